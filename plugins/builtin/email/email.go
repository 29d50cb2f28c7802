// Package email is the built-in notifier for EMAIL targets: it sends the summary of a payload
// (sdk.Summarize) as a plain-text message over SMTP to the target's recipients. STARTTLS is
// required: a server that does not offer it, or whose certificate does not verify, is refused
// rather than sent to in clear, and credentials are only sent after it.
//
// # Settings
//
//	host      SMTP server name or address (required); also the name its certificate must carry
//	port      default 587 (submission)
//	from      sender address, for example "Veritrail <veritrail@example.com>" (required)
//	username  with password: AUTH PLAIN after STARTTLS; none when empty
//	password
//	ca_file   PEM file of extra certificate authorities to trust (a private CA)
//	helo      name given in EHLO, default "localhost"
//	timeout   bound on one attempt, default 30s
//
// # Failures
//
// SMTP 4xx replies (mailbox busy, greylisting, server shutting down) and network errors are
// retryable; 5xx replies (unknown recipient, rejected, authentication failed) and TLS failures
// are not.
package email

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/veritrail/veritrail/plugins/sdk"
)

// Reasons specific to SMTP.
const (
	ReasonTransient = "smtp_transient" // a 4xx reply
	ReasonRejected  = "smtp_rejected"  // a 5xx reply
)

const defaultTimeout = 30 * time.Second

type config struct {
	host, port         string
	from               *mail.Address
	username, password string
	tls                *tls.Config
	helo               string
	timeout            time.Duration
}

// Notifier sends e-mail. It is unusable until Configure gives it a server and a sender.
type Notifier struct {
	mu  sync.RWMutex
	cfg *config
}

var _ sdk.Notifier = (*Notifier)(nil)

// New returns an unconfigured e-mail notifier.
func New() *Notifier { return &Notifier{} }

// Configure applies the settings described in the package comment.
func (n *Notifier) Configure(_ context.Context, settings map[string]string) error {
	s := sdk.Settings(settings)
	if err := s.Only("host", "port", "from", "username", "password", "ca_file", "helo", "timeout"); err != nil {
		return fmt.Errorf("email: %w", err)
	}
	cfg := &config{
		host:     s.String("host", ""),
		username: s.String("username", ""),
		password: s.String("password", ""),
		helo:     s.String("helo", "localhost"),
	}
	if cfg.host == "" {
		return errors.New("email: setting host is required")
	}
	port, err := s.Int("port", 587)
	if err != nil {
		return fmt.Errorf("email: %w", err)
	}
	if port < 1 || port > 65535 {
		return fmt.Errorf("email: setting port: %d is not a port", port)
	}
	cfg.port = strconv.Itoa(port)
	if cfg.from, err = mail.ParseAddress(s.String("from", "")); err != nil {
		return fmt.Errorf("email: setting from: %w", err)
	}
	if cfg.timeout, err = s.Duration("timeout", defaultTimeout); err != nil {
		return fmt.Errorf("email: %w", err)
	}
	cfg.tls = &tls.Config{ServerName: cfg.host, MinVersion: tls.VersionTLS12}
	if path := s.String("ca_file", ""); path != "" {
		pem, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("email: setting ca_file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("email: setting ca_file: no certificate in %s", path)
		}
		cfg.tls.RootCAs = pool
	}
	n.mu.Lock()
	n.cfg = cfg
	n.mu.Unlock()
	return nil
}

// Notify sends one message to the target's recipients in one SMTP transaction.
func (n *Notifier) Notify(ctx context.Context, msg *sdk.Notification) error {
	n.mu.RLock()
	cfg := n.cfg
	n.mu.RUnlock()
	if cfg == nil {
		return sdk.Permanent(sdk.ReasonConfig, errors.New("email: not configured: settings host and from are required"))
	}
	if len(msg.Target.Recipients) == 0 {
		return sdk.Permanent(sdk.ReasonConfig, errors.New("email: target has no recipients"))
	}
	to := make([]*mail.Address, 0, len(msg.Target.Recipients))
	for _, r := range msg.Target.Recipients {
		a, err := mail.ParseAddress(r)
		if err != nil {
			return sdk.Permanent(sdk.ReasonConfig, fmt.Errorf("email: recipient %q: %w", r, err))
		}
		to = append(to, a)
	}
	body, err := compose(cfg.from, to, msg.Payload, time.Now())
	if err != nil {
		return sdk.Permanent(sdk.ReasonConfig, fmt.Errorf("email: %w", err))
	}

	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	addr := net.JoinHostPort(cfg.host, cfg.port)
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return sdk.ClassifyRequestError(fmt.Errorf("email: connect to %s: %w", addr, err))
	}
	// net/smtp knows no context: the deadline bounds every read and write, and cancellation
	// closes the connection under it.
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()

	if err := send(conn, cfg, to, body); err != nil {
		if ctx.Err() != nil {
			return sdk.Retryable(reasonOf(ctx.Err()), fmt.Errorf("email: via %s: %w (%w)", addr, ctx.Err(), err))
		}
		return classify(fmt.Errorf("email: via %s: %w", addr, err))
	}
	return nil
}

func reasonOf(ctxErr error) string {
	if errors.Is(ctxErr, context.DeadlineExceeded) {
		return sdk.ReasonTimeout
	}
	return sdk.ReasonCanceled
}

var errNoStartTLS = errors.New("the server does not offer STARTTLS; refusing to send in clear")

func send(conn net.Conn, cfg *config, to []*mail.Address, body []byte) error {
	c, err := smtp.NewClient(conn, cfg.host)
	if err != nil {
		_ = conn.Close()
		return fmt.Errorf("greeting: %w", err)
	}
	defer func() { _ = c.Close() }()
	if err := c.Hello(cfg.helo); err != nil {
		return fmt.Errorf("EHLO: %w", err)
	}
	if ok, _ := c.Extension("STARTTLS"); !ok {
		return errNoStartTLS
	}
	if err := c.StartTLS(cfg.tls); err != nil {
		return fmt.Errorf("STARTTLS: %w", err)
	}
	if cfg.username != "" {
		if err := c.Auth(smtp.PlainAuth("", cfg.username, cfg.password, cfg.host)); err != nil {
			return fmt.Errorf("AUTH: %w", err)
		}
	}
	if err := c.Mail(cfg.from.Address); err != nil {
		return fmt.Errorf("MAIL FROM: %w", err)
	}
	for _, a := range to {
		if err := c.Rcpt(a.Address); err != nil {
			return fmt.Errorf("RCPT TO %s: %w", a.Address, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("DATA: %w", err)
	}
	if _, err := w.Write(body); err != nil {
		return fmt.Errorf("DATA: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("end of DATA: %w", err)
	}
	// The message was accepted at the end of DATA; a failed goodbye does not undo that.
	_ = c.Quit()
	return nil
}

// classify turns an SMTP conversation's error into a delivery failure.
func classify(err error) error {
	if errors.Is(err, errNoStartTLS) {
		return sdk.Permanent(sdk.ReasonTLS, err)
	}
	var reply *textproto.Error
	if errors.As(err, &reply) {
		switch {
		case reply.Code >= 400 && reply.Code < 500:
			return sdk.Retryable(ReasonTransient, err)
		case reply.Code >= 500:
			return sdk.Permanent(ReasonRejected, err)
		}
		return sdk.Permanent(sdk.ReasonUnexpected, err)
	}
	return sdk.ClassifyRequestError(err)
}

// compose writes the message: RFC 5322 headers, a quoted-printable UTF-8 text body. The
// Message-ID derives from the delivery ID, so a retried delivery carries the same one and mail
// systems can drop the duplicate.
func compose(from *mail.Address, to []*mail.Address, p sdk.Payload, now time.Time) ([]byte, error) {
	s := sdk.Summarize(p)
	var b bytes.Buffer
	header := func(k, v string) {
		b.WriteString(k + ": " + strings.NewReplacer("\r", " ", "\n", " ").Replace(v) + "\r\n")
	}
	rcpts := make([]string, len(to))
	for i, a := range to {
		rcpts[i] = a.String()
	}
	header("From", from.String())
	header("To", strings.Join(rcpts, ", "))
	header("Subject", mime.QEncoding.Encode("utf-8", "[Veritrail] "+s.Title))
	header("Date", now.Format(time.RFC1123Z))
	header("Message-ID", "<"+messageID(p.DeliveryID)+"@veritrail>")
	header("MIME-Version", "1.0")
	header("Content-Type", "text/plain; charset=utf-8")
	header("Content-Transfer-Encoding", "quoted-printable")
	header("X-Veritrail-Delivery", p.DeliveryID)
	b.WriteString("\r\n")

	qp := quotedprintable.NewWriter(&b)
	var text strings.Builder
	text.WriteString(s.Title + "\n\n")
	for _, f := range s.Facts {
		text.WriteString(f.Label + ": " + f.Value + "\n")
	}
	if s.URL != "" {
		text.WriteString("\nOpen in Veritrail: " + s.URL + "\n")
	}
	fmt.Fprintf(&text, "\n-- \nSent by Veritrail for rule %q (#%d) of %s, delivery %s.\n",
		p.Rule.Name, p.Rule.Number, p.Rule.Org, p.DeliveryID)
	if _, err := qp.Write([]byte(text.String())); err != nil {
		return nil, fmt.Errorf("encode body: %w", err)
	}
	if err := qp.Close(); err != nil {
		return nil, fmt.Errorf("encode body: %w", err)
	}
	return b.Bytes(), nil
}

// messageID keeps the characters a Message-ID's left part may carry unquoted.
func messageID(id string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(".-_+", r) {
			return r
		}
		return '_'
	}, id)
}
