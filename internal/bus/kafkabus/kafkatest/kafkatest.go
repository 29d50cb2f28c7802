// Package kafkatest runs an in-process Kafka cluster (kfake) for tests of
// code that uses kafkabus, so they need no Kafka server.
package kafkatest

import (
	"net"
	"strconv"
	"sync"
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

// Restartable is an in-process single-broker cluster that a test can stop and start again on
// the same address with the topics and messages it had: a broker outage and its end.
type Restartable struct {
	t     testing.TB
	opts  []kfake.Opt
	addrs []string

	mu      sync.Mutex
	cluster *kfake.Cluster // nil while stopped
}

// NewRestartable starts a Restartable cluster, closed when the test ends; partitions is as for
// NewCluster. Its state is kept in a temporary directory across restarts.
func NewRestartable(t testing.TB, partitions int) *Restartable {
	t.Helper()
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.DataDir(t.TempDir())}
	if partitions > 0 {
		opts = append(opts, kfake.DefaultNumPartitions(partitions))
	}
	r := &Restartable{t: t, opts: opts}
	r.start(opts)
	addrs := r.cluster.ListenAddrs()
	ports := make([]int, len(addrs))
	for i, a := range addrs {
		_, p, err := net.SplitHostPort(a)
		if err == nil {
			ports[i], err = strconv.Atoi(p)
		}
		if err != nil {
			t.Fatalf("kafkatest: broker address %q: %v", a, err)
		}
	}
	r.addrs = addrs
	r.opts = append(opts, kfake.Ports(ports...)) // a restart listens where the clients know it
	t.Cleanup(r.Stop)
	return r
}

// Addrs are the broker addresses, the same across restarts.
func (r *Restartable) Addrs() []string { return r.addrs }

// Stop closes the broker and every connection to it; its state is saved. Stopping a stopped
// cluster does nothing.
func (r *Restartable) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cluster != nil {
		r.cluster.Close()
		r.cluster = nil
	}
}

// Start starts a stopped cluster again, on the same addresses, with the state it had.
func (r *Restartable) Start() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cluster == nil {
		r.start(r.opts)
	}
}

func (r *Restartable) start(opts []kfake.Opt) {
	r.t.Helper()
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		r.t.Fatalf("kafkatest: starting kfake cluster: %v", err)
	}
	r.cluster = c
}
