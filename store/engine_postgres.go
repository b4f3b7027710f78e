package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// Advisory lock keys of a PostgreSQL store (pg_advisory_lock(int4, int4)):
// lockClass ("robr") with lockOwner is held for the life of a Store by
// one session, so a second bridge cannot open the same store — the
// PostgreSQL twin of SQLite's lock file, until leases replace it —, and
// with lockWrite it is taken by every write transaction, so commits run
// one at a time in seq order.
//
// In cluster mode (Conf.BridgeID) the owner lock is taken SHARED, so the
// cluster's bridges share the store and a bridge without an id (which
// takes it exclusively) and cluster bridges exclude each other; and each
// bridge takes an exclusive lock of its own id, (lockBridgeClass,
// bridgeLockKey(id)), a lock space apart from lockWrite's, so two
// processes with one bridge id cannot both run. The write lock stays
// database-wide: commits are serialised across the cluster's bridges.
const (
	lockClass       = 0x726f6272
	lockOwner       = 1
	lockWrite       = 2
	lockBridgeClass = 0x726f6263 // "robc"
)

// bridgeLockKey is the second key of a bridge id's lock: FNV-1a of
// "robot-bridge:" and the id.
func bridgeLockKey(id string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte("robot-bridge:" + id))
	return h.Sum32()
}

// pgPoolSize bounds the PostgreSQL connections of one store (writes queue
// on the write lock anyway; reads share the pool).
const pgPoolSize = 4

// ownerLock is the session that holds the store's owner lock. A lost
// connection (the server restarted) loses the lock; the next write takes
// it again on a new session, or fails with ErrLocked when another
// process took it meanwhile.
type ownerLock struct {
	db  *sql.DB
	dsn string // redacted, for errors
	// bridge is the bridge id in cluster mode: the owner lock is shared
	// and the bridge id's lock exclusive.
	bridge string
	mu     sync.Mutex
	conn   *sql.Conn // guarded by mu; nil after a loss
	// pid and started (backend_start, as text) identify the session
	// that holds the lock: a pid alone may be reused by another session
	// after the server restarted.
	pid     int64  // guarded by mu
	started string // guarded by mu
	// checkSQL is clusterOwnerCheck(bridge), in cluster mode.
	checkSQL string
}

func (o *ownerLock) acquire(ctx context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.acquireLocked(ctx)
}

func (o *ownerLock) acquireLocked(ctx context.Context) error {
	if o.conn != nil {
		_ = o.conn.Close()
		o.conn = nil
	}
	c, err := o.db.Conn(ctx)
	if err != nil {
		return err
	}
	var got bool
	var pid int64
	var started string
	if o.bridge != "" {
		return o.acquireClusterLocked(ctx, c)
	}
	if err := c.QueryRowContext(ctx, fmt.Sprintf(`SELECT pg_try_advisory_lock(%d, %d), pg_backend_pid(),
		(SELECT backend_start::text FROM pg_stat_activity WHERE pid = pg_backend_pid())`, lockClass, lockOwner)).Scan(&got, &pid, &started); err != nil {
		_ = c.Close()
		return err
	}
	if !got {
		_ = c.Close()
		return fmt.Errorf("%w: another robot-bridge process (or the bridges of a cluster) holds the store in %s", ErrLocked, o.dsn)
	}
	o.conn, o.pid, o.started = c, pid, started
	return nil
}

// acquireClusterLocked takes, on c, the owner lock shared and the bridge
// id's lock exclusively.
func (o *ownerLock) acquireClusterLocked(ctx context.Context, c *sql.Conn) error {
	var shared, own bool
	var pid int64
	var started string
	if err := c.QueryRowContext(ctx, fmt.Sprintf(`SELECT pg_try_advisory_lock_shared(%d, %d), pg_try_advisory_lock(%d, %d), pg_backend_pid(),
		(SELECT backend_start::text FROM pg_stat_activity WHERE pid = pg_backend_pid())`,
		lockClass, lockOwner, lockBridgeClass, int32(bridgeLockKey(o.bridge)))).Scan(&shared, &own, &pid, &started); err != nil {
		_ = c.Close()
		return err
	}
	switch {
	case !shared:
		_ = c.Close()
		return fmt.Errorf("%w: a robot-bridge process without a bridge id holds the store in %s exclusively; bridge %q cannot share it (give every bridge of the cluster an id)",
			ErrLocked, o.dsn, o.bridge)
	case !own:
		_ = c.Close()
		return fmt.Errorf("%w: another robot-bridge process runs as bridge %q on the store in %s; every bridge of a cluster needs an id of its own",
			ErrLocked, o.bridge, o.dsn)
	}
	o.conn, o.pid, o.started = c, pid, started
	return nil
}

// ownerCheck takes the write lock and says whether the owner session
// still holds the owner lock, in one round trip.
var ownerCheck = fmt.Sprintf(`WITH w AS (SELECT pg_advisory_xact_lock(%d, %d))
	SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype='advisory' AND l.granted AND l.classid=%d AND l.objid=%d AND l.objsubid=2
		AND l.pid=? AND a.backend_start::text=?) FROM w`,
	lockClass, lockWrite, lockClass, lockOwner)

// clusterOwnerCheck is ownerCheck in cluster mode: the session must
// hold both the shared owner lock and the bridge id's exclusive lock.
func clusterOwnerCheck(bridge string) string {
	return fmt.Sprintf(`WITH w AS (SELECT pg_advisory_xact_lock(%d, %d))
	SELECT (SELECT COUNT(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype='advisory' AND l.granted AND l.objsubid=2 AND l.pid=? AND a.backend_start::text=?
		AND ((l.classid=%d AND l.objid=%d AND l.mode='ShareLock')
			OR (l.classid=%d AND l.objid='%d'::oid AND l.mode='ExclusiveLock'))) = 2 FROM w`,
		lockClass, lockWrite, lockClass, lockOwner, lockBridgeClass, bridgeLockKey(bridge))
}

// checkQuery is the ownerCheck of this lock.
func (o *ownerLock) checkQuery() string {
	if o.bridge == "" {
		return ownerCheck
	}
	return o.checkSQL
}

// check runs first in every write transaction: it takes the write lock
// and makes sure this process still holds the store, taking the owner
// lock again after a lost session.
func (o *ownerLock) check(ctx context.Context, tx txn) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	var held bool
	if err := tx.queryRow(ctx, o.checkQuery(), o.pid, o.started).Scan(&held); err != nil {
		return err
	}
	if held {
		return nil
	}
	if err := o.acquireLocked(ctx); err != nil {
		return err
	}
	if err := tx.queryRow(ctx, o.checkQuery(), o.pid, o.started).Scan(&held); err != nil {
		return err
	}
	if !held {
		return fmt.Errorf("%w: the store's lock in %s could not be taken again", ErrLocked, o.dsn)
	}
	return nil
}

func (o *ownerLock) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.conn != nil {
		_ = o.conn.Close()
		o.conn = nil
	}
	_ = o.db.Close()
}

// pgConfig parses a DSN. Its error never carries the DSN or a part of
// it: a malformed connection string may hold the password anywhere.
func pgConfig(dsn string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, errors.New("store: Conf.DSN is not a valid PostgreSQL connection string " +
			"(want postgres://user:password@host:port/database?sslmode=… or host=… port=… user=… dbname=… key=value pairs)")
	}
	return cfg, nil
}

// describeDSN names the database of cfg without its password.
func describeDSN(cfg *pgx.ConnConfig) string {
	u := url.URL{Scheme: "postgres", Host: net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), Path: "/" + cfg.Database}
	if cfg.User != "" {
		u.User = url.User(cfg.User)
	}
	return u.String()
}

// redactText removes the DSN and its password from a message.
func redactText(msg, dsn, password string) string {
	if dsn != "" {
		msg = strings.ReplaceAll(msg, dsn, "[dsn]")
	}
	if password != "" {
		msg = strings.ReplaceAll(msg, password, "[redacted]")
		if e := url.QueryEscape(password); e != password {
			msg = strings.ReplaceAll(msg, e, "[redacted]")
		}
		if e := url.PathEscape(password); e != password {
			msg = strings.ReplaceAll(msg, e, "[redacted]")
		}
	}
	return msg
}

// redactedError is an error whose text has the secret removed; errors.Is
// and errors.As still reach the cause.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// openPostgres connects, checks durability, takes the store's owner
// lock, checks the marker, migrates and claims.
func (s *Store) openPostgres(ctx context.Context) error {
	cfg, err := pgConfig(s.conf.DSN)
	if err != nil {
		return err
	}
	s.password = cfg.Password
	where := describeDSN(cfg)
	s.info.Path = where
	// Every session commits synchronously, whatever the server's or the
	// role's default says: a transition is on the disk before the command
	// it implies leaves the bridge.
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["synchronous_commit"] = "on"
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = "robot-bridge"
	}
	if cfg.ConnectTimeout == 0 || cfg.ConnectTimeout > s.conf.BusyTimeout {
		cfg.ConnectTimeout = s.conf.BusyTimeout
	}
	// And once more after connecting, in case the DSN's options or the
	// role's settings asked otherwise.
	durable := stdlib.OptionAfterConnect(func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, "SET synchronous_commit TO on")
		return err
	})
	s.w = stdlib.OpenDB(*cfg, durable)
	s.w.SetMaxOpenConns(pgPoolSize)
	s.w.SetMaxIdleConns(pgPoolSize)
	s.w.SetConnMaxIdleTime(5 * time.Minute)
	s.r = s.w
	fail := func(err error) error {
		s.closeDBs()
		return err
	}
	if err := s.w.PingContext(ctx); err != nil {
		return fail(fmt.Errorf("store: %s: %w", where, s.classify(err)))
	}
	var fsync string
	if err := s.w.QueryRowContext(ctx, `SHOW fsync`).Scan(&fsync); err != nil {
		return fail(fmt.Errorf("store: %s: %w", where, s.classify(err)))
	}
	if fsync != "on" {
		return fail(&OpenError{
			Path: where, Err: ErrNotDurable,
			Problem: "the server runs with fsync=" + fsync + ", so a committed transition could be lost in a crash",
			Remedy:  "turn fsync on in postgresql.conf; the bridge commits every transition before its command and relies on it",
		})
	}
	s.own = &ownerLock{db: stdlib.OpenDB(*cfg, durable), dsn: where, bridge: s.conf.BridgeID}
	if s.conf.BridgeID != "" {
		s.own.checkSQL = clusterOwnerCheck(s.conf.BridgeID)
	}
	s.pgCfg = cfg.Copy()
	s.own.db.SetMaxOpenConns(1)
	if err := s.own.acquire(ctx); err != nil {
		return fail(fmt.Errorf("store: %w", s.classify(err)))
	}

	markerPath := ""
	var mk marker
	haveMarker := false
	if s.conf.Dir != "" {
		markerPath = filepath.Join(s.conf.Dir, s.conf.File+MarkerSuffix)
		if mk, haveMarker, err = readMarker(markerPath); err != nil {
			return fail(&OpenError{
				Path: where, Problem: "its marker file " + markerPath + " is unreadable: " + err.Error(),
				Remedy: "repair or remove the marker (removing it lets an empty database start a new store)", Err: ErrCorrupt,
			})
		}
	}
	version, err := schemaVersion(ctx, s.d, s.w)
	if err != nil {
		return fail(fmt.Errorf("store: %s: %w", where, s.classify(err)))
	}
	fresh := version == 0
	s.info.Fresh = fresh
	if fresh && haveMarker {
		return fail(&OpenError{
			Path: where, Err: ErrMissing,
			Problem: fmt.Sprintf("the database is empty, but %s says this bridge used store %s (created %s); starting empty would forget latched faults, approvals and the audit trail",
				filepath.Base(markerPath), mk.StoreID, mk.CreatedAt.Format(time.RFC3339)),
			Remedy: "point the DSN at the store's database, restore it from a backup, or delete the marker to start a new, empty store on purpose",
		})
	}
	if err := s.migrateAndClaim(ctx, where, markerPath, mk, haveMarker, fresh); err != nil {
		return fail(err)
	}
	return nil
}

// ErrNotDurable says the PostgreSQL server is configured so that a commit
// does not mean "on the disk" (fsync=off). Open refuses it.
var ErrNotDurable = errors.New("store database is not durable")

// classify turns the errors that mean "the database cannot be reached
// now" into ErrUnavailable, and removes the DSN's password from every
// PostgreSQL error's text.
func (s *Store) classify(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) || errors.Is(err, context.Canceled) {
		return err
	}
	if s.d.driver == DriverSQLite {
		if sqliteBusy(err) {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return err
	}
	msg := redactText(err.Error(), s.conf.DSN, s.password)
	if msg != err.Error() {
		err = &redactedError{msg: msg, err: err}
	}
	if pgUnreachable(err) {
		return fmt.Errorf("%w: the PostgreSQL server at %s cannot be reached: %w", ErrUnavailable, s.info.Path, err)
	}
	return err
}

// pgUnreachable reports errors of a connection, not of a statement: the
// server is down, restarting or shutting down, or the link broke.
func pgUnreachable(err error) bool {
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch {
		case strings.HasPrefix(pe.Code, "08"): // connection exception
			return true
		case pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03": // admin/crash shutdown, cannot connect now
			return true
		case pe.Code == "53300": // too many connections
			return true
		}
		return false
	}
	_, connect := errors.AsType[*pgconn.ConnectError](err)
	_, network := errors.AsType[net.Error](err)
	switch {
	case connect, network:
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, os.ErrDeadlineExceeded),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, sql.ErrConnDone):
		return true
	case pgconn.SafeToRetry(err), pgconn.Timeout(err):
		return true
	}
	return strings.Contains(err.Error(), "conn closed")
}
