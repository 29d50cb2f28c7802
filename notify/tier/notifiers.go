package tier

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"sort"

	"github.com/hashicorp/go-hclog"

	"github.com/veritrail/veritrail/internal/metrics"
	"github.com/veritrail/veritrail/notify/catalog"
	"github.com/veritrail/veritrail/plugins/builtin"
)

// NotifiersConfig says which notifiers the tier delivers through: the built-ins, configured,
// and the operator's pinned plugins.
type NotifiersConfig struct {
	// CatalogFile is the operator's catalog file (see catalog.File); optional. A relative
	// plugin_dir in it is relative to the file's directory.
	CatalogFile string
	// File is the catalog when CatalogFile is empty (embedding, tests).
	File catalog.File
	// PluginDir, when set, replaces the catalog's plugin_dir.
	PluginDir string
	// AllowPrivate lets the webhook and chat built-ins reach loopback, private and link-local
	// addresses. Off by default: rule targets are user input, and the SSRF guard refuses them.
	AllowPrivate bool
	// Metrics counts plugin restarts; nil counts nothing. Set by the composition root.
	Metrics *metrics.Notify
	// Log receives go-plugin's and the plugins' lines (catalog.SlogLogger), at its level; nil
	// leaves them to hclog on stderr. Set by the composition root.
	Log *slog.Logger
}

// Notifiers builds the catalog: every built-in configured with its settings (an e-mail
// notifier without settings stays unconfigured, and its deliveries fail as configuration
// errors), and every plugin checked against its pin. Bad settings, an unknown built-in, a
// binary outside the plugin directory or a checksum that does not match fail here, at start.
func Notifiers(ctx context.Context, cfg NotifiersConfig) (*catalog.Catalog, error) {
	f := cfg.File
	if cfg.CatalogFile != "" {
		var err error
		if f, err = catalog.LoadFile(cfg.CatalogFile); err != nil {
			return nil, err
		}
		if f.PluginDir != "" && !filepath.IsAbs(f.PluginDir) {
			f.PluginDir = filepath.Join(filepath.Dir(cfg.CatalogFile), f.PluginDir)
		}
	}
	if cfg.PluginDir != "" {
		f.PluginDir = cfg.PluginDir
	}
	builtins := builtin.Notifiers()
	for _, name := range sortedKeys(f.Builtins) {
		if builtins[name] == nil {
			return nil, fmt.Errorf("catalog: builtins: no built-in notifier is named %q (there are %q)", name, sortedKeys(builtins))
		}
	}
	for _, name := range sortedKeys(builtins) {
		settings := maps.Clone(f.Builtins[name])
		if settings == nil {
			settings = map[string]string{}
		}
		if cfg.AllowPrivate && (name == builtin.Webhook || name == builtin.Chat) {
			settings["allow_private"] = "true"
		}
		if name == builtin.Email && len(settings) == 0 {
			continue
		}
		if err := builtins[name].Configure(ctx, settings); err != nil {
			return nil, fmt.Errorf("catalog: built-in %s: %w", name, err)
		}
	}
	ccfg := catalog.Config{Dir: f.PluginDir, Plugins: f.Plugins, Restarted: cfg.Metrics.PluginRestarted}
	if cfg.Log != nil {
		ccfg.Logger = catalog.SlogLogger(cfg.Log, hclogLevel(ctx, cfg.Log))
	}
	return catalog.New(ccfg, builtins)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// hclogLevel is the lowest of hclog's levels log is enabled for.
func hclogLevel(ctx context.Context, log *slog.Logger) hclog.Level {
	switch {
	case log.Enabled(ctx, slog.LevelDebug):
		return hclog.Debug
	case log.Enabled(ctx, slog.LevelInfo):
		return hclog.Info
	case log.Enabled(ctx, slog.LevelWarn):
		return hclog.Warn
	}
	return hclog.Error
}
