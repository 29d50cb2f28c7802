// Package envpolicytest holds environment policies that tests and benchmarks of several packages share.
package envpolicytest

// Policies are three policies of the kinds environments use: the built-in rules with an exception, attestation
// rules with conditions on flow tags, and a decision for a control (change-approval).
func Policies() []string {
	return []string{`_schema: https://kosli.com/schemas/policy/environment/v1
artifacts:
  provenance:
    required: true
    exceptions:
      - if: ${{ matches(artifact.name, "^datadog:") }}
  trail-compliance:
    required: true
`, `_schema: https://kosli.com/schemas/policy/environment/v1
artifacts:
  attestations:
    - name: snyk
      type: snyk
      if: ${{ flow.tags.risk-level == "high" }}
    - name: unit-tests
      type: junit
    - name: "*"
      type: pull_request
      must_be_compliant: false
      if: ${{ flow.tags.tier >= 2 and not flow.name in ["sandbox", "docs"] }}
`, `_schema: https://kosli.com/schemas/policy/environment/v1
artifacts:
  provenance:
    required: true
  attestations:
    - name: release
      type: decision
      for_control: change-approval
`}
}
