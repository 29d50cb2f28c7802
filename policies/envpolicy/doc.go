// Package envpolicy parses environment policies, compiles them to Rego and evaluates the artifacts of an
// environment against them with OPA.
//
// A policy is YAML (environment-policy.schema.json) or a raw Rego module. [Parse] validates YAML against the
// schema and the rules it cannot express and returns a [Policy] whose conditions are parsed and type-checked once
// (package expr); [ParseRego] compiles a raw module under the pinned capabilities. [Compile] gives the Rego a
// policy runs as. An [Engine] prepares that Rego once per policy meaning ([Policy.ID]) and judges a whole snapshot
// ([Input]) with one OPA evaluation per policy ([Engine.Evaluate], [Engine.EvaluateSnapshot]), or one artifact
// ([Engine.Assert]).
//
//	_schema: https://kosli.com/schemas/policy/environment/v1
//	artifacts:
//	  provenance:
//	    required: true
//	    exceptions:
//	      - if: ${{ matches(artifact.name, "^datadog:") }}
//	  trail-compliance:
//	    required: true
//	  attestations:
//	    - name: snyk
//	      type: snyk
//	      if: ${{ flow.tags.risk-level == "high" }}
//	    - type: junit                  # name defaults to *, must_be_compliant to true
//	    - name: release
//	      type: decision
//	      for_control: change-approval
//
// # Validation
//
// Every problem is reported at once in a *ValidationError, each at its field (artifacts.attestations[0].if, or
// policy_file for the whole document) with the line and column in the file; for an expression, the column of the
// problem inside it (expression errors also start with "column N:" counted inside the expression). Besides the
// schema: _schema must be a URL ending in /v1 (the only version); an if may be written as a string, wrapped in
// ${{ }} or bare, or as the schema's {text: ...}; an exception must have an if (an exception without a condition
// would silently switch its rule off); for_control is valid only with type: decision, must not be empty, and must
// name a control ParseOptions.ControlExists knows (the caller's organization).
//
// # Input document
//
// A policy judges one artifact at a time, seeing this document (the input of a raw policy's rule_evaluations):
//
//	{
//	  "environment": {"name": "prod", "type": "K8S", "tags": {"pci": "true"}},
//	  "artifact": {
//	    "name": "registry.example.com/api:1.4", "fingerprint": "3f2a…", "allowlisted": false,
//	    "flows": [{"name": "api-ci", "tags": {"risk-level": "high"}}],
//	    "trails": [{
//	      "name": "9c1e…", "flow": {"name": "api-ci", "tags": {"risk-level": "high"}},
//	      "compliance_state": "COMPLIANT", "compliant": true,
//	      "attestations": [{"id": "…", "name": "snyk", "type": "snyk", "compliant": true,
//	                        "created_at": 1718000000.5, "target": "artifact", "control": null}],
//	      "index": {
//	        "attestations": {"snyk": {"snyk": true, "*": true}, "*": {"snyk": true, "*": true}},
//	        "decisions": {"change-approval": {"release": {…the decision…}, "*": {…}}}
//	      }
//	    }]
//	  }
//	}
//
// In it:
//   - trails are the trails that reported the artifact, each with its flow, sorted by flow and trail name; flows
//     are their distinct flows. An artifact of no flow has none of either.
//   - attestations are the trail's own (target "trail") and those of this artifact in the trail (target
//     "artifact"): only the latest per target, name and control (by created_at, then report order), because a
//     re-attestation replaces what came before. Overrides are folded in by the caller. system:decision reads as
//     decision; control is the control of a decision, null otherwise.
//   - index.attestations[name][type] is whether every one of those attestations with that name and type is
//     compliant, "*" standing for any name and any type; absent when there is none.
//     index.decisions[control][name] is the latest decision for the control with that name ("*": any name).
//
// [NewInput] builds the documents of a snapshot from [Artifact] values. [ArtifactInput.Hash] is the SHA-256 of
// everything in an artifact's document and the environment: the evaluation of an artifact by one policy version
// depends on nothing else, so a caller may keep verdicts keyed by (Policy.ID, Hash) and evaluate only the
// artifacts whose hash changed ([Input.Select]). [NewInputFor] leaves the environment out of the Hash when every
// policy is YAML, which cannot read it: an artifact's evaluations then hold in every environment it runs in.
//
// # Rule semantics
//
// An artifact is judged in each of its contexts: every trail that reported it, with that trail's flow. An
// artifact of no flow has a single context with no trail, where flow.name is null, flow.tags is empty and
// exists(flow) is false. Conditions are evaluated per context: an exception whose if holds excuses its rule in
// that context; an attestation rule applies only in the contexts where its if holds. A rule is ignored when it
// is left with no context (it is then satisfied too), and satisfied when every context left meets it:
//
//   - provenance (when required): the artifact was reported in some flow. An artifact of no flow fails
//     (no_provenance) unless an exception holds for it; exceptions that hold in every context mark the rule
//     ignored whether or not there is a flow.
//   - trail-compliance (when required): every trail that reported the artifact is COMPLIANT
//     (non_compliant_in_trail, one resolution per trail that is not). "Every" because a failing trail is not
//     excused by a passing one elsewhere, as snapshots judged artifacts before policies. An artifact of no flow
//     fails (no_provenance): nothing shows it compliant.
//   - attestations: in each trail where the rule applies, the attestations of the artifact and of the trail that
//     match the name ("*": any) and type ("*": any; decision matches decisions) must not be empty
//     (missing_attestation), and, with must_be_compliant (the default), all be compliant
//     (non_compliant_attestation, one per attestation that is not). With for_control, only decisions for that
//     control count and the latest of them (by created_at, then report order, artifact and trail together)
//     decides; a failing rule's resolution has context.for_control. must_be_compliant: false asks only that
//     the attestation (or a decision for the control) exists. An artifact of no flow fails every attestation
//     rule that applies to it (its if holds without a flow, or it has none).
//
// provenance and trail-compliance with required: false ask nothing and give no rule evaluation. A policy is
// COMPLIANT for an artifact when every rule evaluation is satisfied. The verdict on an artifact ([Verdict]) is
// compliant when it is allowlisted in the environment, whatever the policies say (Allowlisted says so, and the
// policy evaluations are still reported), or when every policy is compliant; an environment without policies
// finds every artifact compliant.
//
// # Output
//
// Each [PolicyEvaluation] is an element of the assert response's policy_evaluations: policy_name,
// policy_version, status (COMPLIANT or NON-COMPLIANT), compliant, and rule_evaluations in policy order
// (provenance, trail-compliance, then attestations), each {rule: {type, id, definition}, satisfied, ignored,
// resolutions}. rule.type is provenance, trail-compliance or attestation; rule.id the rule's place in the policy
// (attestations[2]); rule.definition the rule as written, defaults filled in. A satisfied rule has one
// resolution rule_satisfied, an ignored one rule_not_applicable; a failing one a resolution per problem:
// missing_attestation, non_compliant_attestation, non_compliant_in_trail (the Kosli CLI knows these) or
// no_provenance, each with a message a person can act on and a context of flow_name, trail_name, for_control,
// attestation_name and attestation_type where they apply.
//
// # Raw Rego policies
//
// For what YAML cannot say, a policy may be one Rego v1 module, in a package of its choice (veritrail_batch is
// reserved), defining rule_evaluations: the rule evaluations of input.artifact as above, an array (or a set,
// ordered by value) of {rule: {type, id?, definition?}, satisfied, ignored?, resolutions?}. The engine evaluates
// it for a whole snapshot in one query, binding input to each artifact in turn. It runs under the capabilities of
// package rego (no http.send or other network, no opa.runtime, no clock or randomness: ParseRego rejects them with
// their line and column) and within Options.RegoTimeout (1s by default); one whose rule_evaluations is undefined
// for an artifact, or not of that shape, is an error that names the artifact and the field, never a pass. Its
// unit tests (test_ rules in _test.rego files, run with "veritrail policy test") see the same capabilities.
//
// # The compiled Rego
//
// A compiled YAML policy defines rule_evaluations as a raw policy does, and results for the batch. Each rule has
// its definition, the constant evaluations it gives when it holds or does not apply, its conditions, and a fast
// path: conditions written inline and attestations read from the trails' indexes decide the usual cases; an
// artifact the fast path does not pass goes to the judge of the rule's kind, which evaluates conditions per
// context and lists what is wrong. A test holds the fast paths to the judges on random evidence.
package envpolicy
