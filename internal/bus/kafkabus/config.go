package kafkabus

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/IBM/sarama"
)

// Defaults used for zero-valued Config fields.
const (
	DefaultClientID          = "veritrail"
	DefaultPartitions        = 12
	DefaultReplicationFactor = 1
)

// Config holds the Kafka settings shared by publishers, subscribers and
// EnsureTopics. Zero ClientID, Partitions and ReplicationFactor mean the
// package defaults.
type Config struct {
	// Brokers are the bootstrap brokers, as host:port.
	Brokers []string
	// ConsumerGroup is the group subscribers join; required by NewSubscriber.
	// All evaluate processes share one group so that each message is handled
	// by one of them, and a restarted process resumes from the group's offsets.
	ConsumerGroup string
	// ClientID identifies this process in broker logs and quotas.
	ClientID string
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

	// envErr keeps invalid environment values found by RegisterFlags, which
	// cannot return an error itself, until Validate reports them.
	envErr error
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
	return c
}

// Validate reports every problem of c at once. It does not require
// ConsumerGroup, which only subscribers need (NewSubscriber checks it).
func (c Config) Validate() error {
	errs := []error{c.envErr}
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
	return errors.Join(errs...)
}

// RegisterFlags registers the Kafka flags on fs, each name prefixed with
// prefix: with an empty prefix they are --kafka-brokers (comma-separated),
// --kafka-consumer-group, --kafka-client-id, --kafka-partitions and
// --kafka-replication-factor.
//
// A flag's default is c's current value (zero fields replaced by the package
// defaults), overridden by its environment variable: VERITRAIL_ followed by
// the flag name in upper case with dashes as underscores, e.g.
// VERITRAIL_KAFKA_BROKERS. Command-line flags win over the environment. An
// invalid environment value is reported by Validate.
func (c *Config) RegisterFlags(fs *flag.FlagSet, prefix string) {
	*c = c.withDefaults()
	c.envErr = nil
	register := func(v flag.Value, name, usage string) {
		name = prefix + name
		env := EnvVar(name)
		if s, ok := os.LookupEnv(env); ok {
			if err := v.Set(s); err != nil {
				c.envErr = errors.Join(c.envErr, fmt.Errorf("kafkabus: %s=%q: %w", env, s, err))
			}
		}
		fs.Var(v, name, fmt.Sprintf("%s (env %s)", usage, env))
	}
	// Back-quoted words name the flags' arguments in the usage text.
	register((*listValue)(&c.Brokers), "kafka-brokers", "comma-separated Kafka bootstrap `brokers`, as host:port")
	register((*stringValue)(&c.ConsumerGroup), "kafka-consumer-group", "Kafka consumer `group` shared by the subscribers")
	register((*stringValue)(&c.ClientID), "kafka-client-id", "Kafka client `ID`")
	register(&intValue[int32]{p: &c.Partitions, bits: 32}, "kafka-partitions", "`count` of partitions of the Kafka topics created on first use")
	register(&intValue[int16]{p: &c.ReplicationFactor, bits: 16}, "kafka-replication-factor", "replication `factor` of the Kafka topics created on first use")
}

// EnvVar returns the environment variable that RegisterFlags reads for the
// flag named flagName (without leading dashes).
func EnvVar(flagName string) string {
	return "VERITRAIL_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

type stringValue string

func (v *stringValue) String() string {
	if v == nil {
		return ""
	}
	return string(*v)
}

func (v *stringValue) Set(s string) error {
	*v = stringValue(s)
	return nil
}

// listValue is a comma-separated list; setting it replaces the whole list
// rather than appending, so a flag overrides its environment default.
type listValue []string

func (v *listValue) String() string {
	if v == nil {
		return ""
	}
	return strings.Join(*v, ",")
}

func (v *listValue) Set(s string) error {
	var items []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	*v = items
	return nil
}

type intValue[T int16 | int32] struct {
	p    *T
	bits int
}

func (v *intValue[T]) String() string {
	if v == nil || v.p == nil {
		return "0"
	}
	return strconv.FormatInt(int64(*v.p), 10)
}

func (v *intValue[T]) Set(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, v.bits)
	if err != nil {
		return err
	}
	if n <= 0 {
		return fmt.Errorf("must be positive, got %d", n)
	}
	*v.p = T(n)
	return nil
}
