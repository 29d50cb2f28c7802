package sdk

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// Reasons name why a delivery attempt failed. They are short and stable so they can label
// metrics and dead letters; a notifier may use its own beside these.
const (
	ReasonNetwork       = "network"         // connection refused, reset, DNS failure
	ReasonTimeout       = "timeout"         // the attempt ran out of time
	ReasonCanceled      = "canceled"        // the host gave up on the attempt (shutdown)
	ReasonServerError   = "server_error"    // 5xx
	ReasonRateLimited   = "rate_limited"    // 429
	ReasonClientError   = "client_error"    // 4xx other than 429
	ReasonRedirect      = "redirect"        // 3xx: redirects are not followed
	ReasonUnexpected    = "unexpected"      // a status or reply the notifier does not know
	ReasonConfig        = "config"          // the target or the settings are unusable
	ReasonBlocked       = "blocked_address" // the target resolves to an address we refuse
	ReasonTLS           = "tls"             // certificate or TLS negotiation failure
	ReasonUnclassified  = "unclassified"    // the notifier returned an error it did not classify
	ReasonPluginFailure = "plugin_failure"  // the plugin process crashed, hung up or failed the call
)

// Failure is a classified delivery failure: the edge that saw it (the notifier) decides whether
// another attempt could succeed. Return it through Retryable, Permanent or a literal when a
// receiver asked for a delay (RetryAfter).
type Failure struct {
	Err       error
	Retryable bool
	Reason    string
	// RetryAfter is the receiver's requested wait before the next attempt; 0 when none.
	RetryAfter time.Duration
}

func (f *Failure) Error() string {
	kind := "permanent"
	if f.Retryable {
		kind = "retryable"
	}
	return fmt.Sprintf("%s failure (%s): %v", kind, f.Reason, f.Err)
}

func (f *Failure) Unwrap() error { return f.Err }

// Retryable classifies err as a failure that a later attempt may not meet.
func Retryable(reason string, err error) error {
	return &Failure{Err: err, Retryable: true, Reason: reason}
}

// Permanent classifies err as a failure that every later attempt would meet too.
func Permanent(reason string, err error) error {
	return &Failure{Err: err, Reason: reason}
}

// Classify returns the classification of err. Errors nobody classified are retryable: a
// delivery is retried within its time budget rather than dropped on an error of unknown kind.
// A cancelled or expired context and network errors are classified here too, so a notifier can
// return those as they come.
func Classify(err error) Failure {
	var f *Failure
	if errors.As(err, &f) {
		return *f
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return Failure{Err: err, Retryable: true, Reason: ReasonTimeout}
	case errors.Is(err, context.Canceled):
		return Failure{Err: err, Retryable: true, Reason: ReasonCanceled}
	}
	var ne net.Error
	if errors.As(err, &ne) {
		if ne.Timeout() {
			return Failure{Err: err, Retryable: true, Reason: ReasonTimeout}
		}
		return Failure{Err: err, Retryable: true, Reason: ReasonNetwork}
	}
	return Failure{Err: err, Retryable: true, Reason: ReasonUnclassified}
}
