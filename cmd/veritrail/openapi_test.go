package main

import (
	"fmt"
	"net/http"
	"os"
	"sync"
	"testing"

	"github.com/veritrail/veritrail/internal/openapicheck"
)

// TestMain holds every answer this package's tests get from /api/v2 (the CLI's requests and the
// tests' own) to the server's OpenAPI description: both use http.DefaultTransport, which is
// wrapped here, and a complaint fails the run after the tests, as it cannot name its test.
func TestMain(m *testing.M) {
	var mu sync.Mutex
	var complaints []string
	http.DefaultTransport = &openapicheck.Transport{Base: http.DefaultTransport, Checker: &openapicheck.Checker{},
		Report: func(s string) {
			mu.Lock()
			defer mu.Unlock()
			complaints = append(complaints, s)
		}}
	code := m.Run()
	for _, c := range complaints {
		fmt.Fprintf(os.Stderr, "OpenAPI: %s\n", c)
	}
	if code == 0 && len(complaints) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d answers break the OpenAPI description\n", len(complaints))
		code = 1
	}
	os.Exit(code)
}
