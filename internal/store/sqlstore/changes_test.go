package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/store/sqlstore"
)

// recorder is a ChangeListener that passes what it hears on.
type recorder struct {
	heard     chan string
	listening chan bool
}

func (r *recorder) Changed(orgs []string, artifacts map[string][]string) {
	var b strings.Builder
	fmt.Fprint(&b, orgs)
	for _, org := range slices.Sorted(func(yield func(string) bool) {
		for k := range artifacts {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, " %s:%v", org, artifacts[org])
	}
	r.heard <- b.String()
}

func (r *recorder) Listening(on bool) { r.listening <- on }

// TestPostgresAnnouncements: what a transaction announces is heard once it commits, never when it rolls back, and
// only by listeners of the same schema.
func TestPostgresAnnouncements(t *testing.T) {
	dsn := os.Getenv("VERITRAIL_TEST_POSTGRES")
	if dsn == "" {
		dsn = defaultPostgres
	}
	admin := connectPostgres(t, dsn)
	open := func() *sqlstore.Store {
		s, err := sqlstore.OpenPostgres(context.Background(), withSearchPath(dsn, createSchema(t, admin)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	s, other := open(), open()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &recorder{heard: make(chan string, 16), listening: make(chan bool, 16)}
	go s.ListenChanges(ctx, r, slog.New(slog.NewTextHandler(io.Discard, nil)))
	select {
	case on := <-r.listening:
		if !on {
			t.Fatal("the listener reported it is not listening")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the listener never listened")
	}

	errRollback := errors.New("roll back")
	if err := s.Update(ctx, func(tx store.Tx) error {
		if err := tx.Announce(ctx, []string{"org-rolled-back"}, nil); err != nil {
			return err
		}
		return errRollback
	}); !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	if err := other.Update(ctx, func(tx store.Tx) error { return tx.Announce(ctx, []string{"org-other-schema"}, nil) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, func(tx store.Tx) error {
		return tx.Announce(ctx, []string{"org-a"}, map[string][]string{"org-b": {"fp1", "fp2"}})
	}); err != nil {
		t.Fatal(err)
	}
	// Too much for one notification: the artifacts' organizations are announced instead.
	many := make([]string, 200)
	for i := range many {
		many[i] = strings.Repeat("f", 64)
	}
	if err := s.Update(ctx, func(tx store.Tx) error {
		return tx.Announce(ctx, nil, map[string][]string{"org-c": many})
	}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"[org-a] org-b:[fp1 fp2]", "[org-c]"} {
		select {
		case got := <-r.heard:
			if got != want {
				t.Fatalf("heard %q, want %q (a rolled-back or another schema's announcement was heard?)", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("did not hear %q", want)
		}
	}
}
