package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"
)

// migration is one forward-only schema step. Versions are dense from 1
// and the same on both engines (a step exists for each, so a schema
// version means the same tables everywhere); a released migration is
// never edited, only followed by a new one.
type migration struct {
	version int
	name    string
	sql     string
}

// migrationFiles holds migrations/<engine>/NNNN_<slug>.sql. The first
// line of each is "-- " and the migration's name, recorded in
// schema_migrations.
//
//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrationFiles embed.FS

var (
	sqliteMigrations   = mustLoadMigrations("migrations/sqlite")
	postgresMigrations = mustLoadMigrations("migrations/postgres")
)

// migrations is the engine's whole schema history.
func (d *dialect) migrations() []migration {
	if d.driver == DriverPostgres {
		return postgresMigrations
	}
	return sqliteMigrations
}

func mustLoadMigrations(dir string) []migration {
	ms, err := loadMigrations(migrationFiles, dir)
	if err != nil {
		panic(err) // the embedded files are part of the build
	}
	return ms
}

func loadMigrations(fsys fs.FS, dir string) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || !strings.HasSuffix(e.Name(), ".sql") {
			return nil, fmt.Errorf("migration file %s/%s: want NNNN_name.sql", dir, e.Name())
		}
		if v != len(out)+1 {
			return nil, fmt.Errorf("migration file %s/%s: version %d, want %d (versions are dense from 1)", dir, e.Name(), v, len(out)+1)
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		first, _, _ := strings.Cut(string(b), "\n")
		name, ok := strings.CutPrefix(first, "-- ")
		if !ok || strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("migration file %s/%s: the first line must be \"-- \" and the migration's name", dir, e.Name())
		}
		out = append(out, migration{version: v, name: strings.TrimSpace(name), sql: string(b)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no migrations in %s", dir)
	}
	return out, nil
}

// errTooNew: the database was written by a newer build.
var errTooNew = errors.New("schema is newer than this build")

// schemaMigrationsDDL creates the table of applied versions.
func (d *dialect) schemaMigrationsDDL() string {
	t := "INTEGER"
	if d.driver == DriverPostgres {
		t = "BIGINT"
	}
	return `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at ` + t + ` NOT NULL
	)`
}

// schemaVersion is the database's version, 0 for an empty database
// (PostgreSQL's Open tells a fresh store by it).
func schemaVersion(ctx context.Context, d *dialect, db *sql.DB) (int, error) {
	var n int
	q := `SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name='schema_migrations'`
	if d.driver == DriverPostgres {
		q = `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema=current_schema() AND table_name='schema_migrations'`
	}
	if err := db.QueryRowContext(ctx, q).Scan(&n); err != nil || n == 0 {
		return 0, err
	}
	var v int
	err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}

// migrate applies every migration newer than the database's version, each
// in its own transaction together with its schema_migrations row, and
// returns the versions it applied and the version reached. A database
// newer than this build is refused (errTooNew) and left as it is.
func migrate(ctx context.Context, d *dialect, db *sql.DB, now time.Time) ([]int, int, error) {
	ms := d.migrations()
	return migrateTo(ctx, d, db, now, ms[len(ms)-1].version)
}

func migrateTo(ctx context.Context, d *dialect, db *sql.DB, now time.Time, target int) ([]int, int, error) {
	if _, err := db.ExecContext(ctx, d.schemaMigrationsDDL()); err != nil {
		return nil, 0, err
	}
	var cur int
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&cur); err != nil {
		return nil, 0, err
	}
	ms := d.migrations()
	latest := ms[len(ms)-1].version
	if cur > latest {
		return nil, cur, fmt.Errorf("%w: the database is at schema version %d, this build knows up to %d", errTooNew, cur, latest)
	}
	var applied []int
	for _, m := range ms {
		if m.version <= cur || m.version > target {
			continue
		}
		if err := applyMigration(ctx, d, db, m, now); err != nil {
			return applied, cur, fmt.Errorf("migration %d (%s): %w", m.version, m.name, err)
		}
		applied = append(applied, m.version)
		cur = m.version
	}
	return applied, cur, nil
}

func applyMigration(ctx context.Context, d *dialect, db *sql.DB, m migration, now time.Time) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, d.bind(`INSERT INTO schema_migrations(version, name, applied_at) VALUES(?, ?, ?)`),
		m.version, m.name, ns(now)); err != nil {
		return err
	}
	return tx.Commit()
}
