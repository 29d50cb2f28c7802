package safehttp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"testing"

	"github.com/veritrail/veritrail/plugins/sdk/safehttp"
)

func TestPublic(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1":          false,
		"127.9.9.9":          false,
		"10.1.2.3":           false,
		"172.16.0.1":         false,
		"192.168.1.1":        false,
		"169.254.169.254":    false,
		"100.64.0.1":         false,
		"0.0.0.0":            false,
		"255.255.255.255":    false,
		"224.0.0.1":          false,
		"::1":                false,
		"::":                 false,
		"fe80::1":            false,
		"fd00::1":            false,
		"::ffff:127.0.0.1":   false,
		"::ffff:10.0.0.1":    false,
		"64:ff9b::a9fe:a9fe": false, // NAT64 of 169.254.169.254
		"2002:7f00:1::":      false, // 6to4 of 127.0.0.1
		"2001:db8::1":        false,
		"8.8.8.8":            true,
		"93.184.216.34":      true,
		"2606:4700::1111":    true,
		"64:ff9b::808:808":   true, // NAT64 of 8.8.8.8
		"::ffff:8.8.4.4":     true,
	} {
		if got := safehttp.Public(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Public(%s) = %v, want %v", addr, got, want)
		}
	}
}

// The guard refuses before connecting, so these tests send nothing to the private addresses
// they name; only the allow-private cases connect, and only to the loopback test server.
func TestClientRefusesNonPublicAddresses(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	p := u.Port()
	targets := map[string]string{
		"loopback":         "http://127.0.0.1:" + p + "/hook",
		"private":          "http://10.0.0.1:" + p + "/hook",
		"metadata":         "http://169.254.169.254/latest/meta-data/",
		"ipv6 loopback":    "http://[::1]:" + p + "/hook",
		"name to loopback": "http://localhost:" + p + "/hook",
		"mapped loopback":  "http://[::ffff:127.0.0.1]:" + p + "/hook",
		"unspecified":      "http://0.0.0.0:" + p + "/hook",
	}
	guarded := safehttp.NewClient(safehttp.Options{})
	for name, target := range targets {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, target, nil)
			resp, err := guarded.Do(req)
			if err == nil {
				resp.Body.Close()
				t.Fatalf("request to %s was sent", target)
			}
			var blocked *safehttp.BlockedError
			if !errors.As(err, &blocked) {
				t.Fatalf("error %v is not a BlockedError", err)
			}
		})
	}

	open := safehttp.NewClient(safehttp.Options{AllowPrivate: true})
	for _, target := range []string{targets["loopback"], targets["name to loopback"]} {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, target, nil)
		resp, err := open.Do(req)
		if err != nil {
			t.Fatalf("allow-private request to %s: %v", target, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("allow-private request to %s: status %d", target, resp.StatusCode)
		}
	}
}

func TestClientDoesNotFollowRedirects(t *testing.T) {
	var hits int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		http.Redirect(w, r, "/elsewhere", http.StatusMovedPermanently)
	}))
	defer srv.Close()
	resp, err := safehttp.NewClient(safehttp.Options{AllowPrivate: true}).Post(srv.URL, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMovedPermanently || hits != 1 {
		t.Fatalf("status %d after %d requests, want the 301 itself after 1", resp.StatusCode, hits)
	}
}

func TestParseURL(t *testing.T) {
	for raw, ok := range map[string]bool{
		"https://hooks.example.com/x":  true,
		"http://10.0.0.1:8080/":        true, // refused when dialled, not here
		"ftp://example.com/":           false,
		"/relative":                    false,
		"https://user:pw@example.com/": false,
		"https://":                     false,
		"::not a url":                  false,
	} {
		if _, err := safehttp.ParseURL(raw); (err == nil) != ok {
			t.Errorf("ParseURL(%q) error = %v, want ok=%v", raw, err, ok)
		}
	}
}
