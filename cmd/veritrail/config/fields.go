package config

import (
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// EnvPrefix starts every setting's environment variable.
const EnvPrefix = "VERITRAIL_"

// Setting describes one field of Settings, from its tags.
type Setting struct {
	// Key is the setting's name: its flag, its YAML key.
	Key string
	// Env is its environment variable.
	Env string
	// Help says what it does.
	Help string
	// Commands are the commands that have it.
	Commands []string
	// NoFlag keeps it off the command line (environment and file only).
	NoFlag bool

	field int
	min   *float64 // from the min tag: the least valid value (of a duration, in seconds)
}

// For reports whether command has the setting.
func (s Setting) For(command string) bool { return slices.Contains(s.Commands, command) }

// EnvName is the environment variable of the setting or flag named key.
func EnvName(key string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, "-", "_"))
}

// All describes every setting, in the order of the fields of Settings.
func All() []Setting {
	t := reflect.TypeFor[Settings]()
	out := make([]Setting, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		s := Setting{Key: f.Tag.Get("koanf"), Help: f.Tag.Get("help"), Commands: strings.Fields(f.Tag.Get("for")),
			NoFlag: f.Tag.Get("flag") == "-", field: i}
		if s.Key == "" || s.Help == "" || len(s.Commands) == 0 {
			panic(fmt.Sprintf("config: field %s lacks its koanf, help or for tag", f.Name)) // a programming error, caught by every test
		}
		s.Env = EnvName(s.Key)
		if m := f.Tag.Get("min"); m != "" {
			n, err := strconv.ParseFloat(m, 64)
			if err != nil {
				panic(fmt.Sprintf("config: field %s: min tag %q: %v", f.Name, m, err))
			}
			s.min = &n
		}
		out = append(out, s)
	}
	return out
}

// lookup is the setting named key, if there is one.
func lookup(key string) (Setting, bool) {
	for _, s := range All() {
		if s.Key == key {
			return s, true
		}
	}
	return Setting{}, false
}

// value is one setting of one Settings as a pflag.Value: every source (file, environment,
// flag) is parsed by its Set, so a value means the same wherever it is written.
type value struct {
	s Setting
	v reflect.Value // the field, settable
}

func (s Setting) of(st *Settings) value {
	return value{s: s, v: reflect.ValueOf(st).Elem().Field(s.field)}
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	levelType    = reflect.TypeFor[slog.Level]()
)

func (v value) String() string {
	switch {
	case v.v.Type() == durationType:
		return time.Duration(v.v.Int()).String()
	case v.v.Type() == levelType:
		return strings.ToLower(slog.Level(v.v.Int()).String())
	}
	switch v.v.Kind() {
	case reflect.String:
		return v.v.String()
	case reflect.Bool:
		return strconv.FormatBool(v.v.Bool())
	case reflect.Int, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.v.Int(), 10)
	case reflect.Float64:
		return strconv.FormatFloat(v.v.Float(), 'g', -1, 64)
	case reflect.Slice:
		return strings.Join(v.v.Interface().([]string), ",")
	}
	panic(fmt.Sprintf("config: %s: unsupported type %s", v.s.Key, v.v.Type()))
}

// Set parses text as the setting's type; a list replaces the whole list rather than appending,
// so that each source overrides the one before.
func (v value) Set(text string) error {
	text = strings.TrimSpace(text)
	switch {
	case v.v.Type() == durationType:
		d, err := time.ParseDuration(text)
		if err != nil {
			return fmt.Errorf("not a duration (like 30s, 2m, 1h30m)")
		}
		if err := v.atLeastMin(d.Seconds()); err != nil {
			return err
		}
		v.v.SetInt(int64(d))
		return nil
	case v.v.Type() == levelType:
		var l slog.Level
		if err := l.UnmarshalText([]byte(text)); err != nil {
			return fmt.Errorf("not a log level (debug, info, warn, error)")
		}
		v.v.SetInt(int64(l))
		return nil
	}
	switch v.v.Kind() {
	case reflect.String:
		v.v.SetString(text)
	case reflect.Bool:
		b, err := strconv.ParseBool(text)
		if err != nil {
			return fmt.Errorf("not true or false")
		}
		v.v.SetBool(b)
	case reflect.Int, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(text, 10, v.v.Type().Bits())
		if err != nil {
			return fmt.Errorf("not an integer of %d bits", v.v.Type().Bits())
		}
		if err := v.atLeastMin(float64(n)); err != nil {
			return err
		}
		v.v.SetInt(n)
	case reflect.Float64:
		f, err := strconv.ParseFloat(text, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("not a number")
		}
		if err := v.atLeastMin(f); err != nil {
			return err
		}
		v.v.SetFloat(f)
	case reflect.Slice:
		var items []string
		for item := range strings.SplitSeq(text, ",") {
			if item = strings.TrimSpace(item); item != "" {
				items = append(items, item)
			}
		}
		v.v.Set(reflect.ValueOf(items))
	default:
		return fmt.Errorf("unsupported type %s", v.v.Type())
	}
	return nil
}

// atLeastMin refuses a number below the setting's min tag.
func (v value) atLeastMin(n float64) error {
	if v.s.min != nil && n < *v.s.min {
		return fmt.Errorf("must be at least %v", *v.s.min)
	}
	return nil
}

// Type names the value's kind in the flag usage.
func (v value) Type() string {
	switch {
	case v.v.Type() == durationType:
		return "duration"
	case v.v.Type() == levelType:
		return "level"
	}
	switch v.v.Kind() {
	case reflect.Int, reflect.Int16, reflect.Int32, reflect.Int64:
		return "int"
	case reflect.Float64:
		return "number"
	case reflect.Slice:
		return "list"
	}
	return v.v.Kind().String()
}

func (v value) isBool() bool { return v.v.Kind() == reflect.Bool }
