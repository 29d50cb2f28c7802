package app

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"mime/multipart"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/veritrail/veritrail/ingest/limits"
	"github.com/veritrail/veritrail/internal/store"
)

// TestRateLimits sends bursts beyond the per-key and per-organization limits: the excess is
// refused with 429 and Retry-After before anything happens, and every accepted request is
// stored. The clock stands still, so no token comes back during the test and the counts are
// exact however slow the machine.
func TestRateLimits(t *testing.T) {
	const keyBurst, orgBurst, burst, setup = 10, 16, 30, 3
	clock := newTestClock()
	tune := func(c *Config) {
		c.Now = clock.Now
		c.Ingest.Limits = limits.Limits{KeyRate: 1, KeyBurst: keyBurst, OrgRate: 1, OrgBurst: orgBurst}
	}
	forEachModeWith(t, tune, func(t *testing.T, e env) {
		setupFlow(t, e.k)
		e.k.get("/trails/"+testOrg+"/app/t1").want(t, http.StatusOK) // applied before other keys use it; setup took 3 tokens
		ci := keyFor(t, e, testOrg, "ci", store.RoleMember)
		ci2 := keyFor(t, e, testOrg, "ci2", store.RoleMember)

		var mu sync.Mutex
		var accepted []string
		send := func(k *kosli, prefix string, wantRefusedBy string) (ok int) {
			var wg sync.WaitGroup
			for i := range burst {
				wg.Go(func() {
					name := fmt.Sprintf("%s-%02d", prefix, i)
					r := k.multipart(http.MethodPost, "/attestations/"+testOrg+"/app/trail/t1/generic", "data_json",
						map[string]any{"attestation_name": name})
					mu.Lock()
					defer mu.Unlock()
					switch r.Status {
					case http.StatusCreated:
						accepted = append(accepted, name)
						ok++
					case http.StatusTooManyRequests:
						if msg := r.JSON(t)["message"].(string); msg != "Rate limit of the "+wantRefusedBy+" exceeded; retry after 1 s" {
							t.Errorf("429 message %q", msg)
						}
					default:
						t.Errorf("%s: status %d: %s", name, r.Status, r.Body)
					}
				})
			}
			wg.Wait()
			return ok
		}
		if n := send(ci, "ci", "API key"); n != keyBurst {
			t.Fatalf("first key: %d accepted, want its burst %d", n, keyBurst)
		}
		if n := send(ci2, "ci2", "organization"); n != orgBurst-setup-keyBurst {
			t.Fatalf("second key: %d accepted, want what is left of the organization's burst, %d", n, orgBurst-setup-keyBurst)
		}
		r := ci2.get("/flows/" + testOrg)
		wantError(t, r, http.StatusTooManyRequests, "Rate limit", "")
		if got := r.Header.Get("Retry-After"); got != "1" {
			t.Fatalf("Retry-After %q, want 1", got)
		}

		// Exactly the accepted attestations are stored.
		ctx := context.Background()
		f, err := e.store.FlowByName(ctx, mustOrg(t, e.store, testOrg).ID, "app")
		if err != nil {
			t.Fatal(err)
		}
		tr, err := e.store.TrailByName(ctx, f.ID, "t1")
		if err != nil {
			t.Fatal(err)
		}
		var stored []string
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			atts, err := e.store.TrailAttestations(ctx, tr.ID)
			if err != nil {
				t.Fatal(err)
			}
			stored = stored[:0]
			for _, a := range atts {
				stored = append(stored, a.Name)
			}
			if len(stored) >= len(accepted) {
				break
			}
		}
		slices.Sort(stored)
		slices.Sort(accepted)
		if !slices.Equal(stored, accepted) {
			t.Fatalf("stored %v, accepted %v", stored, accepted)
		}
	})
}

// TestShedsWritesInFlight: past --max-inflight-writes a write is refused with 503 and
// Retry-After before it is read; the write in flight completes.
func TestShedsWritesInFlight(t *testing.T) {
	base, _ := startEmbedded(t, func(c *Config) { c.Ingest.Limits = limits.Limits{MaxInFlightWrites: 1} })
	k := newKosli(t, base+"/api/v2", testToken)
	setupFlow(t, k)

	// A begin-trail whose body has not all arrived holds the only place. It is written by hand
	// on a connection of its own, so that its headers are surely sent before the rest.
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	if err := mw.WriteField("data_json", `{"name": "slow"}`); err != nil {
		t.Fatal(err)
	}
	mw.Close()
	half := body.Len() / 2
	var conn net.Conn
	var replies *bufio.Reader
	startSlow := func() {
		var err error
		if conn, err = net.Dial("tcp", strings.TrimPrefix(base, "http://")); err != nil {
			t.Fatal(err)
		}
		replies = bufio.NewReader(conn)
		fmt.Fprintf(conn, "PUT /api/v2/trails/%s/app HTTP/1.1\r\nHost: veritrail\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: %s\r\nContent-Length: %d\r\n\r\n", testOrg, testToken, mw.FormDataContentType(), body.Len())
		conn.Write(body.Bytes()[:half])
	}
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()

	// The slow request must reach the server first. If a quick one took the place before it,
	// the slow one was refused, and the server only answers it once its body is complete (it
	// reads a small body out before answering): then it is completed, checked, and sent again.
	var shed reply
	for attempt := 1; ; attempt++ {
		startSlow()
		time.Sleep(time.Duration(attempt) * 20 * time.Millisecond) // time for it to reach the handler
		shed = k.multipart(http.MethodPut, "/trails/"+testOrg+"/app", "data_json", map[string]any{"name": fmt.Sprintf("quick-%d", attempt)})
		if shed.Status == http.StatusServiceUnavailable {
			break
		}
		conn.Write(body.Bytes()[half:])
		resp, err := http.ReadResponse(replies, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		conn.Close()
		conn = nil
		if resp.StatusCode != http.StatusServiceUnavailable || attempt == 20 {
			t.Fatalf("attempt %d: the quick write got %d and the slow one %d; want 503 for one of them", attempt, shed.Status, resp.StatusCode)
		}
	}
	wantError(t, shed, http.StatusServiceUnavailable, "Too many writes in progress", "")
	if shed.Header.Get("Retry-After") != "1" {
		t.Fatalf("Retry-After %q", shed.Header.Get("Retry-After"))
	}

	conn.Write(body.Bytes()[half:])
	resp, err := http.ReadResponse(replies, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("the write in flight: %d", resp.StatusCode)
	}
	k.get("/trails/"+testOrg+"/app/slow").want(t, http.StatusOK)
}
