package app

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/veritrail/veritrail/ingest"
	"github.com/veritrail/veritrail/ingest/blobs"
)

// TestUnavailableCarriesRetryAfter: a write whose publish fails, or whose attachment cannot be
// stored, is a 503 with Retry-After, and nothing else changes; once the dependency works again,
// the same write is accepted.
func TestUnavailableCarriesRetryAfter(t *testing.T) {
	var failPublish, failBlobs atomic.Bool
	tune := func(c *Config) {
		c.ingestDeps = func(d *ingest.Deps) {
			d.Publisher = &failingPublisher{Publisher: d.Publisher, fail: &failPublish}
			d.Blobs = &failingBlobs{Store: d.Blobs, fail: &failBlobs}
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
		attest("after-outages").want(t, http.StatusCreated)
		e.k.get("/attestations/"+testOrg+"/app/trail/t1/after-outages").want(t, http.StatusOK)
		for _, name := range []string{"during-bus-outage", "during-disk-outage"} {
			e.k.get("/attestations/"+testOrg+"/app/trail/t1/"+name).want(t, http.StatusNotFound)
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
