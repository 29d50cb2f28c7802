package sdk

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/veritrail/veritrail/plugins/sdk/safehttp"
)

// maxErrorBody bounds how much of a failed response's body goes into the error.
const maxErrorBody = 512

// CheckResponse classifies an HTTP receiver's answer: nil for 2xx; retryable for 429 and 5xx
// (with the Retry-After the receiver sent, in seconds or as a date); permanent for redirects
// (never followed, so a moved endpoint is reconfigured rather than chased) and every other
// status. The start of the body goes into the error for the dead letter. It reads but does not
// close the body.
func CheckResponse(resp *http.Response, now time.Time) error {
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		return nil
	}
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	err := fmt.Errorf("receiver answered %s", resp.Status)
	if s := strings.TrimSpace(string(snippet)); s != "" {
		err = fmt.Errorf("receiver answered %s: %s", resp.Status, s)
	}
	switch {
	case code == http.StatusTooManyRequests:
		return &Failure{Err: err, Retryable: true, Reason: ReasonRateLimited,
			RetryAfter: ParseRetryAfter(resp.Header.Get("Retry-After"), now)}
	case code >= 500 && code < 600:
		return &Failure{Err: err, Retryable: true, Reason: ReasonServerError,
			RetryAfter: ParseRetryAfter(resp.Header.Get("Retry-After"), now)}
	case code >= 300 && code < 400:
		return Permanent(ReasonRedirect, fmt.Errorf("%w (redirect to %q not followed)", err, resp.Header.Get("Location")))
	case code >= 400 && code < 500:
		return Permanent(ReasonClientError, err)
	default:
		return Permanent(ReasonUnexpected, err)
	}
}

// ParseRetryAfter reads a Retry-After header: delay seconds or an HTTP date. It returns 0 for
// an absent, malformed or past value.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// ClassifyRequestError classifies an error of http.Client.Do: an address refused by the SSRF
// guard and certificate failures are permanent, everything else (refused, reset, DNS, timeouts)
// is retryable.
func ClassifyRequestError(err error) error {
	var blocked *safehttp.BlockedError
	if errors.As(err, &blocked) {
		return Permanent(ReasonBlocked, err)
	}
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		invalid          x509.CertificateInvalidError
		verification     *tls.CertificateVerificationError
	)
	if errors.As(err, &unknownAuthority) || errors.As(err, &hostname) ||
		errors.As(err, &invalid) || errors.As(err, &verification) {
		return Permanent(ReasonTLS, err)
	}
	f := Classify(err)
	if f.Reason == ReasonUnclassified {
		// Whatever else http.Client.Do returns is about reaching the receiver.
		f.Reason = ReasonNetwork
	}
	return &f
}
