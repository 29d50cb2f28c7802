package sqlitebus

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
)

// durabilityChildEnv makes the test binary act as the publishing process of
// TestPublishSurvivesSIGKILL; its value is the database path.
// durabilityJournalEnv, set to 1, makes that process publish through the
// journal.
const (
	durabilityChildEnv   = "SQLITEBUS_DURABILITY_CHILD_DB"
	durabilityJournalEnv = "SQLITEBUS_DURABILITY_CHILD_JOURNAL"
)

// TestPublishSurvivesSIGKILL checks the durability point of Publish: a child
// process publishes with the default settings (WAL, synchronous=NORMAL) and
// prints every UUID after Publish returned; it is killed with SIGKILL
// mid-stream, and every printed UUID must then be delivered from the
// reopened database. It runs with publishes going to the table and through
// the publish journal, which the reopened Bus then moves into the table.
func TestPublishSurvivesSIGKILL(t *testing.T) {
	if path := os.Getenv(durabilityChildEnv); path != "" {
		runDurabilityChild(path, os.Getenv(durabilityJournalEnv) == "1")
		return
	}
	if runtime.GOOS == "windows" {
		t.Skip("needs SIGKILL")
	}
	for name, journal := range map[string]bool{"table": false, "journal": true} {
		t.Run(name, func(t *testing.T) { testPublishSurvivesSIGKILL(t, journal) })
	}
}

func testPublishSurvivesSIGKILL(t *testing.T, journal bool) {
	path := tempDBPath(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestPublishSurvivesSIGKILL$", "-test.count=1")
	cmd.Env = append(os.Environ(), durabilityChildEnv+"="+path)
	if journal {
		cmd.Env = append(cmd.Env, durabilityJournalEnv+"=1")
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})

	// Kill after a few hundred publishes, then keep reading what the child
	// printed before it died: those Publish calls returned too.
	const killAfter = 500
	var printed []string
	scanner := bufio.NewScanner(stdout)
	for scanner.Scan() {
		id, ok := strings.CutPrefix(scanner.Text(), "published ")
		if !ok {
			continue
		}
		printed = append(printed, id)
		if len(printed) == killAfter {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
	}
	err = cmd.Wait()
	killed = true
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die by SIGKILL (wait: %v, printed %d)\n%s", err, len(printed), stderr.String())
	}
	if len(printed) < killAfter {
		t.Fatalf("child printed only %d UUIDs\n%s", len(printed), stderr.String())
	}

	// A fresh process: new *sql.DB, new Bus, a group that never consumed.
	b := newTestBusWith(t, path, Config{NackResendSleep: time.Millisecond, CompactInterval: -1, PublishJournal: journal})
	if journal {
		b.jr.pmu.Lock()
		t.Logf("%d bytes of the journal were not in the table at the kill", b.jr.pendingBytes)
		b.jr.pmu.Unlock()
		waitMoved(t, b)
	}
	ch := mustSubscribe(t, mustSubscriber(t, b, "after-crash"), "evidence")
	var stored int
	if err := b.db.QueryRow(`SELECT COUNT(*) FROM sqlitebus_messages WHERE topic = 'evidence'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	delivered := make(map[string]bool, stored)
	for range stored {
		m := receive(t, ch, 10*time.Second)
		delivered[m.UUID] = true
		m.Ack()
	}
	missing := 0
	for _, id := range printed {
		if !delivered[id] {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d printed UUIDs lost (%d messages stored)", missing, len(printed), stored)
	}
	t.Logf("child printed %d UUIDs before SIGKILL, %d stored; all printed ones delivered", len(printed), stored)
}

// runDurabilityChild publishes from several goroutines, with batches of one
// to three messages, until it is killed; a subscriber consumes meanwhile so
// that the WAL also sees offset writes and checkpoints. It exits by itself
// after a minute in case the parent is gone.
func runDurabilityChild(path string, journal bool) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	db, err := Open(path)
	if err != nil {
		fail(err)
	}
	b, err := New(db, Config{CompactInterval: -1, PublishJournal: journal}, nil)
	if err != nil {
		fail(err)
	}
	pub, err := b.Publisher()
	if err != nil {
		fail(err)
	}
	sub, err := b.Subscriber("child")
	if err != nil {
		fail(err)
	}
	msgs, err := sub.Subscribe(context.Background(), "evidence")
	if err != nil {
		fail(err)
	}
	go func() {
		for m := range msgs {
			m.Ack()
		}
	}()

	var stdoutMu sync.Mutex
	for w := range 4 {
		go func() {
			for i := 0; ; i++ {
				batch := make([]*message.Message, 1+(i+w)%3)
				for j := range batch {
					batch[j] = message.NewMessage(watermill.NewUUID(), []byte(fmt.Sprintf("evidence %d/%d/%d", w, i, j)))
				}
				if err := pub.Publish("evidence", batch...); err != nil {
					fail(err)
				}
				stdoutMu.Lock()
				for _, m := range batch {
					// Unbuffered write(2) to the pipe: once printed, the
					// parent will read it even after the kill.
					fmt.Fprintln(os.Stdout, "published "+m.UUID)
				}
				stdoutMu.Unlock()
			}
		}()
	}
	time.Sleep(time.Minute)
	os.Exit(3)
}
