package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// migration is one forward-only schema step. Versions are dense from 1;
// a released migration is never edited, only followed by a new one.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations is the whole schema history.
var migrations = []migration{
	{1, "initial schema: tasks, transitions, approvals, grants, safety events, audit, idempotency", `
CREATE TABLE meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
);
CREATE TABLE tasks (
	id          TEXT PRIMARY KEY,
	tool        TEXT NOT NULL,
	arguments   TEXT NOT NULL DEFAULT '{}',
	status      TEXT NOT NULL,
	text        TEXT NOT NULL DEFAULT '',
	progress    TEXT,
	result      TEXT,
	error       TEXT,
	approval_id TEXT,
	grant_id    TEXT,
	session_id  TEXT,
	principal   TEXT,
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL
);
CREATE INDEX tasks_status ON tasks(status);
CREATE TABLE transitions (
	seq         INTEGER PRIMARY KEY AUTOINCREMENT,
	task_id     TEXT NOT NULL,
	tool        TEXT NOT NULL,
	from_state  TEXT NOT NULL,
	to_state    TEXT NOT NULL,
	event       TEXT NOT NULL,
	at          INTEGER NOT NULL,
	by          TEXT NOT NULL DEFAULT '',
	reason      TEXT NOT NULL DEFAULT '',
	grant_id    TEXT,
	approval_id TEXT
);
CREATE INDEX transitions_task ON transitions(task_id, seq);
CREATE TABLE approvals (
	id         TEXT PRIMARY KEY,
	task_id    TEXT,
	tool       TEXT NOT NULL,
	status     TEXT NOT NULL,
	data       TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);
CREATE INDEX approvals_status ON approvals(status);
CREATE TABLE grants (
	id         TEXT PRIMARY KEY,
	kind       TEXT NOT NULL,
	tool       TEXT NOT NULL,
	status     TEXT NOT NULL,
	data       TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);
CREATE TABLE safety_events (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	kind       TEXT NOT NULL,
	at         INTEGER NOT NULL,
	task_id    TEXT,
	by         TEXT NOT NULL DEFAULT '',
	reason     TEXT NOT NULL DEFAULT '',
	monitor    TEXT NOT NULL DEFAULT '',
	latency_ns INTEGER NOT NULL DEFAULT 0,
	error      TEXT
);
CREATE TABLE audit (
	seq     INTEGER PRIMARY KEY AUTOINCREMENT,
	at      INTEGER NOT NULL,
	type    TEXT NOT NULL,
	actor   TEXT NOT NULL DEFAULT '',
	task_id TEXT,
	subject TEXT,
	summary TEXT NOT NULL DEFAULT '',
	reason  TEXT NOT NULL DEFAULT '',
	details TEXT
);
CREATE TABLE idempotency (
	key        TEXT PRIMARY KEY,
	tool       TEXT NOT NULL,
	args_hash  TEXT NOT NULL,
	state      TEXT NOT NULL,
	task_id    TEXT,
	error      TEXT,
	created_at INTEGER NOT NULL
);
`},
	{2, "latches; audit indexes for the audit API's filters", `
CREATE TABLE latches (
	name       TEXT PRIMARY KEY CHECK (name IN ('estop', 'fault')),
	active     INTEGER NOT NULL,
	by         TEXT NOT NULL DEFAULT '',
	reason     TEXT NOT NULL DEFAULT '',
	task_id    TEXT,
	since      INTEGER NOT NULL DEFAULT 0,
	updated_at INTEGER NOT NULL
);
CREATE INDEX audit_task ON audit(task_id, seq);
CREATE INDEX audit_type ON audit(type, seq);
CREATE INDEX audit_at ON audit(at);
CREATE INDEX idempotency_pending ON idempotency(state, tool, args_hash);
`},
}

// errTooNew: the database was written by a newer build.
var errTooNew = errors.New("schema is newer than this build")

// migrate applies every migration newer than the database's version, each
// in its own transaction together with its schema_migrations row, and
// returns the versions it applied and the version reached.
func migrate(ctx context.Context, db *sql.DB, now time.Time) ([]int, int, error) {
	return migrateTo(ctx, db, now, migrations[len(migrations)-1].version)
}

func migrateTo(ctx context.Context, db *sql.DB, now time.Time, target int) ([]int, int, error) {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at INTEGER NOT NULL
	)`); err != nil {
		return nil, 0, err
	}
	var cur int
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&cur); err != nil {
		return nil, 0, err
	}
	latest := migrations[len(migrations)-1].version
	if cur > latest {
		return nil, cur, fmt.Errorf("%w: the database is at schema version %d, this build knows up to %d", errTooNew, cur, latest)
	}
	var applied []int
	for _, m := range migrations {
		if m.version <= cur || m.version > target {
			continue
		}
		if err := applyMigration(ctx, db, m, now); err != nil {
			return applied, cur, fmt.Errorf("migration %d (%s): %w", m.version, m.name, err)
		}
		applied = append(applied, m.version)
		cur = m.version
	}
	return applied, cur, nil
}

func applyMigration(ctx context.Context, db *sql.DB, m migration, now time.Time) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations(version, name, applied_at) VALUES(?, ?, ?)`,
		m.version, m.name, ns(now)); err != nil {
		return err
	}
	return tx.Commit()
}
