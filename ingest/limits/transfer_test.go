package limits

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// bound is how long these tests wait for an outcome before they call it missing; the limits
// under test are a fraction of it.
const bound = 15 * time.Second

// TestTrickledBodyIsCutOff: a body sent a byte at a time fails its read once BodyReadTimeout
// (plus the little its bytes earned at the minimum rate) has passed, as a timeout.
func TestTrickledBodyIsCutOff(t *testing.T) {
	readErr := make(chan error, 1)
	srv := httptest.NewServer(BoundTransfers(Limits{BodyReadTimeout: 300 * time.Millisecond, MinTransferRate: 1000},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, err := io.ReadAll(r.Body)
			readErr <- err
			w.WriteHeader(http.StatusRequestTimeout)
		})))
	t.Cleanup(srv.Close) // after the connections dialed later are closed: a stuck handler must end first
	conn := dial(t, srv)
	fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
	stop := trickle(conn)
	defer stop()
	select {
	case err := <-readErr:
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("the handler's read ended with %v, want a timeout", err)
		}
	case <-time.After(bound):
		t.Fatalf("a trickled body was still being read after %v", bound)
	}
}

// TestRefusedTrickleIsDropped: a handler that answers without reading the body (a refusal)
// leaves the server to drain it before it answers; that drain ends at the deadline too, the
// answer goes out and the connection is closed.
func TestRefusedTrickleIsDropped(t *testing.T) {
	srv := httptest.NewServer(BoundTransfers(Limits{BodyReadTimeout: 300 * time.Millisecond},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTooManyRequests) })))
	t.Cleanup(srv.Close) // after the connections dialed later are closed: a stuck handler must end first
	conn := dial(t, srv)
	fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
	stop := trickle(conn)
	defer stop()
	_ = conn.SetReadDeadline(time.Now().Add(bound))
	rd := bufio.NewReader(conn)
	resp, err := http.ReadResponse(rd, nil)
	if err != nil {
		t.Fatalf("no answer to a refused trickle: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || !resp.Close {
		t.Fatalf("status %d, close %v; want 429 and the connection closed", resp.StatusCode, resp.Close)
	}
	// Closed: an end of file, or a reset when the server closed with the trickle's last bytes
	// unread.
	if _, err := rd.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("after the answer: %v, want the connection closed", err)
	}
}

// TestSteadySlowBodyPasses: a body that takes longer than BodyReadTimeout passes when it keeps
// above the minimum rate: its time grows with its size.
func TestSteadySlowBodyPasses(t *testing.T) {
	const size, chunk = 512 << 10, 32 << 10
	got := make(chan error, 1)
	srv := httptest.NewServer(BoundTransfers(Limits{BodyReadTimeout: time.Second, MinTransferRate: 64 << 10},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, err := io.ReadAll(r.Body)
			if err == nil && len(b) != size {
				err = fmt.Errorf("read %d bytes of %d", len(b), size)
			}
			got <- err
		})))
	t.Cleanup(srv.Close) // after the connections dialed later are closed: a stuck handler must end first
	conn := dial(t, srv)
	fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", size)
	// 16 pieces 80 ms apart: at least 1.2 s in all, about 400 KiB/s.
	for range size / chunk {
		if _, err := conn.Write(bytes.Repeat([]byte{'x'}, chunk)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(80 * time.Millisecond)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(bound):
		t.Fatal("the handler did not finish reading")
	}
}

// TestUnreadResponseIsCutOff: a client that does not read a large response does not hold the
// handler: its write fails once WriteTimeout (plus what the size needs at the rate) has passed.
func TestUnreadResponseIsCutOff(t *testing.T) {
	writeErr := make(chan error, 1)
	srv := httptest.NewServer(BoundTransfers(Limits{WriteTimeout: 200 * time.Millisecond, MinTransferRate: 1 << 30},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, err := w.Write(make([]byte, 64<<20)) // more than the sockets buffer
			writeErr <- err
		})))
	t.Cleanup(srv.Close) // after the connections dialed later are closed: a stuck handler must end first
	conn := dial(t, srv)
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	select {
	case err := <-writeErr:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the handler's write ended with %v, want a timeout", err)
		}
	case <-time.After(bound):
		t.Fatalf("a response nobody reads was still being written after %v", bound)
	}
}

// TestSteadySlowReaderGetsAll: a response whose write takes longer than WriteTimeout arrives
// whole when the client reads it above the minimum rate, and the time of the wait before the
// answer (a read-your-writes wait) is not counted.
func TestSteadySlowReaderGetsAll(t *testing.T) {
	const size = 16 << 20
	writeErr := make(chan error, 1)
	srv := httptest.NewServer(BoundTransfers(Limits{WriteTimeout: 100 * time.Millisecond, MinTransferRate: 4 << 20},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(300 * time.Millisecond) // longer than WriteTimeout, before the first write
			_, err := w.Write(bytes.Repeat([]byte{'y'}, size))
			writeErr <- err
		})))
	t.Cleanup(srv.Close) // after the connections dialed later are closed: a stuck handler must end first
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n := 0
	buf := make([]byte, 256<<10)
	for {
		m, err := io.ReadFull(resp.Body, buf)
		n += m
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d bytes: %v", n, err)
		}
		time.Sleep(20 * time.Millisecond) // 64 pieces: about 12 MB/s, at least 1.2 s in all
	}
	if n != size {
		t.Fatalf("read %d bytes of %d", n, size)
	}
	if err := <-writeErr; err != nil {
		t.Fatalf("the handler's write: %v", err)
	}
}

func dial(t *testing.T, srv *httptest.Server) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// trickle sends a byte every 50 ms until stopped or the connection fails.
func trickle(conn net.Conn) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if _, err := conn.Write([]byte{'x'}); err != nil {
					return
				}
			}
		}
	}()
	return func() { close(done) }
}
