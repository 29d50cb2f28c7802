package sdk

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/veritrail/veritrail/plugins/sdk/safehttp"
)

func TestHTTPClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	h := NewHTTPClient()
	if _, err := h.Client().Get(srv.URL); !errors.As(err, new(*safehttp.BlockedError)) {
		t.Fatalf("loopback with the defaults: %v, want a BlockedError", err)
	}
	if err := h.Configure(Settings{"allow_private": "true", "timeout": "2s"}); err != nil {
		t.Fatal(err)
	}
	resp, err := h.Client().Get(srv.URL)
	if err != nil {
		t.Fatalf("loopback with allow_private: %v", err)
	}
	resp.Body.Close()
	if h.Client().Timeout.String() != "2s" {
		t.Errorf("timeout %v, want 2s", h.Client().Timeout)
	}
	for _, bad := range []Settings{{"colour": "red"}, {"allow_private": "perhaps"}, {"timeout": "soon"}} {
		if err := h.Configure(bad); err == nil {
			t.Errorf("Configure(%v) accepted", bad)
		}
	}
}
