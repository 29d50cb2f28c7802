package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/providers/posflag"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"
)

// ConfigFlag is the flag (and, as VERITRAIL_CONFIG, the environment variable) that names the
// YAML file of settings.
const ConfigFlag = "config"

// Loader loads the settings of one command: Bind registers its flags, Load reads the sources
// after the command line is parsed.
type Loader struct {
	command string
	flags   *pflag.FlagSet
	// parsed is what the flags parse into; Load reads back only those given on the command line.
	parsed Settings
	config string
}

// Bind registers --config and a flag for each setting of command on fs. Every flag's usage
// names its environment variable.
func Bind(fs *pflag.FlagSet, command string) *Loader {
	l := &Loader{command: command, flags: fs, parsed: Defaults()}
	fs.StringVar(&l.config, ConfigFlag, "", "YAML file of settings, keys named as the flags (env "+EnvName(ConfigFlag)+")")
	for _, s := range All() {
		if !s.For(command) || s.NoFlag {
			continue
		}
		v := s.of(&l.parsed)
		f := fs.VarPF(v, s.Key, "", fmt.Sprintf("%s (env %s)", s.Help, s.Env))
		if v.isBool() {
			f.NoOptDefVal = "true" // --notify-allow-private alone means true
		}
	}
	return l
}

// EnvOnly describes the command's settings that have no flag, for its help.
func (l *Loader) EnvOnly() string {
	var b strings.Builder
	for _, s := range All() {
		if s.For(l.command) && s.NoFlag {
			fmt.Fprintf(&b, "  %s (config file key %s)\n        %s\n", s.Env, s.Key, s.Help)
		}
	}
	return b.String()
}

// Load returns the command's settings: the defaults, overridden by the YAML file of --config
// (or VERITRAIL_CONFIG), then by the VERITRAIL_* variables of environ (os.Environ() in the
// commands), then by the flags given on the command line. Every invalid value is an error that
// names where it was written, the setting and the value; so is a key of the file that no
// command has. A key of the file that only other commands have is accepted (one file can serve
// every tier) and, like the environment variables of other commands' settings, ignored.
func (l *Loader) Load(environ []string) (Settings, error) {
	merged := koanf.New(".") // keys are flat: no setting's name has a dot
	path := l.config
	if !l.flags.Changed(ConfigFlag) {
		path = lookupEnv(environ, EnvName(ConfigFlag))
	}
	if path != "" {
		layer := koanf.New(".")
		if err := layer.Load(file.Provider(path), yaml.Parser()); err != nil {
			return Settings{}, fmt.Errorf("config file %s: %w", path, err)
		}
		for _, key := range layer.Keys() {
			s, ok := lookup(key)
			if !ok {
				return Settings{}, fmt.Errorf("config file %s: unknown key %q (the keys are the flag names: see docs/CONFIGURATION.md)", path, key)
			}
			if err := check(s, layer.Get(key)); err != nil {
				return Settings{}, fmt.Errorf("config file %s: %s: %w", path, key, err)
			}
		}
		if err := merged.Merge(layer); err != nil {
			return Settings{}, fmt.Errorf("config file %s: %w", path, err)
		}
	}

	envLayer := koanf.New(".")
	err := envLayer.Load(env.Provider(".", env.Opt{Prefix: EnvPrefix, EnvironFunc: func() []string { return environ },
		TransformFunc: func(name, val string) (string, any) {
			key := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, EnvPrefix), "_", "-"))
			if s, ok := lookup(key); !ok || !s.For(l.command) {
				return "", nil // VERITRAIL_CONFIG, the test suites' and the fault harness's variables, other commands' settings
			}
			return key, val
		}}), nil)
	if err != nil {
		return Settings{}, fmt.Errorf("environment: %w", err)
	}
	for _, key := range envLayer.Keys() {
		s, _ := lookup(key)
		if err := check(s, envLayer.Get(key)); err != nil {
			return Settings{}, fmt.Errorf("%s: %w", s.Env, err)
		}
	}

	// The flags parsed already, each through its setting's Set: only those given are read back.
	flagLayer := koanf.New(".")
	err = flagLayer.Load(posflag.ProviderWithValue(l.flags, ".", nil, func(key, val string) (string, any) {
		if s, ok := lookup(key); !ok || !s.For(l.command) {
			return "", nil // --config, --help
		}
		return key, val
	}), nil)
	if err != nil {
		return Settings{}, fmt.Errorf("flags: %w", err)
	}
	for _, layer := range []*koanf.Koanf{envLayer, flagLayer} {
		if err := merged.Merge(layer); err != nil {
			return Settings{}, err
		}
	}

	out := Defaults()
	for _, key := range merged.Keys() {
		s, _ := lookup(key)
		if !s.For(l.command) {
			continue
		}
		if err := s.of(&out).Set(text(merged.Get(key))); err != nil {
			return Settings{}, fmt.Errorf("%s: %w", key, err)
		}
	}
	return out, nil
}

// check parses raw as the setting's value, into a scratch Settings, and words the error.
func check(s Setting, raw any) error {
	scratch := Defaults()
	t := text(raw)
	if err := s.of(&scratch).Set(t); err != nil {
		return fmt.Errorf("invalid value %q: %w", t, err)
	}
	return nil
}

// text is a value read from the file, the environment or a flag as the text Set parses: YAML
// gives numbers, booleans and lists, the others strings.
func text(raw any) string {
	switch v := raw.(type) {
	case nil:
		return ""
	case string:
		return v
	case []any:
		items := make([]string, len(v))
		for i, item := range v {
			items[i] = text(item)
		}
		return strings.Join(items, ",")
	}
	return fmt.Sprint(raw)
}

// lookupEnv is the value of the variable name in environ.
func lookupEnv(environ []string, name string) string {
	i := slices.IndexFunc(environ, func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
	if i < 0 {
		return ""
	}
	return strings.TrimPrefix(environ[i], name+"=")
}
