package consistency

import (
	"context"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/veritrail/veritrail/ingest/answers"
	"github.com/veritrail/veritrail/internal/store"
)

// PeerStore is what Peers needs of the store shared by the ingest processes and the evaluator.
type PeerStore interface {
	MarkInFlight(ctx context.Context, orgID, process string, until float64, scopes []string) error
	RenewInFlight(ctx context.Context, process string, until float64) error
	ClearInFlight(ctx context.Context, orgID, process string) error
	ClearScopesInFlight(ctx context.Context, orgID, process string, scopes []string) error
	InFlight(ctx context.Context, orgID string) ([]store.InFlightMark, error)
	InFlightScopes(ctx context.Context, orgID string, scopes []string) ([]store.InFlightScope, error)
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
	// ScopeLinger is how long a scope stays recorded under a mark that stays, after the
	// process's writes of it are all visible: a scope written again meanwhile, as the trails of a
	// busy pipeline are, costs its writes no store write. At least Linger; zero means 5 s.
	ScopeLinger time.Duration
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
// A mark records the scopes of the writes under it (contract.Envelope.Scopes; "" for writes that
// name none), each before the first write of it is answered, and each removed once this
// process's writes of it are visible and have stayed so for ScopeLinger, while the mark itself
// stays for the writes of other scopes. A write whose scopes are recorded under a standing mark
// goes on at once, whatever store write of the mark is under way for others.
//
// A read first looks for marks of its organization from other processes. If there are some and
// the read depends on part of the organization only, it asks whether any of them holds one of
// the read's scopes or "" (a query sent after the read started, so it sees every scope recorded
// before a write was answered; the reads that start while one is under way share the next,
// scopeAsks); if none does, nothing it depends on is in flight there. Else it
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

	mu    sync.Mutex
	marks map[string]*peerMark
	reads map[string]*orgReads // organization -> the store queries its reads share

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
	op        chan struct{} // a store write of the row or its scopes under way, closed when it ends
	clearing  bool          // that write removes the row
	// scopes are those recorded under the row and those the publishes under way need, by scope.
	scopes map[string]*scopeMark
}

// scopeMark is one scope of a peerMark.
type scopeMark struct {
	busy      int       // publishes under way of the scope
	present   bool      // recorded in the store
	removing  bool      // the store write under way (peerMark.op) removes it
	idleSince time.Time // since when every write of it here is visible; zero while some are not
}

// scope returns the scopeMark of sc, made if needed. The caller holds Peers.mu.
func (m *peerMark) scope(sc string) *scopeMark {
	if m.scopes == nil {
		m.scopes = map[string]*scopeMark{}
	}
	sm := m.scopes[sc]
	if sm == nil {
		sm = &scopeMark{}
		m.scopes[sc] = sm
	}
	return sm
}

// unrecorded lists the scopes that publishes under way need and the store does not hold. The
// caller holds Peers.mu.
func (m *peerMark) unrecorded() []string {
	var out []string
	for sc, sm := range m.scopes {
		if sm.busy > 0 && !sm.present {
			out = append(out, sc)
		}
	}
	return out
}

// unscoped is the scope list of a write that names no scope.
var unscoped = []string{""}

// NewPeers builds the read-after-write state shared with other ingest processes.
func NewPeers(cfg PeersConfig) *Peers {
	if cfg.Lease <= 0 {
		cfg.Lease = 30 * time.Second
	}
	if cfg.Linger <= 0 {
		cfg.Linger = answers.AnnouncementLag
	}
	if cfg.ScopeLinger <= 0 {
		cfg.ScopeLinger = 5 * time.Second
	}
	cfg.ScopeLinger = max(cfg.ScopeLinger, cfg.Linger)
	if cfg.Poll <= 0 {
		cfg.Poll = 5 * time.Millisecond
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Peers{cfg: cfg, marks: map[string]*peerMark{}, reads: map[string]*orgReads{}}
}

// Publishing makes sure org is marked, with scopes (those of the write: see
// contract.Envelope.Scopes; none for a write that may change anything of org), before a write of
// it is published, and returns what to call once the write is recorded in the tracker (or
// failed), before it is answered: done waits until a new mark has stood for markNotice. A mark
// whose lease is half gone is written again first, so that no write is acknowledged under a mark
// that may have run out. Scopes that publishes under way need are recorded together, in one
// store write.
func (p *Peers) Publishing(ctx context.Context, org string, scopes ...string) (done func(), err error) {
	if len(scopes) == 0 {
		scopes = unscoped
	}
	p.mu.Lock()
	m := p.marks[org]
	if m == nil {
		m = &peerMark{}
		p.marks[org] = m
	}
	m.busy++
	for _, sc := range scopes {
		sm := m.scope(sc)
		sm.busy++
		sm.idleSince = time.Time{}
	}
	done = func() {
		p.mu.Lock()
		m.busy--
		m.idleSince = time.Time{}
		for _, sc := range scopes {
			sm := m.scopes[sc]
			sm.busy--
			sm.idleSince = time.Time{}
		}
		wait := time.Until(m.noticed)
		p.mu.Unlock()
		if wait > 0 {
			time.Sleep(wait)
		}
	}
	for {
		now := time.Now()
		ready := m.present && !m.clearing && now.Sub(m.leased) < p.cfg.Lease/2
		for _, sc := range scopes {
			sm := m.scopes[sc]
			ready = ready && sm.present && !sm.removing
		}
		if ready {
			p.mu.Unlock()
			return done, nil
		}
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
		op := make(chan struct{})
		m.op = op
		renewing := m.present
		add := m.unrecorded()
		if m.present && now.Sub(m.leased) >= p.cfg.Lease {
			// The row ran out (this process could not renew it): a reader that caught up with it
			// may have removed it with its scopes. It is made anew, with all of them.
			renewing, add = false, slices.Collect(maps.Keys(m.scopes))
		}
		p.mu.Unlock()
		err := p.cfg.Store.MarkInFlight(ctx, org, p.cfg.Process, unixSeconds(now.Add(p.cfg.Lease)), add)
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
		for _, sc := range add {
			m.scopes[sc].present = true
		}
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

// sweep removes the marks of organizations whose writes here have all been visible for Linger,
// and from the marks that stay, the scopes whose writes have.
func (p *Peers) sweep(ctx context.Context) {
	p.mu.Lock()
	orgs := make([]string, 0, len(p.marks))
	for org, m := range p.marks {
		if m.present && m.op == nil {
			orgs = append(orgs, org)
		}
	}
	p.mu.Unlock()
	for _, org := range orgs {
		p.tracker.settle(ctx, org, math.MaxUint64) // asks the store when some are pending
		p.mu.Lock()
		m := p.marks[org]
		if m == nil || !m.present || m.op != nil {
			p.mu.Unlock()
			continue
		}
		now := time.Now()
		all := m.busy == 0 && p.idle(&m.idleSince, p.tracker.Pending(org) > 0, now, p.cfg.Linger) // checked under mu: a publish finished since is counted
		var gone []string
		if !all {
			for sc, sm := range m.scopes {
				if sm.present && sm.busy == 0 && p.idle(&sm.idleSince, p.tracker.PendingIn(org, sc), now, p.cfg.ScopeLinger) {
					gone = append(gone, sc)
					sm.removing = true
				}
			}
		}
		if !all && len(gone) == 0 {
			p.mu.Unlock()
			continue
		}
		op := make(chan struct{})
		m.op, m.clearing = op, all
		p.mu.Unlock()
		var err error
		if all {
			err = p.cfg.Store.ClearInFlight(ctx, org, p.cfg.Process)
		} else {
			err = p.cfg.Store.ClearScopesInFlight(ctx, org, p.cfg.Process, gone)
		}
		p.mu.Lock()
		m.op, m.clearing = nil, false
		close(op)
		for _, sc := range gone {
			m.scopes[sc].removing = false
		}
		if err == nil {
			if all {
				m.present = false
				gone = gone[:0]
				for sc := range m.scopes {
					gone = append(gone, sc)
				}
			}
			for _, sc := range gone {
				if sm := m.scopes[sc]; sm.busy == 0 {
					delete(m.scopes, sc)
				} else {
					sm.present = false
				}
			}
			if !m.present && m.busy == 0 {
				delete(p.marks, org)
			}
		}
		p.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			p.cfg.Log.Warn("read-after-write: clearing a mark of writes in flight failed", "org", org, "err", err)
		}
	}
}

// idle reports whether writes have been visible for linger: it starts the clock at *since when
// none is pending and stops it when some are. The caller holds mu.
func (p *Peers) idle(since *time.Time, pending bool, now time.Time, linger time.Duration) bool {
	switch {
	case pending:
		*since = time.Time{}
	case since.IsZero():
		*since = now
	default:
		return now.Sub(*since) >= linger
	}
	return false
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
	after := time.Now()
	p.mu.Lock()
	for _, m := range p.marks {
		// A mark written after now has a later lease already; one written meanwhile and not
		// yet recorded present keeps the lease of its own write. A mark whose lease may have
		// run out before the renewal landed (renewals failed meanwhile) may have been removed
		// by a reader, and the renewal found no row: it keeps its old lease, so that the next
		// write makes it anew (Publishing).
		if m.present && m.leased.Before(now) && after.Sub(m.leased) < p.cfg.Lease {
			m.leased = now
		}
	}
	p.mu.Unlock()
	return nil
}

// Wait blocks until the writes of org that other ingest processes acknowledged before the call
// are visible, the deadline passes, or ctx ends. With scopes, the read depends on those only (and
// on writes that name none): writes of the organization's other scopes do not hold it. It reports
// whether another process had writes in flight that the read depends on, and whether the read is
// done with other processes whatever else it comes to depend on: none had writes of org in flight,
// it caught up with all of them, or it gave up (the deadline, a failure to ask). A read that
// learns more scopes after a scoped Wait that is not done waits for those (Wait again).
func (p *Peers) Wait(ctx context.Context, org string, scopes []string, deadline time.Time) (waited, done bool) {
	readStart := time.Now()
	marks, err := p.lookMarks(ctx, org, readStart)
	if err != nil {
		if ctx.Err() == nil {
			p.cfg.Log.Warn("read-after-write: reading the writes in flight failed; serving the read", "org", org, "err", err)
		}
		return false, true
	}
	var others []store.InFlightMark
	for _, m := range marks {
		if m.Process != p.cfg.Process {
			others = append(others, m)
		}
	}
	if len(others) == 0 {
		return false, true
	}
	if scopes != nil && !p.holdScopes(ctx, org, scopes) {
		return false, false
	}
	start := time.Now()
	if !p.catchUp(ctx, org, readStart, deadline) {
		if ctx.Err() == nil {
			p.cfg.Log.Warn(TimedOut+" (other ingest processes); serving the read anyway", "org", org,
				"wait", time.Since(start))
		}
		return true, true
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
	return true, true
}

// holdScopes reports whether another process's mark of org holds any of scopes or "" (writes
// naming none), or no scope at all (a process of a build before scopes, during a rolling
// upgrade). It asks the store after the read started, so it sees every scope recorded before a
// write was answered. A failure to ask counts as held: the read then waits for everything.
func (p *Peers) holdScopes(ctx context.Context, org string, scopes []string) bool {
	held, err := p.orgReads(org).scopes.ask(ctx, append(slices.Clip(scopes), ""),
		func(ctx context.Context, all []string) ([]store.InFlightScope, error) {
			return p.cfg.Store.InFlightScopes(ctx, org, all)
		})
	if err != nil {
		if ctx.Err() == nil {
			p.cfg.Log.Warn("read-after-write: reading the scopes of writes in flight failed; waiting for all of them", "org", org, "err", err)
		}
		return true
	}
	for _, h := range held { // the answer may cover other reads' scopes too
		if h.Process != p.cfg.Process && (h.Every || h.Scope == "" || slices.Contains(scopes, h.Scope)) {
			return true
		}
	}
	return false
}

// orgReads are the store queries the reads of one organization share.
type orgReads struct {
	marks  sharedQuery[[]store.InFlightMark] // the looks for marks
	scopes scopeAsks                         // which scopes other processes hold
}

// orgReads returns org's shared queries, made if needed.
func (p *Peers) orgReads(org string) *orgReads {
	p.mu.Lock()
	defer p.mu.Unlock()
	o := p.reads[org]
	if o == nil {
		if len(p.reads) >= maxOrgReads {
			for other, old := range p.reads { // organizations not read lately need no entry
				if old.marks.idle(time.Now().Add(-time.Second)) {
					delete(p.reads, other)
				}
			}
		}
		o = &orgReads{}
		p.reads[org] = o
	}
	return o
}

// lookMarks returns org's marks as a query answered that started after readStart-markNotice:
// the latest one when it did, else a new one, shared with the reads that start meanwhile.
func (p *Peers) lookMarks(ctx context.Context, org string, readStart time.Time) ([]store.InFlightMark, error) {
	r, err := p.orgReads(org).marks.get(ctx, readStart.Add(-markNotice), func(ctx context.Context) ([]store.InFlightMark, error) {
		return p.cfg.Store.InFlight(ctx, org)
	})
	if err != nil {
		return nil, err
	}
	return r.val, nil
}

// maxOrgReads is the number of organizations from which orgReads drops the shared queries of
// those not read lately.
const maxOrgReads = 4096

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
