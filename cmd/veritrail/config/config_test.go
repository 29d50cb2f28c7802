package config

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// load binds command's flags, parses args, and loads with the given environment and file.
func load(t *testing.T, command string, file string, environ []string, args ...string) (Settings, error) {
	t.Helper()
	fs := pflag.NewFlagSet(command, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	l := Bind(fs, command)
	if file != "" {
		path := filepath.Join(t.TempDir(), "veritrail.yml")
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", path)
	}
	if err := fs.Parse(args); err != nil {
		return Settings{}, err
	}
	return l.Load(environ)
}

// TestPrecedence: defaults < file < environment < flags, for each kind of value.
func TestPrecedence(t *testing.T) {
	const file = "addr: file:1\nconsistency-wait: 3s\nkafka-brokers: [f1:9092, f2:9092]\nrate-limit-key: 7\nnotify-allow-private: true\n" +
		"kafka-partitions: 3\nlog-level: warn\n"
	env := []string{"VERITRAIL_CONSISTENCY_WAIT=4s", "VERITRAIL_KAFKA_BROKERS=e1:9092, e2:9092 ", "VERITRAIL_RATE_LIMIT_KEY=8",
		"VERITRAIL_LOG_LEVEL=debug", "PATH=/bin"}
	flags := []string{"--rate-limit-key", "9", "--log-level=error"}
	for _, c := range []struct {
		name  string
		file  string
		env   []string
		flags []string
		want  func(*Settings)
	}{
		{"defaults", "", nil, nil, func(*Settings) {}},
		{"file", file, nil, nil, func(s *Settings) {
			s.Addr, s.ConsistencyWait, s.KafkaBrokers, s.RateLimitKey = "file:1", 3*time.Second, []string{"f1:9092", "f2:9092"}, 7
			s.NotifyAllowPrivate, s.KafkaPartitions, s.LogLevel = true, 3, slog.LevelWarn
		}},
		{"environment over file", file, env, nil, func(s *Settings) {
			s.Addr, s.ConsistencyWait, s.KafkaBrokers, s.RateLimitKey = "file:1", 4*time.Second, []string{"e1:9092", "e2:9092"}, 8
			s.NotifyAllowPrivate, s.KafkaPartitions, s.LogLevel = true, 3, slog.LevelDebug
		}},
		{"flags over environment", file, env, flags, func(s *Settings) {
			s.Addr, s.ConsistencyWait, s.KafkaBrokers, s.RateLimitKey = "file:1", 4*time.Second, []string{"e1:9092", "e2:9092"}, 9
			s.NotifyAllowPrivate, s.KafkaPartitions, s.LogLevel = true, 3, slog.LevelError
		}},
		{"flags alone", "", nil, []string{"--kafka-brokers", "a:1,b:2", "--notify-allow-private", "--max-backlog", "5"}, func(s *Settings) {
			s.KafkaBrokers, s.NotifyAllowPrivate, s.MaxBacklog = []string{"a:1", "b:2"}, true, 5
		}},
		{"file named by VERITRAIL_CONFIG", "", []string{"VERITRAIL_CONFIG=" + writeFile(t, "max-backlog: 11\n")}, nil, func(s *Settings) {
			s.MaxBacklog = 11
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := load(t, "ingest", c.file, c.env, c.flags...)
			if err != nil {
				t.Fatal(err)
			}
			want := Defaults()
			c.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("settings\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestInvalidValues: an invalid value is an error naming where it was written, the setting and
// the value, in every source.
func TestInvalidValues(t *testing.T) {
	for _, c := range []struct {
		name  string
		file  string
		env   []string
		flags []string
		want  []string
	}{
		{"env duration", "", []string{"VERITRAIL_CONSISTENCY_WAIT=soon"}, nil, []string{"VERITRAIL_CONSISTENCY_WAIT", `"soon"`, "duration"}},
		{"env int64", "", []string{"VERITRAIL_MAX_BACKLOG=lots"}, nil, []string{"VERITRAIL_MAX_BACKLOG", `"lots"`}},
		{"env float", "", []string{"VERITRAIL_RATE_LIMIT_KEY=fast"}, nil, []string{"VERITRAIL_RATE_LIMIT_KEY", `"fast"`}},
		{"env bool", "", []string{"VERITRAIL_NOTIFY_ALLOW_PRIVATE=maybe"}, nil, []string{"VERITRAIL_NOTIFY_ALLOW_PRIVATE", `"maybe"`}},
		{"env below min", "", []string{"VERITRAIL_KAFKA_REPLICATION_FACTOR=0"}, nil, []string{"VERITRAIL_KAFKA_REPLICATION_FACTOR", `"0"`, "at least 1"}},
		{"env out of range", "", []string{"VERITRAIL_KAFKA_REPLICATION_FACTOR=40000"}, nil, []string{"VERITRAIL_KAFKA_REPLICATION_FACTOR", "16 bits"}},
		{"file duration", "idle-timeout: 5\n", nil, nil, []string{"config file", "idle-timeout", `"5"`, "duration"}},
		{"file level", "log-level: loud\n", nil, nil, []string{"config file", "log-level", `"loud"`}},
		{"file int", "rate-limit-key-burst: 1.5\n", nil, nil, []string{"config file", "rate-limit-key-burst", `"1.5"`}},
		{"file of another command's key, invalid", "notify-concurrency: 0\n", nil, nil, []string{"config file", "notify-concurrency", `"0"`}},
		{"env negative duration", "", []string{"VERITRAIL_IDLE_TIMEOUT=-1s"}, nil, []string{"VERITRAIL_IDLE_TIMEOUT", `"-1s"`, "at least 0"}},
		{"env negative rate", "", []string{"VERITRAIL_RATE_LIMIT_ORG=-2"}, nil, []string{"VERITRAIL_RATE_LIMIT_ORG", `"-2"`, "at least 0"}},
		{"env NaN", "", []string{"VERITRAIL_MIN_TRANSFER_RATE=NaN"}, nil, []string{"VERITRAIL_MIN_TRANSFER_RATE", `"NaN"`}},
		{"file negative count", "max-inflight-writes: -3\n", nil, nil, []string{"config file", "max-inflight-writes", `"-3"`, "at least 0"}},
		{"flag int", "", nil, []string{"--kafka-partitions", "0"}, []string{"--kafka-partitions", `"0"`, "at least 1"}},
		{"flag duration", "", nil, []string{"--write-timeout=later"}, []string{"--write-timeout", `"later"`}},
		{"missing file", "", []string{"VERITRAIL_CONFIG=/nonexistent/veritrail.yml"}, nil, []string{"config file /nonexistent/veritrail.yml"}},
		{"file not YAML", "addr: [\n", nil, nil, []string{"config file"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := load(t, "ingest", c.file, c.env, c.flags...)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestUnknownFileKeys: a key no command has is an error naming it; a key another command has
// is ignored by this one.
func TestUnknownFileKeys(t *testing.T) {
	for file, key := range map[string]string{"kafka-broker: [a:1]\n": `"kafka-broker"`, "kafka:\n  brokers: [a:1]\n": `"kafka.brokers"`,
		"addr: x:1\nbootstrap_org: acme\n": `"bootstrap_org"`} {
		_, err := load(t, "serve", file, nil)
		if err == nil || !strings.Contains(err.Error(), "unknown key "+key) {
			t.Errorf("%q: error %v, want unknown key %s", file, err, key)
		}
	}
	s, err := load(t, "serve", "kafka-brokers: [a:1]\nmax-backlog: 9\ndata-dir: /d\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.KafkaBrokers != nil || s.MaxBacklog != Defaults().MaxBacklog || s.DataDir != "/d" {
		t.Errorf("serve took other commands' keys or missed its own: %+v", s)
	}
}

// TestOtherCommandsEnvironmentIgnored: a variable of a setting this command does not have, even
// an invalid one, and variables that are no setting, do not concern it.
func TestOtherCommandsEnvironmentIgnored(t *testing.T) {
	s, err := load(t, "evaluate", "", []string{"VERITRAIL_NOTIFY_CONCURRENCY=many", "VERITRAIL_TEST_POSTGRES=x", "VERITRAIL_POSTGRES=pg://"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Postgres != "pg://" || s.NotifyConcurrency != Defaults().NotifyConcurrency {
		t.Errorf("settings %+v", s)
	}
}

// TestBootstrapTokenHasNoFlag: the secret is read from the environment or the file only.
func TestBootstrapTokenHasNoFlag(t *testing.T) {
	if _, err := load(t, "serve", "", nil, "--bootstrap-token", "s"); err == nil {
		t.Error("--bootstrap-token accepted")
	}
	s, err := load(t, "serve", "bootstrap-token: from-file\n", []string{"VERITRAIL_BOOTSTRAP_ORG=acme"}, "--bootstrap-org", "beta")
	if err != nil || s.BootstrapToken != "from-file" || s.BootstrapOrg != "beta" {
		t.Errorf("bootstrap settings %q %q, %v", s.BootstrapOrg, s.BootstrapToken, err)
	}
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	if help := Bind(fs, "serve").EnvOnly(); !strings.Contains(help, "VERITRAIL_BOOTSTRAP_TOKEN") {
		t.Errorf("help of the settings without a flag: %q", help)
	}
}

// TestEveryFlagNamesItsEnvironment: --help lists every setting of a command with its variable.
func TestEveryFlagNamesItsEnvironment(t *testing.T) {
	for _, command := range []string{"serve", "ingest", "evaluate", "notify", "admin"} {
		fs := pflag.NewFlagSet(command, pflag.ContinueOnError)
		Bind(fs, command)
		usage := fs.FlagUsages()
		for _, s := range All() {
			if s.For(command) && !s.NoFlag && !strings.Contains(usage, "--"+s.Key+" ") {
				t.Errorf("%s: no --%s in\n%s", command, s.Key, usage)
			}
			if s.For(command) && !s.NoFlag && !strings.Contains(usage, "(env "+s.Env+")") {
				t.Errorf("%s: --%s does not name %s", command, s.Key, s.Env)
			}
		}
	}
}

// TestApp: the settings reach the composition root's sections.
func TestApp(t *testing.T) {
	s := Defaults()
	s.Addr, s.NotifyAllowPrivate, s.KafkaBrokers, s.NotifyBudget = "h:1", true, []string{"k:9"}, time.Minute
	c := s.App(nil)
	if c.Ingest.BaseURL != "http://h:1" || !c.Notify.Notifiers.AllowPrivate || c.Kafka.Brokers[0] != "k:9" ||
		c.Notify.Tier.Pipeline.Budget != time.Minute || c.Ingest.Limits != s.Limits() || c.MaxBacklog != s.MaxBacklog {
		t.Errorf("app config %+v", c)
	}
	if err := c.Ingest.Limits.Validate(); err != nil {
		t.Errorf("default limits: %v", err)
	}
}

// TestConfigurationDocIsCurrent: docs/CONFIGURATION.md is what WriteMarkdown writes.
func TestConfigurationDocIsCurrent(t *testing.T) {
	var want bytes.Buffer
	if err := WriteMarkdown(&want); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../../docs/CONFIGURATION.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Error("docs/CONFIGURATION.md is not what the settings generate: run go generate ./cmd/veritrail")
	}
	for _, s := range All() {
		if !strings.Contains(want.String(), "| `"+s.Key+"` |") {
			t.Errorf("%s is not in the table", s.Key)
		}
	}
}

// TestLogFormat: --log-format json writes JSON lines, text writes key=value lines, and another
// value is refused.
func TestLogFormat(t *testing.T) {
	s := Defaults()
	var out bytes.Buffer
	for format, want := range map[string]string{"json": `{"time":`, "text": "time="} {
		out.Reset()
		s.LogFormat = format
		log, err := s.Logger(&out)
		if err != nil {
			t.Fatal(err)
		}
		log.Info("hello", "tier", "ingest")
		if !strings.HasPrefix(out.String(), want) || !strings.Contains(out.String(), "ingest") {
			t.Errorf("%s: %q", format, out.String())
		}
	}
	s.LogFormat = "xml"
	if _, err := s.Logger(&out); err == nil {
		t.Error("log-format xml accepted")
	}
}
