package answers

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/veritrail/veritrail/internal/store"
)

func TestAnswerCache(t *testing.T) {
	fp := strings.Repeat("ab", 32)
	other := strings.Repeat("cd", 32)
	k := NewKey("org", fp, "", "prod", nil)
	kept := func(c *Cache, k Key) bool {
		_, _, _, ok := c.Get(k)
		return ok
	}
	fill := func(c *Cache, k Key, body string) {
		_, _, at, _ := c.Get(k)
		c.Put(k, at, []byte(body), nil)
	}

	tests := []struct {
		name    string
		advance func(*Changes)
		kept    bool
	}{
		{"nothing changed", func(*Changes) {}, true},
		{"a commit naming nothing (a message on a trail, before its evaluation)", func(c *Changes) { c.Advance(nil, nil) }, true},
		{"another artifact's trail evaluated", func(c *Changes) { c.Advance(nil, map[string][]string{"org": {other}}) }, true},
		{"the same fingerprint in another organization", func(c *Changes) { c.Advance(nil, map[string][]string{"else": {fp}}) }, true},
		{"another organization changed", func(c *Changes) { c.Advance([]string{"else"}, nil) }, true},
		{"the artifact's trail evaluated", func(c *Changes) { c.Advance(nil, map[string][]string{"org": {other, fp}}) }, false},
		{"the organization changed", func(c *Changes) { c.Advance([]string{"org"}, nil) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			changes := changesApart(t, []string{"org", "else"}, []string{"org/" + fp, "org/" + other, "else/" + fp})
			c := NewCache(changes)
			fill(c, k, "v1")
			tt.advance(changes)
			if got := kept(c, k); got != tt.kept {
				t.Fatalf("answer kept: %v, want %v", got, tt.kept)
			}
		})
	}

	t.Run("a commit during the computation", func(t *testing.T) {
		changes := NewChanges()
		c := NewCache(changes)
		_, _, at, _ := c.Get(k) // counts read before the answer is computed
		changes.Advance([]string{"org"}, nil)
		c.Put(k, at, []byte("v2"), nil)
		if kept(c, k) {
			t.Fatal("an answer computed across a commit was used")
		}
	})
	t.Run("questions kept apart", func(t *testing.T) {
		c := NewCache(NewChanges())
		fill(c, k, "env")
		if body, _, _, ok := c.Get(k); !ok || !bytes.Equal(body, []byte("env")) {
			t.Fatalf("kept answer: %q %v", body, ok)
		}
		if kept(c, NewKey("org", fp, "", "", []string{"prod"})) {
			t.Fatal("an environment name answered a policy question")
		}
		if NewKey("org", fp, "", "", []string{"a,b"}) == NewKey("org", fp, "", "", []string{"a", "b"}) {
			t.Fatal("policy lists that differ share a key")
		}
	})
	t.Run("forgetting retires everything", func(t *testing.T) {
		changes := NewChanges()
		c := NewCache(changes)
		fill(c, k, "v")
		changes.Forget()
		if kept(c, k) {
			t.Fatal("an answer outlived Forget")
		}
	})
	t.Run("the scopes it depends on are kept with it", func(t *testing.T) {
		c := NewCache(NewChanges())
		_, _, at, _ := c.Get(k)
		c.Put(k, at, []byte("v"), []string{"trail-a", "env-b"})
		if _, scopes, _, ok := c.Get(k); !ok || !slices.Equal(scopes, []string{"trail-a", "env-b"}) {
			t.Fatalf("kept %v, %v; want the answer with scopes [trail-a env-b]", ok, scopes)
		}
	})
	t.Run("announced changes are used only while heard", func(t *testing.T) {
		changes := NewAnnouncedChanges()
		c := NewCache(changes)
		fill(c, k, "v")
		if kept(c, k) {
			t.Fatal("an answer was used before announcements were heard")
		}
		changes.Listening(true)
		fill(c, k, "v")
		if !kept(c, k) {
			t.Fatal("an answer was not kept while announcements are heard")
		}
		changes.Changed(nil, map[string][]string{"org": {fp}})
		if kept(c, k) {
			t.Fatal("an announced change left the answer in use")
		}
		fill(c, k, "v")
		changes.Listening(false)
		if kept(c, k) {
			t.Fatal("an answer was used while announcements were not heard")
		}
		changes.Listening(true)
		if kept(c, k) {
			t.Fatal("an answer kept before a lost connection outlived it")
		}
	})
	t.Run("a prefix is never kept", func(t *testing.T) {
		c := NewCache(NewChanges())
		short := NewKey("org", fp[:12], "", "prod", nil)
		fill(c, short, "v")
		if kept(c, short) {
			t.Fatal("an answer to a prefix was kept")
		}
	})
	t.Run("without changes nothing is kept", func(t *testing.T) {
		c := NewCache(nil)
		fill(c, k, "v")
		if kept(c, k) {
			t.Fatal("a cache without changes answered")
		}
	})
}

// commitStore is a store whose Update calls atCommit where a real one would commit.
type commitStore struct {
	store.Store
	atCommit func()
}

func (s commitStore) Update(_ context.Context, fn func(store.Tx) error) error {
	if err := fn(announceTx{}); err != nil {
		return err
	}
	s.atCommit()
	return nil
}

type announceTx struct{ store.Tx }

func (announceTx) Announce(context.Context, []string, map[string][]string) error { return nil }

// TestWatchedCommits: with the evaluator writing through Changes.Watch, an answer kept from
// before a commit is not used by a reader that sees the commit, however soon after, and no answer
// computed while a commit is under way is kept.
func TestWatchedCommits(t *testing.T) {
	fp := strings.Repeat("ab", 32)
	k := NewKey("org", fp, "", "prod", nil)
	changes := NewChanges()
	c := NewCache(changes)
	kept := func() bool {
		_, _, _, ok := c.Get(k)
		return ok
	}
	fill := func(body string) {
		_, _, at, _ := c.Get(k)
		c.Put(k, at, []byte(body), nil)
	}
	var duringCommit, keptDuring bool
	st := changes.Watch(commitStore{atCommit: func() {
		// The commit is under way (or just done, Evaluated not yet called): the answer from
		// before is retired, and one computed now is not kept.
		duringCommit = kept()
		fill("computed during the commit")
		keptDuring = kept()
	}})
	fill("before")
	if !kept() {
		t.Fatal("an answer was not kept with nothing under way")
	}
	err := st.Update(context.Background(), func(tx store.Tx) error {
		return tx.Announce(context.Background(), nil, map[string][]string{"org": {fp}})
	})
	if err != nil {
		t.Fatal(err)
	}
	if duringCommit {
		t.Fatal("an answer from before a commit was used while it committed")
	}
	if keptDuring {
		t.Fatal("an answer computed while a commit was under way was kept")
	}
	if kept() {
		t.Fatal("an answer computed while a commit was under way is used after it")
	}
	fill("after")
	if !kept() {
		t.Fatal("an answer computed after the commit was not kept")
	}
	// A transaction that announces nothing moves nothing.
	if err := st.Update(context.Background(), func(store.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if !kept() {
		t.Fatal("a commit that announced nothing retired an answer")
	}
}

// changesApart makes counts whose seed gives each of orgs, and each of artifacts, a slot of its
// own. Distinct keys share a slot by hash now and then (an organization's with 1 in 1,024), which
// retires answers early by design but would fail a test that expects one kept.
func changesApart(t *testing.T, orgs, artifacts []string) *Changes {
	t.Helper()
	apart := func(c *Changes, keys []string, n int) bool {
		seen := map[int]bool{}
		for _, k := range keys {
			s := c.slot(k, n)
			if seen[s] {
				return false
			}
			seen[s] = true
		}
		return true
	}
	for range 100 {
		if c := NewChanges(); apart(c, orgs, orgSlots) && apart(c, artifacts, artifactSlots) {
			return c
		}
	}
	t.Fatal("no seed keeps the keys apart")
	return nil
}
