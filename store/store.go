package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jonboulle/clockwork"
	_ "modernc.org/sqlite" // the pure-Go SQLite driver, registered as "sqlite"
)

// Defaults of Conf.
const (
	// DefaultFile is the database's file name in the data dir.
	DefaultFile = "robot-bridge.db"
	// DefaultPostgresFile names, in the data dir, the marker of a
	// PostgreSQL store (robot-bridge.postgres.marker): it remembers which
	// store this bridge used, so an empty or other database is refused.
	DefaultPostgresFile = "robot-bridge.postgres"
	// MarkerSuffix names the marker file next to the database
	// (robot-bridge.db.marker) that remembers a store existed here.
	MarkerSuffix = ".marker"
	// LockSuffix names the lock file (robot-bridge.db.lock) that keeps a
	// second process out of the store.
	LockSuffix = ".lock"
	// DefaultBusyTimeout is how long a write waits for SQLite's lock.
	DefaultBusyTimeout = 5 * time.Second
	// DefaultQueueSize bounds the asynchronous writer's queue.
	DefaultQueueSize = 4096
	// DefaultLatchRetry is how soon a latch change whose commit failed is
	// tried again.
	DefaultLatchRetry = 200 * time.Millisecond
	// DefaultIdempotencyTTL is how long idempotency keys are kept: the 24
	// hours the tool API promises.
	DefaultIdempotencyTTL = 24 * time.Hour
	// DefaultBatch is the most queued records one asynchronous commit takes.
	DefaultBatch = 256
)

// Sentinel errors callers branch on. Open's failures are *OpenError
// wrapping ErrCorrupt, ErrMissing or ErrForeign.
var (
	// ErrCorrupt: the database file exists but is not a healthy SQLite
	// database (bad header, quick_check failed, schema newer than this
	// build). Nothing was changed; an operator must restore or move it.
	ErrCorrupt = errors.New("store database is corrupt")
	// ErrMissing: the marker says a database existed in the data dir but
	// the file is gone. Starting empty would forget latched faults and the
	// audit trail, so Open refuses.
	ErrMissing = errors.New("store database is missing")
	// ErrForeign: the database belongs to another store than the marker
	// names (a file copied in from elsewhere).
	ErrForeign = errors.New("store database belongs to another data dir")
	// ErrLocked: another process has the store open (the data dir's lock
	// file for SQLite, the store's advisory lock on PostgreSQL).
	ErrLocked = errors.New("store in use")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store closed")
	// ErrNotFound: no record with that id.
	ErrNotFound = errors.New("not found")
)

// OpenError explains why Open refused a database, in words an operator
// can act on.
type OpenError struct {
	Path    string
	Problem string
	// Remedy says what the operator can do.
	Remedy string
	Err    error
}

// Error implements error.
func (e *OpenError) Error() string {
	s := fmt.Sprintf("store %s: %s", e.Path, e.Problem)
	if e.Remedy != "" {
		s += "; " + e.Remedy
	}
	return s
}

// Unwrap returns the sentinel (ErrCorrupt, ErrMissing, ErrForeign).
func (e *OpenError) Unwrap() error { return e.Err }

// Conf configures a Store.
type Conf struct {
	// Driver (optional) is the engine: DriverSQLite or DriverPostgres. It
	// defaults to DriverSQLite.
	Driver Driver
	// DSN is the PostgreSQL connection string, a URL or key=value pairs
	// (required for DriverPostgres, refused for DriverSQLite). It is a
	// secret: the store never logs it, and its errors name the database
	// without the password.
	DSN string
	// Dir is the data dir (required for DriverSQLite; for DriverPostgres
	// it holds only the marker and may be empty). It is created (mode
	// 0700) if missing.
	Dir string
	// File (optional) is the database file name inside Dir. It defaults to
	// DefaultFile; for DriverPostgres it names the marker and defaults to
	// DefaultPostgresFile.
	File string
	// Clock (optional) stamps records the callers did not stamp and drives
	// idempotency expiry. It defaults to the real clock.
	Clock clockwork.Clock
	// Logger (optional). It defaults to slog.Default(); the store adds
	// component=store.
	Logger *slog.Logger
	// BusyTimeout (optional) is how long a write waits for SQLite's lock
	// or, on PostgreSQL, for a connection and the store's write lock. It
	// defaults to 5s.
	BusyTimeout time.Duration
	// QueueSize (optional) bounds the asynchronous writer's queue of safety
	// events and task updates. It defaults to 4096; a full queue drops the
	// record, counts it (OnDrop) and logs, and never blocks the caller.
	// Latch changes (e-stop, fault) never enter it: they have their own
	// unbounded lane and are never dropped.
	QueueSize int
	// LatchRetry (optional) is how soon a latch change whose commit failed
	// is tried again. It defaults to 200ms.
	LatchRetry time.Duration
	// IdempotencyTTL (optional) is how long idempotency keys live. It
	// defaults to 24h.
	IdempotencyTTL time.Duration
	// Redact (optional) removes schema-marked sensitive arguments before
	// they are written into audit details. It defaults to keeping them.
	Redact func(tool string, args map[string]any) map[string]any
	// OnDrop (optional) is called (without locks held) for every record the
	// asynchronous writer had to drop because its queue was full; kind is
	// "safety_event" or "task_update".
	OnDrop func(kind string)
	// ObserveWrite (optional) is called after every committed write with
	// its kind ("transition", "approval", "grant", "idempotency", "batch",
	// "audit", "recover") and how long it took, for metrics.
	ObserveWrite func(op string, d time.Duration)
	// QuickCheck (optional) runs SQLite's PRAGMA quick_check at Open when
	// true (SQLite only). It defaults to true; a very large store may turn it off at the
	// price of finding corruption later, on first use.
	QuickCheck *bool
	// BridgeID (optional) turns cluster mode on: several bridges share
	// this PostgreSQL store, each under its own id ([a-z0-9][a-z0-9._-]{0,31},
	// ValidateBridgeID). It requires DriverPostgres
	// (ErrClusterNeedsPostgres otherwise). Then the store is shared with
	// other cluster bridges (never with a bridge without an id), two
	// processes with the same id exclude each other (ErrLocked), the crash
	// memory (Info.CleanShutdown) is this bridge's own, idempotency
	// reservations record the bridge, Recover touches only this bridge's
	// robots, and leases, notifications and the mailbox work (doc.go).
	BridgeID string

	// synchronous overrides synchronous=FULL (SQLite); benchmarks only.
	synchronous string
	// beforeBatch runs before every asynchronous commit; tests and
	// benchmarks use it to simulate a slow disk.
	beforeBatch func()
	// beforeCommit, when set, runs before every group commit (group.go);
	// an error fails the transaction, as a failed commit would. Tests use
	// it.
	beforeCommit func() error
	// ackLost, when it returns true for a write's op, turns that write's
	// successful commit into the error of a connection lost before the
	// commit's answer arrived; tests use it.
	ackLost func(op string) bool
}

// Info describes the database Open found.
type Info struct {
	// Driver is the engine.
	Driver Driver `json:"driver"`
	// Path is the database file, or for PostgreSQL the database without
	// its password (postgres://user@host:port/name).
	Path string `json:"path"`
	// StoreID identifies this store; the marker file repeats it.
	StoreID string `json:"store_id"`
	// Fresh is true when Open created the database (a first start).
	Fresh bool `json:"fresh"`
	// CleanShutdown is true when the previous run closed the store; false
	// after a crash (and for a fresh store). A crash stays known across
	// later runs that close the store without recovering it (Recover
	// settles it), so a bridge that fails to start after a crash and
	// shuts down cleanly does not make the crash forgotten. UncleanSince
	// is when a run first found the store left open.
	CleanShutdown bool      `json:"clean_shutdown"`
	UncleanSince  time.Time `json:"unclean_since,omitzero"`
	// SchemaVersion is the version after migrations; Migrated lists the
	// migrations this Open applied.
	SchemaVersion int   `json:"schema_version"`
	Migrated      []int `json:"migrated,omitempty"`
	// BridgeID is Conf.BridgeID ("" outside cluster mode).
	BridgeID string `json:"bridge_id,omitempty"`
	// Instance is random per Open: it tells this run of the bridge from
	// an earlier one of the same id (leases record it).
	Instance string `json:"instance,omitempty"`
}

// Store is the durable store, on SQLite or PostgreSQL. It implements actions.Recorder,
// actions.Observer, approval.Store, safety.Observer and
// toolapi.IdempotencyStore. All methods are safe for concurrent use.
type Store struct {
	conf  Conf
	log   *slog.Logger
	clock clockwork.Clock
	info  Info
	d     *dialect
	lock  *os.File   // SQLite: the data dir's lock
	own   *ownerLock // PostgreSQL: the store's advisory lock
	w     *sql.DB    // SQLite: the one writer connection; PostgreSQL: the pool
	r     *sql.DB    // SQLite: read-only connections; PostgreSQL: the pool again

	q        chan item // safety events for the writer goroutine
	seq      atomic.Uint64
	latches  *latchLane // latch changes for the writer goroutine, unbounded
	viewsMu  sync.Mutex // guards views
	views    map[string]taskUpdate
	viewsSig chan struct{} // cap 1: views has entries
	quit     chan struct{}
	done     chan struct{}

	closeMu  sync.RWMutex // Close takes it exclusively; enqueuers share it
	closed   bool         // guarded by closeMu
	dropped  atomic.Int64
	lastErr  atomic.Pointer[error]
	idemSeen atomic.Int64 // reserves since the last expiry sweep
	// unsure holds idempotency keys whose reservation failed at a point
	// where it may have been committed all the same (ErrUnavailable),
	// with the created_at that reservation wrote.
	unsure   sync.Map // key → int64
	password string   // PostgreSQL: the DSN's password, removed from error texts
	// pgCfg is the parsed DSN (PostgreSQL), for Listen's own connections.
	pgCfg     *pgx.ConnConfig
	listeners sync.WaitGroup // Listen's goroutines; Close waits for them
	// firstRun: in cluster mode, this bridge id never ran on the store
	// before (set at Open).
	firstRun bool
	// group is the group commit every write goes through (group.go).
	group committer
	// stmts are the hot writes' prepared statements (group.go), by query
	// text; read-only after Open.
	stmts map[string]*sql.Stmt
}

// marker is the content of the marker file.
type marker struct {
	StoreID   string    `json:"store_id"`
	Database  string    `json:"database"`
	CreatedAt time.Time `json:"created_at"`
}

// sqliteHeader is the first 16 bytes of every SQLite 3 database.
var sqliteHeader = []byte("SQLite format 3\x00")

// Open opens (creating on a first start) the store — the SQLite file in
// conf.Dir, or the PostgreSQL database conf.DSN names — checks it,
// applies pending migrations and starts the asynchronous writer.
func Open(ctx context.Context, conf Conf) (*Store, error) {
	drv, err := ParseDriver(string(conf.Driver))
	if err != nil {
		return nil, fmt.Errorf("store: Conf.Driver: %w", err)
	}
	conf.Driver = drv
	switch {
	case drv == DriverSQLite && strings.TrimSpace(conf.Dir) == "":
		return nil, errors.New("store: Conf.Dir is required")
	case drv == DriverSQLite && conf.DSN != "":
		return nil, errors.New("store: Conf.DSN is for the postgres driver; the sqlite store lives in Conf.Dir")
	case drv == DriverPostgres && strings.TrimSpace(conf.DSN) == "":
		return nil, errors.New("store: Conf.DSN is required for the postgres driver")
	}
	if conf.BridgeID != "" {
		if err := ValidateBridgeID(conf.BridgeID); err != nil {
			return nil, fmt.Errorf("store: Conf.BridgeID: %w", err)
		}
		if drv != DriverPostgres {
			return nil, fmt.Errorf("store: Conf.BridgeID %q: %w: several bridges can share only a PostgreSQL store (store.driver: postgres)", conf.BridgeID, ErrClusterNeedsPostgres)
		}
	}
	if conf.File == "" {
		conf.File = DefaultFile
		if drv == DriverPostgres {
			conf.File = DefaultPostgresFile
		}
	}
	if strings.ContainsAny(conf.File, `/\?#`) {
		return nil, fmt.Errorf("store: Conf.File %q must be a plain file name", conf.File)
	}
	if conf.Clock == nil {
		conf.Clock = clockwork.NewRealClock()
	}
	if conf.Logger == nil {
		conf.Logger = slog.Default()
	}
	if conf.BusyTimeout == 0 {
		conf.BusyTimeout = DefaultBusyTimeout
	}
	if conf.QueueSize == 0 {
		conf.QueueSize = DefaultQueueSize
	}
	if conf.LatchRetry == 0 {
		conf.LatchRetry = DefaultLatchRetry
	}
	if conf.IdempotencyTTL == 0 {
		conf.IdempotencyTTL = DefaultIdempotencyTTL
	}
	switch {
	case conf.BusyTimeout < 0:
		return nil, fmt.Errorf("store: Conf.BusyTimeout must not be negative, got %s", conf.BusyTimeout)
	case conf.QueueSize < 0:
		return nil, fmt.Errorf("store: Conf.QueueSize must not be negative, got %d", conf.QueueSize)
	case conf.LatchRetry < 0:
		return nil, fmt.Errorf("store: Conf.LatchRetry must not be negative, got %s", conf.LatchRetry)
	case conf.IdempotencyTTL < 0:
		return nil, fmt.Errorf("store: Conf.IdempotencyTTL must not be negative, got %s", conf.IdempotencyTTL)
	}
	if conf.synchronous == "" {
		conf.synchronous = "FULL"
	}
	if conf.Dir != "" {
		if err := os.MkdirAll(conf.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("store: data dir: %w", err)
		}
	}
	s := &Store{
		conf: conf, log: conf.Logger.With("component", "store"), clock: conf.Clock, d: sqliteDialect,
		q: make(chan item, conf.QueueSize), latches: newLatchLane(), views: map[string]taskUpdate{}, viewsSig: make(chan struct{}, 1),
		quit: make(chan struct{}), done: make(chan struct{}),
	}
	s.info.Driver = drv
	s.info.BridgeID, s.info.Instance = conf.BridgeID, newID()
	if drv == DriverPostgres {
		s.d = postgresDialect
		err = s.openPostgres(ctx)
	} else {
		err = s.openSQLite(ctx)
	}
	if err != nil {
		return nil, err
	}
	if err := s.prepare(ctx); err != nil {
		s.closeDBs()
		if s.lock != nil {
			_ = unlockDir(s.lock)
		}
		return nil, err
	}
	go s.writer()
	s.log.Info("store opened", "driver", string(drv), "path", s.info.Path, "store_id", s.info.StoreID, "fresh", s.info.Fresh,
		"clean_shutdown", s.info.CleanShutdown, "schema_version", s.info.SchemaVersion, "migrated", s.info.Migrated,
		"bridge_id", s.info.BridgeID, "instance", s.info.Instance)
	return s, nil
}

// openSQLite opens the SQLite file: the data dir's lock, the marker, the
// header and quick_check, migrations, the claim and the readers.
func (s *Store) openSQLite(ctx context.Context) error {
	conf := s.conf
	quick := conf.QuickCheck == nil || *conf.QuickCheck
	path := filepath.Join(conf.Dir, conf.File)
	markerPath := path + MarkerSuffix
	lock, err := lockDir(path + LockSuffix)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	opened := false
	defer func() {
		if !opened {
			_ = unlockDir(lock)
		}
	}()
	s.lock = lock

	mk, haveMarker, err := readMarker(markerPath)
	if err != nil {
		return &OpenError{
			Path: path, Problem: "its marker file " + markerPath + " is unreadable: " + err.Error(),
			Remedy: "repair or remove the marker (removing it lets a missing database start empty)", Err: ErrCorrupt,
		}
	}
	fi, statErr := os.Stat(path)
	exists := statErr == nil
	if statErr != nil && !errors.Is(statErr, os.ErrNotExist) {
		return fmt.Errorf("store: %s: %w", path, statErr)
	}
	switch {
	case !exists && haveMarker:
		return &OpenError{
			Path: path, Err: ErrMissing,
			Problem: fmt.Sprintf("the database is missing, but %s says store %s was created here at %s; starting empty would forget latched faults, approvals and the audit trail",
				filepath.Base(markerPath), mk.StoreID, mk.CreatedAt.Format(time.RFC3339)),
			Remedy: "restore the database file (with its -wal file) from a backup, or delete the marker to start a new, empty store on purpose",
		}
	case exists && fi.IsDir():
		return &OpenError{Path: path, Problem: "is a directory", Err: ErrCorrupt}
	case exists && fi.Size() == 0 && haveMarker:
		return &OpenError{
			Path: path, Err: ErrCorrupt,
			Problem: "the database file is empty, but the marker says store " + mk.StoreID + " lived here",
			Remedy:  "restore the database from a backup, or delete both files to start a new, empty store on purpose",
		}
	case exists && fi.Size() > 0:
		if err := checkHeader(path); err != nil {
			return &OpenError{
				Path: path, Problem: err.Error(), Err: ErrCorrupt,
				Remedy: "move the file aside and restore a backup; the bridge will not start on a store it cannot read",
			}
		}
	}
	fresh := !exists || fi.Size() == 0
	s.info.Path = path
	s.info.Fresh = fresh

	if s.w, err = sql.Open("sqlite", dsn(path, conf.BusyTimeout, conf.synchronous, false)); err != nil {
		return fmt.Errorf("store: open %s: %w", path, err)
	}
	s.w.SetMaxOpenConns(1)
	s.w.SetMaxIdleConns(1)
	s.w.SetConnMaxLifetime(0)
	fail := func(err error) error {
		s.closeDBs()
		return err
	}
	if err := s.w.PingContext(ctx); err != nil {
		return fail(&OpenError{
			Path: path, Problem: "SQLite cannot open it: " + err.Error(), Err: ErrCorrupt,
			Remedy: "move the file aside and restore a backup",
		})
	}
	if quick && !fresh {
		if err := quickCheck(ctx, s.w); err != nil {
			return fail(&OpenError{
				Path: path, Problem: err.Error(), Err: ErrCorrupt,
				Remedy: "move the file aside and restore a backup, or try `sqlite3 " + path + " .recover`",
			})
		}
	}
	if err := s.migrateAndClaim(ctx, path, markerPath, mk, haveMarker, fresh); err != nil {
		return fail(err)
	}
	if s.r, err = sql.Open("sqlite", dsn(path, conf.BusyTimeout, conf.synchronous, true)); err != nil {
		return fail(fmt.Errorf("store: open %s for reading: %w", path, err))
	}
	s.r.SetMaxOpenConns(4)
	opened = true
	return nil
}

// migrateAndClaim is the part of opening both engines share: migrations,
// the claim (store id, crash memory), and the marker's check or first
// write. where names the database in errors.
func (s *Store) migrateAndClaim(ctx context.Context, where, markerPath string, mk marker, haveMarker, fresh bool) error {
	applied, version, err := migrate(ctx, s.d, s.w, s.clock.Now())
	if err != nil {
		err = s.classify(err)
		if errors.Is(err, errTooNew) {
			return &OpenError{
				Path: where, Problem: err.Error(), Err: ErrCorrupt,
				Remedy: "run the robot-bridge build that wrote it, or restore a backup",
			}
		}
		if errors.Is(err, ErrUnavailable) {
			return fmt.Errorf("store: %s: migration: %w", where, err)
		}
		return &OpenError{
			Path: where, Problem: "migration failed: " + err.Error(), Err: ErrCorrupt,
			Remedy: "nothing was changed by the failed migration; restore a backup or report the error",
		}
	}
	s.info.SchemaVersion, s.info.Migrated = version, applied

	id, unclean, err := s.claim(ctx)
	if err != nil {
		return fmt.Errorf("store: %s: %w", where, err)
	}
	s.info.StoreID, s.info.CleanShutdown, s.info.UncleanSince = id, unclean.IsZero() && !fresh, unclean
	if haveMarker && mk.StoreID != id {
		return &OpenError{
			Path: where, Err: ErrForeign,
			Problem: fmt.Sprintf("the database is store %s, but the marker names store %s", id, mk.StoreID),
			Remedy:  "put the right database back, or replace the marker on purpose",
		}
	}
	if !haveMarker && markerPath != "" {
		if err := writeMarker(markerPath, marker{StoreID: id, Database: s.markerDatabase(), CreatedAt: s.clock.Now().UTC()}); err != nil {
			return fmt.Errorf("store: write marker %s: %w", markerPath, err)
		}
	}
	return nil
}

// closeDBs closes the database handles (the readers may be the writer's
// pool, on PostgreSQL).
func (s *Store) closeDBs() {
	s.closeStmts()
	if s.r != nil && s.r != s.w {
		_ = s.r.Close()
	}
	if s.w != nil {
		_ = s.w.Close()
	}
	if s.own != nil {
		s.own.close()
	}
}

func dsn(path string, busy time.Duration, sync string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous("+sync+")")
		// A group commit runs each write in a savepoint (group.go), whose
		// statement journal would otherwise spill to a temporary file
		// once a group has changed more than 64 KiB of pages.
		q.Add("_pragma", "temp_store(MEMORY)")
		q.Set("_txlock", "immediate")
	}
	return path + "?" + q.Encode()
}

// closeRead closes a handle a read opened: a result set, or a file or
// directory opened read-only. Its error is dropped on purpose: the read's
// outcome is already known (rows.Err(), which every scan loop checks, the
// bytes read, or the fsync's result), and a failure to close a read-only
// handle cannot change it.
func closeRead(c io.Closer) { _ = c.Close() }

func checkHeader(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer closeRead(f)
	buf := make([]byte, len(sqliteHeader))
	if _, err := io.ReadFull(f, buf); err != nil {
		return fmt.Errorf("not a SQLite database (file shorter than its header): %w", err)
	}
	if !bytes.Equal(buf, sqliteHeader) {
		return errors.New("not a SQLite database (bad header)")
	}
	return nil
}

func quickCheck(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, "PRAGMA quick_check(5)")
	if err != nil {
		return fmt.Errorf("quick_check could not run: %w", err)
	}
	defer closeRead(rows)
	var problems []string
	for rows.Next() {
		var msg string
		if err := rows.Scan(&msg); err != nil {
			return fmt.Errorf("quick_check: %w", err)
		}
		if msg != "ok" {
			problems = append(problems, msg)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("quick_check: %w", err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("quick_check found damage: %s", strings.Join(problems, "; "))
	}
	return nil
}

// Keys of the meta table. In cluster mode each bridge has its own,
// suffixed ":" and its bridge id (metaKey).
const (
	metaRunning = "running" // "1" from Open to a clean Close
	metaUnclean = "unclean" // set by an Open that found "running"; cleared by Recover
)

// metaKey is this bridge's meta key of base: base itself outside
// cluster mode, base:<bridge id> in it, so one bridge's crash is known to
// that bridge only.
func (s *Store) metaKey(base string) string {
	if s.conf.BridgeID == "" {
		return base
	}
	return base + ":" + s.conf.BridgeID
}

// claim reads (or creates) the store id and marks the store as running.
// It reports when a run found the store left running — the previous
// process died without closing it — and remembers that in the meta table
// until Recover settles it: only a run that recovered the store may
// forget a crash.
func (s *Store) claim(ctx context.Context) (id string, unclean time.Time, err error) {
	err = s.tx(ctx, "meta", func(tx txn) error {
		var v string
		switch err := tx.queryRow(ctx, `SELECT value FROM meta WHERE key='store_id'`).Scan(&v); {
		case errors.Is(err, sql.ErrNoRows):
			v = newID()
			if _, err := tx.exec(ctx, `INSERT INTO meta(key, value) VALUES('store_id', ?), ('created_at', ?)`,
				v, s.clock.Now().UTC().Format(time.RFC3339Nano)); err != nil {
				return err
			}
		case err != nil:
			return err
		}
		id = v
		running, ran, err := metaValue(ctx, tx, s.metaKey(metaRunning))
		if err != nil {
			return err
		}
		s.firstRun = s.conf.BridgeID != "" && !ran
		since, have, err := metaValue(ctx, tx, s.metaKey(metaUnclean))
		if err != nil {
			return err
		}
		switch {
		case have:
			if unclean, err = time.Parse(time.RFC3339Nano, since); err != nil {
				return fmt.Errorf("meta %s=%q: %w", s.metaKey(metaUnclean), since, err)
			}
		case running == "1":
			unclean = s.clock.Now().UTC()
			if err := setMeta(ctx, tx, s.metaKey(metaUnclean), unclean.Format(time.RFC3339Nano)); err != nil {
				return err
			}
		}
		if err := s.joinCluster(ctx, tx); err != nil {
			return err
		}
		return setMeta(ctx, tx, s.metaKey(metaRunning), "1")
	})
	return id, unclean, err
}

func metaValue(ctx context.Context, tx txn, key string) (string, bool, error) {
	var v string
	err := tx.queryRow(ctx, `SELECT value FROM meta WHERE key=?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return v, err == nil, err
}

func setMeta(ctx context.Context, tx txn, key, value string) error {
	_, err := tx.exec(ctx, `INSERT INTO meta(key, value) VALUES(?, ?)
		ON CONFLICT(key) DO UPDATE SET value=excluded.value`, key, value)
	return err
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// markerDatabase is what the marker says the store's database is.
func (s *Store) markerDatabase() string {
	if s.d.driver == DriverPostgres {
		return s.info.Path
	}
	return s.conf.File
}

func readMarker(path string) (marker, bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return marker{}, false, nil
	}
	if err != nil {
		return marker{}, false, err
	}
	var m marker
	if err := json.Unmarshal(b, &m); err != nil || m.StoreID == "" {
		return marker{}, false, fmt.Errorf("not a store marker (%d bytes)", len(b))
	}
	return m, true, nil
}

// writeMarker writes the marker atomically and durably: a temporary file,
// fsync, rename, fsync of the directory.
func writeMarker(path string, m marker) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		_ = f.Close() // the write error is the one to report
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close() // the write error is the one to report
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer closeRead(d)
	return d.Sync()
}

// Info returns what Open found.
func (s *Store) Info() Info {
	i := s.info
	i.Migrated = append([]int(nil), s.info.Migrated...)
	return i
}

// Dropped returns how many queued records were dropped because the
// asynchronous writer's queue was full.
func (s *Store) Dropped() int64 { return s.dropped.Load() }

// Healthy reports whether the store can take writes: it is open, no latch
// change waits after a failed commit, its last write did not fail (or
// failed only because the database could not be reached, which the probe
// below settles), and
// a write transaction can begin — SQLite's write lock, a live PostgreSQL
// connection — (for /readyz).
func (s *Store) Healthy(ctx context.Context) error {
	s.closeMu.RLock()
	closed := s.closed
	s.closeMu.RUnlock()
	if closed {
		return ErrClosed
	}
	if n, err := s.latches.failing(); n > 0 && err != nil {
		return fmt.Errorf("store: %d %w: %w", n, ErrLatchNotRecorded, err)
	}
	p := s.lastErr.Load()
	if p != nil && !errors.Is(*p, ErrUnavailable) {
		return fmt.Errorf("store: last write failed: %w", *p)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: not writable: %w", s.classify(err))
	}
	if s.own != nil {
		if err := s.own.check(ctx, txn{tx: tx, d: s.d, ctx: ctx}); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("store: not writable: %w", s.classify(err))
		}
	}
	if err := tx.Rollback(); err != nil {
		return fmt.Errorf("store: not writable: %w", s.classify(err))
	}
	// The last write failed only because the database could not be
	// reached, and now it can: the store is writable again without
	// waiting for the next write to prove it.
	if p != nil {
		s.lastErr.CompareAndSwap(p, nil)
	}
	return nil
}

// Close drains the asynchronous writer, marks the shutdown clean and
// closes the database. A latch change it cannot write is reported, and
// then the shutdown is not marked clean, so the next run knows. It is
// idempotent.
func (s *Store) Close() error {
	s.closeMu.Lock()
	if s.closed {
		s.closeMu.Unlock()
		return nil
	}
	s.closed = true
	s.closeMu.Unlock()
	close(s.quit)
	<-s.done
	s.listeners.Wait()
	var errs []error
	if n, err := s.latches.failing(); n > 0 {
		errs = append(errs, fmt.Errorf("%d %w (shutdown not marked clean): %w", n, ErrLatchNotRecorded, err))
	} else if err := s.tx(context.Background(), "meta", func(tx txn) error {
		_, err := tx.exec(context.Background(), `UPDATE meta SET value='0' WHERE key=?`, s.metaKey(metaRunning))
		return err
	}); err != nil {
		errs = append(errs, fmt.Errorf("mark clean shutdown: %w", err))
	}
	if s.d.driver == DriverSQLite {
		// A checkpoint folds the WAL into the database file, so a backup
		// of the .db file alone is complete after a clean shutdown.
		if _, err := s.w.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			s.log.Warn("WAL checkpoint on close failed", "err", err)
		}
	}
	s.closeStmts()
	if s.r != s.w {
		if err := s.r.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := s.w.Close(); err != nil {
		errs = append(errs, err)
	}
	if s.own != nil {
		s.own.close()
	}
	if err := unlockDir(s.lock); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("store: close: %w", errors.Join(errs...))
	}
	s.log.Info("store closed", "driver", string(s.d.driver), "path", s.info.Path, "dropped", s.dropped.Load())
	return nil
}

func (s *Store) noteErr(op string, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	e := fmt.Errorf("%s: %w", op, err)
	s.lastErr.Store(&e)
}

// ns is the stored form of a time: Unix nanoseconds, UTC.
func ns(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNS(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Every value stored is plain data; a failure is a bug worth
		// seeing in the record rather than a lost write.
		b, _ = json.Marshal(map[string]string{"encode_error": err.Error()})
	}
	return string(b)
}

func nullStr(s string) any {
	if s == "" {
		return nil
	}
	return s
}
