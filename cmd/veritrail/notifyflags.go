package main

import (
	"flag"
	"strconv"
	"time"

	"github.com/veritrail/veritrail/cmd/veritrail/app"
)

// registerNotifyFlags binds the notify tier's section (serve and notify). Each flag's
// environment variable is VERITRAIL_ and its name in upper case, as for every flag.
func registerNotifyFlags(fs *flag.FlagSet, cfg *app.NotifyConfig) {
	n := &cfg.Notifiers
	fs.StringVar(&n.CatalogFile, "notify-catalog", env("notify-catalog", ""),
		"YAML or JSON file of pinned notifier plugins and built-in settings (see docs/ARCHITECTURE.md)")
	fs.StringVar(&n.PluginDir, "notify-plugin-dir", env("notify-plugin-dir", ""),
		"directory of the notifier plugin binaries (overrides the catalog's plugin_dir)")
	registerAllowPrivateFlag(fs, cfg)
	p := &cfg.Tier.Pipeline
	fs.DurationVar(&p.Budget, "notify-budget", envDuration("notify-budget", 15*time.Minute),
		"how long one delivery is retried before it is kept as a dead letter")
	fs.DurationVar(&p.AttemptTimeout, "notify-attempt-timeout", envDuration("notify-attempt-timeout", 30*time.Second),
		"bound on one delivery attempt")
	fs.DurationVar(&p.InitialBackoff, "notify-initial-backoff", envDuration("notify-initial-backoff", time.Second),
		"first wait between attempts; it doubles, with jitter")
	fs.DurationVar(&p.MaxBackoff, "notify-max-backoff", envDuration("notify-max-backoff", 2*time.Minute),
		"longest wait between attempts")
	concurrency, _ := strconv.Atoi(env("notify-concurrency", "16"))
	fs.IntVar(&cfg.Tier.Concurrency, "notify-concurrency", concurrency,
		"triggers delivered at once (those of one environment one after the other)")
}

// registerAllowPrivateFlag binds --notify-allow-private, which notify reads at delivery and ingest
// when a rule is written (serve does both): give ingest and notify processes the same value.
func registerAllowPrivateFlag(fs *flag.FlagSet, cfg *app.NotifyConfig) {
	allow, _ := strconv.ParseBool(env("notify-allow-private", "false"))
	fs.BoolVar(&cfg.Notifiers.AllowPrivate, "notify-allow-private", allow,
		"let webhook and chat targets be loopback, private and link-local addresses, in rules and at delivery (SSRF guard off; tests, on-premises receivers)")
}
