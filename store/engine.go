package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Driver names the database engine behind a Store.
type Driver string

// The engines. Both hold the same tables, written by the same code; only
// the dialect (dialect) and the way a database is opened differ.
const (
	// DriverSQLite is one SQLite file in the data dir, the zero-setup
	// default.
	DriverSQLite Driver = "sqlite"
	// DriverPostgres is a PostgreSQL database named by Conf.DSN.
	DriverPostgres Driver = "postgres"
)

// Drivers lists the engines, for flags and configuration errors.
var Drivers = []Driver{DriverSQLite, DriverPostgres}

// ParseDriver reads a driver name; "" is DriverSQLite.
func ParseDriver(s string) (Driver, error) {
	switch Driver(s) {
	case "", DriverSQLite:
		return DriverSQLite, nil
	case DriverPostgres:
		return DriverPostgres, nil
	}
	return "", fmt.Errorf("store driver %q is not known; allowed: sqlite, postgres", s)
}

// ErrUnavailable says the database cannot be reached or is too busy to take
// the write now (PostgreSQL down or restarting, the connection lost,
// SQLite's lock held past the busy timeout). Nothing the failed call did
// is in force; for a commit whose connection broke the outcome may be
// unknown, and the caller treats it as not written (the command it would
// have allowed is not sent). The bridge answers UNAVAILABLE with a
// retry_after.
var ErrUnavailable = errors.New("store unavailable")

// dialect is what the shared SQL needs to know of its engine. The shared
// queries are written with ? placeholders and SQLite's two-argument MAX;
// for PostgreSQL, bind rewrites them (once per query text, cached) to $n
// placeholders and GREATEST.
type dialect struct {
	driver Driver
	// dollar: $1, $2, … placeholders instead of ?.
	dollar bool
	// returning: new audit rows report their seq through RETURNING
	// (PostgreSQL has no LastInsertId).
	returning bool
	// textSafe: string arguments must be valid UTF-8 without NUL bytes
	// (PostgreSQL's text type refuses both), so they are made so.
	textSafe bool
	// keyBytes: idempotency keys are bound as bytes (PostgreSQL stores
	// them as bytea: a scoped key holds a NUL byte).
	keyBytes bool
	cache    sync.Map // query text → bound text
}

var (
	sqliteDialect   = &dialect{driver: DriverSQLite}
	postgresDialect = &dialect{driver: DriverPostgres, dollar: true, returning: true, textSafe: true, keyBytes: true}
)

// bind returns q in the engine's dialect.
func (d *dialect) bind(q string) string {
	if !d.dollar {
		return q
	}
	if v, ok := d.cache.Load(q); ok {
		return v.(string)
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	out := strings.ReplaceAll(b.String(), "MAX(updated_at, ", "GREATEST(updated_at, ")
	d.cache.Store(q, out)
	return out
}

// args makes the arguments fit the engine's types.
func (d *dialect) args(a []any) []any {
	if !d.textSafe {
		return a
	}
	for i, v := range a {
		if s, ok := v.(string); ok {
			a[i] = safeText(s)
		}
	}
	return a
}

// safeText is s as PostgreSQL's text type takes it: NUL bytes and invalid
// UTF-8 become U+FFFD. Every string the store writes passes here on
// PostgreSQL (idempotency keys, which must stay exact, are bytes).
func safeText(s string) string {
	if strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// key is an idempotency key as the engine binds it.
func (d *dialect) key(k string) any {
	if d.keyBytes {
		return []byte(k)
	}
	return k
}

// txn is one write transaction in the engine's dialect.
type txn struct {
	tx *sql.Tx
	d  *dialect
	// from is the bridge id in cluster mode (""outside it): notify
	// announces the transaction's writes under it.
	from string
	// ctx is the group commit's context (group.go). Statements run under
	// it whatever context their caller passes, so one caller going away
	// cannot roll back the writes of others that share the transaction.
	ctx context.Context
	// ps are the store's prepared statements by query text (group.go).
	ps map[string]*sql.Stmt
}

// stmt is q's prepared statement in this transaction, or nil.
func (t txn) stmt(q string) *sql.Stmt {
	if st := t.ps[q]; st != nil {
		return t.tx.StmtContext(t.ctx, st)
	}
	return nil
}

func (t txn) exec(_ context.Context, q string, args ...any) (sql.Result, error) {
	if st := t.stmt(q); st != nil {
		return st.ExecContext(t.ctx, t.d.args(args)...)
	}
	return t.tx.ExecContext(t.ctx, t.d.bind(q), t.d.args(args)...)
}

func (t txn) query(_ context.Context, q string, args ...any) (*sql.Rows, error) {
	if st := t.stmt(q); st != nil {
		return st.QueryContext(t.ctx, t.d.args(args)...)
	}
	return t.tx.QueryContext(t.ctx, t.d.bind(q), t.d.args(args)...)
}

func (t txn) queryRow(_ context.Context, q string, args ...any) *sql.Row {
	if st := t.stmt(q); st != nil {
		return st.QueryRowContext(t.ctx, t.d.args(args)...)
	}
	return t.tx.QueryRowContext(t.ctx, t.d.bind(q), t.d.args(args)...)
}

// rowQuerier is a transaction or the store's readers.
type rowQuerier interface {
	queryRow(ctx context.Context, q string, args ...any) *sql.Row
}

// query reads through the store's reader connections.
func (s *Store) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	rows, err := s.r.QueryContext(ctx, s.d.bind(q), s.d.args(args)...)
	return rows, s.classify(err)
}

func (s *Store) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	return s.r.QueryRowContext(ctx, s.d.bind(q), s.d.args(args)...)
}

// qReturningSeq makes an insert report its row's seq (PostgreSQL).
const qReturningSeq = " RETURNING seq"

// insertReturningSeq inserts one row and returns its seq.
func insertReturningSeq(ctx context.Context, tx txn, q string, args ...any) (int64, error) {
	if tx.d.returning {
		var seq int64
		err := tx.queryRow(ctx, q+qReturningSeq, args...).Scan(&seq)
		return seq, err
	}
	res, err := tx.exec(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}
