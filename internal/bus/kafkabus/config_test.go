package kafkabus_test

import (
	"strings"
	"testing"

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
