package rego

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
)

func TestQueryCacheCapabilities(t *testing.T) {
	for _, call := range []string{
		`http.send({"method": "get", "url": "http://example.com"})`,
		`net.lookup_ip_addr("example.com")`,
		`opa.runtime()`,
		`time.now_ns()`,
		`rand.intn("x", 10)`,
		`uuid.rfc4122("x")`,
	} {
		t.Run(call, func(t *testing.T) {
			c := NewQueryCache(4)
			_, err := c.Prepared(context.Background(), "k", func() (QuerySpec, error) {
				return QuerySpec{Query: "data.x.y", Modules: map[string]string{"x.rego": "package x\n\ny := " + call + "\n"}}, nil
			})
			if err == nil || !strings.Contains(err.Error(), "undefined function") {
				t.Errorf("err = %v, want undefined function", err)
			}
			if c.Stats().Len != 0 {
				t.Error("failed preparation stayed in the cache")
			}
		})
	}
	// Pure builtins stay.
	c := NewQueryCache(4)
	pq, err := c.Prepared(context.Background(), "ok", func() (QuerySpec, error) {
		return QuerySpec{Query: "data.x.y", Modules: map[string]string{"x.rego": `package x

y := net.cidr_contains("10.0.0.0/8", "10.1.2.3")
`}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	v, err := Eval(context.Background(), pq, ast.NewObject())
	if err != nil || v.Compare(ast.Boolean(true)) != 0 {
		t.Errorf("Eval = %v, %v", v, err)
	}
}

func TestQueryCacheUndefined(t *testing.T) {
	c := NewQueryCache(4)
	pq, err := c.Prepared(context.Background(), "k", func() (QuerySpec, error) {
		return QuerySpec{Query: "data.x.y", Modules: map[string]string{"x.rego": "package x\n\ny if input.go == true\n"}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Eval(context.Background(), pq, ast.NewObject()); !errors.Is(err, ErrUndefined) {
		t.Errorf("err = %v, want ErrUndefined", err)
	}
}

// Concurrent callers of one key share one preparation; a failed preparation is not kept.
func TestQueryCachePreparesOnce(t *testing.T) {
	c := NewQueryCache(4)
	var builds atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			_, err := c.Prepared(context.Background(), "k", func() (QuerySpec, error) {
				builds.Add(1)
				return QuerySpec{Query: "data.x.y", Modules: map[string]string{"x.rego": "package x\n\ny := 1\n"}}, nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if s := c.Stats(); builds.Load() != 1 || s.Misses != 1 || s.Hits != 15 || s.Len != 1 {
		t.Errorf("stats = %+v, want one preparation shared by 16 callers", s)
	}
	_, err := c.Prepared(context.Background(), "bad", func() (QuerySpec, error) {
		return QuerySpec{}, errors.New("boom")
	})
	if err == nil || err.Error() != "boom" {
		t.Errorf("err = %v, want the build error", err)
	}
	if s := c.Stats(); s.Len != 1 {
		t.Errorf("a failed build stayed in the cache: %+v", s)
	}
}

const policyUnderTest = `package demo

allow if input.user == "alice"
`

func TestRunTests(t *testing.T) {
	sources := map[string]string{
		"demo.rego": policyUnderTest,
		"demo_test.rego": `package demo_test

import data.demo

test_alice_allowed if demo.allow with input as {"user": "alice"}

test_bob_allowed if demo.allow with input as {"user": "bob"}

test_printing if {
	print("hello from the test")
	not demo.allow with input as {}
}

todo_test_later if false
`,
	}
	res, err := RunTests(context.Background(), sources, "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]TestResult{}
	for _, r := range res {
		got[r.Name] = r
	}
	if len(res) != 4 {
		t.Fatalf("got %d results, want 4: %+v", len(res), res)
	}
	if r := got["test_alice_allowed"]; !r.Pass || r.File != "demo_test.rego" || r.Row != 5 {
		t.Errorf("alice: %+v", r)
	}
	if r := got["test_bob_allowed"]; r.Pass || r.Error != "" {
		t.Errorf("bob should fail without an error: %+v", r)
	}
	if r := got["test_printing"]; !r.Pass || !strings.Contains(r.Output, "hello from the test") {
		t.Errorf("printing: %+v", r)
	}
	if r := got["todo_test_later"]; !r.Skipped {
		t.Errorf("todo: %+v", r)
	}
	if res[0].Row > res[1].Row {
		t.Errorf("results not in line order: %+v", res)
	}

	filtered, err := RunTests(context.Background(), sources, "alice", time.Minute)
	if err != nil || len(filtered) != 1 || filtered[0].Name != "test_alice_allowed" {
		t.Errorf("filtered = %+v, %v", filtered, err)
	}
}

// Tests are held to the same capabilities as policies, and to their time limit.
func TestRunTestsRestricted(t *testing.T) {
	_, err := RunTests(context.Background(), map[string]string{
		"net_test.rego": "package n\n\ntest_fetch if http.send({\"method\": \"get\", \"url\": \"http://example.com\"})\n",
	}, "", time.Minute)
	if err == nil || !strings.Contains(err.Error(), "undefined function http.send") ||
		!strings.Contains(err.Error(), "net_test.rego:3") {
		t.Errorf("err = %v, want undefined function http.send at net_test.rego:3", err)
	}

	res, err := RunTests(context.Background(), map[string]string{
		"slow_test.rego": "package s\n\ntest_forever if count([x | some x in numbers.range(1, 100000000000)]) > 0\n",
	}, "", 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Pass || res[0].Error == "" {
		t.Errorf("res = %+v, want one test stopped by its time limit", res)
	}
}
