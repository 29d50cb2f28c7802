package kafkabus_test

import (
	"strings"
	"testing"
	"time"

	"github.com/veritrail/veritrail/internal/bus/kafkabus"
)

func TestValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  kafkabus.Config
		want string // substring of the error; empty for valid
	}{
		"minimal":          {kafkabus.Config{Brokers: []string{"localhost:9092"}}, ""},
		"no brokers":       {kafkabus.Config{}, "no brokers"},
		"broker no port":   {kafkabus.Config{Brokers: []string{"localhost"}}, `"localhost" is not host:port`},
		"negative counts":  {kafkabus.Config{Brokers: []string{"localhost:9092"}, Partitions: -1}, "partitions"},
		"negative replica": {kafkabus.Config{Brokers: []string{"localhost:9092"}, ReplicationFactor: -1}, "replication factor"},
		"short session":    {kafkabus.Config{Brokers: []string{"localhost:9092"}, SessionTimeout: 500 * time.Millisecond}, "session timeout"},
		"session":          {kafkabus.Config{Brokers: []string{"localhost:9092"}, SessionTimeout: 30 * time.Second}, ""},
	} {
		err := tc.cfg.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: unexpected error %v", name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.want)
		}
	}
}

func TestNewSubscriberRequiresConsumerGroup(t *testing.T) {
	_, err := kafkabus.NewSubscriber(kafkabus.Config{Brokers: []string{"localhost:9092"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "consumer group") {
		t.Fatalf("NewSubscriber without a group: %v", err)
	}
}

// TestSubscriberSession: the consumer group session is the configured one (6 s by default, not
// Sarama's 10 s), with six heartbeats in it, so a killed member's partitions move well within
// a read's consistency wait.
func TestSubscriberSession(t *testing.T) {
	for _, tc := range []struct{ set, session, heartbeat time.Duration }{
		{0, 6 * time.Second, time.Second},
		{30 * time.Second, 30 * time.Second, 5 * time.Second},
	} {
		sc := kafkabus.SubscriberSaramaConfig(kafkabus.Config{Brokers: []string{"localhost:9092"}, ConsumerGroup: "g", SessionTimeout: tc.set})
		if got := sc.Consumer.Group.Session.Timeout; got != tc.session {
			t.Errorf("session timeout %v set: %v, want %v", tc.set, got, tc.session)
		}
		if got := sc.Consumer.Group.Heartbeat.Interval; got != tc.heartbeat {
			t.Errorf("session timeout %v set: heartbeat every %v, want %v", tc.set, got, tc.heartbeat)
		}
		if err := sc.Validate(); err != nil {
			t.Errorf("session timeout %v set: Sarama refuses the config: %v", tc.set, err)
		}
	}
}
