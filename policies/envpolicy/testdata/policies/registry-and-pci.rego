# A raw Rego environment policy: what the YAML rules cannot say. Artifacts must come from the company registry,
# and in an environment tagged pci=true every trail that reported them needs a compliant pull request.
package veritrail.custom

registry := "registry.example.com/"

registry_rule := {"type": "registry", "id": "registry", "definition": {"prefix": registry}}

pci_rule := {"type": "pci-review", "id": "pci-review", "definition": {"environment_tag": "pci"}}

rule_evaluations := [registry_evaluation, pci_evaluation]

registry_evaluation := {"rule": registry_rule, "satisfied": true, "ignored": false, "resolutions": []} if {
	startswith(input.artifact.name, registry)
} else := {"rule": registry_rule, "satisfied": false, "ignored": false, "resolutions": [{
	"type": "untrusted_registry",
	"message": sprintf("artifact %s does not come from %s: push it there and deploy that image", [input.artifact.name, registry]),
	"context": {},
}]}

pci_evaluation := {"rule": pci_rule, "satisfied": true, "ignored": true, "resolutions": []} if {
	object.get(input.environment.tags, "pci", "false") != "true"
} else := {"rule": pci_rule, "satisfied": count(unreviewed) == 0, "ignored": false, "resolutions": unreviewed}

unreviewed := [{
	"type": "missing_attestation",
	"message": sprintf("trail %s of flow %s has no compliant pull request", [t.name, t.flow.name]),
	"context": {"flow_name": t.flow.name, "trail_name": t.name, "attestation_type": "pull_request"},
} |
	some t in input.artifact.trails
	not t.index.attestations["*"].pull_request == true
]
