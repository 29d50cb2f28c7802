package memlog_test

import (
	"testing"

	"github.com/veritrail/veritrail/internal/deliverylog/logtest"
	"github.com/veritrail/veritrail/internal/deliverylog/memlog"
)

func TestConformance(t *testing.T) {
	logtest.Run(t, func(*testing.T) logtest.Log { return memlog.New() })
}
