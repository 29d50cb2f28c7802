package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/policies/attestkind"
	"github.com/veritrail/veritrail/policies/customtype"
)

// AttestationCommon holds the fields every attest operation's data_json shares.
type AttestationCommon struct {
	AttestationName     string          `json:"attestation_name" doc:"the attestation's name; 'artifact.name' attests a template artifact when target_artifacts is not given"`
	OriginURL           *string         `json:"origin_url,omitempty" doc:"where the evidence comes from (a CI run)"`
	Description         *string         `json:"description,omitempty"`
	ArtifactFingerprint string          `json:"artifact_fingerprint,omitempty" pattern:"^[a-f0-9]{64}$" doc:"the SHA-256 of the artifact attested"`
	TargetArtifacts     []string        `json:"target_artifacts,omitempty" doc:"the template artifact the attestation is for"`
	GitCommitInfo       json.RawMessage `json:"git_commit_info,omitempty" doc:"object: {sha1, message?, author?, branch?, timestamp? (a number), url?}"`
	RepoInfo            json.RawMessage `json:"repo_info,omitempty" doc:"object: {url, name, id, description?, provider?, namespace_path?, additional_info?}"`
	ExternalURLs        json.RawMessage `json:"external_urls,omitempty" doc:"object: {label: {href, fingerprint?}}"`
	Annotations         json.RawMessage `json:"annotations,omitempty" doc:"object: {key: value}"`
	// user_data is carried in the data as it came; nothing reads it here.
}

// check checks the common fields; attest calls it on what decodeAttestationData decoded.
func (a *AttestationCommon) check(c checker, _ *form) {
	c.name("attestation_name", a.AttestationName, nil, "")
	checkTargets(c, a.TargetArtifacts)
	if a.ArtifactFingerprint != "" {
		c.match("artifact_fingerprint", a.ArtifactFingerprint, fingerprintRE, fingerprintPattern)
	}
	checkCommitInfo(c, "git_commit_info", a.GitCommitInfo)
	checkObject(c, "repo_info", a.RepoInfo)
	checkExternalURLs(c, "external_urls", a.ExternalURLs)
	checkObject(c, "annotations", a.Annotations)
	checkOriginURL(c, "origin_url", a.OriginURL)
}

// attestation is a validated attestation ready to publish.
type attestation struct {
	name, typ   string
	compliant   bool
	fingerprint string
	target      string
	control     string // the control a decision answers
	data        map[string]any
}

func (a *API) registerAttestations() {
	registerAttestKind[GenericAttestation](a, "generic")
	registerAttestKind[CustomAttestation](a, "custom")
	registerAttestKind[JUnitAttestation](a, "junit")
	registerAttestKind[SnykAttestation](a, "snyk")
	registerAttestKind[SonarAttestation](a, "sonar")
	registerAttestKind[JiraAttestation](a, "jira")
	registerAttestKind[PullRequestAttestation](a, "pull_request")
	registerAttestKind[DecisionAttestation](a, "system")
	registerAttestKind[SarifAttestation](a, "sarif")

	type overrideInput struct {
		TrailPath
		Body struct {
			// The common attestation payload, as `kosli attest override` sends it.
			AttestationCommon
			// Shadows the common field to declare the name rule (c.name checks it).
			AttestationName         string          `json:"attestation_name" maxLength:"256"`
			Reason                  string          `json:"reason"`
			NewComplianceStatus     any             `json:"new_compliance_status" doc:"a boolean (or COMPLIANT / NON-COMPLIANT)"`
			OriginalAttestationType string          `json:"original_attestation_type,omitempty" required:"false" doc:"e.g. generic; the type of the override when nothing is overridden yet"`
			UserData                json.RawMessage `json:"user_data,omitempty" required:"false"`
		}
	}
	o := op(http.MethodPost, "/attestations/{org}/{flow}/trail/{trail}/override", "overrideAttestation", PrivWrite,
		"Override the compliance of an attestation, reported or only expected", "Attestations")
	o.DefaultStatus = http.StatusCreated
	huma.Register(a.huma, o, func(ctx context.Context, in *overrideInput) (*stringOutput, error) {
		p := principalFrom(ctx)
		b := in.Body
		c := checker{}
		b.AttestationCommon.AttestationName = b.AttestationName
		b.AttestationCommon.check(c, nil)
		c.required("reason", b.Reason)
		compliant, ok := parseComplianceStatus(b.NewComplianceStatus)
		if !ok {
			c["new_compliance_status"] = fmt.Sprintf("Input should be 'COMPLIANT' or 'NON-COMPLIANT' [input: %v]", b.NewComplianceStatus)
		}
		if err := c.err(); err != nil {
			return nil, err
		}
		flow, tr, err := a.flowAndTrail(ctx, p, in.Flow, in.Trail)
		if err != nil {
			return nil, err
		}
		name, target := splitAttestationName(b.AttestationName, b.TargetArtifacts)
		// The override replaces the latest attestation of the name, which must count the
		// attestations reported before it: wait for the organization's writes in flight.
		a.awaitWrites(ctx, p)
		orig, err := a.latestAttestation(ctx, p, tr, name, b.ArtifactFingerprint, target)
		var missing *Error
		if errors.As(err, &missing) && missing.Status == http.StatusNotFound {
			// Nothing reported under the name yet (the template expects it): the override
			// stands in for it, with the type the client names, until one is reported.
			orig = store.Attestation{Name: name, Type: storedType(b.OriginalAttestationType),
				ArtifactFingerprint: b.ArtifactFingerprint, TargetArtifact: target}
		} else if err != nil {
			return nil, err
		}
		if orig.ID != "" && b.OriginalAttestationType != "" && b.OriginalAttestationType != orig.Type && b.OriginalAttestationType != displayType(orig.Type) {
			return nil, fieldError("original_attestation_type", "The attestation '%s' has type '%s', not '%s'", name, displayType(orig.Type), b.OriginalAttestationType)
		}
		data := map[string]any{"reason": b.Reason, "new_compliance_status": b.NewComplianceStatus}
		for key, v := range map[string]json.RawMessage{"user_data": b.UserData, "git_commit_info": b.GitCommitInfo,
			"repo_info": b.RepoInfo, "external_urls": b.ExternalURLs, "annotations": b.Annotations} {
			if !isJSONNull(v) {
				data[key] = v
			}
		}
		for key, v := range map[string]*string{"description": b.Description, "origin_url": b.OriginURL} {
			if v != nil {
				data[key] = *v
			}
		}
		rawData, err := json.Marshal(data)
		if err != nil {
			return nil, a.internal(ctx, "encode override", err)
		}
		env := &contract.Envelope{Kind: contract.KindAttestationReported, Attestation: &contract.AttestationInput{
			ID: newID(), FlowID: flow.ID, TrailName: tr.Name, Name: orig.Name, Type: orig.Type, IsCompliant: compliant,
			ArtifactFingerprint: orig.ArtifactFingerprint, TargetArtifact: orig.TargetArtifact,
			Overrides: &contract.Override{AttestationID: orig.ID, Reason: b.Reason}, Data: rawData,
		}}
		if !isJSONNull(b.RepoInfo) {
			env.Attestation.RepoInfo = b.RepoInfo
		}
		if err := a.publish(ctx, p, env); err != nil {
			return nil, err
		}
		return &stringOutput{Status: http.StatusCreated, Body: "OK"}, nil
	})

	type byTrailInput struct {
		TrailPath
		Name string `path:"name"`
	}
	huma.Register(a.huma, op(http.MethodGet, "/attestations/{org}/{flow}/trail/{trail}/{name}", "getTrailAttestation", PrivRead,
		"Attestations of a name in a trail, newest first", "Attestations"),
		func(ctx context.Context, in *byTrailInput) (*listOutput[map[string]any], error) {
			p := principalFrom(ctx)
			flow, tr, err := a.flowAndTrail(ctx, p, in.Flow, in.Trail)
			if err != nil {
				return nil, err
			}
			return a.attestationsNamed(ctx, p, flow, []store.Trail{tr}, in.Name, "")
		})

	type byArtifactInput struct {
		FlowPath
		Fingerprint string `path:"fingerprint"`
		Name        string `path:"name"`
	}
	huma.Register(a.huma, op(http.MethodGet, "/attestations/{org}/{flow}/artifact/{fingerprint}/{name}", "getArtifactAttestation", PrivRead,
		"Attestations of a name on an artifact, newest first", "Attestations"),
		func(ctx context.Context, in *byArtifactInput) (*listOutput[map[string]any], error) {
			p := principalFrom(ctx)
			flow, err := a.flowByName(ctx, p, in.Flow)
			if err != nil {
				return nil, err
			}
			art, err := a.artifactByPrefix(ctx, p, flow, in.Fingerprint, "")
			if err != nil {
				return nil, err
			}
			tr, err := a.store.TrailByID(ctx, art.TrailID)
			if err != nil {
				return nil, a.internal(ctx, "look up trail", err)
			}
			return a.attestationsNamed(ctx, p, flow, []store.Trail{tr}, in.Name, art)
		})

	type listInput struct {
		OrgPath
		AttestationID string `query:"attestation_id" doc:"Search for one attestation"`
		Page          int    `query:"page" minimum:"0"`
		PerPage       int    `query:"per_page" minimum:"0" maximum:"100"`
	}
	type listOut struct {
		Body struct {
			Data       []map[string]any `json:"data"`
			Pagination Pagination       `json:"pagination"`
		}
	}
	huma.Register(a.huma, op(http.MethodGet, "/attestations/{org}", "listAttestations", PrivRead, "List attestations, newest first", "Attestations"),
		func(ctx context.Context, in *listInput) (*listOut, error) {
			p := principalFrom(ctx)
			pg := pageOf(in.Page, in.PerPage, 15)
			var atts []store.Attestation
			total := 0
			if in.AttestationID != "" {
				att, err := a.store.AttestationByID(ctx, p.Org.ID, in.AttestationID)
				if err == nil {
					atts, total = []store.Attestation{att}, 1
				} else if !errors.Is(err, store.ErrNotFound) {
					return nil, a.internal(ctx, "look up attestation", err)
				}
			} else {
				var err error
				if atts, total, err = a.store.ListAttestations(ctx, p.Org.ID, pg); err != nil {
					return nil, a.internal(ctx, "list attestations", err)
				}
			}
			out := &listOut{}
			out.Body.Data = []map[string]any{}
			for _, att := range atts {
				v, err := a.attestationViewLookup(ctx, p, att)
				if err != nil {
					return nil, err
				}
				out.Body.Data = append(out.Body.Data, v)
			}
			out.Body.Pagination = pagination(total, pg)
			return out, nil
		})

	type evidenceInput struct {
		TrailPath
		ID string `path:"id"`
	}
	evidence := op(http.MethodGet, "/attestations/{org}/{flow}/trail/{trail}/attestation/{id}/evidence", "getEvidence", PrivRead,
		"Download the evidence file of an attestation", "Attestations")
	// A stream: Huma cannot see what it writes, so the description says it.
	evidence.Responses = map[string]*huma.Response{"200": {Description: "The evidence file as it was attached",
		Content: map[string]*huma.MediaType{"application/octet-stream": {Schema: &huma.Schema{Type: huma.TypeString, Format: "binary"}}}}}
	huma.Register(a.huma, evidence,
		func(ctx context.Context, in *evidenceInput) (*huma.StreamResponse, error) {
			p := principalFrom(ctx)
			att, err := a.store.AttestationByID(ctx, p.Org.ID, in.ID)
			if errors.Is(err, store.ErrNotFound) || (err == nil && att.EvidenceSHA256 == "") {
				return nil, apiError(http.StatusNotFound, "Attestation '%s' has no evidence in organization '%s'", in.ID, p.Org.Name)
			}
			if err != nil {
				return nil, a.internal(ctx, "look up attestation", err)
			}
			b, err := a.blobs.Get(ctx, att.EvidenceSHA256)
			if err != nil {
				return nil, a.internal(ctx, "read evidence", err)
			}
			return &huma.StreamResponse{Body: func(hctx huma.Context) {
				hctx.SetHeader("Content-Type", "application/octet-stream")
				hctx.SetHeader("Content-Disposition", fmt.Sprintf("attachment; filename=%q", att.EvidenceName))
				hctx.SetHeader("Digest", "sha-256="+att.EvidenceSHA256)
				_, _ = hctx.BodyWriter().Write(b)
			}}, nil
		})
}

// registerAttestKind registers the multipart attest operation of one kind, whose data_json is a P.
func registerAttestKind[P any](a *API, kind string) {
	type attestInput struct {
		TrailPath
		FormBody
	}
	o := op(http.MethodPost, "/attestations/{org}/{flow}/trail/{trail}/"+kind, "attest_"+kind, PrivWrite,
		"Attest "+strings.ReplaceAll(kind, "_", " ")+" evidence to a trail or an artifact", "Attestations")
	o.DefaultStatus = http.StatusCreated
	parts := formParts{json: "data_json", decoding: decodeByHandler, files: []filePart{
		{name: "attachment_file", doc: "Evidence kept with the attestation; several files arrive tarred as one", large: true},
	}}
	registerForm(a, o, parts, func(ctx context.Context, in *attestInput, f *Form[P]) (*stringOutput, error) {
		var file *formFile
		if ff, ok := f.file("attachment_file"); ok {
			file = &ff
		}
		return a.attest(ctx, principalFrom(ctx), in.TrailPath, kind, f.Raw, file)
	})
}

// splitAttestationName accepts the "artifact.attestation" form when the client did not split it.
func splitAttestationName(name string, targets []string) (string, string) {
	if len(targets) > 0 {
		return name, targets[0]
	}
	if a, b, ok := strings.Cut(name, "."); ok && a != "" && b != "" {
		return b, a
	}
	return name, ""
}

// checkTargets checks the names of target_artifacts, which name artifacts of the template.
func checkTargets(c checker, targets []string) {
	for i := range targets {
		c.optionalName(fmt.Sprintf("target_artifacts[%d]", i), &targets[i], nil, "")
	}
}

func parseComplianceStatus(v any) (bool, bool) {
	switch x := v.(type) {
	case bool:
		return x, true
	case string:
		switch strings.ToUpper(strings.ReplaceAll(x, "_", "-")) {
		case "COMPLIANT", "TRUE":
			return true, true
		case "NON-COMPLIANT", "NONCOMPLIANT", "FALSE":
			return false, true
		}
	}
	return false, false
}

// storedType is the stored type of a type as the client names it (the inverse of displayType);
// generic when it names none.
func storedType(t string) string {
	switch t {
	case "":
		return "generic"
	case "system:decision":
		return "decision"
	}
	return t
}

func displayType(t string) string {
	if t == "decision" {
		return "system:decision"
	}
	return t
}

// attest validates one attestation of any multipart kind and publishes it.
func (a *API) attest(ctx context.Context, p *Principal, path TrailPath, kind string, raw []byte, file *formFile) (*stringOutput, error) {
	// The data is stored as it came: its values stay raw JSON (decoding them only to encode
	// them again cost a tenth of a request), and the kinds add their own fields beside them.
	common, fields, err := decodeAttestationData(raw)
	if err != nil {
		return nil, err
	}
	data := make(map[string]any, len(fields)+4)
	for k, v := range fields {
		data[k] = v
	}
	name, target := splitAttestationName(common.AttestationName, common.TargetArtifacts)
	c := checker{}
	common.check(c, nil)
	if err := c.err(); err != nil {
		return nil, err
	}
	if target != "" && common.ArtifactFingerprint == "" && isJSONNull(common.GitCommitInfo) {
		// The CLI looks for this sentence in the message itself.
		msg := fmt.Sprintf("Attestation '%s.%s' requires at least one of: artifact_fingerprint or git_commit_info.", target, name)
		return nil, &Error{Status: http.StatusBadRequest, Message: msg, Errors: map[string]string{"artifact_fingerprint": msg}}
	}
	att := attestation{name: name, target: target, fingerprint: common.ArtifactFingerprint, data: data}
	if err := a.judge(ctx, p, kind, raw, &att); err != nil {
		return nil, err
	}
	if att.control != "" {
		// Decisions are rare: see the organization's control changes (an archive just before) first.
		a.awaitWrites(ctx, p)
		ctl, err := a.controlByID(ctx, p, att.control)
		if err != nil {
			return nil, err
		}
		if ctl.Archived {
			return nil, fieldError("control", "Control '%s' is archived in organization '%s'", att.control, p.Org.Name)
		}
	}
	ref, err := a.trailRef(ctx, p, path.Flow, path.Trail)
	if err != nil {
		return nil, err
	}
	if att.fingerprint != "" {
		art, err := a.trailArtifact(ctx, p, ref, att.fingerprint)
		if err != nil {
			return nil, err
		}
		if att.target == "" {
			att.target = art.TemplateName
		}
	}
	in := &contract.AttestationInput{
		ID: newID(), FlowID: ref.FlowID, TrailName: ref.TrailName, Name: att.name, Type: att.typ, IsCompliant: att.compliant,
		ArtifactFingerprint: att.fingerprint, TargetArtifact: att.target,
	}
	if !isJSONNull(common.RepoInfo) {
		in.RepoInfo = common.RepoInfo
	}
	if file != nil {
		sha, err := a.blobs.Put(ctx, file.data)
		if err != nil {
			a.log.ErrorContext(ctx, "ingest: store attachment", "err", err)
			return nil, unavailable("Could not store the attachment; please retry")
		}
		in.Evidence = &contract.BlobRef{SHA256: sha, Size: int64(len(file.data)), Filename: file.name}
	}
	if in.Data, err = encodeData(att.data); err != nil {
		return nil, a.internal(ctx, "encode attestation", err)
	}
	if err := a.publish(ctx, p, &contract.Envelope{Kind: contract.KindAttestationReported, Attestation: in}); err != nil {
		return nil, err
	}
	return &stringOutput{Status: http.StatusCreated, Body: fmt.Sprintf("Attestation '%s' was reported", att.name)}, nil
}

// trailArtifact finds an artifact of the trail by full fingerprint.
func (a *API) trailArtifact(ctx context.Context, p *Principal, ref store.TrailRef, fp string) (store.Artifact, error) {
	art, err := lookup(ctx, a, p, func() (store.Artifact, error) {
		arts, err := a.store.TrailArtifacts(ctx, ref.TrailID)
		if err != nil {
			return store.Artifact{}, err
		}
		for i := len(arts) - 1; i >= 0; i-- {
			if arts[i].Fingerprint == fp {
				return arts[i], nil
			}
		}
		return store.Artifact{}, store.ErrNotFound
	})
	if errors.Is(err, store.ErrNotFound) {
		return art, apiError(http.StatusNotFound, `Artifact with fingerprint %s does not exist in trail "%s" of flow "%s" belonging to organization "%s"`,
			fp, ref.TrailName, ref.FlowName, p.Org.Name)
	}
	if err != nil {
		return art, a.internal(ctx, "look up artifact", err)
	}
	return art, nil
}

// judge validates the kind-specific fields and decides compliance: custom types by their rules,
// the built-in kinds by policies/attestkind.
func (a *API) judge(ctx context.Context, p *Principal, kind string, raw []byte, att *attestation) error {
	att.typ = kind
	if kind == "custom" {
		return a.judgeCustom(ctx, p, raw, att)
	}
	v, err := attestkind.Judge(kind, func(v any) error { return decodeJSONPart("data_json", raw, v) }, att.data)
	if err != nil {
		return judgeError(kind, err)
	}
	att.typ, att.compliant, att.control = v.Type, v.Compliant, v.Control
	return nil
}

// judgeError words a refusal of attestkind.Judge (apart from the write path: errors.As takes its
// target's address, which would cost an allocation per attestation there).
func judgeError(kind string, err error) error {
	var fields attestkind.FieldErrors
	switch {
	case errors.Is(err, attestkind.ErrUnknownKind):
		return apiError(http.StatusNotFound, "Unknown attestation kind '%s'", kind)
	case errors.As(err, &fields):
		return validationFailed(fields)
	}
	return err // decodeJSONPart's, worded already
}

func (a *API) judgeCustom(ctx context.Context, p *Principal, raw []byte, att *attestation) error {
	var b struct {
		TypeName string          `json:"type_name"`
		Data     json.RawMessage `json:"attestation_data"`
	}
	if err := decodeJSONPart("data_json", raw, &b); err != nil {
		return err
	}
	if b.TypeName == "" {
		return fieldError("type_name", "Field required")
	}
	name, version, _ := strings.Cut(b.TypeName, "@")
	ct, err := lookup(ctx, a, p, func() (store.CustomType, error) {
		ct, err := a.store.CustomType(ctx, p.Org.ID, name)
		if err == nil && ct.Archived {
			err = store.ErrNotFound
		}
		return ct, err
	})
	if errors.Is(err, store.ErrNotFound) || (err == nil && len(ct.Versions) == 0) {
		return apiError(http.StatusNotFound, "Custom attestation type '%s' does not exist for org '%s'", name, p.Org.Name)
	}
	if err != nil {
		return a.internal(ctx, "look up custom type", err)
	}
	v := ct.Versions[len(ct.Versions)-1]
	if version != "" {
		found := false
		for _, cand := range ct.Versions {
			if fmt.Sprint(cand.Version) == strings.TrimPrefix(version, "v") {
				v, found = cand, true
			}
		}
		if !found {
			return apiError(http.StatusNotFound, "version %s does not exist for custom attestation type '%s'", version, name)
		}
	}
	if isJSONNull(b.Data) {
		return fieldError("attestation_data", "Field required")
	}
	typ, err := a.compileType(v)
	if err != nil {
		return a.internal(ctx, "compile custom type", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b.Data))
	dec.UseNumber()
	var data any
	if err := dec.Decode(&data); err != nil {
		return fieldError("attestation_data", "Invalid JSON: %v", err)
	}
	if err := typ.Check(data); err != nil {
		var de *customtype.DataError
		if errors.As(err, &de) {
			return validationFailed(de.Fields)
		}
		return fieldError("attestation_data", "%v", err)
	}
	compliant, results := typ.Evaluate(ctx, data)
	att.typ, att.compliant = "custom:"+name, compliant
	att.data["type_name"] = name
	att.data["type_version"] = v.Version
	att.data["evaluator_results"] = results
	return nil
}

// latestAttestation finds the newest attestation of a name in a trail (at the artifact level
// when fingerprint or target is given).
func (a *API) latestAttestation(ctx context.Context, p *Principal, tr store.Trail, name, fingerprint, target string) (store.Attestation, error) {
	att, err := lookup(ctx, a, p, func() (store.Attestation, error) {
		atts, err := a.store.TrailAttestations(ctx, tr.ID)
		if err != nil {
			return store.Attestation{}, err
		}
		for i := len(atts) - 1; i >= 0; i-- {
			x := atts[i]
			if x.Name != name || x.OverridesID != "" {
				continue
			}
			if fingerprint != "" && x.ArtifactFingerprint != fingerprint {
				continue
			}
			if target != "" && x.TargetArtifact != target {
				continue
			}
			return x, nil
		}
		return store.Attestation{}, store.ErrNotFound
	})
	if errors.Is(err, store.ErrNotFound) {
		return att, apiError(http.StatusNotFound, "Attestation '%s' does not exist in trail '%s'", name, tr.Name)
	}
	if err != nil {
		return att, a.internal(ctx, "look up attestation", err)
	}
	return att, nil
}

// attestationsNamed lists a trail's attestations of one name, newest first, optionally those of one artifact.
func (a *API) attestationsNamed(ctx context.Context, p *Principal, flow store.Flow, trails []store.Trail, name string, art any) (*listOutput[map[string]any], error) {
	out := &listOutput[map[string]any]{Body: []map[string]any{}}
	artifact, byArtifact := art.(store.Artifact)
	for _, tr := range trails {
		atts, err := a.store.TrailAttestations(ctx, tr.ID)
		if err != nil {
			return nil, a.internal(ctx, "list attestations", err)
		}
		for i := len(atts) - 1; i >= 0; i-- {
			x := atts[i]
			if x.Name != name {
				continue
			}
			if byArtifact && x.ArtifactFingerprint != artifact.Fingerprint &&
				(x.TargetArtifact == "" || x.TargetArtifact != artifact.TemplateName) {
				continue
			}
			out.Body = append(out.Body, a.attestationView(p, flow, tr, x))
		}
	}
	// None of that name is an empty list, not a 404: the CLI prints "No attestations found."
	return out, nil
}

func (a *API) attestationViewLookup(ctx context.Context, p *Principal, att store.Attestation) (map[string]any, error) {
	flow, err := a.store.FlowByID(ctx, p.Org.ID, att.FlowID)
	if err != nil {
		return nil, a.internal(ctx, "look up flow", err)
	}
	tr, err := a.store.TrailByID(ctx, att.TrailID)
	if err != nil {
		return nil, a.internal(ctx, "look up trail", err)
	}
	return a.attestationView(p, flow, tr, att), nil
}

// attestationView is the stored data_json overlaid with the fields the service owns.
func (a *API) attestationView(p *Principal, flow store.Flow, tr store.Trail, att store.Attestation) map[string]any {
	v := map[string]any{}
	_ = json.Unmarshal(att.Data, &v) // stored by us from a decoded object
	trailURL := a.trailURL(p.Org.Name, flow.Name, tr.Name)
	apiBase := a.cfg.BaseURL + "/api/v2/attestations/" + p.Org.Name + "/" + flow.Name
	v["attestation_id"] = att.ID
	v["attestation_name"] = att.Name
	v["attestation_type"] = displayType(att.Type)
	v["is_compliant"] = att.IsCompliant
	v["schema_version"] = 2
	v["created_at"] = att.CreatedAt
	v["flow_name"] = flow.Name
	v["trail_name"] = tr.Name
	v["reported_by"] = att.ReportedBy
	v["has_audit_package"] = att.EvidenceSHA256 != ""
	v["html_url"] = trailURL + "?attestation_id=" + att.ID
	if _, ok := v["user_data"]; !ok {
		v["user_data"] = map[string]any{}
	}
	for _, k := range []string{"origin_url", "description", "git_commit_info"} {
		if _, ok := v[k]; !ok {
			v[k] = nil
		}
	}
	v["artifact_fingerprint"] = nilIfEmpty(att.ArtifactFingerprint)
	targets := []string{}
	if att.TargetArtifact != "" {
		targets = append(targets, att.TargetArtifact)
	}
	v["target_artifacts"] = targets
	links := map[string]any{"self": map[string]string{"href": apiBase + "/trail/" + tr.Name + "/" + att.Name}}
	if att.EvidenceSHA256 != "" {
		v["evidence_archive_fingerprint"] = att.EvidenceSHA256
		links["evidence"] = map[string]string{"href": apiBase + "/trail/" + tr.Name + "/attestation/" + att.ID + "/evidence"}
	}
	if att.OverridesID != "" {
		v["overridden_attestation_id"] = att.OverridesID
		v["override_reason"] = att.OverrideReason
	}
	v["_links"] = links
	return v
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// encodeData encodes an attestation's data: the fields as they came, which are valid JSON
// already and are copied as they are, and the fields a kind added, encoded. Keys are sorted, as
// json.Marshal sorts them; unlike it, this does not scan the raw values again.
func encodeData(data map[string]any) (json.RawMessage, error) {
	keys := slices.Sorted(maps.Keys(data))
	size := 2
	for _, k := range keys {
		if v, ok := data[k].(json.RawMessage); ok {
			size += len(k) + len(v) + 4
		}
	}
	out := make([]byte, 0, size+64)
	out = append(out, '{')
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		key, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		out = append(append(out, key...), ':')
		switch v := data[k].(type) {
		case json.RawMessage:
			if len(v) == 0 {
				out = append(out, "null"...)
				break
			}
			out = append(out, v...)
		default:
			b, err := json.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("encode %s: %w", k, err)
			}
			out = append(out, b...)
		}
	}
	return append(out, '}'), nil
}
