// Package template parses and validates flow templates, compiles each one to a Rego module and evaluates the
// compliance of a trail against it with OPA.
//
// A flow template (YAML, see flow-template.schema.json) says which attestations a trail needs and which artifacts
// it must produce, each with the attestations that artifact needs:
//
//	version: 1
//	trail:
//	  attestations:
//	  - {name: pr, type: pull_request}
//	  artifacts:
//	  - name: backend
//	    attestations:
//	    - {name: unit-test, type: junit}
//
// [Parse] validates a template and returns a [Template]; [Compile] turns it into the Rego module that holds its
// expectations as constants followed by the compliance rules (the same for every template); an [Engine] prepares
// that module once per template version ([Template.ID]) and evaluates a [TrailInput] against it.
//
// # Compliance rules
//
// Go (bind.go) applies the part that is the same for every template: rule 1 (binding), and the choice of "the
// latest" in rule 2 (per name at each level) and rule 4 (per slot). The policy the template compiles to
// (template.rego.tmpl) decides everything that depends on the template: type matching, COMPLETE or MISSING,
// unexpected attestations and artifacts, MISSING slots, artifact statuses, the trail state and the order of entries.
//
//  1. Binding. An artifact-level attestation belongs to an artifact slot when its ArtifactFingerprint equals the
//     fingerprint of the artifact in that slot, or else (fingerprint empty, or naming no reported artifact yet)
//     when its TargetArtifact equals the slot's template name, so evidence reported before the artifact binds when
//     the artifact arrives. An attestation with neither is trail-level. One whose fingerprint matches no reported
//     artifact and whose TargetArtifact is empty is attached to an unexpected entry keyed by the fingerprint. One
//     whose fingerprint names an artifact that lost its slot to a later report (rule 4) binds nowhere.
//  2. For each expected attestation (trail level, or per artifact slot) the latest attestation reported with that
//     name at that level (by CreatedAt, then report order) fills it when its type matches: status COMPLETE,
//     IsCompliant its value, ID and OverriddenID copied. Types match when equal (decision, custom:x, ...), when the
//     template says "*", and "system:decision" matches "decision". A latest attestation of another type does not
//     fill the entry and is listed as unexpected. An unfilled entry is MISSING with IsCompliant nil.
//  3. Reported attestations that no template entry names are listed after the expected ones with Unexpected set,
//     the latest per name only.
//  4. An artifact slot the template names without a reported artifact has Status MISSING, IsCompliant false, and
//     its expected attestations listed as MISSING. When several artifacts were reported for one template name, the
//     latest wins.
//  5. Artifact status: NON-COMPLIANT if any of its listed attestations, expected or unexpected, is not compliant;
//     else INCOMPLETE if any expected attestation is MISSING; else COMPLIANT. IsCompliant = (Status == COMPLIANT).
//  6. Trail state: NON-COMPLIANT if any trail-level attestation (expected or unexpected) is not compliant or any
//     artifact is NON-COMPLIANT; else INCOMPLETE if anything expected is MISSING (a trail attestation, an artifact
//     slot, an artifact's attestation); else COMPLIANT. With an empty template a trail is compliant when every
//     attestation made is compliant; an empty trail with an empty template is COMPLIANT.
//  7. Output order is deterministic: expected entries in template order, then unexpected ones sorted by name.
//
// Artifacts reported without a template name are unexpected entries keyed by fingerprint, unless the same
// fingerprint already fills a named slot. An attestation that targets a name the template does not know, for an
// artifact not reported yet, gets an unexpected entry keyed by that name.
//
// # OPA plumbing
//
// Prepared queries, pinned capabilities and evaluation come from policies/rego, shared with environment policies.
//
// The Engine also keeps policy results by (template version, input signature). After binding, the policy sees only
// the names, types and compliance of the latest attestations at each level, so the trails of one flow, which
// mostly carry the same evidence, give it a handful of distinct inputs; the policy is a pure function of them
// (pinned capabilities, no clock), so a repeated input skips OPA and only the decoding, which fills in each
// trail's own IDs, runs again. TestEvaluateMatchesReferencePolicy checks cached, uncached and reference results
// agree.
package template
