package procmem

import (
	"runtime"
	"testing"
)

func TestParse(t *testing.T) {
	u := parse("Name:\tx\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nThreads:\t4\n")
	if u.RSSMB != 100 || u.HWMMB != 200 {
		t.Fatalf("parse = %+v, want 100 and 200 MB", u)
	}
	if u := parse("Name:\tx\n"); u != (Usage{}) {
		t.Fatalf("parse without the fields = %+v", u)
	}
}

func TestReadOnLinux(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/self/status is Linux's")
	}
	ClearPeak()
	u := Read()
	if u.RSSMB <= 0 || u.HWMMB < u.RSSMB {
		t.Fatalf("read = %+v: want a resident set and a peak at least as large", u)
	}
}
