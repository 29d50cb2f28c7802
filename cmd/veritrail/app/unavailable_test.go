package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/veritrail/veritrail/ingest"
	"github.com/veritrail/veritrail/ingest/blobs"
	"github.com/veritrail/veritrail/internal/store"
)

// TestUnavailableCarriesRetryAfter: a write whose publish fails, or whose attachment cannot be
// stored, is a 503 with Retry-After, and nothing else changes; once the dependency works again,
// the same write is accepted. A store error that can go away on its own is a 503 with
// Retry-After too; one that cannot is a 500.
func TestUnavailableCarriesRetryAfter(t *testing.T) {
	var failPublish, failBlobs atomic.Bool
	var failStore atomic.Pointer[pgconn.PgError]
	tune := func(c *Config) {
		c.ingestDeps = func(d *ingest.Deps) {
			d.Publisher = &failingPublisher{Publisher: d.Publisher, fail: &failPublish}
			d.Blobs = &failingBlobs{Store: d.Blobs, fail: &failBlobs}
			d.Store = &failingReader{Reader: d.Store, fail: &failStore}
		}
	}
	forEachModeWith(t, tune, func(t *testing.T, e env) {
		failPublish.Store(false) // whatever an earlier mode left
		failBlobs.Store(false)
		setupFlow(t, e.k)
		e.k.get("/trails/"+testOrg+"/app/t1").want(t, http.StatusOK)
		attest := func(name string) reply {
			return e.k.multipart(http.MethodPost, "/attestations/"+testOrg+"/app/trail/t1/generic", "data_json",
				map[string]any{"attestation_name": name}, file{"attachment_file", "report.txt", []byte("the report of " + name)})
		}
		failPublish.Store(true)
		r := attest("during-bus-outage")
		wantError(t, r, http.StatusServiceUnavailable, "Could not record the request durably", "")
		if got := r.Header.Get("Retry-After"); got != "5" {
			t.Fatalf("publish failed: Retry-After %q, want 5", got)
		}
		failPublish.Store(false)
		failBlobs.Store(true)
		r = attest("during-disk-outage")
		wantError(t, r, http.StatusServiceUnavailable, "Could not store the attachment", "")
		if got := r.Header.Get("Retry-After"); got != "5" {
			t.Fatalf("attachment not stored: Retry-After %q, want 5", got)
		}
		failBlobs.Store(false)
		// The store's connections were cut (PostgreSQL restarting, backends terminated): a retry
		// will likely succeed, so 503 with Retry-After. An error about the data stays a 500.
		failStore.Store(&pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"})
		r = e.k.multipart(http.MethodPut, "/trails/"+testOrg+"/app", "data_json", map[string]any{"name": "t2"})
		wantError(t, r, http.StatusServiceUnavailable, "Service unavailable while trying to look up trail; please retry", "")
		if got := r.Header.Get("Retry-After"); got != "1" {
			t.Fatalf("store connection lost: Retry-After %q, want 1", got)
		}
		failStore.Store(&pgconn.PgError{Code: "42P01", Message: `relation "trails" does not exist`})
		r = e.k.multipart(http.MethodPut, "/trails/"+testOrg+"/app", "data_json", map[string]any{"name": "t2"})
		wantError(t, r, http.StatusInternalServerError, "Internal error while trying to look up trail", "")
		failStore.Store(nil)
		attest("after-outages").want(t, http.StatusCreated)
		e.k.get("/attestations/"+testOrg+"/app/trail/t1/after-outages").want(t, http.StatusOK)
		// Nothing of the refused requests was recorded: no attestation of their names (an
		// unknown name is an empty list, CLIENT-2.md section 11).
		for _, name := range []string{"during-bus-outage", "during-disk-outage"} {
			if got := e.k.get("/attestations/"+testOrg+"/app/trail/t1/"+name).want(t, http.StatusOK).Array(t); len(got) != 0 {
				t.Fatalf("%s was recorded: %v", name, got)
			}
		}
	})
}

type failingPublisher struct {
	message.Publisher
	fail *atomic.Bool
}

func (p *failingPublisher) Publish(topic string, msgs ...*message.Message) error {
	if p.fail.Load() {
		return errors.New("the broker is unreachable")
	}
	return p.Publisher.Publish(topic, msgs...)
}

// failingReader fails TrailByName with the error in fail, when there is one.
type failingReader struct {
	store.Reader
	fail *atomic.Pointer[pgconn.PgError]
}

func (r *failingReader) TrailByName(ctx context.Context, flowID, name string) (store.Trail, error) {
	if err := r.fail.Load(); err != nil {
		return store.Trail{}, fmt.Errorf("sqlstore: trail: %w", err)
	}
	return r.Reader.TrailByName(ctx, flowID, name)
}

type failingBlobs struct {
	blobs.Store
	fail *atomic.Bool
}

func (b *failingBlobs) Put(ctx context.Context, data []byte) (string, error) {
	if b.fail.Load() {
		return "", errors.New("no space left on device")
	}
	return b.Store.Put(ctx, data)
}
