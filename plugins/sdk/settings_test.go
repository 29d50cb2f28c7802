package sdk_test

import (
	"strings"
	"testing"
	"time"

	"github.com/veritrail/veritrail/plugins/sdk"
)

func TestSettings(t *testing.T) {
	s := sdk.Settings{"allow_private": "true", "timeout": "3s", "port": "587", "name": "x"}
	if err := s.Only("allow_private", "timeout", "port", "name"); err != nil {
		t.Fatal(err)
	}
	if err := s.Only("timeout"); err == nil || !strings.Contains(err.Error(), "allow_private") {
		t.Fatalf("Only: %v, want an error naming allow_private", err)
	}
	if b, err := s.Bool("allow_private", false); err != nil || !b {
		t.Errorf("Bool = %v %v", b, err)
	}
	if d, err := s.Duration("timeout", time.Second); err != nil || d != 3*time.Second {
		t.Errorf("Duration = %v %v", d, err)
	}
	if n, err := s.Int("port", 25); err != nil || n != 587 {
		t.Errorf("Int = %v %v", n, err)
	}
	if d, err := s.Duration("absent", time.Second); err != nil || d != time.Second {
		t.Errorf("Duration default = %v %v", d, err)
	}
	bad := sdk.Settings{"allow_private": "perhaps", "timeout": "-1s", "port": "x"}
	if _, err := bad.Bool("allow_private", false); err == nil || !strings.Contains(err.Error(), "allow_private") {
		t.Errorf("Bool(perhaps) = %v", err)
	}
	if _, err := bad.Duration("timeout", 0); err == nil {
		t.Error("Duration(-1s) accepted")
	}
	if _, err := bad.Int("port", 0); err == nil {
		t.Error("Int(x) accepted")
	}
}
