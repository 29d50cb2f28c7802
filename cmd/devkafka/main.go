// Command devkafka runs a single-node, Kafka-protocol broker (franz-go's kfake) for trying the
// distributed mode on one machine without installing Kafka. It is for development only: it is
// not Kafka, it has no replication, and its durability is that of its data directory.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/veritrail/veritrail/internal/devkafka"
)

func main() {
	port := flag.Int("port", 9092, "port to listen on (127.0.0.1)")
	dataDir := flag.String("data-dir", "./devkafka-data", "where the broker keeps its logs; empty keeps them in memory")
	partitions := flag.Int("partitions", 12, "partitions of automatically created topics")
	flag.Parse()

	b, err := devkafka.Start(devkafka.Config{Port: *port, DataDir: *dataDir, Partitions: *partitions})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	fmt.Printf("devkafka: Kafka protocol on %v (data in %q); Ctrl-C stops it\n", b.Addrs(), *dataDir)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
}
