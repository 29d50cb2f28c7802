// Package answers keeps assert answers in memory while what they depend on stands still: the
// counts of an evaluator's commits by organization and artifact (Changes, advanced in this
// process or by announcements from another), and the cache of encoded answers stamped with them
// (Cache). Ingest asks it before computing an assert and gives it what it computed.
package answers

import (
	"bytes"
	"context"
	"encoding/json"
	"hash/maphash"
	"strings"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/veritrail/veritrail/internal/store"
)

// Changes counts the commits of an evaluator running in this process, by what they changed.
// Every answer an assert gives depends only on what the evaluator stored about the
// organization, and mostly only on the one artifact's evidence, so an answer computed at one
// pair of counts is still right while both stand still: that is what lets assert answer from
// memory while evidence for other artifacts keeps arriving.
//
// Counts live in fixed tables of slots chosen by hash: two organizations or two artifacts that
// share a slot only retire each other's answers early, and memory does not grow with the number
// of artifacts ever seen.
type Changes struct {
	seed      maphash.Seed
	epoch     atomic.Uint64 // advanced when changes may have gone unheard (Forget)
	orgs      [orgSlots]atomic.Uint64
	artifacts [artifactSlots]atomic.Uint64
	// announced says the counts follow the commits they count (another process announces them,
	// see NewAnnouncedChanges) instead of moving before their readers wake; listening, that
	// announcements are heard now (nothing kept is used while they are not).
	announced bool
	listening atomic.Bool
	// watched says the counts move around the commits themselves (see Watch); committing counts
	// the transactions between their two moves.
	watched    bool
	committing atomic.Int64
}

const (
	orgSlots      = 1 << 10
	artifactSlots = 1 << 16
)

// NewChanges makes the counts of an evaluator in this process.
func NewChanges() *Changes { return &Changes{seed: maphash.MakeSeed()} }

// NewAnnouncedChanges makes counts advanced by announcements of an evaluator in another process
// (the distributed mode: PostgreSQL's LISTEN/NOTIFY, delivered after the commit). An announcement
// can arrive after a client that wrote has seen its write committed, so for AnnouncementLag
// after a key's writes are found visible, its asserts are computed afresh (read your writes);
// other clients may get a kept answer for as long as an announcement takes to arrive.
func NewAnnouncedChanges() *Changes { c := NewChanges(); c.announced = true; return c }

// Changed is Advance, for a listener of announcements.
func (c *Changes) Changed(orgs []string, artifacts map[string][]string) { c.Advance(orgs, artifacts) }

// Listening records whether announcements are heard (see NewAnnouncedChanges): while they are
// not, kept answers are not used, and when they are again, what was kept is forgotten.
func (c *Changes) Listening(on bool) {
	c.Forget()
	c.listening.Store(on)
}

// AnnouncementLag bounds how late an announcement arrives after its commit, for the writer's
// own reads: delivery takes milliseconds; a second is a wide margin.
const AnnouncementLag = time.Second

// Forget retires every answer kept: the caller may have missed changes (a lost connection).
func (c *Changes) Forget() { c.epoch.Add(1) }

// Advance records a commit that changed anything about the organizations orgs, and the
// evidence of the artifacts (organization ID -> fingerprints). The evaluator calls it after the
// commit, so an answer computed while the commit was under way carries a count from before it
// and is not used again.
func (c *Changes) Advance(orgs []string, artifacts map[string][]string) {
	for _, org := range orgs {
		c.orgs[c.slot(org, orgSlots)].Add(1)
	}
	for org, fps := range artifacts {
		for _, fp := range fps {
			c.artifacts[c.slot(org+"/"+fp, artifactSlots)].Add(1)
		}
	}
}

// Stamp is the counts an answer about one artifact depends on; busy says a watched commit was
// under way when they were read, so that an answer computed now may not be kept.
type Stamp struct {
	epoch, org, artifact uint64
	busy                 bool
}

func (s Stamp) same(o Stamp) bool {
	return s.epoch == o.epoch && s.org == o.org && s.artifact == o.artifact
}

func (c *Changes) stamp(org, fingerprint string) Stamp {
	s := Stamp{epoch: c.epoch.Load(), org: c.orgs[c.slot(org, orgSlots)].Load(),
		artifact: c.artifacts[c.slot(org+"/"+fingerprint, artifactSlots)].Load()}
	s.busy = c.committing.Load() > 0 // read after the counts: see Watch
	return s
}

// Watch returns st with its transactions watched: one that announces changes (store.Tx.Announce)
// advances the counts of what it names just before it commits and again after, and while a
// transaction is between the two no answer is kept. So a reader that sees a commit reads counts
// that have moved past every answer kept from before it, however soon after the commit it
// reads, and nothing kept was computed on what the commit replaced: an answer kept at counts
// read while no commit was under way was computed after every commit those counts include. The
// embedded mode's evaluator writes through it; nothing kept then depends on how soon Evaluated
// follows a commit.
func (c *Changes) Watch(st store.Store) store.Store {
	c.watched = true
	return watchedStore{Store: st, c: c}
}

type watchedStore struct {
	store.Store
	c *Changes
}

func (s watchedStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	tx := &watchedTx{}
	err := s.Store.Update(ctx, func(inner store.Tx) error {
		tx.Tx, tx.orgs, tx.artifacts, tx.announced = inner, nil, nil, false
		if err := fn(tx); err != nil || !tx.announced {
			return err
		}
		if !tx.begun { // once, should the store run fn again
			tx.begun = true
			s.c.committing.Add(1)
		}
		s.c.Advance(tx.orgs, tx.artifacts)
		return nil
	})
	if tx.begun {
		s.c.Advance(tx.orgs, tx.artifacts)
		s.c.committing.Add(-1)
	}
	return err
}

// watchedTx records what a transaction announces.
type watchedTx struct {
	store.Tx
	orgs      []string
	artifacts map[string][]string
	announced bool
	begun     bool
}

func (t *watchedTx) Announce(ctx context.Context, orgs []string, artifacts map[string][]string) error {
	if len(orgs) > 0 || len(artifacts) > 0 {
		t.announced = true
		t.orgs = append(t.orgs, orgs...)
		if t.artifacts == nil {
			t.artifacts = map[string][]string{}
		}
		for org, fps := range artifacts {
			t.artifacts[org] = append(t.artifacts[org], fps...)
		}
	}
	return t.Tx.Announce(ctx, orgs, artifacts)
}

func (c *Changes) slot(s string, n int) int { return int(maphash.String(c.seed, s) % uint64(n)) }

// cacheSize bounds the assert answers kept: about 2.5 KB each with three policies.
const cacheSize = 8192

// Key is one assert question: the organization and the request's parameters as given.
type Key struct {
	org, fingerprint, flow, environment, policies string
}

func NewKey(org, fingerprint, flow, env string, policies []string) Key {
	return Key{org: org, fingerprint: fingerprint, flow: flow, environment: env,
		policies: strings.Join(policies, "\x00")} // names hold no NUL
}

// answer is an encoded assert result, the counts it was computed at, and the scopes of the
// writes that would change it (its artifact's trails, its environment: see Get).
type answer struct {
	at     Stamp
	body   []byte
	scopes []string
}

// Cache keeps encoded assert answers while what they depend on stands still. The counts
// are read before the answer is computed: a commit that lands during the computation advances
// them past it, so the answer is recomputed next time rather than trusted. Only questions that
// name a whole fingerprint are kept: a prefix's meaning changes when another artifact matching
// it is reported, which no count of the one artifact records. Without Changes (the evaluator
// runs in another process and nothing here hears of its commits) nothing is kept and every
// assert reads the store.
type Cache struct {
	changes *Changes
	lru     *lru.Cache[Key, answer]
}

func NewCache(c *Changes) *Cache {
	if c == nil {
		return &Cache{}
	}
	l, _ := lru.New[Key, answer](cacheSize) // only a size <= 0 fails
	return &Cache{changes: c, lru: l}
}

// Get returns the answer to k if it was computed at the current counts, with the scopes it was
// kept with (the caller waits for writes of those before using it: read after write), and the
// counts to store a new answer at.
func (c *Cache) Get(k Key) (body []byte, scopes []string, at Stamp, ok bool) {
	if c.changes == nil || len(k.fingerprint) != 64 {
		return nil, nil, Stamp{}, false
	}
	now := c.changes.stamp(k.org, k.fingerprint)
	if c.changes.announced && !c.changes.listening.Load() {
		return nil, nil, now, false
	}
	if a, ok := c.lru.Get(k); ok && a.at.same(now) {
		return a.body, a.scopes, now, true
	}
	return nil, nil, now, false
}

// Put keeps body as the answer to k computed at counts at, depending on the writes of scopes.
func (c *Cache) Put(k Key, at Stamp, body []byte, scopes []string) {
	if c.changes == nil || len(k.fingerprint) != 64 || at.busy {
		return
	}
	c.lru.Add(k, answer{at: at, body: body, scopes: scopes})
}

// Encode encodes v as Huma would have (no HTML escaping, a final newline), so that an
// answer from memory is byte for byte the answer computed.
func Encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Evaluated records a commit of an evaluator in this process that reported it after the commit
// (see Changes.Advance); counts that move with the commits themselves (Watch) have moved already.
func (c *Cache) Evaluated(orgs []string, artifacts map[string][]string) {
	if c.changes != nil && !c.changes.watched {
		c.changes.Advance(orgs, artifacts)
	}
}

// Lags reports whether the counts may move only after a commit a reader already sees (advanced
// after it, or announced from another process): a reader that has just waited for its writes
// must then ask for a fresh answer. Watched counts never lag.
func (c *Cache) Lags() bool { return c.changes != nil && !c.changes.watched }
