package kafkabus_test

import (
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/veritrail/veritrail/internal/bus/kafkabus"
)

func TestRegisterFlagsDefaultsEnvironmentAndFlags(t *testing.T) {
	t.Setenv("VERITRAIL_KAFKA_BROKERS", "kafka-1:9092, kafka-2:9092")
	t.Setenv("VERITRAIL_KAFKA_PARTITIONS", "6")
	t.Setenv("VERITRAIL_KAFKA_CLIENT_ID", "from-env")

	cfg := kafkabus.Config{ConsumerGroup: "veritrail-evaluate"}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cfg.RegisterFlags(fs, "")
	if err := fs.Parse([]string{"--kafka-partitions=8", "--kafka-client-id", "from-flag"}); err != nil {
		t.Fatal(err)
	}

	if want := []string{"kafka-1:9092", "kafka-2:9092"}; !reflect.DeepEqual(cfg.Brokers, want) {
		t.Errorf("Brokers = %q, want %q (environment)", cfg.Brokers, want)
	}
	if cfg.ConsumerGroup != "veritrail-evaluate" {
		t.Errorf("ConsumerGroup = %q, want the value set before RegisterFlags", cfg.ConsumerGroup)
	}
	if cfg.Partitions != 8 || cfg.ClientID != "from-flag" {
		t.Errorf("Partitions, ClientID = %d, %q; want the flags' 8, from-flag", cfg.Partitions, cfg.ClientID)
	}
	if cfg.ReplicationFactor != kafkabus.DefaultReplicationFactor {
		t.Errorf("ReplicationFactor = %d, want the default %d", cfg.ReplicationFactor, kafkabus.DefaultReplicationFactor)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	if f := fs.Lookup("kafka-partitions"); f == nil || f.DefValue != "6" || !strings.Contains(f.Usage, "VERITRAIL_KAFKA_PARTITIONS") {
		t.Errorf("kafka-partitions flag: %+v, want default 6 from the environment, named in the usage", f)
	}
}

func TestRegisterFlagsPrefix(t *testing.T) {
	t.Setenv("VERITRAIL_EVALUATE_KAFKA_CONSUMER_GROUP", "evaluators")
	var cfg kafkabus.Config
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cfg.RegisterFlags(fs, "evaluate-")
	if err := fs.Parse([]string{"--evaluate-kafka-brokers=localhost:9092"}); err != nil {
		t.Fatal(err)
	}
	if cfg.ConsumerGroup != "evaluators" || len(cfg.Brokers) != 1 {
		t.Errorf("got %+v", cfg)
	}
	if got := kafkabus.EnvVar("evaluate-kafka-brokers"); got != "VERITRAIL_EVALUATE_KAFKA_BROKERS" {
		t.Errorf("EnvVar = %s", got)
	}
}

func TestRegisterFlagsInvalidEnvironment(t *testing.T) {
	t.Setenv("VERITRAIL_KAFKA_PARTITIONS", "many")
	t.Setenv("VERITRAIL_KAFKA_REPLICATION_FACTOR", "0")
	cfg := kafkabus.Config{Brokers: []string{"localhost:9092"}}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cfg.RegisterFlags(fs, "")
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "VERITRAIL_KAFKA_PARTITIONS") || !strings.Contains(err.Error(), "VERITRAIL_KAFKA_REPLICATION_FACTOR") {
		t.Fatalf("Validate = %v, want both invalid variables reported", err)
	}
}

func TestRegisterFlagsRejectsNonPositiveCounts(t *testing.T) {
	var cfg kafkabus.Config
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.RegisterFlags(fs, "")
	if err := fs.Parse([]string{"--kafka-partitions=0"}); err == nil {
		t.Error("--kafka-partitions=0 accepted")
	}
}

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
