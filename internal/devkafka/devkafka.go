// Package devkafka starts the development broker: a single-node, Kafka-protocol broker
// (franz-go's kfake) on 127.0.0.1. deploy/devkafka runs it as a command for trying the
// distributed mode on one machine; the fault harness (internal/faults) runs it as a process it
// can kill -9 and start again on the same port and data directory. It is not Kafka: no
// replication, and its durability is that of its data directory.
package devkafka

import (
	"fmt"
	"os"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Config is where and how the broker runs.
type Config struct {
	// Port on 127.0.0.1; 0 picks a free one (see Broker.Addrs).
	Port int
	// DataDir keeps the topics, their messages and the consumer groups' offsets across
	// restarts, every produced batch fsynced; empty keeps everything in memory.
	DataDir string
	// Partitions of automatically created topics; 0 means 12.
	Partitions int
}

// Broker is a running broker.
type Broker struct{ c *kfake.Cluster }

// Start starts a broker; with a DataDir it resumes from what the directory holds.
func Start(cfg Config) (*Broker, error) {
	if cfg.Partitions <= 0 {
		cfg.Partitions = 12
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1), kfake.Ports(cfg.Port), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(cfg.Partitions),
	}
	if cfg.DataDir != "" {
		if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
			return nil, fmt.Errorf("devkafka: data dir: %w", err)
		}
		opts = append(opts, kfake.DataDir(cfg.DataDir), kfake.SyncWrites())
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("devkafka: start: %w", err)
	}
	return &Broker{c: c}, nil
}

// Addrs are the addresses the broker listens on, as host:port.
func (b *Broker) Addrs() []string { return b.c.ListenAddrs() }

// Close stops the broker, writing what it holds to its data directory.
func (b *Broker) Close() { b.c.Close() }
