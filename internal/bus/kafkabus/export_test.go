package kafkabus

import "github.com/IBM/sarama"

// WithSaramaTuning returns cfg with tune applied to every Sarama config
// built from it.
func WithSaramaTuning(cfg Config, tune func(*sarama.Config)) Config {
	cfg.tuneSarama = tune
	return cfg
}

// SubscriberSaramaConfig is the Sarama config a subscriber of cfg (defaults applied) runs with.
func SubscriberSaramaConfig(cfg Config) *sarama.Config {
	return subscriberSaramaConfig(cfg.withDefaults())
}
