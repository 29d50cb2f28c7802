package plugintest

import (
	"time"

	"github.com/veritrail/veritrail/plugins/sdk"
)

// SampleEnvironment is the environment every sample happens in; the suite expects every
// rendering of a message to name it.
const SampleEnvironment = "production-eu"

// Sample returns a notification of trigger to target with every payload field set, as the
// notify tier would send it.
func Sample(trigger sdk.Trigger, target sdk.Target) *sdk.Notification {
	yes, no := true, false
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	p := sdk.Payload{
		SchemaVersion: sdk.SchemaVersion,
		DeliveryID:    "d41d8cd98f00b204e9800998ecf8427e-" + string(trigger),
		Rule:          sdk.Rule{Org: "acme", Number: 7, Name: "prod watch"},
		Event: sdk.Event{
			ID:          "evt-" + string(trigger),
			Trigger:     trigger,
			OccurredAt:  at,
			Description: "reported by the k8s reporter",
			Environment: sdk.Environment{
				Name:      SampleEnvironment,
				Type:      "K8S",
				HTMLURL:   "https://veritrail.example/acme/environments/" + SampleEnvironment,
				Compliant: &no,
			},
			Snapshot: &sdk.Snapshot{
				Index:      42,
				Compliant:  &no,
				ReportedAt: at,
				HTMLURL:    "https://veritrail.example/acme/environments/" + SampleEnvironment + "/snapshots/42",
			},
		},
	}
	switch trigger {
	case sdk.OnNonCompliantEnv:
	case sdk.OnCompliantEnv:
		p.Event.Environment.Compliant = &yes
		p.Event.Snapshot.Compliant = &yes
	default:
		a := &sdk.Artifact{
			Name:            "backend",
			Fingerprint:     "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
			HTMLURL:         "https://veritrail.example/acme/artifacts/9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
			Compliant:       &yes,
			InstancesBefore: 0,
			InstancesNow:    3,
			Provenance: []sdk.Provenance{{
				Flow:      "backend-ci",
				Trail:     "0123456789abcdef0123456789abcdef01234567",
				GitCommit: "0123456789abcdef0123456789abcdef01234567",
				CommitURL: "https://git.example/acme/backend/commit/0123456789abcdef0123456789abcdef01234567",
				BuildURL:  "https://ci.example/acme/backend/runs/981",
				HTMLURL:   "https://veritrail.example/acme/flows/backend-ci/trails/0123456789abcdef0123456789abcdef01234567",
				Compliant: &yes,
			}},
		}
		switch trigger {
		case sdk.OnExitedArtifact:
			a.InstancesBefore, a.InstancesNow = 3, 0
		case sdk.OnScaledArtifact:
			a.InstancesBefore, a.InstancesNow = 3, 5
		}
		p.Event.Artifact = a
	}
	return &sdk.Notification{Target: target, Payload: p, Attempt: 1}
}
