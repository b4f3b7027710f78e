package store

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/store/pgtest"
)

// TestMain stops the test binary's one PostgreSQL server after the run.
func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Shutdown()
	os.Exit(code)
}

// testEngine opens stores of one engine for a test. A data dir stands for
// a database: on PostgreSQL each dir a test uses gets a database of its
// own on the shared server, and opening the same dir again opens the same
// database, so restart tests read the same on both engines.
type testEngine struct {
	driver Driver
	pg     *pgtest.Server // PostgreSQL only

	mu  sync.Mutex
	dbs map[string]string // guarded by mu; dir → DSN
}

func newTestEngine(t testing.TB, d Driver) *testEngine {
	t.Helper()
	e := &testEngine{driver: d, dbs: map[string]string{}}
	if d == DriverPostgres {
		e.pg = pgtest.Shared(t)
	}
	return e
}

// forEachEngine runs one test's cases against SQLite and PostgreSQL.
func forEachEngine(t *testing.T, fn func(t *testing.T, e *testEngine)) {
	t.Helper()
	for _, d := range Drivers {
		t.Run(string(d), func(t *testing.T) { fn(t, newTestEngine(t, d)) })
	}
}

// dsn is the database that stands for dir (PostgreSQL).
func (e *testEngine) dsn(t testing.TB, dir string) string {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if v, ok := e.dbs[dir]; ok {
		return v
	}
	v := e.pg.CreateDB(t)
	e.dbs[dir] = v
	return v
}

// conf is the Conf that opens dir's store on this engine.
func (e *testEngine) conf(t testing.TB, dir string) Conf {
	t.Helper()
	c := Conf{Dir: dir, Logger: quietLogger()}
	if e.driver == DriverPostgres {
		c.Driver, c.DSN = DriverPostgres, e.dsn(t, dir)
	}
	return c
}

// open opens dir's store on a fake clock and closes it when the test ends
// (closing twice is fine).
func (e *testEngine) open(t testing.TB, dir string, edit ...func(*Conf)) (*Store, *clockwork.FakeClock) {
	t.Helper()
	clk := clockwork.NewFakeClockAt(t0)
	c := e.conf(t, dir)
	c.Clock = clk
	for _, ed := range edit {
		ed(&c)
	}
	if c.Clock != clk {
		clk, _ = c.Clock.(*clockwork.FakeClock)
	}
	s, err := Open(context.Background(), c)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s, clk
}

// rawDB opens dir's database directly, bypassing the store.
func (e *testEngine) rawDB(t testing.TB, dir string) *sql.DB {
	t.Helper()
	var db *sql.DB
	var err error
	if e.driver == DriverPostgres {
		db, err = sql.Open("pgx", e.dsn(t, dir))
	} else {
		require.NoError(t, os.MkdirAll(dir, 0o700))
		db, err = sql.Open("sqlite", dsn(filepath.Join(dir, DefaultFile), DefaultBusyTimeout, "FULL", false))
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func (e *testEngine) dialect() *dialect {
	if e.driver == DriverPostgres {
		return postgresDialect
	}
	return sqliteDialect
}

// markerPath is where the store of dir keeps its marker.
func (e *testEngine) markerPath(dir string) string {
	if e.driver == DriverPostgres {
		return filepath.Join(dir, DefaultPostgresFile+MarkerSuffix)
	}
	return filepath.Join(dir, DefaultFile+MarkerSuffix)
}

// tableExists says whether the database holds the table.
func (e *testEngine) tableExists(t testing.TB, db *sql.DB, name string) bool {
	t.Helper()
	q := `SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name=?`
	if e.driver == DriverPostgres {
		q = `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema=current_schema() AND table_name=$1`
	}
	var n int
	require.NoError(t, db.QueryRow(q, name).Scan(&n))
	return n > 0
}

// storedText is a string as the engine keeps it: PostgreSQL's text
// holds no NUL byte and only valid UTF-8 (safeText).
func (e *testEngine) storedText(s string) string {
	if e.driver == DriverPostgres {
		return safeText(s)
	}
	return s
}
