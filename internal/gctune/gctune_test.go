package gctune

import (
	"errors"
	"io/fs"
	"runtime/debug"
	"testing"
)

func TestApply(t *testing.T) {
	const v2, v1 = "/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"
	cases := []struct {
		name  string
		env   map[string]string
		files map[string]string
		want  Applied
	}{
		{name: "no container", want: Applied{Percent: DefaultPercent}},
		{name: "cgroup v2 limit", files: map[string]string{v2: "1073741824\n"},
			want: Applied{Percent: DefaultPercent, Limit: share(1073741824)}},
		{name: "cgroup v2 without a limit", files: map[string]string{v2: "max\n"}, want: Applied{Percent: DefaultPercent}},
		{name: "cgroup v1 limit", files: map[string]string{v1: "536870912"},
			want: Applied{Percent: DefaultPercent, Limit: share(536870912)}},
		{name: "cgroup v1 unlimited", files: map[string]string{v1: "9223372036854771712"}, want: Applied{Percent: DefaultPercent}},
		{name: "the operator's GOGC", env: map[string]string{"GOGC": "50"}, files: map[string]string{v2: "1073741824"},
			want: Applied{Limit: share(1073741824)}},
		{name: "the operator's GOMEMLIMIT", env: map[string]string{"GOMEMLIMIT": "100MiB"}, files: map[string]string{v2: "1073741824"},
			want: Applied{Percent: DefaultPercent}},
		{name: "both the operator's", env: map[string]string{"GOGC": "off", "GOMEMLIMIT": "1GiB"}, files: map[string]string{v2: "1073741824"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := Env{
				Getenv: func(k string) string { return c.env[k] },
				ReadFile: func(p string) ([]byte, error) {
					if s, ok := c.files[p]; ok {
						return []byte(s), nil
					}
					return nil, fs.ErrNotExist
				},
			}
			beforePercent := debug.SetGCPercent(-1)
			debug.SetGCPercent(beforePercent)
			beforeLimit := debug.SetMemoryLimit(-1)
			got, restore := Apply(env)
			if got != c.want {
				t.Errorf("Apply = %+v, want %+v", got, c.want)
			}
			if c.want.Percent != 0 {
				if p := debug.SetGCPercent(-1); p != c.want.Percent {
					t.Errorf("GC percent %d after Apply, want %d", p, c.want.Percent)
				} else {
					debug.SetGCPercent(p)
				}
			}
			if c.want.Limit != 0 {
				if l := debug.SetMemoryLimit(-1); l != c.want.Limit {
					t.Errorf("memory limit %d after Apply, want %d", l, c.want.Limit)
				}
			}
			restore()
			p := debug.SetGCPercent(-1)
			debug.SetGCPercent(p)
			if p != beforePercent {
				t.Errorf("GC percent %d after restore, want %d", p, beforePercent)
			}
			if l := debug.SetMemoryLimit(-1); l != beforeLimit {
				t.Errorf("memory limit %d after restore, want %d", l, beforeLimit)
			}
		})
	}
}

func TestOSReadsTheProcess(t *testing.T) {
	env := OS()
	if env.Getenv == nil || env.ReadFile == nil {
		t.Fatal("OS() leaves a function unset")
	}
	if _, err := env.ReadFile("/nonexistent/gctune"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile of a missing file: %v", err)
	}
}

func share(limit int64) int64 { return int64(float64(limit) * LimitShare) }

func TestAppliedString(t *testing.T) {
	for _, c := range []struct {
		a    Applied
		want string
	}{
		{Applied{}, "GOGC from the environment"},
		{Applied{Percent: 300}, "GOGC=300"},
		{Applied{Percent: 300, Limit: 512 << 20}, "GOGC=300, memory limit 512 MiB from the container"},
		{Applied{Limit: 256 << 20}, "GOGC from the environment, memory limit 256 MiB from the container"},
	} {
		if got := c.a.String(); got != c.want {
			t.Errorf("%+v.String() = %q, want %q", c.a, got, c.want)
		}
	}
}
