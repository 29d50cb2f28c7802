package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"gopkg.in/yaml.v3"
)

// composeDir holds the compose file of the distributed mode on one machine.
var composeDir = filepath.Join("..", "..", "deploy", "compose")

// loadCompose loads and validates deploy/compose/compose.yaml as `docker compose config` does
// (the compose specification's schema, interpolation, merge keys, consistency), with env as
// the environment.
func loadCompose(t *testing.T, env ...string) (*types.Project, error) {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{filepath.Join(composeDir, "compose.yaml")},
		cli.WithEnv(env), cli.WithWorkingDirectory(composeDir), cli.WithConsistency(true), cli.WithResolvedPaths(true))
	if err != nil {
		t.Fatal(err)
	}
	return opts.LoadProject(context.Background())
}

// TestComposeFileIsValid: the compose file loads under the compose specification; it refuses
// to start without a bootstrap token; it runs Kafka, PostgreSQL, the migrations, the three
// tiers and Prometheus, in that order of readiness; and Prometheus scrapes every tier on the
// port the tier serves its metrics on, with the alert rules mounted where its configuration
// reads them.
func TestComposeFileIsValid(t *testing.T) {
	if _, err := loadCompose(t); err == nil || !strings.Contains(err.Error(), "VERITRAIL_BOOTSTRAP_TOKEN") {
		t.Errorf("loaded without VERITRAIL_BOOTSTRAP_TOKEN: %v", err)
	}
	p, err := loadCompose(t, "VERITRAIL_BOOTSTRAP_TOKEN="+strings.Repeat("ab", 32))
	if err != nil {
		t.Fatalf("compose.yaml does not load: %v", err)
	}
	want := []string{"evaluate", "ingest", "kafka", "migrate", "notify", "postgres", "prometheus"}
	if got := p.ServiceNames(); !slices.Equal(got, want) {
		t.Fatalf("services %v, want %v", got, want)
	}
	svc := func(name string) types.ServiceConfig {
		s, err := p.GetService(name)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	dependsOn := func(name, on, condition string) {
		t.Helper()
		if d, ok := svc(name).DependsOn[on]; !ok || d.Condition != condition {
			t.Errorf("%s depends on %s with %+v, want %s", name, on, d, condition)
		}
	}
	dependsOn("migrate", "kafka", types.ServiceConditionHealthy)
	dependsOn("migrate", "postgres", types.ServiceConditionHealthy)
	if got := svc("migrate").Command; !slices.Equal(got, types.ShellCommand{"admin", "migrate"}) {
		t.Errorf("migrate runs %v", got)
	}

	// Where each tier serves its metrics: ingest on its API address, the others on --admin-addr.
	metricsPort := map[string]string{}
	for tier, flag := range map[string]string{"ingest": "--addr", "evaluate": "--admin-addr", "notify": "--admin-addr"} {
		s := svc(tier)
		dependsOn(tier, "migrate", types.ServiceConditionCompletedSuccessfully)
		if len(s.Command) == 0 || s.Command[0] != tier || s.Build == nil || s.Image != "veritrail:dev" {
			t.Errorf("%s: command %v, image %q, build %v", tier, s.Command, s.Image, s.Build)
		}
		i := slices.Index(s.Command, flag)
		if i < 0 || i+1 >= len(s.Command) {
			t.Errorf("%s listens nowhere an orchestrator reaches: command %v has no %s", tier, s.Command, flag)
			continue
		}
		host, port, err := net.SplitHostPort(s.Command[i+1])
		if err != nil || host != "0.0.0.0" {
			t.Errorf("%s %s %s: not every interface of its container (%v)", tier, flag, s.Command[i+1], err)
		}
		metricsPort[tier] = port
		for _, v := range []string{"VERITRAIL_POSTGRES", "VERITRAIL_KAFKA_BROKERS"} {
			if s.Environment[v] == nil || *s.Environment[v] == "" {
				t.Errorf("%s has no %s", tier, v)
			}
		}
	}
	if ports := svc("ingest").Ports; len(ports) != 1 || ports[0].Target != 8080 || ports[0].Published != "8080" || ports[0].HostIP != "127.0.0.1" {
		t.Errorf("ingest publishes %+v, want 127.0.0.1:8080 -> 8080", ports)
	}
	if tok := svc("ingest").Environment["VERITRAIL_BOOTSTRAP_TOKEN"]; tok == nil || *tok != strings.Repeat("ab", 32) {
		t.Errorf("ingest's bootstrap token is %v", tok)
	}

	// Prometheus: its configuration and alert rules mounted where it reads them, each tier scraped.
	prom := svc("prometheus")
	mounts := map[string]string{}
	for _, v := range prom.Volumes {
		mounts[v.Target] = v.Source
	}
	var cfg struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			Job           string `yaml:"job_name"`
			MetricsPath   string `yaml:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, mounts["/etc/prometheus/prometheus.yml"], &cfg)
	for _, rules := range cfg.RuleFiles {
		var groups struct {
			Groups []struct {
				Rules []map[string]any `yaml:"rules"`
			} `yaml:"groups"`
		}
		readYAML(t, mounts[rules], &groups)
		if len(groups.Groups) == 0 || len(groups.Groups[0].Rules) == 0 {
			t.Errorf("rule file %s (%s) has no rules", rules, mounts[rules])
		}
	}
	if len(cfg.RuleFiles) == 0 {
		t.Error("Prometheus loads no alert rules")
	}
	scraped := map[string]bool{}
	for _, sc := range cfg.ScrapeConfigs {
		if sc.MetricsPath != "" && sc.MetricsPath != "/metrics" {
			t.Errorf("job %s scrapes %s", sc.Job, sc.MetricsPath)
		}
		for _, st := range sc.StaticConfigs {
			for _, target := range st.Targets {
				host, port, err := net.SplitHostPort(target)
				if err != nil {
					t.Errorf("job %s: target %q: %v", sc.Job, target, err)
					continue
				}
				if want, ok := metricsPort[host]; !ok || port != want {
					t.Errorf("job %s scrapes %s, which is no tier's metrics port (%v)", sc.Job, target, metricsPort)
				}
				scraped[host] = true
			}
		}
	}
	for tier := range metricsPort {
		if !scraped[tier] {
			t.Errorf("Prometheus does not scrape %s", tier)
		}
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %q: %v", path, err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
