package ingest

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Limits is how much load ingest accepts before it sheds the rest. Every refusal happens in
// the authorization hook, before a handler reads the body or publishes anything, so a
// request is either wholly accepted or refused without a side effect.
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

	// envErr keeps invalid environment values seen by RegisterFlags until Validate.
	envErr error
}

// DefaultLimits are the limits of `veritrail serve` and `veritrail ingest` when no flag or
// environment variable sets them. A CI key rarely makes more than a few requests a second;
// the per-key bucket lets a pipeline's burst through and stops a runaway loop.
func DefaultLimits() Limits {
	return Limits{KeyRate: 100, KeyBurst: 200, OrgRate: 500, OrgBurst: 1000, MaxInFlightWrites: 256}
}

// RegisterFlags registers --rate-limit-key, --rate-limit-key-burst, --rate-limit-org,
// --rate-limit-org-burst and --max-inflight-writes, with defaults from l overridden by
// VERITRAIL_RATE_LIMIT_KEY and so on; an invalid environment value is reported by Validate.
func (l *Limits) RegisterFlags(fs *flag.FlagSet) {
	l.envErr = nil
	register := func(v flag.Value, name, usage string) {
		env := "VERITRAIL_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		if s, ok := os.LookupEnv(env); ok {
			if err := v.Set(s); err != nil {
				l.envErr = errors.Join(l.envErr, fmt.Errorf("%s=%q: %w", env, s, err))
			}
		}
		fs.Var(v, name, fmt.Sprintf("%s (env %s)", usage, env))
	}
	register(floatFlag{&l.KeyRate}, "rate-limit-key", "requests per second one API key may make; 0 = unlimited")
	register(intFlag{&l.KeyBurst}, "rate-limit-key-burst", "requests one API key may make at once")
	register(floatFlag{&l.OrgRate}, "rate-limit-org", "requests per second all keys of one organization may make; 0 = unlimited")
	register(intFlag{&l.OrgBurst}, "rate-limit-org-burst", "requests all keys of one organization may make at once")
	register(intFlag{&l.MaxInFlightWrites}, "max-inflight-writes", "writes handled at once before 503; 0 = unbounded")
}

// Validate reports every problem of l at once.
func (l Limits) Validate() error {
	errs := []error{l.envErr}
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
	if l.MaxInFlightWrites < 0 {
		errs = append(errs, errors.New("--max-inflight-writes must not be negative"))
	}
	return errors.Join(errs...)
}

type floatFlag struct{ p *float64 }

func (f floatFlag) String() string {
	if f.p == nil {
		return "0"
	}
	return strconv.FormatFloat(*f.p, 'g', -1, 64)
}

func (f floatFlag) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return err
	}
	*f.p = v
	return nil
}

type intFlag struct{ p *int }

func (f intFlag) String() string {
	if f.p == nil {
		return "0"
	}
	return strconv.Itoa(*f.p)
}

func (f intFlag) Set(s string) error {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return err
	}
	*f.p = v
	return nil
}

// maxBuckets bounds the token buckets kept; past it they are all dropped and start full
// again, a moment of leniency rather than unbounded memory.
const maxBuckets = 100_000

// limiter enforces Limits: a token bucket per key and per organization, and a count of the
// writes in flight.
type limiter struct {
	keys     buckets
	orgs     buckets
	inflight chan struct{} // nil: unbounded
}

func newLimiter(cfg Limits) *limiter {
	l := &limiter{keys: buckets{rate: cfg.KeyRate, burst: cfg.KeyBurst},
		orgs: buckets{rate: cfg.OrgRate, burst: cfg.OrgBurst}}
	if cfg.MaxInFlightWrites > 0 {
		l.inflight = make(chan struct{}, cfg.MaxInFlightWrites)
	}
	return l
}

// allow takes one token from the key's bucket and one from the organization's, or neither.
// When it cannot, it says which limit refused and how long until a token is there.
func (l *limiter) allow(now time.Time, keyID, orgID string) (refused string, wait time.Duration) {
	k := l.keys.reserve(now, keyID)
	if d := delay(k, now); d > 0 {
		cancel(k, now)
		return "API key", d
	}
	o := l.orgs.reserve(now, orgID)
	if d := delay(o, now); d > 0 {
		cancel(o, now)
		cancel(k, now) // the request is not made: give the key its token back
		return "organization", d
	}
	return "", 0
}

// startWrite admits a write if fewer than MaxInFlightWrites are in flight; done must be
// called when it ends.
func (l *limiter) startWrite() (done func(), ok bool) {
	if l.inflight == nil {
		return func() {}, true
	}
	select {
	case l.inflight <- struct{}{}:
		return func() { <-l.inflight }, true
	default:
		return nil, false
	}
}

// buckets are the token buckets of one kind, by ID. A zero rate means unlimited.
type buckets struct {
	rate  float64
	burst int
	m     sync.Map // string -> *rate.Limiter
	n     atomic.Int64
}

// reserve reserves a token; nil means unlimited.
func (b *buckets) reserve(now time.Time, id string) *rate.Reservation {
	if b.rate <= 0 {
		return nil
	}
	v, ok := b.m.Load(id)
	if !ok {
		if b.n.Load() >= maxBuckets {
			b.m.Clear()
			b.n.Store(0)
		}
		var loaded bool
		if v, loaded = b.m.LoadOrStore(id, rate.NewLimiter(rate.Limit(b.rate), max(b.burst, 1))); !loaded {
			b.n.Add(1)
		}
	}
	return v.(*rate.Limiter).ReserveN(now, 1)
}

func delay(r *rate.Reservation, now time.Time) time.Duration {
	if r == nil {
		return 0
	}
	return r.DelayFrom(now)
}

func cancel(r *rate.Reservation, now time.Time) {
	if r != nil {
		r.CancelAt(now)
	}
}

// retryAfter is the Retry-After value, in whole seconds (at least 1), for a wait.
func retryAfter(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
