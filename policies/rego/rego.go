// Package rego is the OPA plumbing every Rego-backed policy shares: capabilities pinned to one OPA release without
// network, runtime, clock or randomness; prepared queries cached per immutable version and shared across
// goroutines; evaluation with parsed input and an explicit error for an undefined result; and OPA's unit-test
// runner under the same capabilities.
package rego

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/open-policy-agent/opa/v1/ast"
	oparego "github.com/open-policy-agent/opa/v1/rego"
)

// CapabilitiesVersion is the OPA release whose builtins compiled policies may use. Pinning it keeps an OPA upgrade
// from changing what a stored policy means.
const CapabilitiesVersion = "v1.22.2"

// deniedBuiltins are taken out of the pinned capabilities on top of every builtin OPA marks nondeterministic:
// nothing may reach the network, read the OPA runtime, or depend on the clock or randomness.
var deniedBuiltins = []string{
	"http.send",
	"net.lookup_ip_addr",
	"opa.runtime",
	"time.now_ns",
	"rand.intn",
	"uuid.rfc4122",
	"io.jwt.decode_verify", // checks exp/nbf against the clock
}

// Capabilities returns the pinned capabilities (a shared value: do not modify it).
var Capabilities = sync.OnceValue(func() *ast.Capabilities {
	c, err := ast.LoadCapabilitiesVersion(CapabilitiesVersion)
	if err != nil {
		panic("policies/rego: OPA capabilities " + CapabilitiesVersion + ": " + err.Error())
	}
	c.Builtins = slices.DeleteFunc(c.Builtins, func(b *ast.Builtin) bool {
		return b.Nondeterministic || slices.Contains(deniedBuiltins, b.Name)
	})
	c.AllowNet = []string{} // empty, not nil: no host at all (schema fetches included)
	return c
})

// ErrUndefined is returned when a query has no result: a policy bug, never a verdict.
var ErrUndefined = errors.New("policy result is undefined")

// PreparedQuery is a query compiled once and evaluated many times, concurrently.
type PreparedQuery = oparego.PreparedEvalQuery

// QuerySpec is what a prepared query is built from.
type QuerySpec struct {
	Query   string            // e.g. data.veritrail.flowtemplate.result
	Modules map[string]string // file name -> Rego source
}

// CacheStats counts the work of a QueryCache.
type CacheStats struct {
	Hits      uint64 // a prepared query was reused (or was being prepared by another caller)
	Misses    uint64 // a query was prepared
	Evictions uint64 // the least recently used query was dropped to stay within the size
	Len       int    // prepared queries held now
}

// QueryCache prepares each query once per key and shares it across goroutines. Keys name immutable versions (a
// template ID, a policy version): the query of a key never changes, so entries are only ever evicted (LRU), not
// invalidated. Concurrent callers of one missing key wait for a single preparation. Safe for concurrent use.
type QueryCache struct {
	mu      sync.Mutex
	entries *simplelru.LRU[string, *preparedEntry]
	stats   CacheStats
}

type preparedEntry struct {
	ready chan struct{} // closed when query and err are set
	query PreparedQuery
	err   error
}

// NewQueryCache returns a cache holding at most size prepared queries (1024 when size <= 0).
func NewQueryCache(size int) *QueryCache {
	if size <= 0 {
		size = 1024
	}
	c := &QueryCache{}
	c.entries, _ = simplelru.NewLRU[string, *preparedEntry](size, func(string, *preparedEntry) {
		c.stats.Evictions++ // called with c.mu held
	})
	return c
}

// Prepared returns the prepared query of key, building it with build the first time.
func (c *QueryCache) Prepared(ctx context.Context, key string, build func() (QuerySpec, error)) (PreparedQuery, error) {
	c.mu.Lock()
	e, ok := c.entries.Get(key)
	if ok {
		c.stats.Hits++
		c.mu.Unlock()
		select {
		case <-e.ready:
			return e.query, e.err
		case <-ctx.Done():
			return PreparedQuery{}, ctx.Err()
		}
	}
	e = &preparedEntry{ready: make(chan struct{})}
	c.entries.Add(key, e)
	c.stats.Misses++
	c.mu.Unlock()

	spec, err := build()
	if err == nil {
		// Prepare without the caller's cancellation: the result is shared with every other caller of key.
		e.query, err = Prepare(context.WithoutCancel(ctx), spec)
	}
	e.err = err
	close(e.ready)
	if e.err != nil {
		c.mu.Lock()
		if cur, ok := c.entries.Peek(key); ok && cur == e {
			c.entries.Remove(key) // let a later call try again
		}
		c.mu.Unlock()
	}
	return e.query, e.err
}

// Stats returns the counters so far.
func (c *QueryCache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Len = c.entries.Len()
	return s
}

// Prepare compiles spec under the pinned capabilities, in Rego v1 with strict checks and builtin errors raised
// (a policy that misuses a builtin fails loudly instead of quietly deciding), print statements disabled.
// Callers that evaluate a spec more than once go through a QueryCache.
func Prepare(ctx context.Context, spec QuerySpec) (PreparedQuery, error) {
	opts := []func(*oparego.Rego){
		oparego.Query(spec.Query),
		oparego.Capabilities(Capabilities()),
		oparego.SetRegoVersion(ast.RegoV1),
		oparego.Strict(true),
		oparego.StrictBuiltinErrors(true),
		oparego.EnablePrintStatements(false),
		oparego.GenerateJSON(astResult),
	}
	for name, src := range spec.Modules {
		opts = append(opts, oparego.Module(name, src))
	}
	pq, err := oparego.New(opts...).PrepareForEval(ctx)
	if err != nil {
		return PreparedQuery{}, fmt.Errorf("prepare %s: %w", spec.Query, err)
	}
	return pq, nil
}

// astResult keeps results as AST values: callers read them directly instead of through map[string]any.
func astResult(t *ast.Term, _ *oparego.EvalContext) (any, error) { return t.Value, nil }

// Eval evaluates a prepared query with parsed input and returns the value of its single
// expression; ErrUndefined when there is none. The time limit is the context's.
func Eval(ctx context.Context, pq PreparedQuery, input ast.Value) (ast.Value, error) {
	rs, err := pq.Eval(ctx, oparego.EvalParsedInput(input))
	if err != nil {
		return nil, err
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return nil, ErrUndefined
	}
	v, ok := rs[0].Expressions[0].Value.(ast.Value)
	if !ok {
		return nil, fmt.Errorf("policy result is %T, not an AST value", rs[0].Expressions[0].Value)
	}
	return v, nil
}
