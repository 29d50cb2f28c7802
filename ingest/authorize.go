package ingest

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/veritrail/veritrail/ingest/auth"
	"github.com/veritrail/veritrail/ingest/limits"
	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/metrics"
)

// Principal is the caller acting in one organization, as the authorization hook resolved it.
type Principal = auth.Principal

// Privilege is what an operation declares it needs (see op).
type Privilege = auth.Privilege

// The privileges operations declare.
const (
	PrivRead     = auth.PrivRead
	PrivSnapshot = auth.PrivSnapshot
	PrivWrite    = auth.PrivWrite
	PrivAdmin    = auth.PrivAdmin
)

const (
	privilegeKey = "privilege"
	publicKey    = "public"
	// scopedReadKey marks a read that waits for the writes it depends on itself (awaitScopes)
	// instead of for all of its organization's before it starts.
	scopedReadKey = "scoped-read"
	apiPrefix     = "/api/v2"
)

type principalKey struct{}

type requestKey struct{}

// requestFrom is the audit description of the write being handled, set by authorize.
func requestFrom(ctx context.Context) *contract.Request {
	r, _ := ctx.Value(requestKey{}).(*contract.Request)
	return r
}

func principalFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// authorize is the one authorization hook: it authenticates the key (or admits an anonymous
// reader of a public organization), resolves the organization in the path, checks the
// operation's declared privilege, and then waits for the organization's writes in flight before
// a read (read after write). Nothing a handler does happens before these checks pass.
func (a *API) authorize(ctx huma.Context, next func(huma.Context)) {
	o := ctx.Operation()
	need, _ := o.Metadata[privilegeKey].(Privilege)
	if need == "" {
		next(ctx)
		return
	}
	public, _ := o.Metadata[publicKey].(bool)
	orgName := ctx.Param("org")
	var p *Principal
	var err error
	if inDefault, _ := o.Metadata[inDefaultOrgKey].(bool); inDefault {
		p, err = a.auth.InDefaultOrg(ctx.Context(), ctx.Header("Authorization"))
	} else {
		p, err = a.auth.Authenticate(ctx.Context(), ctx.Header("Authorization"), orgName, public)
	}
	if err != nil {
		a.writeErr(ctx, a.refusedCaller(ctx.Context(), ctx.URL().Path, err))
		return
	}
	if !a.withinLimits(ctx, p) {
		return
	}
	if !p.Anonymous && !auth.Allows(p.Role, need) {
		a.writeErr(ctx, apiError(http.StatusForbidden, "Access denied: this operation needs the %s privilege in organization '%s'", need, p.Org.Name))
		return
	}
	// Reads (GET, whatever privilege they need, anonymous ones too) wait for the organization's
	// writes acknowledged before them, or, marked scopedReadKey, for those they depend on
	// (the handler waits); writes are audited.
	if o.Method == http.MethodGet {
		if scoped, _ := o.Metadata[scopedReadKey].(bool); !scoped {
			a.awaitWrites(ctx.Context(), p)
		}
	} else {
		done, refused := a.limits.StartWrite(p.KeyID, p.Org.ID)
		if refused != limits.Admitted {
			a.writeErr(ctx, a.writeRefused(refused))
			return
		}
		defer done()
		ctx = huma.WithValue(ctx, requestKey{}, &contract.Request{Operation: o.OperationID,
			Target: strings.TrimPrefix(ctx.URL().Path, apiPrefix)})
	}
	next(huma.WithValue(ctx, principalKey{}, p))
}

// refusedCaller is the answer to a caller auth did not resolve. A refused organization is
// named by the path asked for, as the hosted service does ("Access denied to
// /api/v2/user/<org>" for `kosli update default-org`).
func (a *API) refusedCaller(ctx context.Context, path string, err error) *Error {
	var lookup *auth.LookupError
	switch {
	case errors.Is(err, auth.ErrNoKey):
		return apiError(http.StatusUnauthorized, "Authentication required: send an API key as 'Authorization: Bearer <key>'")
	case errors.Is(err, auth.ErrInvalidKey):
		return apiError(http.StatusUnauthorized, "Invalid API key")
	case errors.Is(err, auth.ErrExpiredKey):
		return apiError(http.StatusUnauthorized, "API key is expired or revoked")
	case errors.Is(err, auth.ErrDenied):
		return apiError(http.StatusForbidden, "Access denied to %s", path)
	case errors.As(err, &lookup):
		return a.internal(ctx, lookup.What, lookup.Err)
	}
	return a.internal(ctx, "authenticate", err)
}

// writeRefused is the answer to a write refused by a bound of the writes in flight: 503 when
// the server has no place left, 429 when the key or the organization holds its share (the
// client is asked to slow down, not told the server is down).
func (a *API) writeRefused(r limits.Refusal) *Error {
	var e *Error
	switch r {
	case limits.RefusedKey:
		a.metrics.Refused(metrics.RefusedInFlightKey)
		e = apiError(http.StatusTooManyRequests, "Too many writes of the API key in progress (at most %d at once); retry after 1 s",
			a.cfg.Limits.KeyInFlightWrites)
	case limits.RefusedOrg:
		a.metrics.Refused(metrics.RefusedInFlightOrg)
		e = apiError(http.StatusTooManyRequests, "Too many writes of the organization in progress (at most %d at once); retry after 1 s",
			a.cfg.Limits.OrgInFlightWrites)
	default:
		a.metrics.Refused(metrics.RefusedInFlightAll)
		e = apiError(http.StatusServiceUnavailable, "Too many writes in progress; retry shortly")
	}
	e.RetryAfter = 1
	return e
}

// withinLimits takes the request's tokens, or answers 429 with Retry-After and reports false.
func (a *API) withinLimits(ctx huma.Context, p *Principal) bool {
	keyID := p.KeyID
	if p.Anonymous {
		keyID = "anonymous/" + p.Org.ID
	}
	refused, wait := a.limits.Allow(a.clock(), keyID, p.Org.ID)
	if wait <= 0 {
		return true
	}
	if refused == limits.RateOfKey {
		a.metrics.Refused(metrics.RefusedRateKey)
	} else {
		a.metrics.Refused(metrics.RefusedRateOrg)
	}
	secs := limits.RetryAfter(wait)
	e := apiError(http.StatusTooManyRequests, "Rate limit of the %s exceeded; retry after %d s", refused, secs)
	e.RetryAfter = secs
	a.writeErr(ctx, e)
	return false
}
