package veritrail.custom_test

import data.veritrail.custom

reviewed := {"name": "t1", "flow": {"name": "api", "tags": {}}, "index": {"attestations": {"*": {"pull_request": true}}}}

unreviewed := {"name": "t2", "flow": {"name": "api", "tags": {}}, "index": {"attestations": {}}}

test_registry_image_passes if {
	[r, _] := custom.rule_evaluations with input as {
		"environment": {"tags": {}},
		"artifact": {"name": "registry.example.com/api:1", "trails": []},
	}
	r.satisfied
}

test_other_registry_fails if {
	[r, _] := custom.rule_evaluations with input as {
		"environment": {"tags": {}},
		"artifact": {"name": "docker.io/api:1", "trails": []},
	}
	not r.satisfied
	r.resolutions[0].type == "untrusted_registry"
}

test_pci_needs_review if {
	[_, p] := custom.rule_evaluations with input as {
		"environment": {"tags": {"pci": "true"}},
		"artifact": {"name": "registry.example.com/api:1", "trails": [reviewed, unreviewed]},
	}
	not p.satisfied
	count(p.resolutions) == 1
	p.resolutions[0].context.trail_name == "t2"
}

test_pci_ignored_elsewhere if {
	[_, p] := custom.rule_evaluations with input as {
		"environment": {"tags": {}},
		"artifact": {"name": "registry.example.com/api:1", "trails": [unreviewed]},
	}
	p.ignored
}
