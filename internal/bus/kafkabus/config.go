package kafkabus

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/IBM/sarama"
)

// Defaults used for zero-valued Config fields.
const (
	DefaultClientID          = "veritrail"
	DefaultPartitions        = 12
	DefaultReplicationFactor = 1
	// DefaultSessionTimeout is Kafka brokers' default lowest (group.min.session.timeout.ms):
	// a killed evaluator's partitions move within about 7 s (the session and one heartbeat),
	// well inside the 15 s a read waits for them. Sarama's own 10 s, plus up to 3 s until the
	// others hear of the rebalance, left a busy machine too little of those 15 s.
	DefaultSessionTimeout = 6 * time.Second
	minSessionTimeout     = time.Second
)

// Config holds the Kafka settings shared by publishers, subscribers and
// EnsureTopics. Zero ClientID, Partitions, ReplicationFactor and SessionTimeout
// mean the package defaults.
type Config struct {
	// Brokers are the bootstrap brokers, as host:port.
	Brokers []string
	// ConsumerGroup is the group subscribers join; required by NewSubscriber.
	// All evaluate processes share one group so that each message is handled
	// by one of them, and a restarted process resumes from the group's offsets.
	ConsumerGroup string
	// ClientID identifies this process in broker logs and quotas.
	ClientID string
	// InstanceID, when set, makes this process a static member of its consumer group
	// (KIP-345): restarted with the same ID (a container restarted in its pod), it takes its
	// partitions back at once, where a new member waits for the killed one's session to end
	// and for the rebalance that follows, and every read waiting on those partitions with it.
	// Each process of a group needs its own; a second process with the same one fences the
	// first. A static member does not leave the group when it stops, so a process stopped for
	// good frees its partitions only after the session timeout. Empty: dynamic membership.
	InstanceID string
	// SessionTimeout is how long the group waits for a silent member before it hands that
	// member's partitions to the others (DefaultSessionTimeout when 0). Reads that wait for
	// an evaluator killed with -9 wait this long, and a static member stopped for good frees its
	// partitions only after it: keep it well under the consistency wait. Members heartbeat six
	// times within it.
	SessionTimeout time.Duration
	// Partitions is the partition count of the topics EnsureTopics creates. It
	// bounds how many consumers of a group can work in parallel.
	Partitions int32
	// ReplicationFactor of the topics EnsureTopics creates.
	ReplicationFactor int16
	// MaxInFlight is how many messages of one partition a subscriber hands out before the first
	// of them is acked. 0 or 1 is one at a time (watermill-kafka's subscriber); a consumer that
	// applies many messages per store transaction sets more, or it gets one message per
	// partition per transaction.
	MaxInFlight int

	// tuneSarama, set only by tests (export_test.go), adjusts every Sarama
	// config built from this Config, e.g. to shorten group timeouts.
	tuneSarama func(*sarama.Config)
}

// withDefaults returns c with zero fields replaced by the package defaults.
func (c Config) withDefaults() Config {
	if c.ClientID == "" {
		c.ClientID = DefaultClientID
	}
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = DefaultReplicationFactor
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	return c
}

// Validate reports every problem of c at once. It does not require
// ConsumerGroup, which only subscribers need (NewSubscriber checks it).
func (c Config) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("kafkabus: no brokers configured"))
	}
	for _, b := range c.Brokers {
		if _, port, err := net.SplitHostPort(b); err != nil || port == "" {
			errs = append(errs, fmt.Errorf("kafkabus: broker %q is not host:port", b))
		}
	}
	if c.Partitions < 0 {
		errs = append(errs, fmt.Errorf("kafkabus: partitions must not be negative (0 means %d), got %d", DefaultPartitions, c.Partitions))
	}
	if c.MaxInFlight < 0 {
		errs = append(errs, fmt.Errorf("kafkabus: max in flight must not be negative, got %d", c.MaxInFlight))
	}
	if c.ReplicationFactor < 0 {
		errs = append(errs, fmt.Errorf("kafkabus: replication factor must not be negative (0 means %d), got %d", DefaultReplicationFactor, c.ReplicationFactor))
	}
	if c.SessionTimeout != 0 && c.SessionTimeout < minSessionTimeout {
		errs = append(errs, fmt.Errorf("kafkabus: session timeout must be at least %v (0 means %v), got %v", minSessionTimeout, DefaultSessionTimeout, c.SessionTimeout))
	}
	return errors.Join(errs...)
}
