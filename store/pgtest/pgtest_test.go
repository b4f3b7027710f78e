package pgtest

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) {
	code := m.Run()
	Shutdown()
	os.Exit(code)
}

func TestShared_ServesADatabasePerTestAndSurvivesARestart(t *testing.T) {
	// Given the shared server and a database of this test
	s := Shared(t)
	dsn := s.CreateDB(t)
	db, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	defer func() { _ = db.Close() }()
	ctx := context.Background()
	_, err = db.ExecContext(ctx, `CREATE TABLE kept (v TEXT)`)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `INSERT INTO kept VALUES ('before')`)
	require.NoError(t, err)
	// Then the server runs with durable commits
	var sync, fsync string
	require.NoError(t, db.QueryRowContext(ctx, `SHOW synchronous_commit`).Scan(&sync))
	require.NoError(t, db.QueryRowContext(ctx, `SHOW fsync`).Scan(&fsync))
	require.Equal(t, "on", sync)
	require.Equal(t, "on", fsync)
	// When it is stopped, the database cannot be reached
	require.NoError(t, s.Stop())
	require.Error(t, db.PingContext(ctx))
	// And when it is back, the same handle works again and the data is there
	require.NoError(t, s.Start())
	var v string
	require.Eventually(t, func() bool { return db.QueryRowContext(ctx, `SELECT v FROM kept`).Scan(&v) == nil }, 30*time.Second, 10*time.Millisecond)
	require.Equal(t, "before", v)
}

func TestBinDir_AMissingPostgreSQLSaysHowToInstallIt(t *testing.T) {
	// Given a machine without pg_config and without Debian's server
	_, err := binDir("pg_config-not-installed", filepath.Join(t.TempDir(), "*", "bin", "initdb"))
	// Then the error says what is missing and the command that installs it
	require.ErrorContains(t, err, "initdb was not found")
	require.ErrorContains(t, err, "apt-get install -y postgresql")
	// And on this machine it is found
	d, err := BinDir()
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(d, "postgres"))
}
