package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// chartDir is the Helm chart of the veritrail binary.
var chartDir = filepath.Join("..", "..", "deploy", "helm", "veritrail")

// helm returns the helm binary, or skips the test when there is none outside CI (.ci/run
// installs it).
func helm(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("helm")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("helm is not installed under CI: %v", err)
		}
		t.Skipf("helm is not installed: %v", err)
	}
	return path
}

// object is one rendered Kubernetes object, as generic YAML.
type object map[string]any

func (o object) get(path ...any) any {
	var v any = map[string]any(o)
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			s, _ := v.([]any)
			if k >= len(s) {
				return nil
			}
			v = s[k]
		}
	}
	return v
}

// render runs helm template with the region's values file and returns the objects by
// "Kind/name".
func render(t *testing.T, helmBin string, args ...string) (map[string]object, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command(helmBin, append([]string{"template", "vt", chartDir}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return nil, errors.New(errOut.String())
	}
	objects := map[string]object{}
	dec := yaml.NewDecoder(&out)
	for {
		var m map[string]any // not object: yaml.v3 would make the nested maps objects too
		err := dec.Decode(&m)
		o := object(m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		kind, _ := o.get("kind").(string)
		name, _ := o.get("metadata", "name").(string)
		if kind == "" {
			continue // a document of comments only
		}
		objects[kind+"/"+name] = o
	}
	return objects, nil
}

// TestChartRendersBothRegions: helm lint passes, and each region's values render the three
// tiers with the image, their ports and probes on /livez and /readyz, the region's brokers
// and base URL, the DSN from the region's Secret, the HPA, the PDB, the ServiceMonitor and the
// migration Job as a pre-install/pre-upgrade hook; more evaluators than partitions is refused.
func TestChartRendersBothRegions(t *testing.T) {
	helmBin := helm(t)
	for _, region := range []struct{ name, url, broker, secret string }{
		{"eu", "https://eu.veritrail.example", "kafka-0.kafka.eu.svc:9092", "veritrail-eu-postgres"},
		{"us", "https://us.veritrail.example", "kafka-0.kafka.us.svc:9092", "veritrail-us-postgres"},
	} {
		t.Run(region.name, func(t *testing.T) {
			values := filepath.Join(chartDir, "values-"+region.name+".yaml")
			if out, err := exec.Command(helmBin, "lint", chartDir, "-f", values).CombinedOutput(); err != nil {
				t.Fatalf("helm lint: %v\n%s", err, out)
			}
			objs, err := render(t, helmBin, "-f", values)
			if err != nil {
				t.Fatal(err)
			}
			for tier, port := range map[string]int{"ingest": 8080, "evaluate": 8081, "notify": 8081} {
				d := objs["Deployment/vt-veritrail-"+tier]
				if d == nil {
					t.Fatalf("no %s Deployment in %v", tier, keys(objs))
				}
				c := object(d.get("spec", "template", "spec", "containers", 0).(map[string]any))
				if c.get("image") != "ghcr.io/veritrail/veritrail:dev" || c.get("args", 0) != tier ||
					c.get("ports", 0, "containerPort") != port {
					t.Errorf("%s container: image %v, args %v, ports %v", tier, c.get("image"), c.get("args"), c.get("ports"))
				}
				if c.get("livenessProbe", "httpGet", "path") != "/livez" || c.get("readinessProbe", "httpGet", "path") != "/readyz" {
					t.Errorf("%s probes: %v %v", tier, c.get("livenessProbe"), c.get("readinessProbe"))
				}
				env := map[string]any{}
				for _, e := range c.get("env").([]any) {
					e := e.(map[string]any)
					env[e["name"].(string)] = e
				}
				if v := object(env["VERITRAIL_BASE_URL"].(map[string]any)).get("value"); v != region.url {
					t.Errorf("%s base URL %v", tier, v)
				}
				if v := object(env["VERITRAIL_KAFKA_BROKERS"].(map[string]any)).get("value"); !strings.HasPrefix(v.(string), region.broker) {
					t.Errorf("%s brokers %v", tier, v)
				}
				if v := object(env["VERITRAIL_POSTGRES"].(map[string]any)).get("valueFrom", "secretKeyRef", "name"); v != region.secret {
					t.Errorf("%s DSN secret %v", tier, v)
				}
			}
			job := objs["Job/vt-veritrail-migrate"]
			if job == nil || job.get("metadata", "annotations", "helm.sh/hook") != "pre-install,pre-upgrade" ||
				job.get("spec", "template", "spec", "containers", 0, "args", 1) != "migrate" {
				t.Errorf("migration job: %v", job)
			}
			for _, kind := range []string{"HorizontalPodAutoscaler/vt-veritrail-ingest", "PodDisruptionBudget/vt-veritrail-ingest",
				"ServiceMonitor/vt-veritrail", "ConfigMap/vt-veritrail", "Service/vt-veritrail-ingest"} {
				if objs[kind] == nil {
					t.Errorf("no %s", kind)
				}
			}
			if _, err := render(t, helmBin, "-f", values, "--set", "evaluate.replicas=13"); err == nil ||
				!strings.Contains(err.Error(), "more than kafka.partitions") {
				t.Errorf("13 evaluators on 12 partitions: %v", err)
			}
		})
	}
}

func keys(m map[string]object) []string {
	var k []string
	for key := range m {
		k = append(k, key)
	}
	return k
}
