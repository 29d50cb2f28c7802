package sqlitebus

import (
	"context"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
)

func benchBus(b *testing.B, sync Synchronous) *Bus {
	b.Helper()
	db, err := OpenWith(tempDBPath(b), Config{Synchronous: sync})
	if err != nil {
		b.Fatal(err)
	}
	bus, err := New(db, Config{CompactInterval: -1}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = bus.Close()
		_ = db.Close()
	})
	return bus
}

// BenchmarkPublish measures one Publish of one message (one transaction),
// i.e. the latency an ingest request pays for durability.
func BenchmarkPublish(b *testing.B) {
	for _, sync := range []Synchronous{SynchronousNormal, SynchronousFull} {
		b.Run("synchronous="+string(sync), func(b *testing.B) {
			pub := mustPublisher(b, benchBus(b, sync))
			payload := make([]byte, 512)
			b.ReportAllocs()
			for b.Loop() {
				if err := pub.Publish("evidence", message.NewMessage(watermill.NewUUID(), payload)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPublishConcurrent is BenchmarkPublish from 16 goroutines per
// core, as ingest publishes under load (envelopes of about 1.5 KB):
// concurrent calls share commits.
func BenchmarkPublishConcurrent(b *testing.B) {
	for _, sync := range []Synchronous{SynchronousNormal, SynchronousFull} {
		b.Run("synchronous="+string(sync), func(b *testing.B) {
			pub := mustPublisher(b, benchBus(b, sync))
			payload := make([]byte, 1500)
			b.ReportAllocs()
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := pub.Publish("evidence", message.NewMessage(watermill.NewUUID(), payload)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkPublishSubscribe measures the round trip in one process: Publish
// one message, receive it and Ack it, the next Publish only after the ack
// was taken. ns/op is the publish-to-processed latency (plus storing the
// ack for a consumer group).
func BenchmarkPublishSubscribe(b *testing.B) {
	for _, group := range []string{"evaluate", ""} {
		name := "group"
		if group == "" {
			name = "independent"
		}
		b.Run(name, func(b *testing.B) {
			bus := benchBus(b, SynchronousNormal)
			pub := mustPublisher(b, bus)
			msgs, err := mustSubscriber(b, bus, group).Subscribe(context.Background(), "evidence")
			if err != nil {
				b.Fatal(err)
			}
			payload := make([]byte, 512)
			b.ReportAllocs()
			for b.Loop() {
				if err := pub.Publish("evidence", message.NewMessage(watermill.NewUUID(), payload)); err != nil {
					b.Fatal(err)
				}
				select {
				case m := <-msgs:
					m.Ack()
				case <-time.After(10 * time.Second):
					b.Fatal("no delivery")
				}
			}
		})
	}
}
