package email_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/veritrail/veritrail/plugins/builtin/email"
	"github.com/veritrail/veritrail/plugins/sdk"
	"github.com/veritrail/veritrail/plugins/sdk/plugintest"
)

// received is one message as the server saw it.
type received struct {
	from   string
	to     []string
	data   []byte
	tls    bool
	authed string
}

// behaviour makes the server refuse at one step.
type behaviour struct {
	noTLS   bool // do not offer STARTTLS
	rcptErr *smtp.SMTPError
	dataErr *smtp.SMTPError
}

type session struct {
	conn *smtp.Conn
	b    behaviour
	got  chan<- received
	msg  received
}

func (s *session) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, username, password string) error {
		if username != "veritrail" || password != "hunter2" {
			return &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "bad credentials"}
		}
		s.msg.authed = username
		return nil
	}), nil
}

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	if s.msg.authed == "" {
		return smtp.ErrAuthRequired
	}
	s.msg.from = from
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if s.b.rcptErr != nil {
		return s.b.rcptErr
	}
	s.msg.to = append(s.msg.to, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if s.b.dataErr != nil {
		return s.b.dataErr
	}
	_, s.msg.tls = s.conn.TLSConnectionState()
	s.msg.data = data
	s.got <- s.msg
	return nil
}

func (s *session) Reset()        { s.msg = received{authed: s.msg.authed} }
func (s *session) Logout() error { return nil }

// server starts a real SMTP server on loopback with STARTTLS (unless b.noTLS) and returns its
// port, the CA file that trusts it, and the messages it accepts.
func server(t *testing.T, b behaviour) (port, caFile string, got <-chan received) {
	t.Helper()
	cert, certPEM := plugintest.SelfSignedCert(t)
	ch := make(chan received, 16)
	s := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &session{conn: c, b: b, got: ch}, nil
	}))
	s.Domain = "localhost"
	s.ReadTimeout = 10 * time.Second
	s.WriteTimeout = 10 * time.Second
	if !b.noTLS {
		s.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(l) }()
	t.Cleanup(func() { _ = s.Close() })

	caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	_, port, _ = net.SplitHostPort(l.Addr().String())
	return port, caFile, ch
}

func notifier(t *testing.T, port, caFile string) sdk.Notifier {
	t.Helper()
	n := email.New()
	settings := map[string]string{
		"host": "127.0.0.1", "port": port, "from": "Veritrail <veritrail@example.com>",
		"username": "veritrail", "password": "hunter2", "timeout": "10s",
	}
	if caFile != "" {
		settings["ca_file"] = caFile
	}
	if err := n.Configure(context.Background(), settings); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestConformance(t *testing.T) {
	var port, caFile string
	var got <-chan received
	plugintest.Run(t, plugintest.Suite{
		New: func(t *testing.T) sdk.Notifier {
			port, caFile, got = server(t, behaviour{})
			return notifier(t, port, caFile)
		},
		Receiver: func(t *testing.T) (sdk.Target, <-chan []byte) {
			in, out := got, make(chan []byte, 16) // got belongs to the server New just started
			done := make(chan struct{})
			t.Cleanup(func() { close(done) })
			go func() {
				for {
					select {
					case m := <-in:
						out <- decode(t, m.data)
					case <-done:
						return
					}
				}
			}()
			return sdk.Target{ID: "1", Type: sdk.TargetEmail, Recipients: []string{"ops@example.com"}}, out
		},
		BadTarget: &sdk.Target{ID: "1", Type: sdk.TargetEmail},
	})
}

// decode returns a message's headers and its body without the transfer encoding.
func decode(t *testing.T, data []byte) []byte {
	m, err := mail.ReadMessage(strings.NewReader(string(data)))
	if err != nil {
		t.Errorf("unparsable message: %v\n%s", err, data)
		return data
	}
	body, err := io.ReadAll(quotedprintable.NewReader(m.Body))
	if err != nil {
		t.Errorf("body is not quoted-printable: %v", err)
	}
	subject, _ := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	return []byte(subject + "\n" + string(body))
}

func TestSendsOverSTARTTLS(t *testing.T) {
	port, caFile, got := server(t, behaviour{})
	msg := plugintest.Sample(sdk.OnExitedArtifact, sdk.Target{Type: sdk.TargetEmail,
		Recipients: []string{"Ops <ops@example.com>", "sre@example.com"}})
	if err := notifier(t, port, caFile).Notify(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	m := <-got
	if !m.tls {
		t.Fatal("the message was sent without TLS")
	}
	if m.authed != "veritrail" || m.from != "veritrail@example.com" ||
		strings.Join(m.to, ",") != "ops@example.com,sre@example.com" {
		t.Fatalf("envelope: auth %q from %q to %v", m.authed, m.from, m.to)
	}
	parsed, err := mail.ReadMessage(strings.NewReader(string(m.data)))
	if err != nil {
		t.Fatal(err)
	}
	subject, _ := new(mime.WordDecoder).DecodeHeader(parsed.Header.Get("Subject"))
	if subject != "[Veritrail] backend stopped running in production-eu" {
		t.Errorf("Subject %q", subject)
	}
	if id := parsed.Header.Get("Message-ID"); !strings.Contains(id, "d41d8cd98f00b204e9800998ecf8427e-ON_EXITED_ARTIFACT") {
		t.Errorf("Message-ID %q does not derive from the delivery id", id)
	}
	body := string(decode(t, m.data))
	for _, want := range []string{"Fingerprint: " + msg.Payload.Event.Artifact.Fingerprint, "Instances: 3 → 0",
		"Open in Veritrail: " + msg.Payload.Event.Artifact.HTMLURL, msg.Payload.DeliveryID} {
		if !strings.Contains(body, want) {
			t.Errorf("body lacks %q:\n%s", want, body)
		}
	}
}

func TestFailureClassification(t *testing.T) {
	cases := []struct {
		name      string
		b         behaviour
		trustCA   bool
		retryable bool
		reason    string
	}{
		{"mailbox busy 450", behaviour{rcptErr: &smtp.SMTPError{Code: 450, EnhancedCode: smtp.EnhancedCode{4, 2, 1}, Message: "busy"}}, true, true, email.ReasonTransient},
		{"greylisted 451 at data", behaviour{dataErr: &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 7, 1}, Message: "try later"}}, true, true, email.ReasonTransient},
		{"unknown user 550", behaviour{rcptErr: &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}}, true, false, email.ReasonRejected},
		{"rejected 554 at data", behaviour{dataErr: &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "spam"}}, true, false, email.ReasonRejected},
		{"no STARTTLS offered", behaviour{noTLS: true}, true, false, sdk.ReasonTLS},
		{"untrusted certificate", behaviour{}, false, false, sdk.ReasonTLS},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			port, caFile, got := server(t, c.b)
			if !c.trustCA {
				caFile = ""
			}
			err := notifier(t, port, caFile).Notify(context.Background(),
				plugintest.Sample(sdk.OnStartedArtifact, sdk.Target{Type: sdk.TargetEmail, Recipients: []string{"ops@example.com"}}))
			f := sdk.Classify(err)
			if err == nil || f.Retryable != c.retryable || f.Reason != c.reason {
				t.Fatalf("err=%v retryable=%v reason=%q, want %v %q", err, f.Retryable, f.Reason, c.retryable, c.reason)
			}
			select {
			case m := <-got:
				t.Fatalf("the server accepted a message: %s", m.data)
			default:
			}
		})
	}

	t.Run("bad credentials 535", func(t *testing.T) {
		port, caFile, _ := server(t, behaviour{})
		n := email.New()
		if err := n.Configure(context.Background(), map[string]string{"host": "127.0.0.1", "port": port,
			"from": "veritrail@example.com", "username": "veritrail", "password": "wrong", "ca_file": caFile}); err != nil {
			t.Fatal(err)
		}
		err := n.Notify(context.Background(), plugintest.Sample(sdk.OnStartedArtifact, sdk.Target{Type: sdk.TargetEmail, Recipients: []string{"ops@example.com"}}))
		if f := sdk.Classify(err); err == nil || f.Retryable || f.Reason != email.ReasonRejected {
			t.Fatalf("err=%v %+v, want a permanent %q", err, f, email.ReasonRejected)
		}
	})

	t.Run("connection refused", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(l.Addr().String())
		l.Close()
		err = notifier(t, port, "").Notify(context.Background(), plugintest.Sample(sdk.OnStartedArtifact, sdk.Target{Type: sdk.TargetEmail, Recipients: []string{"ops@example.com"}}))
		if f := sdk.Classify(err); err == nil || !f.Retryable || f.Reason != sdk.ReasonNetwork {
			t.Fatalf("err=%v %+v, want a retryable %q", err, f, sdk.ReasonNetwork)
		}
	})
}

func TestConfigure(t *testing.T) {
	for _, s := range []map[string]string{
		{"from": "a@example.com"},                              // no host
		{"host": "smtp.example.com"},                           // no from
		{"host": "smtp.example.com", "from": "not an address"}, // bad from
		{"host": "smtp.example.com", "from": "a@example.com", "port": "0"},
		{"host": "smtp.example.com", "from": "a@example.com", "ca_file": "/nonexistent/ca.pem"},
	} {
		if err := email.New().Configure(context.Background(), s); err == nil {
			t.Errorf("Configure(%v) accepted", s)
		}
	}
	err := email.New().Notify(context.Background(), plugintest.Sample(sdk.OnStartedArtifact, sdk.Target{Type: sdk.TargetEmail, Recipients: []string{"a@example.com"}}))
	var f *sdk.Failure
	if !errors.As(err, &f) || f.Retryable {
		t.Fatalf("an unconfigured notifier answered %v, want a permanent failure", err)
	}
}
