// Package config is the configuration of the veritrail commands: one struct, Settings, whose
// fields name their setting and say what it does, loaded in a fixed order: defaults < the YAML
// file given by --config (or VERITRAIL_CONFIG) < VERITRAIL_* environment variables < flags.
// docs/CONFIGURATION.md is generated from it (WriteMarkdown).
package config

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/veritrail/veritrail/ingest/limits"

	"github.com/veritrail/veritrail/cmd/veritrail/app"
	"github.com/veritrail/veritrail/ingest"
	"github.com/veritrail/veritrail/internal/bus/backlog"
	"github.com/veritrail/veritrail/internal/bus/kafkabus"
	"github.com/veritrail/veritrail/notify"
	"github.com/veritrail/veritrail/notify/tier"
)

// Settings is every setting of the commands that run tiers (serve, ingest, evaluate, notify)
// and of admin, which opens the same stores.
//
// Each field's tags: koanf is the setting's name, which is its flag (--NAME), its key in the
// YAML file and, in upper case with underscores, its environment variable after VERITRAIL_;
// for lists the commands that have it; help describes it; flag:"-" keeps it off the command
// line (a secret would show in the process list); min bounds a number from below.
type Settings struct {
	Addr            string        `koanf:"addr" for:"serve ingest evaluate notify" help:"HTTP listen address"`
	BaseURL         string        `koanf:"base-url" for:"serve ingest evaluate notify" help:"public base URL of html_url links (empty: http://ADDR)"`
	ConsistencyWait time.Duration `koanf:"consistency-wait" for:"serve ingest evaluate notify" min:"0" help:"how long a read waits for the writes of its organization acknowledged before it to be applied"`
	LogLevel        slog.Level    `koanf:"log-level" for:"serve ingest evaluate notify" help:"debug, info, warn or error"`
	LogFormat       string        `koanf:"log-format" for:"serve ingest evaluate notify" help:"text or json: the format of every log line, the notifier plugins' included"`
	AdminAddr       string        `koanf:"admin-addr" for:"evaluate notify" help:"listen address of /metrics, /livez and /readyz of the evaluate and notify tiers, e.g. 0.0.0.0:8081 (serve and ingest answer them on --addr); empty, the default: none, so that several processes share a machine without choosing ports"`

	DataDir  string `koanf:"data-dir" for:"serve admin" help:"directory of the embedded mode's state, bus and attachments"`
	Postgres string `koanf:"postgres" for:"ingest evaluate notify admin" help:"PostgreSQL DSN of the distributed mode, e.g. postgres://user@host:5432/veritrail (admin: the store to manage instead of --data-dir's)"`

	KafkaBrokers           []string      `koanf:"kafka-brokers" for:"ingest evaluate notify" help:"comma-separated Kafka bootstrap brokers, as host:port"`
	KafkaConsumerGroup     string        `koanf:"kafka-consumer-group" for:"ingest evaluate notify" help:"Kafka consumer group shared by the subscribers (empty: veritrail-evaluate, veritrail-notify)"`
	KafkaClientID          string        `koanf:"kafka-client-id" for:"ingest evaluate notify" help:"Kafka client ID"`
	KafkaInstanceID        string        `koanf:"kafka-instance-id" for:"evaluate notify" help:"this process's static member ID in its Kafka consumer groups, kept across its restarts (the pod's name), so that a restarted process takes its partitions back at once (empty: dynamic membership)"`
	KafkaSessionTimeout    time.Duration `koanf:"kafka-session-timeout" for:"evaluate notify" min:"1" help:"how long the Kafka consumer group waits for a silent process before it hands its partitions to the others; reads behind a killed evaluator wait this long, so keep it well under --consistency-wait"`
	KafkaPartitions        int32         `koanf:"kafka-partitions" for:"ingest evaluate notify" min:"1" help:"partitions of the Kafka topics created on first use"`
	KafkaReplicationFactor int16         `koanf:"kafka-replication-factor" for:"ingest evaluate notify" min:"1" help:"replication factor of the Kafka topics created on first use"`

	RateLimitKey         float64       `koanf:"rate-limit-key" for:"serve ingest evaluate notify" min:"0" help:"requests per second one API key may make; 0 = unlimited"`
	RateLimitKeyBurst    int           `koanf:"rate-limit-key-burst" for:"serve ingest evaluate notify" min:"0" help:"requests one API key may make at once"`
	RateLimitOrg         float64       `koanf:"rate-limit-org" for:"serve ingest evaluate notify" min:"0" help:"requests per second all keys of one organization may make; 0 = unlimited"`
	RateLimitOrgBurst    int           `koanf:"rate-limit-org-burst" for:"serve ingest evaluate notify" min:"0" help:"requests all keys of one organization may make at once"`
	MaxInFlightWrites    int           `koanf:"max-inflight-writes" for:"serve ingest evaluate notify" min:"0" help:"writes handled at once before 503; 0 = unbounded"`
	MaxInFlightWritesKey int           `koanf:"max-inflight-writes-key" for:"serve ingest evaluate notify" min:"0" help:"writes one API key may have in flight before 429; 0 = no share"`
	MaxInFlightWritesOrg int           `koanf:"max-inflight-writes-org" for:"serve ingest evaluate notify" min:"0" help:"writes one organization may have in flight before 429; 0 = no share"`
	BodyReadTimeout      time.Duration `koanf:"body-read-timeout" for:"serve ingest evaluate notify" min:"0" help:"time a request body may take beyond what its size needs at --min-transfer-rate, then 408; 0 = no limit"`
	MinTransferRate      float64       `koanf:"min-transfer-rate" for:"serve ingest evaluate notify" min:"0" help:"bytes per second a body upload or a response download must keep up to be given more time; 0 = none"`
	WriteTimeout         time.Duration `koanf:"write-timeout" for:"serve ingest evaluate notify" min:"0" help:"time the client may take to accept each response write, beyond what its size needs at --min-transfer-rate; 0 = no limit"`
	IdleTimeout          time.Duration `koanf:"idle-timeout" for:"serve ingest evaluate notify" min:"0" help:"time a keep-alive connection may wait for its next request; 0 = forever"`

	MaxBacklog int64 `koanf:"max-backlog" for:"ingest" min:"0" help:"how many messages the evaluators may be behind all ingest processes before publishes wait (up to 1 s each)"`

	NotifyCatalog        string        `koanf:"notify-catalog" for:"serve notify" help:"YAML or JSON file of pinned notifier plugins and built-in settings (see docs/ARCHITECTURE.md)"`
	NotifyPluginDir      string        `koanf:"notify-plugin-dir" for:"serve notify" help:"directory of the notifier plugin binaries (overrides the catalog's plugin_dir)"`
	NotifyAllowPrivate   bool          `koanf:"notify-allow-private" for:"serve ingest notify" help:"let webhook and chat targets be loopback, private and link-local addresses, in rules (ingest) and at delivery (notify) (SSRF guard off; tests, on-premises receivers); give ingest and notify the same value"`
	NotifyBudget         time.Duration `koanf:"notify-budget" for:"serve notify" min:"0" help:"how long one delivery is retried before it is kept as a dead letter"`
	NotifyAttemptTimeout time.Duration `koanf:"notify-attempt-timeout" for:"serve notify" min:"0" help:"bound on one delivery attempt"`
	NotifyInitialBackoff time.Duration `koanf:"notify-initial-backoff" for:"serve notify" min:"0" help:"first wait between attempts; it doubles, with jitter"`
	NotifyMaxBackoff     time.Duration `koanf:"notify-max-backoff" for:"serve notify" min:"0" help:"longest wait between attempts"`
	NotifyConcurrency    int           `koanf:"notify-concurrency" for:"serve notify" min:"1" help:"triggers delivered at once (those of one environment one after the other)"`

	BootstrapOrg   string `koanf:"bootstrap-org" for:"serve ingest" help:"organization ensured at every start with an admin key whose secret is bootstrap-token; set both or neither (with neither, serve creates the organization default once and prints its new key)"`
	BootstrapToken string `koanf:"bootstrap-token" for:"serve ingest" flag:"-" help:"secret of the admin key of bootstrap-org (environment or config file only: a flag would show it in the process list)"`
}

// Defaults are the settings before any file, environment variable or flag.
func Defaults() Settings {
	l := limits.Default()
	return Settings{
		Addr: "127.0.0.1:8080", ConsistencyWait: ingest.DefaultConsistencyWait, LogLevel: slog.LevelInfo, LogFormat: "text",
		DataDir:       "./veritrail-data",
		KafkaClientID: kafkabus.DefaultClientID, KafkaPartitions: kafkabus.DefaultPartitions, KafkaSessionTimeout: kafkabus.DefaultSessionTimeout,
		KafkaReplicationFactor: kafkabus.DefaultReplicationFactor,
		RateLimitKey:           l.KeyRate, RateLimitKeyBurst: l.KeyBurst, RateLimitOrg: l.OrgRate, RateLimitOrgBurst: l.OrgBurst,
		MaxInFlightWrites: l.MaxInFlightWrites, MaxInFlightWritesKey: l.KeyInFlightWrites, MaxInFlightWritesOrg: l.OrgInFlightWrites,
		BodyReadTimeout: l.BodyReadTimeout, MinTransferRate: l.MinTransferRate, WriteTimeout: l.WriteTimeout, IdleTimeout: l.IdleTimeout,
		MaxBacklog:   backlog.DefaultMax,
		NotifyBudget: 15 * time.Minute, NotifyAttemptTimeout: 30 * time.Second, NotifyInitialBackoff: time.Second,
		NotifyMaxBackoff: 2 * time.Minute, NotifyConcurrency: 16,
	}
}

// Logger is the processes' logger: lines in --log-format at --log-level and above, to w.
func (s Settings) Logger(w io.Writer) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: s.LogLevel}
	switch s.LogFormat {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log-format: %q is neither text nor json", s.LogFormat)
}

// Limits are the ingest tier's load limits the settings give.
func (s Settings) Limits() limits.Limits {
	return limits.Limits{KeyRate: s.RateLimitKey, KeyBurst: s.RateLimitKeyBurst, OrgRate: s.RateLimitOrg, OrgBurst: s.RateLimitOrgBurst,
		MaxInFlightWrites: s.MaxInFlightWrites, KeyInFlightWrites: s.MaxInFlightWritesKey, OrgInFlightWrites: s.MaxInFlightWritesOrg,
		BodyReadTimeout: s.BodyReadTimeout, MinTransferRate: s.MinTransferRate, WriteTimeout: s.WriteTimeout, IdleTimeout: s.IdleTimeout}
}

// App is the composition root's configuration of the settings, logging to log.
func (s Settings) App(log *slog.Logger) app.Config {
	baseURL := s.BaseURL
	if baseURL == "" {
		baseURL = "http://" + s.Addr
	}
	return app.Config{
		Addr: s.Addr, AdminAddr: s.AdminAddr, DataDir: s.DataDir, Postgres: s.Postgres,
		Kafka: kafkabus.Config{Brokers: s.KafkaBrokers, ConsumerGroup: s.KafkaConsumerGroup, ClientID: s.KafkaClientID,
			InstanceID: s.KafkaInstanceID, SessionTimeout: s.KafkaSessionTimeout, Partitions: s.KafkaPartitions,
			ReplicationFactor: s.KafkaReplicationFactor},
		Ingest: ingest.Config{BaseURL: baseURL, ConsistencyWait: s.ConsistencyWait, Limits: s.Limits()},
		Notify: app.NotifyConfig{
			Notifiers: tier.NotifiersConfig{CatalogFile: s.NotifyCatalog, PluginDir: s.NotifyPluginDir, AllowPrivate: s.NotifyAllowPrivate},
			Tier: tier.Config{Concurrency: s.NotifyConcurrency, Pipeline: notify.Config{Budget: s.NotifyBudget,
				AttemptTimeout: s.NotifyAttemptTimeout, InitialBackoff: s.NotifyInitialBackoff, MaxBackoff: s.NotifyMaxBackoff}},
		},
		MaxBacklog:   s.MaxBacklog,
		BootstrapOrg: s.BootstrapOrg, BootstrapToken: s.BootstrapToken,
		Log: log,
	}
}
