package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/veritrail/veritrail/plugins/sdk"
	"github.com/veritrail/veritrail/plugins/sdk/safehttp"
)

func response(code int, header http.Header) *http.Response {
	if header == nil {
		header = http.Header{}
	}
	return &http.Response{
		StatusCode: code,
		Status:     fmt.Sprintf("%d %s", code, http.StatusText(code)),
		Header:     header,
		Body:       io.NopCloser(strings.NewReader("details from the receiver")),
	}
}

func TestCheckResponse(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	retryAfter := func(v string) http.Header { return http.Header{"Retry-After": {v}} }
	cases := []struct {
		code       int
		header     http.Header
		ok         bool
		retryable  bool
		reason     string
		retryAfter time.Duration
	}{
		{code: 200, ok: true},
		{code: 201, ok: true},
		{code: 204, ok: true},
		{code: 301, header: http.Header{"Location": {"https://elsewhere.example/"}}, reason: sdk.ReasonRedirect},
		{code: 400, reason: sdk.ReasonClientError},
		{code: 401, reason: sdk.ReasonClientError},
		{code: 403, reason: sdk.ReasonClientError},
		{code: 404, reason: sdk.ReasonClientError},
		{code: 408, reason: sdk.ReasonClientError},
		{code: 409, reason: sdk.ReasonClientError},
		{code: 429, retryable: true, reason: sdk.ReasonRateLimited},
		{code: 429, header: retryAfter("7"), retryable: true, reason: sdk.ReasonRateLimited, retryAfter: 7 * time.Second},
		{code: 429, header: retryAfter(now.Add(90 * time.Second).Format(http.TimeFormat)), retryable: true,
			reason: sdk.ReasonRateLimited, retryAfter: 90 * time.Second},
		{code: 429, header: retryAfter("soon"), retryable: true, reason: sdk.ReasonRateLimited},
		{code: 500, retryable: true, reason: sdk.ReasonServerError},
		{code: 502, retryable: true, reason: sdk.ReasonServerError},
		{code: 503, retryable: true, reason: sdk.ReasonServerError},
		{code: 503, header: retryAfter("2"), retryable: true, reason: sdk.ReasonServerError, retryAfter: 2 * time.Second},
		{code: 504, retryable: true, reason: sdk.ReasonServerError},
		{code: 101, reason: sdk.ReasonUnexpected},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%d %v", c.code, c.header), func(t *testing.T) {
			err := sdk.CheckResponse(response(c.code, c.header), now)
			if c.ok {
				if err != nil {
					t.Fatalf("CheckResponse = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("CheckResponse = nil, want a failure")
			}
			f := sdk.Classify(err)
			if f.Retryable != c.retryable || f.Reason != c.reason || f.RetryAfter != c.retryAfter {
				t.Fatalf("got retryable=%v reason=%q retryAfter=%v, want %v %q %v",
					f.Retryable, f.Reason, f.RetryAfter, c.retryable, c.reason, c.retryAfter)
			}
			if !strings.Contains(err.Error(), "details from the receiver") {
				t.Errorf("error %q does not carry the receiver's body", err)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":    0,
		"0":   0,
		"-3":  0,
		"120": 2 * time.Minute,
		" 5 ": 5 * time.Second,
		"abc": 0,
		now.Add(-time.Minute).Format(http.TimeFormat): 0,
		now.Add(time.Hour).Format(http.TimeFormat):    time.Hour,
	} {
		if got := sdk.ParseRetryAfter(v, now); got != want {
			t.Errorf("ParseRetryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestClassify(t *testing.T) {
	opErr := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	cases := []struct {
		name      string
		err       error
		retryable bool
		reason    string
	}{
		{"classified permanent", fmt.Errorf("wrapped: %w", sdk.Permanent("config", errors.New("no url"))), false, "config"},
		{"classified retryable", sdk.Retryable("server_error", errors.New("502")), true, "server_error"},
		{"deadline", fmt.Errorf("post: %w", context.DeadlineExceeded), true, sdk.ReasonTimeout},
		{"canceled", context.Canceled, true, sdk.ReasonCanceled},
		{"network", opErr, true, sdk.ReasonNetwork},
		{"unknown", errors.New("something odd"), true, sdk.ReasonUnclassified},
	}
	for _, c := range cases {
		f := sdk.Classify(c.err)
		if f.Retryable != c.retryable || f.Reason != c.reason {
			t.Errorf("%s: Classify = %v %q, want %v %q", c.name, f.Retryable, f.Reason, c.retryable, c.reason)
		}
	}
	if f := sdk.Classify(sdk.ClassifyRequestError(&safehttp.BlockedError{})); f.Retryable || f.Reason != sdk.ReasonBlocked {
		t.Errorf("blocked address: %v %q, want permanent %q", f.Retryable, f.Reason, sdk.ReasonBlocked)
	}
	if f := sdk.Classify(sdk.ClassifyRequestError(errors.New("EOF"))); !f.Retryable || f.Reason != sdk.ReasonNetwork {
		t.Errorf("request error: %v %q, want retryable %q", f.Retryable, f.Reason, sdk.ReasonNetwork)
	}
}
