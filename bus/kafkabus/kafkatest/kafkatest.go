// Package kafkatest runs an in-process Kafka cluster (kfake) for tests of
// code that uses kafkabus, so they need no Kafka server.
package kafkatest

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// NewCluster starts a single-broker in-process Kafka cluster, closed when
// the test ends, and returns its broker addresses for kafkabus.Config.Brokers.
//
// Like a production cluster with auto.create.topics.enable=false, it creates
// no topic on its own, so tests also cover kafkabus creating its topics.
// partitions is the count the cluster uses for topics created without one;
// kafkabus always passes Config.Partitions, so tests that care about the
// count should set that to the same value. A non-positive partitions keeps
// kfake's default.
func NewCluster(t testing.TB, partitions int) []string {
	t.Helper()
	opts := []kfake.Opt{kfake.NumBrokers(1)}
	if partitions > 0 {
		opts = append(opts, kfake.DefaultNumPartitions(partitions))
	}
	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("kafkatest: starting kfake cluster: %v", err)
	}
	t.Cleanup(cluster.Close)
	return cluster.ListenAddrs()
}
