package ingest

import (
	"flag"
	"testing"
	"time"
)

func TestLimiterBuckets(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	l := newLimiter(Limits{KeyRate: 1, KeyBurst: 2})
	for i := range 2 {
		if refused, _ := l.allow(now, "a", "o"); refused != "" {
			t.Fatalf("request %d within the key's burst refused by the %s", i+1, refused)
		}
	}
	if refused, wait := l.allow(now, "a", "o"); refused != "API key" || wait != time.Second {
		t.Fatalf("past the burst: refused by %q, wait %v; want the API key, 1s", refused, wait)
	}
	if refused, _ := l.allow(now, "b", "o"); refused != "" {
		t.Fatalf("another key shares no bucket with the first: refused by the %s", refused)
	}
	if refused, _ := l.allow(now.Add(time.Second), "a", "o"); refused != "" {
		t.Fatalf("a token a second later: refused by the %s", refused)
	}

	// The organization's bucket is shared; a request it refuses gives the key its token back.
	l = newLimiter(Limits{KeyRate: 0.001, KeyBurst: 1, OrgRate: 1, OrgBurst: 1})
	if refused, _ := l.allow(now, "x", "o"); refused != "" {
		t.Fatalf("first request refused by the %s", refused)
	}
	if refused, wait := l.allow(now, "y", "o"); refused != "organization" || wait != time.Second {
		t.Fatalf("second key: refused by %q, wait %v; want the organization, 1s", refused, wait)
	}
	if refused, _ := l.allow(now.Add(time.Second), "y", "o"); refused != "" {
		t.Fatalf("the key's token was not given back: refused by the %s", refused)
	}
	if refused, _ := l.allow(now.Add(time.Second), "z", "other"); refused != "" {
		t.Fatalf("another organization: refused by the %s", refused)
	}

	l = newLimiter(Limits{})
	for range 1000 {
		if refused, _ := l.allow(now, "a", "o"); refused != "" {
			t.Fatalf("zero limits refused by the %s", refused)
		}
	}
}

func TestLimiterInFlight(t *testing.T) {
	l := newLimiter(Limits{MaxInFlightWrites: 2})
	done1, ok1 := l.startWrite()
	_, ok2 := l.startWrite()
	if _, ok := l.startWrite(); !ok1 || !ok2 || ok {
		t.Fatalf("admitted %v %v, then %v; want two, then none", ok1, ok2, ok)
	}
	done1()
	if _, ok := l.startWrite(); !ok {
		t.Fatal("a write that ended did not free its place")
	}
	if _, ok := newLimiter(Limits{}).startWrite(); !ok {
		t.Fatal("unbounded writes refused")
	}
}

func TestRetryAfter(t *testing.T) {
	for d, want := range map[time.Duration]int{time.Millisecond: 1, time.Second: 1, 1500 * time.Millisecond: 2, time.Minute: 60} {
		if got := retryAfter(d); got != want {
			t.Errorf("retryAfter(%v) = %d, want %d", d, got, want)
		}
	}
}

func TestLimitsFlags(t *testing.T) {
	t.Setenv("VERITRAIL_RATE_LIMIT_KEY", "5")
	t.Setenv("VERITRAIL_MAX_INFLIGHT_WRITES", "9")
	l := DefaultLimits()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	l.RegisterFlags(fs)
	if err := fs.Parse([]string{"--rate-limit-org", "7", "--max-inflight-writes", "3"}); err != nil {
		t.Fatal(err)
	}
	want := DefaultLimits()
	want.KeyRate, want.OrgRate, want.MaxInFlightWrites = 5, 7, 3 // flags win over the environment
	if l != want {
		t.Fatalf("limits %+v, want %+v", l, want)
	}
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}

	t.Setenv("VERITRAIL_RATE_LIMIT_KEY_BURST", "many")
	l = DefaultLimits()
	l.RegisterFlags(flag.NewFlagSet("serve", flag.ContinueOnError))
	if err := l.Validate(); err == nil {
		t.Fatal("an invalid environment value passed Validate")
	}
	for _, bad := range []Limits{{KeyRate: -1}, {OrgRate: 2, OrgBurst: 0}, {MaxInFlightWrites: -1}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) passed", bad)
		}
	}
}
