package limits

import (
	"sync"
	"testing"
	"time"
)

func TestLimiterBuckets(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	l := NewLimiter(Limits{KeyRate: 1, KeyBurst: 2})
	for i := range 2 {
		if refused, _ := l.Allow(now, "a", "o"); refused != "" {
			t.Fatalf("request %d within the key's burst refused by the %s", i+1, refused)
		}
	}
	if refused, wait := l.Allow(now, "a", "o"); refused != "API key" || wait != time.Second {
		t.Fatalf("past the burst: refused by %q, wait %v; want the API key, 1s", refused, wait)
	}
	if refused, _ := l.Allow(now, "b", "o"); refused != "" {
		t.Fatalf("another key shares no bucket with the first: refused by the %s", refused)
	}
	if refused, _ := l.Allow(now.Add(time.Second), "a", "o"); refused != "" {
		t.Fatalf("a token a second later: refused by the %s", refused)
	}

	// The organization's bucket is shared; a request it refuses gives the key its token back.
	l = NewLimiter(Limits{KeyRate: 0.001, KeyBurst: 1, OrgRate: 1, OrgBurst: 1})
	if refused, _ := l.Allow(now, "x", "o"); refused != "" {
		t.Fatalf("first request refused by the %s", refused)
	}
	if refused, wait := l.Allow(now, "y", "o"); refused != "organization" || wait != time.Second {
		t.Fatalf("second key: refused by %q, wait %v; want the organization, 1s", refused, wait)
	}
	if refused, _ := l.Allow(now.Add(time.Second), "y", "o"); refused != "" {
		t.Fatalf("the key's token was not given back: refused by the %s", refused)
	}
	if refused, _ := l.Allow(now.Add(time.Second), "z", "other"); refused != "" {
		t.Fatalf("another organization: refused by the %s", refused)
	}

	l = NewLimiter(Limits{})
	for range 1000 {
		if refused, _ := l.Allow(now, "a", "o"); refused != "" {
			t.Fatalf("zero limits refused by the %s", refused)
		}
	}
}

// TestLimiterRefusalsTakeNothing: requests refused together are each told the same wait, the
// time until the next token, and take nothing from the buckets: once that token is there, the
// key makes exactly one request, and a key whose requests the organization refused keeps its
// whole burst. (With rate.Limiter reservations, some of 64 refused together were told 2 to 4 s.)
func TestLimiterRefusalsTakeNothing(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	together := func(l *Limiter, key, org string) map[string]map[time.Duration]int {
		var mu sync.Mutex
		got := map[string]map[time.Duration]int{}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 64 {
			wg.Go(func() {
				<-start
				refused, wait := l.Allow(now, key, org)
				mu.Lock()
				defer mu.Unlock()
				if got[refused] == nil {
					got[refused] = map[time.Duration]int{}
				}
				got[refused][wait]++
			})
		}
		close(start)
		wg.Wait()
		return got
	}
	l := NewLimiter(Limits{KeyRate: 1, KeyBurst: 2})
	for range 2 {
		l.Allow(now, "a", "o")
	}
	if got := together(l, "a", "o"); len(got) != 1 || len(got["API key"]) != 1 || got["API key"][time.Second] != 64 {
		t.Fatalf("64 requests past the key's burst: %v, want all refused by the API key with a wait of 1s", got)
	}
	later := now.Add(time.Second)
	if refused, _ := l.Allow(later, "a", "o"); refused != "" {
		t.Fatalf("the token a second later: refused by the %s", refused)
	}
	if refused, wait := l.Allow(later, "a", "o"); refused != "API key" || wait != time.Second {
		t.Fatalf("a second request a second later: refused by %q, wait %v; want the API key, 1s", refused, wait)
	}

	l = NewLimiter(Limits{KeyRate: 0.001, KeyBurst: 64, OrgRate: 1, OrgBurst: 1})
	l.Allow(now, "x", "o")
	if got := together(l, "y", "o"); len(got) != 1 || got["organization"][time.Second] != 64 {
		t.Fatalf("64 requests past the organization's burst: %v, want all refused by the organization with a wait of 1s", got)
	}
	for i := range 64 {
		if refused, _ := l.Allow(now.Add(time.Duration(i+1)*time.Second), "y", "o"); refused != "" {
			t.Fatalf("request %d of the key's burst of 64: refused by the %s", i+1, refused)
		}
	}
}

func TestLimiterInFlight(t *testing.T) {
	l := NewLimiter(Limits{MaxInFlightWrites: 2})
	done1, r1 := l.StartWrite("a", "o")
	_, r2 := l.StartWrite("b", "p")
	if _, r := l.StartWrite("c", "q"); r1 != Admitted || r2 != Admitted || r != RefusedServer {
		t.Fatalf("admitted %v %v, then %v; want two, then the server's refusal", r1, r2, r)
	}
	done1()
	if _, r := l.StartWrite("c", "q"); r != Admitted {
		t.Fatal("a write that ended did not free its place")
	}
	if _, r := NewLimiter(Limits{}).StartWrite("a", "o"); r != Admitted {
		t.Fatal("unbounded writes refused")
	}
}

// TestLimiterInFlightShares: a key and an organization hold at most their share of the places,
// so that the others still find some; a write that ends gives its key's and organization's
// place back.
func TestLimiterInFlightShares(t *testing.T) {
	l := NewLimiter(Limits{MaxInFlightWrites: 5, KeyInFlightWrites: 2, OrgInFlightWrites: 3})
	var dones []func()
	start := func(key, org string, want Refusal) {
		t.Helper()
		done, r := l.StartWrite(key, org)
		if r != want {
			t.Fatalf("write of %s/%s: refusal %v, want %v", org, key, r, want)
		}
		if done != nil {
			dones = append(dones, done)
		}
	}
	start("a", "o", Admitted)
	start("a", "o", Admitted)
	start("a", "o", RefusedKey) // the key's share is taken...
	start("b", "o", Admitted)   // ...not its organization's
	start("c", "o", RefusedOrg) // now the organization's is
	start("x", "p", Admitted)   // another organization still gets places
	start("y", "p", Admitted)
	start("z", "q", RefusedServer) // until every place is taken
	dones[0]()                     // a write of key a in o ends: key a is within its share again
	start("a", "o", Admitted)
	start("a", "o", RefusedKey)
	start("z", "q", RefusedServer)
	if len(l.inflight.keys) != 4 || len(l.inflight.orgs) != 2 {
		t.Fatalf("counts kept for %d keys and %d organizations, want 4 and 2", len(l.inflight.keys), len(l.inflight.orgs))
	}
	for _, done := range dones[1:] {
		done()
	}
	if l.inflight.total != 0 || len(l.inflight.keys) != 0 || len(l.inflight.orgs) != 0 {
		t.Fatalf("after every write ended: total %d, %d keys, %d organizations kept", l.inflight.total, len(l.inflight.keys), len(l.inflight.orgs))
	}
}

func TestRetryAfter(t *testing.T) {
	for d, want := range map[time.Duration]int{time.Millisecond: 1, time.Second: 1, 1500 * time.Millisecond: 2, time.Minute: 60} {
		if got := RetryAfter(d); got != want {
			t.Errorf("RetryAfter(%v) = %d, want %d", d, got, want)
		}
	}
}

// TestLimitsValidate: every negative bound, and a rate without a burst, is refused.
func TestLimitsValidate(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Limits{{KeyRate: -1}, {OrgRate: 2, OrgBurst: 0}, {MaxInFlightWrites: -1}, {KeyInFlightWrites: -1},
		{OrgInFlightWrites: -1}, {BodyReadTimeout: -time.Second}, {WriteTimeout: -time.Second}, {IdleTimeout: -time.Second},
		{MinTransferRate: -1}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) passed", bad)
		}
	}
}
