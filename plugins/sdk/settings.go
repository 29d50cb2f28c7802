package sdk

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"
)

// Settings are the operator's settings for a notifier, as Configure receives them, with typed
// accessors that name the offending key in their errors.
type Settings map[string]string

// Only fails when a setting is not one of the known keys, so a misspelt setting is an error
// rather than silently ignored.
func (s Settings) Only(known ...string) error {
	var unknown []string
	for k := range s {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("unknown settings %q (known: %q)", unknown, known)
	}
	return nil
}

// String returns the setting, or def when it is absent.
func (s Settings) String(key, def string) string {
	if v, ok := s[key]; ok {
		return v
	}
	return def
}

// Bool parses the setting with strconv.ParseBool, or returns def when it is absent.
func (s Settings) Bool(key string, def bool) (bool, error) {
	v, ok := s[key]
	if !ok {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("setting %s: %q is not a boolean", key, v)
	}
	return b, nil
}

// Duration parses the setting with time.ParseDuration, or returns def when it is absent.
func (s Settings) Duration(key string, def time.Duration) (time.Duration, error) {
	v, ok := s[key]
	if !ok {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("setting %s: %q is not a positive duration such as 10s", key, v)
	}
	return d, nil
}

// Int parses the setting as a decimal integer, or returns def when it is absent.
func (s Settings) Int(key string, def int) (int, error) {
	v, ok := s[key]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("setting %s: %q is not an integer", key, v)
	}
	return n, nil
}
