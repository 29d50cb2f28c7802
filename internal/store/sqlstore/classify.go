package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/veritrail/veritrail/internal/store"
)

// Classify implements store.Store.
func (s *Store) Classify(err error) store.ErrorClass { return Classify(err) }

// Classify says whether err, an error of this package on either database, can go away when
// the work is tried again. An error about the database rather than the data (a lost
// connection, a lock, a full disk, even corruption) is transient: judging it permanent would
// set aside every message while it lasts. Errors about the data are permanent.
func Classify(err error) store.ErrorClass {
	switch {
	case err == nil:
		return store.ClassTransient // nothing to judge; never a reason to set anything aside
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrConflict):
		return store.ClassPermanent
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return store.ClassTransient
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return classifySQLState(pg.Code)
	}
	var lite interface{ Code() int } // modernc.org/sqlite's *Error
	if errors.As(err, &lite) {
		return classifySQLite(lite.Code())
	}
	if connectionLost(err) {
		return store.ClassTransient
	}
	return store.ClassUnknown
}

// classifySQLState classifies a PostgreSQL error code (Appendix A of its manual).
func classifySQLState(code string) store.ErrorClass {
	switch code {
	case "40002": // integrity constraint violation at commit (a deferred constraint)
		return store.ClassPermanent
	case "55P03", "55006", // lock not available, object in use
		"25P03", "25P04", // idle-in-transaction and transaction timeouts
		"XX001", "XX002": // data or index corrupted: the database's trouble, not the message's
		return store.ClassTransient
	}
	if len(code) != 5 {
		return store.ClassUnknown
	}
	switch code[:2] {
	case "08", // connection exception
		"28", // invalid authorization (at connect: the operator fixes it)
		"40", // transaction rollback: serialization failure, deadlock, statement completion unknown
		"53", // insufficient resources: disk full, out of memory, too many connections
		"57", // operator intervention: query canceled, admin or crash shutdown, cannot connect now
		"58": // system error: I/O
		return store.ClassTransient
	case "21", // cardinality violation
		"22", // data exception: an encoding the database refuses (a NUL), a value out of range
		"23", // integrity constraint violation
		"42", // syntax error or access rule violation
		"44", // WITH CHECK OPTION violation
		"54": // program limit exceeded: a value too large for an index
		return store.ClassPermanent
	}
	return store.ClassUnknown
}

// SQLite's primary result codes (the low byte of an extended code), from sqlite3.h.
const (
	sqliteBusy      = 5
	sqliteLocked    = 6
	sqliteNoMem     = 7
	sqliteReadOnly  = 8
	sqliteInterrupt = 9
	sqliteIOErr     = 10
	sqliteCorrupt   = 11
	sqliteFull      = 13
	sqliteCantOpen  = 14
	sqliteProtocol  = 15
	sqliteSchema    = 17
	sqliteTooBig    = 18
	sqliteConstrain = 19
	sqliteMismatch  = 20
	sqliteNotADB    = 26
)

func classifySQLite(code int) store.ErrorClass {
	switch code & 0xff {
	case sqliteBusy, sqliteLocked, sqliteNoMem, sqliteReadOnly, sqliteInterrupt, sqliteIOErr, sqliteCorrupt, sqliteFull,
		sqliteCantOpen, sqliteProtocol, sqliteSchema, sqliteNotADB:
		return store.ClassTransient
	case sqliteTooBig, sqliteConstrain, sqliteMismatch:
		return store.ClassPermanent
	}
	return store.ClassUnknown // SQLITE_ERROR above all: a failed statement, for any reason
}

// connectionLost recognises the errors of a connection that broke or never opened, which
// carry no SQLSTATE.
func connectionLost(err error) bool {
	var netErr net.Error
	var connectErr *pgconn.ConnectError
	switch {
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone), errors.Is(err, pgconn.ErrConnClosed),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.As(err, &netErr), errors.As(err, &connectErr), pgconn.SafeToRetry(err), pgconn.Timeout(err):
		return true
	}
	// database/sql's error for a closed pool is not exported.
	return strings.Contains(err.Error(), "sql: database is closed")
}
