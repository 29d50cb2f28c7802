package faults

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// supervisor starts the run's processes and notices those that exit on their own.
type supervisor struct {
	launch Launcher
	logDir string
	start  time.Time // of the run, for the times in the report

	mu    sync.Mutex
	procs []*proc
	exits []Exit
}

// proc is one process of the cluster (evaluate-1, broker, ...) across its restarts.
type proc struct {
	s       *supervisor
	name    string
	spec    childSpec
	logPath string

	mu     sync.Mutex
	cur    *incarnation // nil before the first start
	starts int
}

// incarnation is one start of a proc.
type incarnation struct {
	cmd      *exec.Cmd
	stdin    io.Closer
	done     chan struct{} // closed once the process is reaped
	expected chan struct{} // closed when the harness kills it
}

func (s *supervisor) add(name string, spec childSpec) *proc {
	p := &proc{s: s, name: name, spec: spec, logPath: filepath.Join(s.logDir, name+".log")}
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	return p
}

// since is the time since the run began, in seconds.
func (s *supervisor) since() float64 { return time.Since(s.start).Seconds() }

// startProc starts p and waits (up to within) until it serves: the child's ready line, and for
// HTTP roles an OK from /ready.
func (p *proc) startProc(ctx context.Context, within time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	spec, err := json.Marshal(p.spec)
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("faults: log of %s: %w", p.name, err)
	}
	p.starts++
	fmt.Fprintf(logf, "=== faults: start %d of %s at +%.1fs\n", p.starts, p.name, p.s.since())
	cmd := p.s.launch()
	cmd.Env = append(cmd.Env, childEnv+"="+string(spec))
	ready := make(chan string, 1)
	cmd.Stdout = &readyWatch{w: logf, ready: ready}
	cmd.Stderr = logf
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe() // held open: its end tells an orphaned child to exit
	if err != nil {
		logf.Close()
		return err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("faults: start %s: %w", p.name, err)
	}
	inc := &incarnation{cmd: cmd, stdin: stdin, done: make(chan struct{}), expected: make(chan struct{})}
	p.cur = inc
	start := p.starts
	go func() {
		werr := cmd.Wait()
		fmt.Fprintf(logf, "=== faults: %s exited at +%.1fs: %v\n", p.name, p.s.since(), cmd.ProcessState)
		logf.Close()
		close(inc.done)
		select {
		case <-inc.expected:
		default:
			status := fmt.Sprint(cmd.ProcessState)
			if cmd.ProcessState == nil {
				status = fmt.Sprint(werr)
			}
			p.s.mu.Lock()
			p.s.exits = append(p.s.exits, Exit{Process: p.name, Start: start, AtSeconds: round1(p.s.since()), Status: status,
				LastError: lastError(p.logPath), LogTail: tailOf(p.logPath, 3000)})
			p.s.mu.Unlock()
		}
	}()

	timer := time.NewTimer(within)
	defer timer.Stop()
	var addr string
	select {
	case addr = <-ready:
	case <-inc.done:
		return fmt.Errorf("faults: %s exited before it was ready (%v): %s", p.name, cmd.ProcessState, lastError(p.logPath))
	case <-timer.C:
		return fmt.Errorf("faults: %s not ready within %v; log %s", p.name, within, p.logPath)
	case <-ctx.Done():
		return ctx.Err()
	}
	if p.spec.Role != roleIngest && p.spec.Role != roleServe {
		return nil
	}
	hc := &http.Client{Timeout: time.Second}
	for {
		resp, err := hc.Get("http://" + addr + "/ready")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-inc.done:
			return fmt.Errorf("faults: %s exited before /ready answered (%v)", p.name, cmd.ProcessState)
		case <-timer.C:
			return fmt.Errorf("faults: %s at %s: /ready did not answer OK within %v: %v", p.name, addr, within, err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (p *proc) startCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// kill sends SIGKILL and waits until the process is reaped.
func (p *proc) kill() {
	p.mu.Lock()
	inc := p.cur
	p.mu.Unlock()
	if inc == nil {
		return
	}
	select {
	case <-inc.expected:
	default:
		close(inc.expected)
	}
	// An error means the process is already gone; done is closed either way.
	_ = inc.cmd.Process.Signal(syscall.SIGKILL)
	<-inc.done
	_ = inc.stdin.Close()
}

// running reports whether the current incarnation is alive.
func (p *proc) running() bool {
	p.mu.Lock()
	inc := p.cur
	p.mu.Unlock()
	if inc == nil {
		return false
	}
	select {
	case <-inc.done:
		return false
	default:
		return true
	}
}

// killAll stops every process; the run is over.
func (s *supervisor) killAll() {
	s.mu.Lock()
	procs := append([]*proc(nil), s.procs...)
	s.mu.Unlock()
	for _, p := range procs {
		p.kill()
	}
}

// unexpectedExits are the processes that exited without being killed, so far.
func (s *supervisor) unexpectedExits() []Exit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Exit(nil), s.exits...)
}

// readyWatch copies a child's stdout to its log and hands over the ready line's address once.
type readyWatch struct {
	w     io.Writer
	ready chan<- string // buffered; gets one value
	line  []byte
	sent  bool // only exec's copying goroutine calls Write
}

func (r *readyWatch) Write(b []byte) (int, error) {
	n, err := r.w.Write(b)
	if r.sent {
		return n, err
	}
	r.line = append(r.line, b...)
	for {
		i := strings.IndexByte(string(r.line), '\n')
		if i < 0 {
			break
		}
		if addr, ok := strings.CutPrefix(string(r.line[:i]), readyPrefix); ok {
			r.ready <- strings.TrimSpace(addr)
			r.sent, r.line = true, nil
			break
		}
		r.line = r.line[i+1:]
	}
	return n, err
}

// scanLog counts the lines of a process's log that contain each of patterns, and the lines
// logged at level ERROR, and keeps the first line of each pattern.
func scanLog(path string, patterns []string) (counts map[string]int, errorLines int, first map[string]string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, nil, err
	}
	defer f.Close()
	counts, first = map[string]int{}, map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "level=ERROR") {
			errorLines++
		}
		for _, pat := range patterns {
			if strings.Contains(line, pat) {
				counts[pat]++
				if _, ok := first[pat]; !ok {
					first[pat] = clip(line, 400)
				}
			}
		}
	}
	return counts, errorLines, first, sc.Err()
}

// lastError is the last line of a log at level ERROR, or where the log is.
func lastError(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(string(b), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], "level=ERROR") {
			return clip(lines[i], 600)
		}
	}
	return "see " + path
}

// tailOf is the end of a file, at most n bytes.
func tailOf(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	if len(b) > n {
		return "..." + string(b[len(b)-n:])
	}
	return string(b)
}

// freePort asks the kernel for a port that is free now; the process given it binds it a
// moment later, and again after each restart.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("faults: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
