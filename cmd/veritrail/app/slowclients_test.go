package app

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/veritrail/veritrail/ingest/limits"
	"github.com/veritrail/veritrail/internal/store"
)

// slowLimits are the production limits with a short body timeout, and without rate limits (this
// is about write places, not request rates).
func slowLimits() limits.Limits {
	l := limits.Default()
	l.KeyRate, l.OrgRate = 0, 0
	l.BodyReadTimeout = 2 * time.Second
	return l
}

// TestSlowBodiesDoNotStarveWriters: 300 connections of one key send a 1 MB attestation a byte
// at a time; meanwhile another key's ordinary attestations are all answered 201, and every slow
// request ends with a 4xx (429 beyond its key's share of the write places, 408 once its body is
// overdue) or a closed connection.
func TestSlowBodiesDoNotStarveWriters(t *testing.T) {
	const trickles, writes = 300, 20
	limits := slowLimits()
	forEachModeWith(t, func(c *Config) { c.Ingest.Limits = limits }, func(t *testing.T, e env) {
		setupFlow(t, e.k)
		e.k.get("/trails/"+testOrg+"/app/t1").want(t, http.StatusOK)
		slowSecret := keySecret(t, e, testOrg, "slow", store.RoleMember)
		ci := keyFor(t, e, testOrg, "ci", store.RoleMember)

		results := make(chan trickleResult, trickles)
		for range trickles {
			startTrickle(t, e.base, slowSecret, "/api/v2/attestations/"+testOrg+"/app/trail/t1/generic", results)
		}
		// Were slow bodies to hold write places, they would hold every one once this many slow
		// requests had been refused.
		var ended []trickleResult
		collect := func(n int, within time.Duration) {
			t.Helper()
			deadline := time.After(within)
			for len(ended) < n {
				select {
				case r := <-results:
					ended = append(ended, r)
				case <-deadline:
					t.Fatalf("%d of %d slow requests ended within %v", len(ended), trickles, within)
				}
			}
		}
		collect(trickles-limits.MaxInFlightWrites, 30*time.Second)

		for i := range writes {
			r := ci.multipart(http.MethodPost, "/attestations/"+testOrg+"/app/trail/t1/generic", "data_json",
				map[string]any{"attestation_name": fmt.Sprintf("quick-%02d", i)})
			if r.Status != http.StatusCreated {
				t.Fatalf("write %d of another key while slow bodies arrive: %d %s", i, r.Status, r.Body)
			}
		}

		collect(trickles, time.Minute)
		counts := map[string]int{}
		for _, r := range ended {
			switch {
			case r.err != nil:
				counts["closed"]++
			case r.status >= 400 && r.status < 500:
				counts[fmt.Sprint(r.status)]++
				if r.retryAfter == "" && r.status == http.StatusTooManyRequests {
					t.Errorf("a 429 without Retry-After")
				}
			default:
				t.Errorf("a slow request ended with %d", r.status)
			}
		}
		t.Logf("slow requests ended: %v", counts)
		if counts["408"] == 0 {
			t.Errorf("no slow request was cut off with 408: %v", counts)
		}
	})
}

// TestSteadySlowUploadPasses: an attachment sent more slowly than the body timeout allows on
// its own, but steadily above the minimum rate, is accepted whole.
func TestSteadySlowUploadPasses(t *testing.T) {
	limits := slowLimits()
	forEachModeWith(t, func(c *Config) { c.Ingest.Limits = limits }, func(t *testing.T, e env) {
		setupFlow(t, e.k)
		e.k.get("/trails/"+testOrg+"/app/t1").want(t, http.StatusOK)
		attachment := bytes.Repeat([]byte("evidence "), (1<<20)/9)
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="data_json"`)
		pw, _ := mw.CreatePart(h)
		pw.Write([]byte(`{"attestation_name": "slow-upload"}`))
		fw, _ := mw.CreateFormFile("attachment_file", "report.txt")
		fw.Write(attachment)
		mw.Close()

		conn, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /api/v2/attestations/%s/app/trail/t1/generic HTTP/1.1\r\nHost: veritrail\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: %s\r\nContent-Length: %d\r\n\r\n", testOrg, testToken, mw.FormDataContentType(), body.Len())
		// 32 KiB every 100 ms: at least 3.2 s in all, over the 2 s body timeout, at about 320 KiB/s.
		for b := body.Bytes(); len(b) > 0; {
			n := min(len(b), 32<<10)
			if _, err := conn.Write(b[:n]); err != nil {
				t.Fatalf("the upload was cut off: %v", err)
			}
			b = b[n:]
			time.Sleep(100 * time.Millisecond)
		}
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("a steady slow upload: %d %s", resp.StatusCode, got)
		}
		atts := e.k.get("/attestations/"+testOrg+"/app/trail/t1/slow-upload").want(t, http.StatusOK).Array(t)
		sum := sha256.Sum256(attachment)
		if len(atts) != 1 || atts[0].(map[string]any)["evidence_archive_fingerprint"] != hex.EncodeToString(sum[:]) {
			t.Fatalf("stored %v, want one attestation whose evidence is the attachment (sha256 %x)", atts, sum)
		}
	})
}

// TestIdleConnectionsClosed: a keep-alive connection that sends no next request is closed after
// the idle timeout, on both modes' servers.
func TestIdleConnectionsClosed(t *testing.T) {
	forEachModeWith(t, func(c *Config) { c.Ingest.Limits.IdleTimeout = 300 * time.Millisecond }, func(t *testing.T, e env) {
		conn, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "GET /ready HTTP/1.1\r\nHost: veritrail\r\n\r\n")
		rd := bufio.NewReader(conn)
		resp, err := http.ReadResponse(rd, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Close {
			t.Fatalf("status %d, close %v; want 200 on a kept-alive connection", resp.StatusCode, resp.Close)
		}
		_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
		if _, err := rd.ReadByte(); err != io.EOF {
			t.Fatalf("an idle connection: %v, want it closed by the server", err)
		}
	})
}

// trickleResult is how a slow request ended: an answer, or err when the connection was closed
// without one.
type trickleResult struct {
	status     int
	retryAfter string
	err        error
}

// startTrickle starts a multipart request that declares a 1 MB body and sends it one byte every
// 100 ms until it is answered or its connection closed; then it sends how it ended on results.
func startTrickle(t *testing.T, base, secret, path string, results chan<- trickleResult) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	const boundary = "trickle"
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: veritrail\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: multipart/form-data; boundary=%s\r\nContent-Length: %d\r\n\r\n", path, secret, boundary, 1<<20)
	body := []byte("--" + boundary + "\r\nContent-Disposition: form-data; name=\"attachment_file\"; filename=\"big\"\r\n\r\n" +
		strings.Repeat("x", 4096))
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			results <- trickleResult{err: err}
			return
		}
		resp.Body.Close()
		results <- trickleResult{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	}()
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for _, b := range body {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if _, err := conn.Write([]byte{b}); err != nil {
				return
			}
		}
	}()
}
