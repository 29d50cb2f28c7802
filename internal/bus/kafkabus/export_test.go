package kafkabus

import "github.com/IBM/sarama"

// WithSaramaTuning returns cfg with tune applied to every Sarama config
// built from it.
func WithSaramaTuning(cfg Config, tune func(*sarama.Config)) Config {
	cfg.tuneSarama = tune
	return cfg
}
