package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// outcome is how a request ended, as its client saw it.
type outcome uint8

const (
	created outcome = iota // 201
	updated                // 200: a trail begun again
	refused                // 4xx but 429: nothing may be stored
	limited                // 429: nothing may be stored
	failed                 // 5xx: may or may not be stored
	broken                 // the connection failed once the request may have been sent
	unsent                 // no connection was made: nothing was sent
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"201", "200", "4xx", "429", "5xx", "connection error", "not sent"}

func (o outcome) String() string { return outcomeNames[o] }

// acknowledged outcomes promise the write is stored; ambiguous ones allow it at most once;
// the others promise it is not.
func (o outcome) acknowledged() bool { return o == created || o == updated }
func (o outcome) ambiguous() bool    { return o == failed || o == broken }

// classify turns a response status or a transport error into an outcome. A failed dial sent
// nothing; any other transport error may have come after the request reached the server.
func classify(status int, err error) outcome {
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return unsent
		}
		return broken
	}
	switch {
	case status == http.StatusCreated:
		return created
	case status == http.StatusOK:
		return updated
	case status == http.StatusTooManyRequests:
		return limited
	case status >= 400 && status < 500:
		return refused
	default: // 5xx, and anything else no client expects
		return failed
	}
}

// The kinds of request the load sends.
const (
	kindTrail = iota
	kindAttestation
	kindSnapshot      // the snapshot reporter's reports (snapshots.go)
	kindEvidence      // the evidence changer's build attestations
	kindFinalSnapshot // the final reports after the drain
	numKinds
)

// ledger records every request of the load and how it ended.
type ledger struct {
	mu               sync.Mutex
	trails           map[string]*trailRec
	counts           [numKinds][numOutcomes]int
	missingRetry     int            // 503s and 429s without Retry-After
	examples         []string       // the first few answers of each unexpected kind
	examplesOf       map[string]int // by kind of answer
	acked            atomic.Int64   // attestations answered 201
	notOK            atomic.Int64   // requests answered otherwise than 2xx, or not at all
	lastNotOKAtNanos atomic.Int64
}

// trailRec is one trail the load wrote.
type trailRec struct {
	begun bool // a begin was answered 201 or 200
	maybe bool // a begin ended ambiguously
	atts  map[string]*attRec
}

// attRec is one attestation, sent once.
type attRec struct {
	compliant bool
	outcome   outcome
	status    int
}

func newLedger() *ledger {
	return &ledger{trails: map[string]*trailRec{}, examplesOf: map[string]int{}}
}

// answer is what one request got.
type answer struct {
	status     int
	retryAfter string // the Retry-After header
	body       string
	err        error
}

func (l *ledger) record(kind int, what string, a answer) outcome {
	o := classify(a.status, a.err)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counts[kind][o]++
	if (a.status == http.StatusServiceUnavailable || a.status == http.StatusTooManyRequests) && a.retryAfter == "" {
		l.missingRetry++
	}
	if !o.acknowledged() {
		l.notOK.Add(1)
		l.lastNotOKAtNanos.Store(time.Now().UnixNano())
		class := fmt.Sprintf("%d %v", a.status, o)
		if l.examplesOf[class] < 3 {
			l.examplesOf[class]++
			detail := a.body
			if a.err != nil {
				detail = a.err.Error()
			}
			l.examples = append(l.examples, fmt.Sprintf("%s: %v (status %d): %s", what, o, a.status, clip(detail, 300)))
		}
	}
	return o
}

func (l *ledger) beginTrail(trail string, a answer) outcome {
	o := l.record(kindTrail, "begin trail "+trail, a)
	l.mu.Lock()
	defer l.mu.Unlock()
	tr := l.trail(trail)
	tr.begun = tr.begun || o.acknowledged()
	tr.maybe = tr.maybe || o.ambiguous()
	return o
}

func (l *ledger) attest(trail, name string, compliant bool, a answer) outcome {
	o := l.record(kindAttestation, "attestation "+trail+"/"+name, a)
	if o == created {
		l.acked.Add(1)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.trail(trail).atts[name] = &attRec{compliant: compliant, outcome: o, status: a.status}
	return o
}

func (l *ledger) trail(name string) *trailRec {
	tr := l.trails[name]
	if tr == nil {
		tr = &trailRec{atts: map[string]*attRec{}}
		l.trails[name] = tr
	}
	return tr
}

// plannedAtt is an attestation a writer will send.
type plannedAtt struct {
	name      string
	compliant bool
}

// buildName is the attestation the flow's template requires.
const buildName = "build"

// flowTemplate requires one generic attestation; every other attestation is unexpected, and
// counts only through its compliance.
const flowTemplate = "version: 1\ntrail:\n  attestations:\n  - name: " + buildName + "\n    type: generic\n"

// planTrail picks what one trail gets, so that the run has trails of every compliance state:
// 15% lack the required attestation (INCOMPLETE), 15% have it non-compliant and 20% have a
// non-compliant other one (NON-COMPLIANT), the rest are COMPLIANT. Besides the required one a
// trail gets 2 to 12 others, as pipelines report a few tests and scans each.
func planTrail(rng *rand.Rand, trail string) []plannedAtt {
	r := rng.IntN(100)
	extras := 2 + rng.IntN(11)
	bad := rng.IntN(extras)
	var atts []plannedAtt
	for j := range extras {
		atts = append(atts, plannedAtt{name: fmt.Sprintf("%s-a%d", trail, j), compliant: !(r >= 30 && r < 50 && j == bad)})
	}
	if r >= 15 {
		b := plannedAtt{name: buildName, compliant: r >= 30}
		at := rng.IntN(len(atts) + 1)
		atts = append(atts[:at], append([]plannedAtt{b}, atts[at:]...)...)
	}
	return atts
}

// client speaks to the API as the Kosli CLI does: a bearer token, JSON multipart parts
// without a filename, files as application/octet-stream.
type client struct {
	http  *http.Client
	base  string // http://host:port/api/v2
	org   string
	token string
}

func newClient(base, org, token string, conns int) *client {
	return &client{base: base, org: org, token: token, http: &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns,
			IdleConnTimeout: time.Minute, DisableCompression: true},
	}}
}

// multipart sends data_json (and a file part when name is set).
func (c *client) multipart(ctx context.Context, method, path string, dataJSON any, fileField, fileName string, file []byte) answer {
	js, err := json.Marshal(dataJSON)
	if err != nil {
		return answer{err: err}
	}
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="data_json"`)
	pw, _ := w.CreatePart(h)
	_, _ = pw.Write(js)
	if fileField != "" {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q; filename=%q`, fileField, fileName))
		h.Set("Content-Type", "application/octet-stream")
		fw, _ := w.CreatePart(h)
		_, _ = fw.Write(file)
	}
	_ = w.Close()
	return c.do(ctx, method, path, w.FormDataContentType(), buf.Bytes())
}

// as is the client sending with another key.
func (c *client) as(token string) *client {
	cp := *c
	cp.token = token
	return &cp
}

func (c *client) get(ctx context.Context, path string) answer {
	return c.do(ctx, http.MethodGet, path, "application/json; charset=utf-8", nil)
}

func (c *client) do(ctx context.Context, method, path, contentType string, body []byte) answer {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("User-Agent", "Kosli/v2.38.0")
	req.Header.Set("Content-Type", contentType)
	resp, err := c.http.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	// The status line is the answer; a body cut off by a kill changes nothing.
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return answer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: strings.TrimSpace(string(b))}
}

// flowName is the run's one flow.
const flowName = "faults"

// load is the writers: each begins trails one after the other and attests each trail's
// planned attestations once ahead more trails are begun, every name sent once.
type load struct {
	clients []*client // one per key; writer g sends with g's
	l       *ledger
	lim     *rate.Limiter
	stop    atomic.Bool
	wg      sync.WaitGroup
	seed    uint64
	writers int
	ahead   int
}

func (ld *load) start(ctx context.Context) {
	for g := range ld.writers {
		ld.wg.Go(func() { ld.writer(ctx, g) })
	}
}

// finish stops the writers after the requests they are sending, and waits for them.
func (ld *load) finish() {
	ld.stop.Store(true)
	ld.wg.Wait()
}

func (ld *load) writer(ctx context.Context, g int) {
	c := ld.clients[g%len(ld.clients)]
	rng := rand.New(rand.NewPCG(ld.seed, uint64(g)))
	pause := backoff{}
	type begun struct {
		trail string
		plan  []plannedAtt
	}
	var queue []begun // trails begun and not attested yet
	for i := 0; ; i++ {
		trail := fmt.Sprintf("w%02d-t%05d", g, i)
		plan := planTrail(rng, trail)
		for {
			if !ld.wait(ctx) {
				return
			}
			a := c.multipart(ctx, http.MethodPut, "/trails/"+c.org+"/"+flowName,
				map[string]any{"name": trail, "description": "fault harness", "user_data": map[string]any{}}, "", "", nil)
			o := ld.l.beginTrail(trail, a)
			if o.acknowledged() {
				queue = append(queue, begun{trail, plan})
				pause.reset()
				break
			}
			if o == refused { // a valid request refused: recorded; this trail is given up
				break
			}
			pause.wait(ctx)
		}
		if len(queue) <= ld.ahead {
			continue
		}
		next := queue[0]
		queue = queue[1:]
		for _, at := range next.plan {
			if !ld.wait(ctx) {
				return
			}
			a := c.multipart(ctx, http.MethodPost, "/attestations/"+c.org+"/"+flowName+"/trail/"+next.trail+"/generic",
				map[string]any{"attestation_name": at.name, "is_compliant": at.compliant, "user_data": map[string]any{}}, "", "", nil)
			// Never sent again: a second request under the same name could store it twice legitimately.
			if ld.l.attest(next.trail, at.name, at.compliant, a).acknowledged() {
				pause.reset()
			} else {
				pause.wait(ctx)
			}
		}
	}
}

// wait takes a token of the rate limit and reports whether the writer goes on.
func (ld *load) wait(ctx context.Context) bool {
	if ld.stop.Load() || ctx.Err() != nil {
		return false
	}
	return ld.lim.Wait(ctx) == nil && !ld.stop.Load()
}

// backoff paces a writer whose requests fail (a process is down), from 20 ms to 500 ms.
type backoff struct{ d time.Duration }

func (b *backoff) reset() { b.d = 0 }

func (b *backoff) wait(ctx context.Context) {
	b.d = min(max(2*b.d, 20*time.Millisecond), 500*time.Millisecond)
	t := time.NewTimer(b.d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// snapshot copies the ledger's trails for verification.
func (l *ledger) snapshot() map[string]*trailRec {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]*trailRec, len(l.trails))
	for name, tr := range l.trails {
		c := &trailRec{begun: tr.begun, maybe: tr.maybe, atts: make(map[string]*attRec, len(tr.atts))}
		for n, a := range tr.atts {
			cp := *a
			c.atts[n] = &cp
		}
		out[name] = c
	}
	return out
}

// outcomes sums the ledger's requests of one kind.
func (l *ledger) outcomes(kind int) Outcomes {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.counts[kind]
	o := Outcomes{Created: c[created], Updated: c[updated], Refused: c[refused], Limited: c[limited], Failed: c[failed],
		Broken: c[broken], NotSent: c[unsent]}
	for _, n := range c {
		o.Sent += n
	}
	return o
}

func (l *ledger) exampleAnswers() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := append([]string(nil), l.examples...)
	sort.Strings(out)
	return out
}
