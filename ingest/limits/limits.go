// Package limits holds how much load ingest accepts and how slow a client may be: the
// configuration (Limits, its flags and environment variables), the token buckets per API key and
// per organization, the bound on writes in flight with the key's and the organization's shares of
// it, and the connection deadlines that cut off a client sending or reading too slowly. Ingest's
// authorization hook asks it before a handler runs; it knows nothing of HTTP answers.
package limits

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Limits is how much load ingest accepts before it sheds the rest, and how slow a client may
// be. Every refusal happens in the authorization hook, before a handler reads the body or
// publishes anything, so a request is either wholly accepted or refused without a side effect.
type Limits struct {
	// KeyRate is the requests per second one API key may make (anonymous readers of a public
	// organization share one key per organization); 0 means no limit. KeyBurst is how many
	// it may make at once.
	KeyRate  float64
	KeyBurst int
	// OrgRate and OrgBurst limit all the keys of one organization together.
	OrgRate  float64
	OrgBurst int
	// MaxInFlightWrites bounds the writes being handled at once (each may hold a 10 MB
	// attachment in memory); beyond it writes are refused with 503. 0 means no bound.
	MaxInFlightWrites int
	// KeyInFlightWrites and OrgInFlightWrites are the shares of those one API key and one
	// organization may hold; beyond its share a write is refused with 429, so that one client
	// uploading slowly (a write holds its place while its body arrives) cannot take every
	// place. 0 means no share.
	KeyInFlightWrites int
	OrgInFlightWrites int

	// BodyReadTimeout is how long a request body may take to arrive beyond what its size needs
	// at MinTransferRate; past it the request is answered 408 and its place freed. 0 means no
	// limit (Huma's own 5 s for JSON bodies then applies).
	BodyReadTimeout time.Duration
	// MinTransferRate, in bytes per second, extends the time of a body with its size, and the
	// time of each response write with the bytes written: a large attachment on a slow but
	// steady link passes, a trickle does not. 0 means no extension.
	MinTransferRate float64
	// WriteTimeout is how long the client may take to accept each response write, beyond what
	// its size needs at MinTransferRate. It runs from the write, not from the request, so a long
	// read-your-writes wait or upload before the answer is not counted. 0 means no limit.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that has waited that long for its next
	// request. 0 means never.
	IdleTimeout time.Duration
}

// Default is the limits of `veritrail serve` and `veritrail ingest` when no setting
// changes them (cmd/veritrail/config). A CI key rarely makes more than a few requests a second;
// the per-key bucket lets a pipeline's burst through and stops a runaway loop.
// A key may hold an eighth of the write places and an organization half of them, and 64 KiB/s
// (512 kbit/s) brings a 10 MB attachment in within about three minutes.
func Default() Limits {
	return Limits{KeyRate: 100, KeyBurst: 200, OrgRate: 500, OrgBurst: 1000,
		MaxInFlightWrites: 256, KeyInFlightWrites: 32, OrgInFlightWrites: 128,
		BodyReadTimeout: 10 * time.Second, MinTransferRate: 64 << 10, WriteTimeout: 30 * time.Second,
		IdleTimeout: 2 * time.Minute}
}

// Validate reports every problem of l at once.
func (l Limits) Validate() error {
	var errs []error
	check := func(name string, rate float64, burst int) {
		if rate < 0 || math.IsNaN(rate) || math.IsInf(rate, 0) {
			errs = append(errs, fmt.Errorf("--rate-limit-%s must be a number of requests per second, at least 0", name))
		}
		if rate > 0 && burst < 1 {
			errs = append(errs, fmt.Errorf("--rate-limit-%s-burst must be at least 1 when --rate-limit-%s is set", name, name))
		}
	}
	check("key", l.KeyRate, l.KeyBurst)
	check("org", l.OrgRate, l.OrgBurst)
	for _, c := range []struct {
		name string
		n    int64
	}{{"max-inflight-writes", int64(l.MaxInFlightWrites)}, {"max-inflight-writes-key", int64(l.KeyInFlightWrites)},
		{"max-inflight-writes-org", int64(l.OrgInFlightWrites)}, {"body-read-timeout", int64(l.BodyReadTimeout)},
		{"write-timeout", int64(l.WriteTimeout)}, {"idle-timeout", int64(l.IdleTimeout)}} {
		if c.n < 0 {
			errs = append(errs, fmt.Errorf("--%s must not be negative", c.name))
		}
	}
	if l.MinTransferRate < 0 || math.IsNaN(l.MinTransferRate) || math.IsInf(l.MinTransferRate, 0) {
		errs = append(errs, errors.New("--min-transfer-rate must be a number of bytes per second, at least 0"))
	}
	return errors.Join(errs...)
}

// maxBuckets bounds the token buckets kept; past it they are all dropped and start full
// again, a moment of leniency rather than unbounded memory.
const maxBuckets = 100_000

// Limiter enforces Limits: a token bucket per key and per organization, and the writes in
// flight.
type Limiter struct {
	keys     buckets
	orgs     buckets
	inflight inflight
}

func NewLimiter(cfg Limits) *Limiter {
	return &Limiter{keys: buckets{rate: cfg.KeyRate, burst: max(cfg.KeyBurst, 1)},
		orgs: buckets{rate: cfg.OrgRate, burst: max(cfg.OrgBurst, 1)},
		inflight: inflight{max: cfg.MaxInFlightWrites, keyMax: cfg.KeyInFlightWrites, orgMax: cfg.OrgInFlightWrites,
			keys: map[string]int{}, orgs: map[string]int{}}}
}

// The limits Allow names when it refuses (words of the 429's message).
const (
	RateOfKey = "API key"
	RateOfOrg = "organization"
)

// Allow takes one token from the key's bucket and one from the organization's, or neither.
// When it cannot, it says which limit refused and how long until a token is there.
func (l *Limiter) Allow(now time.Time, keyID, orgID string) (refused string, wait time.Duration) {
	if d := l.keys.take(now, keyID); d > 0 {
		return RateOfKey, d
	}
	if d := l.orgs.take(now, orgID); d > 0 {
		l.keys.giveBack(now, keyID) // the request is not made
		return RateOfOrg, d
	}
	return "", 0
}

// Refusal says which bound refused a write (StartWrite).
type Refusal int

const (
	Admitted Refusal = iota
	RefusedServer
	RefusedKey
	RefusedOrg
)

// StartWrite admits a write if fewer than MaxInFlightWrites are in flight and the key and the
// organization are within their shares; done must be called when it ends. refused says which
// bound refused it otherwise.
func (l *Limiter) StartWrite(keyID, orgID string) (done func(), refused Refusal) {
	return l.inflight.start(keyID, orgID)
}

// inflight counts the writes in flight, in all and by key and organization. Zero bounds
// bound nothing.
type inflight struct {
	max, keyMax, orgMax int

	mu    sync.Mutex
	total int
	keys  map[string]int // only keys with writes in flight
	orgs  map[string]int
}

func (f *inflight) start(keyID, orgID string) (done func(), refused Refusal) {
	if f.max <= 0 && f.keyMax <= 0 && f.orgMax <= 0 {
		return func() {}, Admitted
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.keyMax > 0 && f.keys[keyID] >= f.keyMax:
		return nil, RefusedKey
	case f.orgMax > 0 && f.orgs[orgID] >= f.orgMax:
		return nil, RefusedOrg
	case f.max > 0 && f.total >= f.max:
		return nil, RefusedServer
	}
	f.total++
	f.keys[keyID]++
	f.orgs[orgID]++
	return func() { f.end(keyID, orgID) }, Admitted
}

func (f *inflight) end(keyID, orgID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.total--
	if f.keys[keyID]--; f.keys[keyID] == 0 {
		delete(f.keys, keyID)
	}
	if f.orgs[orgID]--; f.orgs[orgID] == 0 {
		delete(f.orgs, orgID)
	}
}

// buckets are the token buckets of one kind, by ID. A zero rate means unlimited.
type buckets struct {
	rate  float64
	burst int
	m     sync.Map // string -> *bucket
	n     atomic.Int64
}

// bucket is one token bucket. A refusal takes nothing from it: with rate.Limiter's
// reservations, refused requests arriving together each reserved a token before cancelling,
// so each was told to wait longer than the one before (a Retry-After of 2 s at 1 request a
// second), and a cancelled reservation followed by another gave back less than it took.
type bucket struct {
	mu     sync.Mutex
	tokens float64
	at     time.Time // when tokens was last brought up to date
}

// of answers id's bucket, made full at now.
func (b *buckets) of(now time.Time, id string) *bucket {
	v, ok := b.m.Load(id)
	if !ok {
		if b.n.Load() >= maxBuckets {
			b.m.Clear()
			b.n.Store(0)
		}
		var loaded bool
		if v, loaded = b.m.LoadOrStore(id, &bucket{tokens: float64(b.burst), at: now}); !loaded {
			b.n.Add(1)
		}
	}
	return v.(*bucket)
}

// take takes a token from id's bucket, or answers how long until one is there.
func (b *buckets) take(now time.Time, id string) (wait time.Duration) {
	if b.rate <= 0 {
		return 0
	}
	k := b.of(now, id)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.refill(now, b.rate, b.burst)
	if k.tokens >= 1 {
		k.tokens--
		return 0
	}
	return time.Duration(math.Ceil((1 - k.tokens) / b.rate * float64(time.Second)))
}

// giveBack returns the token take took from id's bucket.
func (b *buckets) giveBack(now time.Time, id string) {
	if b.rate <= 0 {
		return
	}
	k := b.of(now, id)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.refill(now, b.rate, b.burst)
	k.tokens = min(k.tokens+1, float64(b.burst))
}

// refill adds the tokens earned since k.at. The caller holds k.mu.
func (k *bucket) refill(now time.Time, rate float64, burst int) {
	if now.After(k.at) {
		k.tokens = min(k.tokens+now.Sub(k.at).Seconds()*rate, float64(burst))
		k.at = now
	}
}

// RetryAfter is the Retry-After value, in whole seconds (at least 1), for a wait.
func RetryAfter(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
