package app

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/veritrail/veritrail/internal/bus/kafkabus"
	"github.com/veritrail/veritrail/internal/bus/kafkabus/kafkatest"
	"github.com/veritrail/veritrail/internal/bus/sqlitebus"
)

// TestReadyFollowsTheDistributedDependencies: ingest's /ready is 503 while the Kafka broker
// is down and while PostgreSQL is unreachable, and 200 again once each is back; /live is 200
// throughout. The broker restarts with its data on the same address; PostgreSQL is reached
// through a proxy the test cuts.
func TestReadyFollowsTheDistributedDependencies(t *testing.T) {
	cluster := kafkatest.NewRestartable(t, 4)
	dsn := postgresSchema(t)
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		t.Fatalf("this test needs VERITRAIL_TEST_POSTGRES as a URL, got %q", dsn)
	}
	proxy := newTCPProxy(t, u.Host)
	u.Host = proxy.addr
	cfg := baseConfig()
	cfg.Postgres = u.String()
	cfg.Kafka = kafkabus.Config{Brokers: cluster.Addrs(), Partitions: 4}
	cfg.Ingest.ReadyCache = 20 * time.Millisecond
	cfg.Log = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	in, err := StartIngest(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	base := "http://" + in.Addr
	k := newKosli(t, base+"/api/v2", testToken)

	waitReady(t, base, http.StatusOK, "")
	cluster.Stop()
	waitReady(t, base, http.StatusServiceUnavailable, "Not ready: bus unavailable")
	cluster.Start()
	waitReady(t, base, http.StatusOK, "")
	// The broker took writes again.
	k.multipart(http.MethodPut, "/flows/"+testOrg+"/template_file", "data_json", map[string]any{"name": "app", "description": ""},
		file{"template_file", "t.yml", []byte(simpleTemplate)}).want(t, http.StatusCreated)

	proxy.Stop()
	waitReady(t, base, http.StatusServiceUnavailable, "Not ready: store unavailable")
	proxy.Start()
	waitReady(t, base, http.StatusOK, "")
}

// TestReadyFollowsTheEmbeddedDependencies: serve's /ready is 503 while another process holds
// the bus database's write lock (nothing can be moved, claimed or acked) and 200 once it lets
// go, and 503 once the store is closed; /live is 200 throughout.
func TestReadyFollowsTheEmbeddedDependencies(t *testing.T) {
	cfg := baseConfig()
	cfg.DataDir = t.TempDir()
	cfg.Ingest.ReadyCache = 20 * time.Millisecond
	// The bus and the store fail on purpose here; their errors are expected.
	cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	r, err := StartEmbedded(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() }) // the store is closed twice: its error is expected
	base := "http://" + r.Addr
	waitReady(t, base, http.StatusOK, "")

	other, err := sqlitebus.Open(filepath.Join(cfg.DataDir, "bus.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ctx := context.Background()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	waitReady(t, base, http.StatusServiceUnavailable, "Not ready: bus unavailable")
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	waitReady(t, base, http.StatusOK, "")

	if err := r.Store.Close(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, base, http.StatusServiceUnavailable, "Not ready: store unavailable")
}

// waitReady polls /ready until it answers status with body (OK for 200), a 503 with
// Retry-After; /live must answer 200 meanwhile.
func waitReady(t *testing.T, base string, status int, body string) {
	t.Helper()
	if status == http.StatusOK {
		body = "OK"
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	var last string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got, header, err := getText(hc, base+"/ready")
		if err != nil {
			t.Fatal(err)
		}
		last = got
		if strings.HasPrefix(got, http.StatusText(status)+": ") {
			text := strings.TrimPrefix(got, http.StatusText(status)+": ")
			if text != body {
				continue
			}
			if status == http.StatusServiceUnavailable && header.Get("Retry-After") != "5" {
				t.Fatalf("/ready 503 without Retry-After: %v", header)
			}
			live, _, err := getText(hc, base+"/live")
			if err != nil || live != "OK: OK" {
				t.Fatalf("/live answered %q, %v while /ready answered %q", live, err, got)
			}
			return
		}
	}
	t.Fatalf("/ready did not answer %d %q within 30 s; last: %q", status, body, last)
}

// getText returns "Status text: body" of a GET, and its header.
func getText(hc *http.Client, url string) (string, http.Header, error) {
	resp, err := hc.Get(url)
	if err != nil {
		return "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return http.StatusText(resp.StatusCode) + ": " + string(b), resp.Header, err
}

// tcpProxy forwards connections to target until stopped: stopping it closes the listener and
// every connection, as an unreachable server looks to its clients; starting it listens again
// on the same address.
type tcpProxy struct {
	t      *testing.T
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	p := &tcpProxy{t: t, target: target, conns: map[net.Conn]bool{}}
	p.listen("127.0.0.1:0")
	p.addr = p.ln.Addr().String()
	t.Cleanup(p.Stop)
	return p
}

func (p *tcpProxy) listen(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
}

func (p *tcpProxy) forward(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // stopped meanwhile
		p.mu.Unlock()
		c.Close()
		s.Close()
		return
	}
	p.conns[c], p.conns[s] = true, true
	p.mu.Unlock()
	go func() { io.Copy(s, c); s.Close() }()
	io.Copy(c, s)
	c.Close()
}

// Stop closes the listener and every forwarded connection.
func (p *tcpProxy) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// Start listens again on the proxy's address.
func (p *tcpProxy) Start() { p.listen(p.addr) }
