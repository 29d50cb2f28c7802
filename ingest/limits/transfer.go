package limits

import (
	"errors"
	"io"
	"net/http"
	"os"
	"time"
)

// BoundTransfers holds each request to Limits' transfer bounds with connection deadlines that
// follow its progress: its body must arrive within BodyReadTimeout plus what its size needs at
// MinTransferRate, and each response write must be accepted within WriteTimeout plus what its
// size needs at that rate. The http.Server's own ReadTimeout and WriteTimeout are fixed per
// request, and no fixed value both cuts off a trickle early and lets a 10 MB attachment through
// a slow but steady link; its WriteTimeout would also count a long read-your-writes wait or
// upload before the answer.
func BoundTransfers(l Limits, next http.Handler) http.Handler {
	if l.BodyReadTimeout <= 0 && l.WriteTimeout <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		// Only a request with a body: without one, the server reads the connection in the
		// background (to notice a client gone) and a deadline would end that read.
		if l.BodyReadTimeout > 0 && r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
			b := &slowBody{ReadCloser: r.Body, rc: rc, start: time.Now(), grace: l.BodyReadTimeout, rate: l.MinTransferRate}
			// Set now, not at the first read: a handler that refuses the request unread leaves
			// the server to drain the body, and that must end too.
			b.setDeadline()
			// On a copy of the request: the server inspects its own body after the handler
			// (whether to drain it, or to close the connection).
			r = r.WithContext(r.Context())
			r.Body = b
		}
		if l.WriteTimeout > 0 {
			w = &deadlineWriter{ResponseWriter: w, rc: rc, timeout: l.WriteTimeout, rate: l.MinTransferRate}
		}
		next.ServeHTTP(w, r)
	})
}

// deadlineStep is how far a computed deadline may run ahead of the one set before it is set
// again, so that a body read in small pieces does not reset a timer at every read.
const deadlineStep = 50 * time.Millisecond

// slowBody is a request body whose read deadline is start + grace + bytes read / rate.
type slowBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	start time.Time
	grace time.Duration
	rate  float64
	n     int64
	set   time.Time // the deadline last set
	reads int
	done  bool // the body ended: the server now reads the connection itself
}

func (b *slowBody) deadline() time.Time {
	d := b.start.Add(b.grace)
	if b.rate > 0 {
		d = d.Add(time.Duration(float64(b.n) / b.rate * float64(time.Second)))
	}
	return d
}

func (b *slowBody) setDeadline() {
	d := b.deadline()
	_ = b.rc.SetReadDeadline(d) // unsupported only on a writer that is not a connection's
	b.set = d
}

func (b *slowBody) Read(p []byte) (int, error) {
	if b.done {
		return b.ReadCloser.Read(p)
	}
	// Always at the first read: Huma sets a deadline of its own before it reads.
	if b.reads == 0 || b.deadline().Sub(b.set) >= deadlineStep {
		b.setDeadline()
	}
	b.reads++
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	if err != nil {
		b.done = true
		if errors.Is(err, os.ErrDeadlineExceeded) {
			err = errSlowBody
		}
	}
	return n, err
}

// errSlowBody is a body that missed its deadline; it is a timeout, which Huma answers with 408.
var errSlowBody error = slowBodyError{}

type slowBodyError struct{}

func (slowBodyError) Error() string   { return "request body arrived too slowly" }
func (slowBodyError) Timeout() bool   { return true }
func (slowBodyError) Temporary() bool { return false }

// deadlineWriter sets the connection's write deadline before each write of the response.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	rate    float64
}

func (w *deadlineWriter) extend(n int) {
	d := w.timeout
	if w.rate > 0 {
		d += time.Duration(float64(n) / w.rate * float64(time.Second))
	}
	_ = w.rc.SetWriteDeadline(time.Now().Add(d))
}

func (w *deadlineWriter) WriteHeader(status int) {
	w.extend(0)
	w.ResponseWriter.WriteHeader(status)
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	w.extend(len(p))
	return w.ResponseWriter.Write(p)
}

func (w *deadlineWriter) Flush() {
	w.extend(0)
	_ = w.rc.Flush()
}

// Unwrap lets http.ResponseController and Huma reach the connection's writer.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
