package sqlitebus

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"sync"
	"syscall"

	"github.com/ThreeDotsLabs/watermill"
)

// The publish journal (Config.PublishJournal) is an append-only file beside
// the database, "<database>-publog", that Publish writes instead of the
// messages table. A group of Publish calls costs one write(2) there, against
// a SQLite transaction of about eight WAL frames (two write(2) calls each),
// shared-memory locks and B-tree work for the table and its index: on two
// cores that commit, serial and on the path of every 201, kept a quarter of
// the machine idle while handlers queued for it (docs/PERFORMANCE.md). A
// mover goroutine copies the journal into the table in transactions of up
// to moveBatch messages and records in the same transaction how far it has
// copied, so each message reaches the table exactly once, in journal order,
// across crashes.
//
// The guarantee is the table's: a Publish that returned nil survives a kill
// of the process (the write is in the page cache), and with
// SynchronousFull the journal is fsynced before Publish returns.
//
// File layout: a 16-byte header (magic, epoch) and then records, one per
// Publish call, so that a call's messages are moved all or none:
//
//	u32 body length | u32 CRC-32C of body | body
//	body: uvarint time (unix ns) | str topic | uvarint count | count × (str uuid | str metadata | str payload)
//	str: uvarint length | bytes
//
// A record cut short or damaged by a crash fails its length or checksum; it
// was never acknowledged, and the file is truncated there on open. Once the
// file has grown past rotateBytes, appends wait while the mover moves the
// rest of it, and it is truncated to a header with the next epoch. The
// table's sqlitebus_journal row holds (epoch, offset moved to); a file whose
// epoch is one past the row's was rotated after its last move and holds
// nothing of the old epoch.
const (
	journalMagic    = "VTBUSJ01"
	journalHeader   = 16
	recordHead      = 8
	journalSuffix   = "-publog"
	rotateBytes     = 16 << 20
	maxPendingBytes = 64 << 20
	moveBatch       = 1024
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errJournalLocked means another process holds the journal of the database.
var errJournalLocked = errors.New("journal is locked by another process")

type journal struct {
	path   string
	fsync  bool
	logger watermill.LoggerAdapter
	// rotateAt and maxPending are rotateBytes and maxPendingBytes (tests lower them).
	rotateAt   int64
	maxPending int

	// mu serialises appends, truncation and rotation of the file.
	mu     sync.Mutex
	f      *os.File
	epoch  uint64
	end    int64 // where the next record goes
	broken error // set when a failed append could not be undone
	closed bool

	// pmu guards what was appended and not yet moved; room is signalled
	// when the mover made some. Lock order: mu before pmu.
	pmu          sync.Mutex
	room         *sync.Cond
	closing      bool // closed, as seen under pmu
	pending      []journalChunk
	headDone     int // bytes of pending[0] already moved
	pendingBytes int
	wake         chan struct{}
	// hurry ends the mover's linger (Bus.Hurry): a reader waits for what it holds.
	hurry chan struct{}
}

// journalChunk is one append: whole records written at file offset start.
type journalChunk struct {
	epoch uint64
	start int64
	data  []byte
}

// journalPosition is how far the table holds the journal, as stored in the
// sqlitebus_journal row; ok is false when there is no row yet.
type journalPosition struct {
	epoch uint64
	moved int64
	ok    bool
}

// openJournal opens (creating if needed) and locks the journal at path, drops
// a torn tail and queues what the table does not hold yet (after pos) for the
// mover.
func openJournal(path string, pos journalPosition, fsync bool, logger watermill.LoggerAdapter) (*journal, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w", path, errJournalLocked)
		}
		return nil, fmt.Errorf("lock journal %s: %w", path, err)
	}
	j := &journal{path: path, fsync: fsync, logger: logger, rotateAt: rotateBytes, maxPending: maxPendingBytes,
		f: f, wake: make(chan struct{}, 1), hurry: make(chan struct{}, 1)}
	j.room = sync.NewCond(&j.pmu)
	if err := j.recover(pos); err != nil {
		_ = f.Close()
		return nil, err
	}
	return j, nil
}

// recover reads the file and sets epoch, end and the pending tail.
func (j *journal) recover(pos journalPosition) error {
	data, err := os.ReadFile(j.path)
	if err != nil {
		return fmt.Errorf("read journal: %w", err)
	}
	if len(data) < journalHeader {
		// New, or cut while being rotated (rotation truncates only a fully
		// moved file): start the epoch after the table's.
		return j.reset(pos.epoch + 1)
	}
	if string(data[:8]) != journalMagic {
		return fmt.Errorf("journal %s: not a sqlitebus journal (bad magic)", j.path)
	}
	j.epoch = binary.LittleEndian.Uint64(data[8:journalHeader])
	from := int64(journalHeader)
	switch {
	case !pos.ok:
		// The table has never moved anything: all of the file is unmoved.
	case j.epoch == pos.epoch:
		if pos.moved < journalHeader || pos.moved > int64(len(data)) {
			return fmt.Errorf("journal %s: the bus says %d bytes were moved, the file has %d", j.path, pos.moved, len(data))
		}
		from = pos.moved
	case j.epoch == pos.epoch+1:
		// Rotated after the last move: nothing of this epoch is moved.
	default:
		return fmt.Errorf("journal %s: epoch %d does not follow the bus's epoch %d (was the database restored without its journal?)",
			j.path, j.epoch, pos.epoch)
	}
	end := from
	for end < int64(len(data)) {
		_, n, ok := readRecord(data[end:])
		if !ok {
			break
		}
		end += int64(n)
	}
	if end < int64(len(data)) {
		// A torn last append: its callers got an error or no answer.
		j.logger.Info("sqlitebus: dropping the torn end of the publish journal",
			watermill.LogFields{"path": j.path, "offset": end, "bytes": int64(len(data)) - end})
		if err := j.f.Truncate(end); err != nil {
			return fmt.Errorf("truncate journal: %w", err)
		}
	}
	j.end = end
	if end > from {
		j.pending = []journalChunk{{epoch: j.epoch, start: from, data: data[from:end]}}
		j.pendingBytes = int(end - from)
	}
	return nil
}

// pendingMessages counts the unmoved messages by topic.
func (j *journal) pendingMessages() map[string]int {
	counts := map[string]int{}
	j.eachPending(func(rec journalRecord) { counts[rec.topic] += len(rec.msgs) })
	return counts
}

// eachPending calls fn for each unmoved record, in journal order.
func (j *journal) eachPending(fn func(journalRecord)) {
	j.pmu.Lock()
	defer j.pmu.Unlock()
	off := j.headDone
	for _, c := range j.pending {
		for off < len(c.data) {
			rec, n, ok := readRecord(c.data[off:])
			if !ok {
				break
			}
			fn(rec)
			off += n
		}
		off = 0
	}
}

// reset empties the file to a header of epoch. The caller holds mu or owns j.
func (j *journal) reset(epoch uint64) error {
	if err := j.f.Truncate(0); err != nil {
		return fmt.Errorf("truncate journal: %w", err)
	}
	var h [journalHeader]byte
	copy(h[:], journalMagic)
	binary.LittleEndian.PutUint64(h[8:], epoch)
	if _, err := j.f.WriteAt(h[:], 0); err != nil {
		return fmt.Errorf("write journal header: %w", err)
	}
	if j.fsync {
		if err := j.f.Sync(); err != nil {
			return fmt.Errorf("sync journal: %w", err)
		}
	}
	j.epoch, j.end = epoch, journalHeader
	return nil
}

// append writes the records of group in one write and answers each request:
// nil once its record is in the file, an error if it is not.
func (j *journal) append(group []*publishReq, now int64) {
	size := 0
	for _, r := range group {
		size += recordHead + 32
		for i, m := range r.msgs {
			size += len(m.UUID) + len(r.metadata[i]) + len(m.Payload) + 3*binary.MaxVarintLen32
		}
	}
	buf := make([]byte, 0, size)
	written := group[:0:0]
	for _, r := range group {
		var err error
		if buf, err = appendRecord(buf, r, now); err != nil {
			r.done <- err
			continue
		}
		written = append(written, r)
	}
	if len(written) == 0 {
		return
	}
	err := j.write(buf)
	for _, r := range written {
		r.done <- err
	}
}

func (j *journal) write(buf []byte) error {
	// The mover is far behind (the database is failing or slow): wait
	// rather than let the journal and memory grow without bound. Not under
	// mu, which the mover takes to rotate.
	j.pmu.Lock()
	for j.pendingBytes > j.maxPending && !j.closing {
		j.room.Wait()
	}
	j.pmu.Unlock()
	j.mu.Lock()
	defer j.mu.Unlock()
	switch {
	case j.closed:
		return ErrClosed
	case j.broken != nil:
		return fmt.Errorf("journal unusable since an earlier failure: %w", j.broken)
	}
	_, err := j.f.WriteAt(buf, j.end)
	if err == nil && j.fsync {
		err = j.f.Sync()
	}
	if err != nil {
		// A partial record would hide every later one from recovery.
		if terr := j.f.Truncate(j.end); terr != nil {
			j.broken = errors.Join(err, terr)
		}
		return fmt.Errorf("append to journal: %w", err)
	}
	j.pmu.Lock()
	j.pending = append(j.pending, journalChunk{epoch: j.epoch, start: j.end, data: buf})
	j.pendingBytes += len(buf)
	j.pmu.Unlock()
	j.end += int64(len(buf))
	select {
	case j.wake <- struct{}{}:
	default:
	}
	return nil
}

// usable reports why appends fail, if they do.
func (j *journal) usable() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	switch {
	case j.closed:
		return ErrClosed
	case j.broken != nil:
		return fmt.Errorf("journal unusable since an earlier failure: %w", j.broken)
	}
	return nil
}

// full reports whether the file has grown past rotateAt.
func (j *journal) full() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.end >= j.rotateAt && !j.closed && j.broken == nil
}

// rotate empties a file that has grown past rotateAt. Appends wait meanwhile
// while move (the mover's) copies what is left of it into the table, so that
// a steady load, which rarely leaves nothing unmoved, cannot grow the file
// without bound; the wait is a few moves once every rotateAt bytes. A move
// commits before it trims pending, so once pending is empty nothing of this
// epoch is only in the file.
func (j *journal) rotate(move func() (bool, error)) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.end < j.rotateAt || j.closed || j.broken != nil {
		return nil
	}
	for {
		j.pmu.Lock()
		idle := len(j.pending) == 0
		j.pmu.Unlock()
		if idle {
			break
		}
		if _, err := move(); err != nil {
			return err // the mover retries; the file rotates later
		}
	}
	if err := j.reset(j.epoch + 1); err != nil {
		// A half-rotated file reads as empty on open; appending to it now
		// would not be found again.
		j.broken = err
		return err
	}
	return nil
}

// close stops appends and wakes a writer waiting for room. The mover is
// stopped by the Bus; the file (and its lock) is released by release.
func (j *journal) close() {
	j.pmu.Lock()
	j.closing = true
	j.room.Broadcast()
	j.pmu.Unlock()
	j.mu.Lock()
	j.closed = true
	j.mu.Unlock()
}

func (j *journal) release() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.f.Close()
}

// appendRecord encodes r's messages as one record.
func appendRecord(dst []byte, r *publishReq, now int64) ([]byte, error) {
	start := len(dst)
	dst = append(dst, make([]byte, recordHead)...)
	dst = binary.AppendUvarint(dst, uint64(now))
	dst = appendString(dst, r.topic)
	dst = binary.AppendUvarint(dst, uint64(len(r.msgs)))
	for i, m := range r.msgs {
		dst = appendString(dst, m.UUID)
		dst = appendString(dst, r.metadata[i])
		dst = appendString(dst, []byte(m.Payload))
	}
	body := dst[start+recordHead:]
	if len(body) > math.MaxUint32 {
		return dst[:start], fmt.Errorf("%d bytes in one publish: too large for the journal", len(body))
	}
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(body)))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(body, castagnoli))
	return dst, nil
}

func appendString[S string | []byte](dst []byte, s S) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// journalRecord is a decoded record; its byte slices point into the chunk.
type journalRecord struct {
	created int64
	topic   string
	msgs    []journalMsg
}

type journalMsg struct {
	uuid     string
	metadata []byte
	payload  []byte
}

// readRecord decodes the record at the start of b. ok is false when b does
// not start with a whole record whose checksum matches.
func readRecord(b []byte) (rec journalRecord, n int, ok bool) {
	if len(b) < recordHead {
		return rec, 0, false
	}
	size := binary.LittleEndian.Uint32(b)
	if uint64(len(b)-recordHead) < uint64(size) {
		return rec, 0, false
	}
	body := b[recordHead : recordHead+int(size)]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return rec, 0, false
	}
	d := decoder{b: body}
	rec.created = int64(d.uvarint())
	rec.topic = string(d.bytes())
	count := d.uvarint()
	if d.bad || count > uint64(len(d.b)) { // each message takes at least three bytes
		return rec, 0, false
	}
	rec.msgs = make([]journalMsg, count)
	for i := range rec.msgs {
		rec.msgs[i] = journalMsg{uuid: string(d.bytes()), metadata: d.bytes(), payload: d.bytes()}
	}
	if d.bad || len(d.b) != 0 {
		return rec, 0, false
	}
	return rec, recordHead + int(size), true
}

// decoder reads uvarints and length-prefixed strings; bad sticks once set.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.bad || n > uint64(len(d.b)) {
		d.bad = true
		return nil
	}
	s := d.b[:n:n]
	d.b = d.b[n:]
	return s
}
