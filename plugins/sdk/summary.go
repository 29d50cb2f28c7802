package sdk

import (
	"fmt"
	"strconv"
)

// Summary is a payload in words, for notifiers that write to people (chat, e-mail, tickets), so
// every one of them says the same thing the same way.
type Summary struct {
	// Title is one line: "backend started running in prod".
	Title string
	// Facts are labelled values in a stable order.
	Facts []Fact
	// URL is the most specific page about the event: the artifact, else the snapshot, else the
	// environment. Empty when the payload carries none.
	URL string
}

// Fact is one labelled value of a Summary.
type Fact struct {
	Label string
	Value string
}

// Summarize describes p.
func Summarize(p Payload) Summary {
	e := p.Event
	env := e.Environment.Name
	artifact := "an artifact"
	if e.Artifact != nil && e.Artifact.Name != "" {
		artifact = e.Artifact.Name
	}
	var s Summary
	switch e.Trigger {
	case OnStartedArtifact:
		s.Title = fmt.Sprintf("%s started running in %s", artifact, env)
	case OnExitedArtifact:
		s.Title = fmt.Sprintf("%s stopped running in %s", artifact, env)
	case OnScaledArtifact:
		if a := e.Artifact; a != nil {
			s.Title = fmt.Sprintf("%s scaled from %d to %d instances in %s", artifact, a.InstancesBefore, a.InstancesNow, env)
		} else {
			s.Title = fmt.Sprintf("%s scaled in %s", artifact, env)
		}
	case OnAllowedArtifact:
		s.Title = fmt.Sprintf("%s was allowlisted in %s", artifact, env)
	case OnNonCompliantEnv:
		s.Title = fmt.Sprintf("%s is not compliant", env)
	case OnCompliantEnv:
		s.Title = fmt.Sprintf("%s is compliant", env)
	default:
		s.Title = fmt.Sprintf("%s in %s", e.Trigger, env)
	}

	add := func(label, value string) {
		if value != "" {
			s.Facts = append(s.Facts, Fact{Label: label, Value: value})
		}
	}
	add("Environment", env)
	add("Environment compliance", compliance(e.Environment.Compliant))
	if sn := e.Snapshot; sn != nil {
		add("Snapshot", "#"+strconv.FormatInt(sn.Index, 10))
	}
	if a := e.Artifact; a != nil {
		add("Artifact", a.Name)
		add("Fingerprint", a.Fingerprint)
		add("Artifact compliance", compliance(a.Compliant))
		if e.Trigger == OnScaledArtifact || a.InstancesBefore != 0 || a.InstancesNow != 0 {
			add("Instances", fmt.Sprintf("%d → %d", a.InstancesBefore, a.InstancesNow))
		}
		for _, pv := range a.Provenance {
			add("Flow", pv.Flow+" / "+pv.Trail)
			add("Commit", pv.GitCommit)
		}
	}
	add("Description", e.Description)
	add("Rule", fmt.Sprintf("%s (#%d)", p.Rule.Name, p.Rule.Number))

	switch {
	case e.Artifact != nil && e.Artifact.HTMLURL != "":
		s.URL = e.Artifact.HTMLURL
	case e.Snapshot != nil && e.Snapshot.HTMLURL != "":
		s.URL = e.Snapshot.HTMLURL
	default:
		s.URL = e.Environment.HTMLURL
	}
	return s
}

func compliance(c *bool) string {
	switch {
	case c == nil:
		return ""
	case *c:
		return "compliant"
	default:
		return "non-compliant"
	}
}
