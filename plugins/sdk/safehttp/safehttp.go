// Package safehttp is an HTTP client for URLs that users configure (webhooks, chat incoming
// webhooks, plugin endpoints): it refuses to connect to loopback, private, link-local (cloud
// metadata at 169.254.169.254), and other non-public addresses, so a notification rule cannot be
// used to reach the service's own network (server-side request forgery).
//
// The check runs in the dialer, on the address actually being connected to after name
// resolution, for every new connection. Checking the URL's host before the request would not
// do: a name can resolve to a public address when checked and to 127.0.0.1 when dialled (DNS
// rebinding), and redirects would bypass it. Proxies from the environment are not used, since
// the dialled address would then be the proxy's, and redirects are not followed.
package safehttp

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// Options configure a client.
type Options struct {
	// AllowPrivate permits loopback, private and link-local addresses: for tests and on-premises
	// receivers. Off by default.
	AllowPrivate bool
	// Timeout bounds one request, response included; 0 leaves it to the request's context.
	Timeout time.Duration
}

// BlockedError is returned (wrapped by net/http) when a connection to a refused address was
// attempted.
type BlockedError struct {
	Addr netip.Addr
}

func (e *BlockedError) Error() string {
	return fmt.Sprintf("refusing to connect to %s: not a public address (allow_private is off)", e.Addr)
}

// NewClient returns an HTTP client that enforces Options on every connection it makes.
func NewClient(o Options) *http.Client {
	dialer := &net.Dialer{
		Timeout:   10 * time.Second,
		KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			if o.AllowPrivate {
				return nil
			}
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("refusing to connect to %q: not an IP address and port: %w", address, err)
			}
			if !Public(ap.Addr()) {
				return &BlockedError{Addr: ap.Addr().Unmap()}
			}
			return nil
		},
	}
	transport := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{
		Transport: transport,
		Timeout:   o.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// Non-public ranges that netip's predicates do not cover.
var reserved = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and the broadcast address
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("100::/64"),        // discard
}

// Prefixes whose IPv6 addresses carry an IPv4 address that a gateway will connect to.
var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// Public reports whether a is a globally routable unicast address that a receiver may have.
func Public(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsUnspecified() ||
		a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() ||
		a.IsMulticast() {
		return false
	}
	for _, p := range reserved {
		if p.Contains(a) {
			return false
		}
	}
	if a.Is6() {
		b := a.As16()
		switch {
		case nat64.Contains(a):
			return Public(netip.AddrFrom4([4]byte(b[12:16])))
		case sixToFour.Contains(a):
			return Public(netip.AddrFrom4([4]byte(b[2:6])))
		}
	}
	return true
}

// ParseURL checks a user-configured receiver URL: absolute, http or https, with a host and
// without credentials in it (secrets belong in the target's secret, not in a URL that gets
// logged).
func ParseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("target url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("target url %q: scheme must be http or https", u.Redacted())
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("target url %q: no host", u.Redacted())
	}
	if u.User != nil {
		return nil, fmt.Errorf("target url %q: credentials in the url are not allowed", u.Redacted())
	}
	return u, nil
}
