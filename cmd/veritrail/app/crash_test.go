package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/store/sqlstore"
)

// The crash test re-executes the test binary as a child running StartEmbedded, so that it can
// kill -9 a real process and not merely cancel a context.
const (
	crashChildDirEnv  = "VERITRAIL_CRASH_CHILD_DIR"
	crashChildHoldEnv = "VERITRAIL_CRASH_CHILD_HOLD_EVALUATOR"
	crashAddrPrefix   = "veritrail-crash-child-addr="

	crashFlow     = "crash"
	crashTrail    = "t1"
	crashTemplate = "version: 1\ntrail:\n  attestations:\n  - name: smoke\n    type: generic\n"
	crashSenders  = 4
	crashTarget   = 150              // the kill comes after this many 201s...
	crashSendFor  = time.Second      // ...or after this long, whichever is first
	crashRecover  = 30 * time.Second // covers the 3 s bus lease the dead child still holds
)

// TestCrashChild is the child process of TestCrashKeepsEvery201; run directly, it does nothing.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashChildDirEnv)
	if dir == "" {
		return
	}
	// The parent holds our stdin open: if it dies without killing us, we do not linger.
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(3)
	}()
	cfg := baseConfig()
	cfg.DataDir = dir
	if os.Getenv(crashChildHoldEnv) != "" {
		cfg.holdEvaluator = make(chan struct{}) // never applies anything
	}
	r, err := StartEmbedded(context.Background(), cfg)
	if err != nil {
		t.Fatalf("child: start: %v", err)
	}
	fmt.Printf("%s%s\n", crashAddrPrefix, r.Addr)
	// Serve until SIGKILL; returning would mean the process stopped by itself.
	t.Fatalf("child: stopped: %v", r.Wait())
}

// TestCrashKeepsEvery201 checks "201 means durable": every attestation answered 201 by a
// process that is then killed with SIGKILL is in the trail once the data directory is opened
// again, and exactly once (messages redelivered after the crash change nothing).
func TestCrashKeepsEvery201(t *testing.T) {
	dir := t.TempDir()
	child := startCrashChild(t, dir)

	k := newKosli(t, "http://"+child.addr+"/api/v2", testToken)
	k.multipart(http.MethodPut, "/flows/"+testOrg+"/template_file", "data_json",
		map[string]any{"name": crashFlow, "description": "crash test"},
		file{"template_file", "template.yml", []byte(crashTemplate)}).want(t, http.StatusCreated)
	k.multipart(http.MethodPut, "/trails/"+testOrg+"/"+crashFlow, "data_json",
		map[string]any{"name": crashTrail, "user_data": map[string]any{}}).want(t, http.StatusCreated)

	accepted, unexpected := floodAndKill(t, child)
	for _, u := range unexpected {
		t.Errorf("before the kill: %s", u)
	}
	if len(accepted) == 0 {
		t.Fatal("no attestation was accepted before the kill")
	}

	cfg := baseConfig()
	cfg.DataDir = dir
	// Short: a read that must wait for the backlog polls again rather than hiding the wait.
	cfg.Ingest.ConsistencyWait = 2 * time.Second
	// Those waits log warnings; show them only with -v or on failure.
	cfg.Log = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	r, err := StartEmbedded(context.Background(), cfg)
	if err != nil {
		t.Fatalf("restart on the crashed data dir: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	k = newKosli(t, "http://"+r.Addr+"/api/v2", testToken)
	applied := len(listAttestationNames(t, k))
	t.Logf("%d attestations answered 201 before the kill; %d applied at restart", len(accepted), applied)

	// A barrier: the group reads the bus in order, one message at a time, so once this later
	// message is visible every earlier one (redeliveries included) has been handled.
	sentinel := "smoke"
	k.multipart(http.MethodPost, "/attestations/"+testOrg+"/"+crashFlow+"/trail/"+crashTrail+"/generic", "data_json",
		map[string]any{"attestation_name": sentinel, "is_compliant": true, "user_data": map[string]any{}}).want(t, http.StatusCreated)
	deadline := time.Now().Add(crashRecover)
	for {
		rep := k.get("/attestations/" + testOrg + "/" + crashFlow + "/trail/" + crashTrail + "/" + sentinel)
		if rep.Status == http.StatusOK {
			break
		}
		if rep.Status != http.StatusNotFound || time.Now().After(deadline) {
			t.Fatalf("the restarted process did not catch up within %v (%d of %d accepted applied at restart): %d %s",
				crashRecover, applied, len(accepted), rep.Status, rep.Body)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Every stored attestation once (names whose 201 was lost to the kill may be there too).
	counts := listAttestationNames(t, k)
	for name, n := range counts {
		if n != 1 {
			t.Errorf("attestation %q stored %d times", name, n)
		}
	}
	var lost []string
	for _, name := range accepted {
		if counts[name] == 0 {
			lost = append(lost, name)
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d of %d attestations answered 201 are lost after kill -9, e.g. %v", len(lost), len(accepted), lost[:min(len(lost), 10)])
	}

	// The trail's compliance, evaluated after the catch-up, lists them too.
	tr := k.get("/trails/"+testOrg+"/"+crashFlow+"/"+crashTrail).want(t, http.StatusOK).JSON(t)
	var cs struct {
		AttestationsStatuses []struct {
			AttestationName string `json:"attestation_name"`
			Status          string `json:"status"`
			Unexpected      bool   `json:"unexpected"`
		} `json:"attestations_statuses"`
	}
	raw, _ := json.Marshal(tr["compliance_status"])
	if err := json.Unmarshal(raw, &cs); err != nil {
		t.Fatalf("compliance_status: %v: %s", err, raw)
	}
	listed := map[string]bool{}
	for _, s := range cs.AttestationsStatuses {
		listed[s.AttestationName] = s.Status == "COMPLETE" && s.Unexpected == (s.AttestationName != sentinel)
	}
	missing := 0
	for _, name := range accepted {
		if !listed[name] {
			missing++
		}
	}
	if missing > 0 || !listed[sentinel] {
		t.Errorf("trail compliance lists %d of %d accepted attestations (sentinel: %v)", len(accepted)-missing, len(accepted), listed[sentinel])
	}
}

// TestCrashReadAfterRestart checks read after write across a crash: attestations answered 201
// by a process killed with SIGKILL before it applied them are seen by the first read of another
// key after the restart. The child never applies anything and the restarted process holds its
// evaluator back until the read is waiting, so the backlog is certainly unapplied when the read
// starts; the read must wait for it, then see every acknowledged attestation in the trail's
// compliance.
func TestCrashReadAfterRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := baseConfig()
	cfg.DataDir = dir
	cfg.Log = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	// The flow and trail, applied by a first process on the data directory.
	r, err := StartEmbedded(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	k := newKosli(t, "http://"+r.Addr+"/api/v2", testToken)
	k.multipart(http.MethodPut, "/flows/"+testOrg+"/template_file", "data_json",
		map[string]any{"name": crashFlow, "description": "crash test"},
		file{"template_file", "template.yml", []byte(crashTemplate)}).want(t, http.StatusCreated)
	k.multipart(http.MethodPut, "/trails/"+testOrg+"/"+crashFlow, "data_json",
		map[string]any{"name": crashTrail, "user_data": map[string]any{}}).want(t, http.StatusCreated)
	k.get("/trails/"+testOrg+"/"+crashFlow+"/"+crashTrail).want(t, http.StatusOK)
	reader := NewSecret()
	if err := CreateOrgKey(context.Background(), r.Store, mustOrg(t, r.Store, testOrg), "deploy", store.RoleReader, reader); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	child := startCrashChild(t, dir, crashChildHoldEnv+"=1")
	accepted, unexpected := floodAndKill(t, child)
	for _, u := range unexpected {
		t.Errorf("before the kill: %s", u)
	}
	if len(accepted) == 0 {
		t.Fatal("no attestation was accepted before the kill")
	}

	hold := make(chan struct{})
	cfg.holdEvaluator = hold
	r, err = StartEmbedded(context.Background(), cfg)
	if err != nil {
		t.Fatalf("restart on the crashed data dir: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	listed := trailAttestations(t, firstReadAfterRestart(t, r, hold, reader))
	var missing []string
	for _, name := range accepted {
		if !listed[name] {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("the first read after the restart misses %d of %d attestations answered 201, e.g. %v", len(missing), len(accepted),
			missing[:min(len(missing), 10)])
	}
	t.Logf("%d attestations answered 201 before the kill, none applied; all in the first read after the restart", len(accepted))
}

// TestRestartWaitsForUnevaluatedTrails: a trail the previous process applied evidence to and
// stopped before evaluating holds the first reads of its organization until it is evaluated.
func TestRestartWaitsForUnevaluatedTrails(t *testing.T) {
	dir := t.TempDir()
	cfg := baseConfig()
	cfg.DataDir = dir
	r, err := StartEmbedded(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	k := newKosli(t, "http://"+r.Addr+"/api/v2", testToken)
	k.multipart(http.MethodPut, "/flows/"+testOrg+"/template_file", "data_json", map[string]any{"name": crashFlow, "description": ""},
		file{"template_file", "template.yml", []byte(crashTemplate)}).want(t, http.StatusCreated)
	k.multipart(http.MethodPut, "/trails/"+testOrg+"/"+crashFlow, "data_json", map[string]any{"name": crashTrail}).want(t, http.StatusCreated)
	k.get("/trails/"+testOrg+"/"+crashFlow+"/"+crashTrail).want(t, http.StatusOK)
	ctx := context.Background()
	org := mustOrg(t, r.Store, testOrg)
	ref, err := r.Store.TrailRef(ctx, org.ID, crashFlow, crashTrail)
	if err != nil {
		t.Fatal(err)
	}
	reader := NewSecret()
	if err := CreateOrgKey(ctx, r.Store, org, "deploy", store.RoleReader, reader); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// What a process killed between applying an attestation and evaluating its trail leaves.
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	err = st.Update(ctx, func(tx store.Tx) error {
		if err := tx.InsertAttestation(ctx, store.Attestation{ID: NewSecret(), OrgID: org.ID, FlowID: ref.FlowID, TrailID: ref.TrailID,
			Name: "left-behind", Type: "generic", IsCompliant: true, Data: json.RawMessage(`{}`), ReportedBy: "ci", CreatedAt: unixNow()}); err != nil {
			return err
		}
		if err := tx.MarkDirty(ctx, ref.TrailID); err != nil {
			return err
		}
		return tx.MarkApplied(ctx, NewSecret(), ref.TrailID, unixNow())
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	hold := make(chan struct{})
	cfg.holdEvaluator = hold
	r, err = StartEmbedded(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	if !trailAttestations(t, firstReadAfterRestart(t, r, hold, reader))["left-behind"] {
		t.Fatal("the first read after the restart shows the trail's compliance without the attestation applied before the crash")
	}
}

// firstReadAfterRestart reads the crash trail with key secret while the evaluator of r is held
// back, checks that the read waits, then lets the evaluator go and returns what the read got.
func firstReadAfterRestart(t *testing.T, r *Running, hold chan struct{}, secret string) []byte {
	t.Helper()
	type answer struct {
		status int
		header http.Header
		body   []byte
		err    error
	}
	read := make(chan answer, 1)
	url := "http://" + r.Addr + "/api/v2/trails/" + testOrg + "/" + crashFlow + "/" + crashTrail
	go func() {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			read <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		read <- answer{resp.StatusCode, resp.Header, body, err}
	}()
	// The read must wait for the backlog; only then is the evaluator let go.
	for r.API.Tracker().Waiting() == 0 {
		select {
		case a := <-read:
			t.Fatalf("the first read after the restart answered before the backlog was applied: %d %s", a.status, tail(string(a.body), 2000))
		case <-time.After(time.Millisecond):
		}
	}
	close(hold)
	a := <-read
	if a.err != nil || a.status != http.StatusOK {
		t.Fatalf("the first read: %d %v %s", a.status, a.err, a.body)
	}
	checkAnswer(t, http.MethodGet, url, a.status, a.header, a.body)
	return a.body
}

// trailAttestations lists the attestation names in a trail's compliance.
func trailAttestations(t *testing.T, body []byte) map[string]bool {
	t.Helper()
	var tr struct {
		ComplianceStatus struct {
			AttestationsStatuses []struct {
				AttestationName string `json:"attestation_name"`
			} `json:"attestations_statuses"`
		} `json:"compliance_status"`
	}
	if err := json.Unmarshal(body, &tr); err != nil {
		t.Fatalf("trail: %v: %s", err, body)
	}
	listed := map[string]bool{}
	for _, s := range tr.ComplianceStatus.AttestationsStatuses {
		listed[s.AttestationName] = true
	}
	return listed
}

// crashChild is the child process serving the API.
type crashChild struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{} // closed once the process is reaped
}

// startCrashChild starts the child on dir, with env added to its environment, and waits until
// its API answers; the child is killed and reaped in t.Cleanup whatever happens.
func startCrashChild(t *testing.T, dir string, env ...string) *crashChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.timeout=2m")
	cmd.Env = append(append(os.Environ(), crashChildDirEnv+"="+dir), env...)
	stdin, err := cmd.StdinPipe() // held open: its EOF tells an orphaned child to exit
	if err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	out := &addrWatch{found: found}
	var stderr syncBuffer
	cmd.Stdout, cmd.Stderr = out, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &crashChild{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-c.done
		_ = stdin.Close()
		if t.Failed() {
			t.Logf("child stdout:\n%s\nchild stderr (tail):\n%s", out.String(), tail(stderr.String(), 4000))
		}
	})

	select {
	case c.addr = <-found:
	case <-c.done:
		t.Fatalf("child exited before serving: %v", cmd.ProcessState)
	case <-time.After(20 * time.Second):
		t.Fatal("child did not report its address within 20s")
	}
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := hc.Get("http://" + c.addr + "/ready")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return c
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("child at %s not ready: %v", c.addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// floodAndKill sends generic attestations from several goroutines until crashTarget are
// accepted or crashSendFor passes, then kills the child with SIGKILL. It returns the names
// answered 201, and any answer that was neither 201 nor a dropped connection.
func floodAndKill(t *testing.T, c *crashChild) (accepted, unexpected []string) {
	t.Helper()
	url := "http://" + c.addr + "/api/v2/attestations/" + testOrg + "/" + crashFlow + "/trail/" + crashTrail + "/generic"
	tr := &http.Transport{MaxIdleConnsPerHost: crashSenders}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	var (
		mu    sync.Mutex
		count atomic.Int64
		wg    sync.WaitGroup
		stop  = make(chan struct{})
	)
	for g := range crashSenders {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("a-%d-%d", g, n)
				status, err := postGeneric(hc, url, name)
				if err != nil {
					return // the child is gone; this one was not acknowledged
				}
				mu.Lock()
				if status == http.StatusCreated {
					accepted = append(accepted, name)
				} else {
					unexpected = append(unexpected, fmt.Sprintf("%s answered %d", name, status))
				}
				mu.Unlock()
				if status != http.StatusCreated {
					return
				}
				count.Add(1)
			}
		})
	}
	start := time.Now()
	for count.Load() < crashTarget && time.Since(start) < crashSendFor {
		time.Sleep(2 * time.Millisecond)
	}
	// Kill while requests are in flight: some get 201 and some are cut off.
	if err := c.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("kill child: %v", err)
	}
	<-c.done
	close(stop)
	wg.Wait()
	return accepted, unexpected
}

// postGeneric attests a generic attestation as the Kosli CLI does and returns the status; an
// error means no status was received.
func postGeneric(hc *http.Client, url, name string) (int, error) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="data_json"`)
	pw, err := w.CreatePart(h)
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(pw, `{"attestation_name":%q,"is_compliant":true,"user_data":{}}`, name)
	if err := w.Close(); err != nil {
		return 0, err
	}
	req, err := http.NewRequest(http.MethodPost, url, &buf)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("User-Agent", "Kosli/v2.38.0")
	req.Header.Set("Content-Type", w.FormDataContentType())
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	// The status line is the acknowledgement; the body may be cut off by the kill.
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// listAttestationNames counts the organization's attestations by name, through every page.
func listAttestationNames(t *testing.T, k *kosli) map[string]int {
	t.Helper()
	counts := map[string]int{}
	seen := 0
	for page := 1; ; page++ {
		var body struct {
			Data []struct {
				Name string `json:"attestation_name"`
			} `json:"data"`
			Pagination struct {
				Total     int `json:"total"`
				PageCount int `json:"page_count"`
			} `json:"pagination"`
		}
		rep := k.get(fmt.Sprintf("/attestations/%s?per_page=100&page=%d", testOrg, page)).want(t, http.StatusOK)
		if err := json.Unmarshal(rep.Body, &body); err != nil {
			t.Fatalf("list attestations: %v", err)
		}
		for _, a := range body.Data {
			counts[a.Name]++
		}
		seen += len(body.Data)
		if page >= body.Pagination.PageCount {
			if seen != body.Pagination.Total {
				t.Fatalf("listed %d attestations, pagination total %d", seen, body.Pagination.Total)
			}
			return counts
		}
	}
}

// addrWatch is the child's stdout: it hands over the address line once.
type addrWatch struct {
	syncBuffer
	found chan<- string // buffered; gets one value
	sent  bool          // only exec's copying goroutine calls Write
}

func (w *addrWatch) Write(p []byte) (int, error) {
	n, err := w.syncBuffer.Write(p)
	if !w.sent {
		for _, line := range strings.SplitAfter(w.String(), "\n") {
			if addr, ok := strings.CutPrefix(line, crashAddrPrefix); ok && strings.HasSuffix(addr, "\n") {
				w.found <- strings.TrimSpace(addr)
				w.sent = true
				break
			}
		}
	}
	return n, err
}

// syncBuffer is a bytes.Buffer safe to read while the child writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
