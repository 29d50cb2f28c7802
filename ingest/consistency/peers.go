package consistency

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/veritrail/veritrail/ingest/answers"
	"github.com/veritrail/veritrail/internal/store"
)

// PeerStore is what Peers needs of the store shared by the ingest processes and the evaluator.
type PeerStore interface {
	MarkInFlight(ctx context.Context, orgID, process string, until float64) error
	RenewInFlight(ctx context.Context, process string, until float64) error
	ClearInFlight(ctx context.Context, orgID, process string) error
	InFlight(ctx context.Context, orgID string) ([]store.InFlightMark, error)
	ClearExpiredInFlight(ctx context.Context, orgID, process string, before float64) error
	Positions(ctx context.Context, topic string) (map[int32]int64, error)
	PendingEvaluations(ctx context.Context, orgID string) ([]store.DirtyTrail, error)
	Evaluated(ctx context.Context, generations map[string]int64) (bool, error)
}

// PeersConfig configures Peers.
type PeersConfig struct {
	// Process names this ingest process among those sharing the store; unique per start.
	Process string
	Store   PeerStore
	// Topic is the bus topic the evaluator records its positions of (store.Progress).
	Topic string
	// EndOffsets returns where each partition of Topic ends: every message acknowledged to a
	// publisher lies below.
	EndOffsets func(ctx context.Context) (map[int32]int64, error)
	// Lease is how long a mark lasts without renewal: a process that dies leaves marks that
	// readers elsewhere treat as in flight until they have caught up with the bus and the lease
	// has run out. Zero means 30 s.
	Lease time.Duration
	// Linger is how long a mark stays after the process's writes of the organization are all
	// visible, so that readers elsewhere compute their asserts afresh until announcements of
	// those writes have arrived. Zero means answers.AnnouncementLag.
	Linger time.Duration
	// Poll is how often waits ask the store again. Zero means 5 ms.
	Poll time.Duration
	Log  *slog.Logger
}

// Peers extends read after write across ingest processes (the distributed mode), where a read
// at one process must see what another acknowledged, and nothing in its memory knows of it.
//
// A process that publishes for an organization first marks it in the store ("writes in flight",
// one row per organization and process), when the organization goes from nothing in flight to
// something in this process: one store write per idle-to-busy change, not per request. The mark
// is removed once the process's writes of the organization are all visible and have stayed so
// for Linger, and renewed while it stays, so that the row of a process that died runs out.
//
// A read first looks for marks of its organization from other processes. If there are some, it
// takes the bus's end offsets (one ListOffsets request) and waits until the evaluator's recorded
// positions reach them: every message acknowledged before the read is then applied. Then it
// waits until the organization's trails that were dirty at that moment are evaluated at the
// generation they had, which later writes cannot put off. Marks whose lease ran out are removed
// by the reader that caught up with them.
//
// The look for marks is shared: a read uses the answer of a query that started less than
// markNotice before it, and a process that makes a new mark answers no write under it before
// markNotice has passed since the mark was committed. A read that starts after such a 201 thus
// starts more than markNotice after the mark was committed, and every answer it may use came
// from a query that started later than that, so it saw the mark. Only durations are compared,
// each on one process's clock: the processes' clocks need not agree. So reads of an organization
// cost at most one query per markNotice per process, and the first write of a busy spell waits
// up to markNotice longer.
type Peers struct {
	cfg     PeersConfig
	tracker *Tracker // this process's writes; set by Track

	mu     sync.Mutex
	marks  map[string]*peerMark
	looked map[string]*sharedQuery[[]store.InFlightMark] // organization -> its looks for marks

	// The bus's ends and the evaluator's positions, asked once for the reads waiting together.
	ends      sharedQuery[map[int32]int64]
	positions sharedQuery[map[int32]int64]
}

// markNotice is how long a look for marks is used by the reads that start after it began, and how
// long a new mark stands before a write under it is answered. Every ingest process must use the
// same value.
const markNotice = 20 * time.Millisecond

// peerMark is this process's mark of one organization.
type peerMark struct {
	busy      int           // publishes under way (between Publishing and their done)
	present   bool          // the row exists
	leased    time.Time     // when its lease was last set (the row's until is this + Lease)
	noticed   time.Time     // when a write under the row may be answered (markNotice after it was made)
	idleSince time.Time     // since when every write here is visible; zero while some are not
	op        chan struct{} // a store write of the row under way, closed when it ends
}

// NewPeers builds the read-after-write state shared with other ingest processes.
func NewPeers(cfg PeersConfig) *Peers {
	if cfg.Lease <= 0 {
		cfg.Lease = 30 * time.Second
	}
	if cfg.Linger <= 0 {
		cfg.Linger = answers.AnnouncementLag
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 5 * time.Millisecond
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Peers{cfg: cfg, marks: map[string]*peerMark{}, looked: map[string]*sharedQuery[[]store.InFlightMark]{}}
}

// Publishing makes sure org is marked before a write of it is published, and returns what to
// call once the write is recorded in the tracker (or failed), before it is answered: done waits
// until a new mark has stood for markNotice. A mark whose lease is half gone is written again
// first, so that no write is acknowledged under a mark that may have run out.
func (p *Peers) Publishing(ctx context.Context, org string) (done func(), err error) {
	p.mu.Lock()
	m := p.marks[org]
	if m == nil {
		m = &peerMark{}
		p.marks[org] = m
	}
	m.busy++
	done = func() {
		p.mu.Lock()
		m.busy--
		m.idleSince = time.Time{}
		wait := time.Until(m.noticed)
		p.mu.Unlock()
		if wait > 0 {
			time.Sleep(wait)
		}
	}
	for {
		if op := m.op; op != nil {
			p.mu.Unlock()
			select {
			case <-op:
			case <-ctx.Done():
				done()
				return nil, ctx.Err()
			}
			p.mu.Lock()
			continue
		}
		now := time.Now()
		if m.present && now.Sub(m.leased) < p.cfg.Lease/2 {
			p.mu.Unlock()
			return done, nil
		}
		op := make(chan struct{})
		m.op = op
		renewing := m.present
		p.mu.Unlock()
		err := p.cfg.Store.MarkInFlight(ctx, org, p.cfg.Process, unixSeconds(now.Add(p.cfg.Lease)))
		p.mu.Lock()
		m.op = nil
		close(op)
		if err != nil {
			p.mu.Unlock()
			done()
			return nil, err
		}
		if !renewing { // committed by now: readers elsewhere use no look from before it past markNotice
			m.noticed = time.Now().Add(markNotice)
		}
		m.present, m.leased = true, now
	}
}

// Run keeps this process's marks: it removes those of organizations whose writes here are all
// visible (after Linger) and renews the others' leases, until ctx ends.
func (p *Peers) Run(ctx context.Context) {
	sweep := time.NewTicker(min(p.cfg.Linger/4, 100*time.Millisecond))
	defer sweep.Stop()
	var renewed time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-sweep.C:
		}
		p.sweep(ctx)
		if now := time.Now(); now.Sub(renewed) >= p.cfg.Lease/3 {
			if err := p.renew(ctx, now); err != nil {
				if ctx.Err() == nil {
					p.cfg.Log.Warn("read-after-write: renewing the marks of writes in flight failed", "err", err)
				}
				continue
			}
			renewed = now
		}
	}
}

// sweep removes the marks of organizations whose writes here have all been visible for Linger.
func (p *Peers) sweep(ctx context.Context) {
	p.mu.Lock()
	orgs := make([]string, 0, len(p.marks))
	for org, m := range p.marks {
		if m.present && m.busy == 0 && m.op == nil {
			orgs = append(orgs, org)
		}
	}
	p.mu.Unlock()
	for _, org := range orgs {
		p.tracker.settle(ctx, org, math.MaxUint64) // asks the store when some are pending
		p.mu.Lock()
		m := p.marks[org]
		now := time.Now()
		switch {
		case m == nil || !m.present || m.busy > 0 || m.op != nil:
			p.mu.Unlock()
			continue
		case p.tracker.Pending(org) > 0: // checked under mu: a publish finished since is counted
			m.idleSince = time.Time{}
			p.mu.Unlock()
			continue
		case m.idleSince.IsZero():
			m.idleSince = now
			p.mu.Unlock()
			continue
		case now.Sub(m.idleSince) < p.cfg.Linger:
			p.mu.Unlock()
			continue
		}
		op := make(chan struct{})
		m.op = op
		p.mu.Unlock()
		err := p.cfg.Store.ClearInFlight(ctx, org, p.cfg.Process)
		p.mu.Lock()
		m.op = nil
		close(op)
		if err == nil {
			m.present = false
			if m.busy == 0 {
				delete(p.marks, org)
			}
		}
		p.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			p.cfg.Log.Warn("read-after-write: clearing a mark of writes in flight failed", "org", org, "err", err)
		}
	}
}

// renew moves the lease of every mark of this process.
func (p *Peers) renew(ctx context.Context, now time.Time) error {
	p.mu.Lock()
	marked := false
	for _, m := range p.marks {
		marked = marked || m.present
	}
	p.mu.Unlock()
	if !marked {
		return nil
	}
	if err := p.cfg.Store.RenewInFlight(ctx, p.cfg.Process, unixSeconds(now.Add(p.cfg.Lease))); err != nil {
		return err
	}
	p.mu.Lock()
	for _, m := range p.marks {
		// A mark written after now has a later lease already; one written meanwhile and not
		// yet recorded present keeps the lease of its own write.
		if m.present && m.leased.Before(now) {
			m.leased = now
		}
	}
	p.mu.Unlock()
	return nil
}

// Wait blocks until the writes of org that other ingest processes acknowledged before the call
// are visible, the deadline passes, or ctx ends, and reports whether another process had writes
// of org in flight.
func (p *Peers) Wait(ctx context.Context, org string, deadline time.Time) bool {
	readStart := time.Now()
	marks, err := p.lookMarks(ctx, org, readStart)
	if err != nil {
		if ctx.Err() == nil {
			p.cfg.Log.Warn("read-after-write: reading the writes in flight failed; serving the read", "org", org, "err", err)
		}
		return false
	}
	var others []store.InFlightMark
	for _, m := range marks {
		if m.Process != p.cfg.Process {
			others = append(others, m)
		}
	}
	if len(others) == 0 {
		return false
	}
	start := time.Now()
	if !p.catchUp(ctx, org, readStart, deadline) {
		if ctx.Err() == nil {
			p.cfg.Log.Warn("read-after-write wait for other ingest processes timed out; serving the read anyway", "org", org,
				"wait", time.Since(start))
		}
		return true
	}
	// Caught up with every message of the bus from before the read: a mark whose lease ran out
	// belongs to a process that publishes no more, and nothing it acknowledged is in flight.
	for _, m := range others {
		if m.Until < unixSeconds(start) {
			if err := p.cfg.Store.ClearExpiredInFlight(ctx, org, m.Process, unixSeconds(start)); err != nil && ctx.Err() == nil {
				p.cfg.Log.Warn("read-after-write: clearing an expired mark of writes in flight failed", "org", org,
					"process", m.Process, "err", err)
			}
		}
	}
	return true
}

// lookMarks returns org's marks as a query answered that started after readStart-markNotice:
// the latest one when it did, else a new one, shared with the reads that start meanwhile.
func (p *Peers) lookMarks(ctx context.Context, org string, readStart time.Time) ([]store.InFlightMark, error) {
	p.mu.Lock()
	q := p.looked[org]
	if q == nil {
		if len(p.looked) >= maxLooked {
			for o, old := range p.looked { // organizations not read lately need no entry
				if old.idle(time.Now().Add(-time.Second)) {
					delete(p.looked, o)
				}
			}
		}
		q = &sharedQuery[[]store.InFlightMark]{}
		p.looked[org] = q
	}
	p.mu.Unlock()
	r, err := q.get(ctx, readStart.Add(-markNotice), func(ctx context.Context) ([]store.InFlightMark, error) {
		return p.cfg.Store.InFlight(ctx, org)
	})
	if err != nil {
		return nil, err
	}
	return r.val, nil
}

// maxLooked is the size from which lookMarks drops the looks of organizations not read lately.
const maxLooked = 4096

// catchUp waits until every message on the bus when the read started is applied, and then the
// trails of org dirty at that moment are evaluated; false when the deadline or ctx ended it
// first. The bus and the positions are asked once for the reads waiting together.
func (p *Peers) catchUp(ctx context.Context, org string, readStart, deadline time.Time) bool {
	var ends map[int32]int64
	for {
		r, err := p.ends.get(ctx, readStart, p.cfg.EndOffsets) // asked after the read started
		if err == nil {
			ends = r.val
			break
		}
		if ctx.Err() == nil {
			p.cfg.Log.Warn("read-after-write: reading the bus's end offsets failed", "err", err)
		}
		if !p.pause(ctx, deadline) {
			return false
		}
	}
	var seen time.Time
	for {
		r, err := p.positions.get(ctx, seen, func(ctx context.Context) (map[int32]int64, error) {
			return p.cfg.Store.Positions(ctx, p.cfg.Topic)
		})
		if err == nil && reached(r.val, ends) {
			break
		}
		if err != nil && ctx.Err() == nil {
			p.cfg.Log.Warn("read-after-write: reading the applied positions failed", "err", err)
		}
		if r != nil {
			seen = r.start // the next look must be newer
		}
		if !p.pause(ctx, deadline) {
			return false
		}
	}
	dirty, err := p.cfg.Store.PendingEvaluations(ctx, org)
	for err != nil {
		if !p.pause(ctx, deadline) {
			return false
		}
		dirty, err = p.cfg.Store.PendingEvaluations(ctx, org)
	}
	if len(dirty) == 0 {
		return true
	}
	gens := make(map[string]int64, len(dirty))
	for _, d := range dirty {
		gens[d.TrailID] = d.Generation
	}
	for {
		if ok, err := p.cfg.Store.Evaluated(ctx, gens); err == nil && ok {
			return true
		}
		if !p.pause(ctx, deadline) {
			return false
		}
	}
}

// reached reports whether the positions cover every partition's end.
func reached(pos, ends map[int32]int64) bool {
	for part, end := range ends {
		if pos[part] < end {
			return false
		}
	}
	return true
}

// pause waits one poll interval; false when the deadline or ctx comes first.
func (p *Peers) pause(ctx context.Context, deadline time.Time) bool {
	d := min(p.cfg.Poll, time.Until(deadline))
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return time.Now().Before(deadline)
	}
}

// Track makes p follow t, the tracker of this process's writes: a mark is removed once the
// writes it covers are visible there. Ingest's New calls it before serving.
func (p *Peers) Track(t *Tracker) { p.tracker = t }

func unixSeconds(t time.Time) float64 { return float64(t.UnixMicro()) / 1e6 }
