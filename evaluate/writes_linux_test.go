package evaluate

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// reportWrites reports the bytes the process wrote and its write calls (pwrite of WAL frames and
// checkpoints, mostly) per op from now until the benchmark ends: what a change to the rows an
// attestation writes changes, measured without the noise of the clock (/proc/self/io).
func reportWrites(b *testing.B) {
	bytes0, calls0, ok := processWrites()
	if !ok {
		return
	}
	b.Cleanup(func() {
		if bytes1, calls1, ok := processWrites(); ok {
			b.ReportMetric(float64(bytes1-bytes0)/float64(b.N), "wbytes/op")
			b.ReportMetric(float64(calls1-calls0)/float64(b.N), "wcalls/op")
		}
	})
}

func processWrites() (bytes, calls int64, ok bool) {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	seen := 0
	for s.Scan() {
		k, v, _ := strings.Cut(s.Text(), ": ")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "wchar":
			bytes, seen = n, seen+1
		case "syscw":
			calls, seen = n, seen+1
		}
	}
	return bytes, calls, seen == 2
}
