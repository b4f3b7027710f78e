package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/safety"
)

func TestOpen_FreshThenReopen(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		dir := t.TempDir()
		// Given an empty data dir
		s, _ := e.open(t, dir)
		info := s.Info()
		// Then the first open creates the database and its marker
		require.True(t, info.Fresh)
		require.False(t, info.CleanShutdown)
		require.Equal(t, []int{1, 2, 3, 4, 5}, info.Migrated)
		require.Equal(t, 5, info.SchemaVersion)
		require.FileExists(t, e.markerPath(dir))
		require.Equal(t, e.driver, info.Driver)
		require.NoError(t, s.Close())

		// When it is opened again after a clean close
		s2, _ := e.open(t, dir)
		info2 := s2.Info()
		// Then it is the same store, not fresh, and knows the shutdown was clean
		require.False(t, info2.Fresh)
		require.True(t, info2.CleanShutdown)
		require.Empty(t, info2.Migrated)
		require.Equal(t, info.StoreID, info2.StoreID)
	})
}

func TestOpen_CrashIsNotACleanShutdown(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		dir := t.TempDir()
		// Given a store that was never closed (the process died)
		s, _ := e.open(t, dir)
		crash(s)
		// When it is opened again
		s2, _ := e.open(t, dir)
		// Then the previous run is known to have crashed
		require.False(t, s2.Info().CleanShutdown)
		require.False(t, s2.Info().Fresh)
	})
}

func TestOpen_ACrashStaysKnownUntilARunRecoversIt(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		dir := t.TempDir()
		ctx := context.Background()
		// Given a store whose process died
		s, _ := e.open(t, dir)
		crash(s)
		// When the next run opens it and closes it cleanly without recovering
		// it (a bridge that failed to start)
		s2, _ := e.open(t, dir)
		require.False(t, s2.Info().CleanShutdown)
		since := s2.Info().UncleanSince
		require.False(t, since.IsZero())
		require.NoError(t, s2.Close())
		// Then the run after it still knows the crash, and since when
		s3, _ := e.open(t, dir)
		require.False(t, s3.Info().CleanShutdown, "a clean close without Recover made the crash forgotten")
		require.Equal(t, since, s3.Info().UncleanSince)
		// When that run recovers and shuts down cleanly
		rep, err := s3.Recover(ctx, RecoverInput{StopSent: true})
		require.NoError(t, err)
		require.False(t, rep.CleanShutdown)
		require.NoError(t, s3.Close())
		// Then the next one reads a clean shutdown
		s4, _ := e.open(t, dir)
		require.True(t, s4.Info().CleanShutdown)
		require.True(t, s4.Info().UncleanSince.IsZero())
	})
}

func TestRecover_RecordsTheCrashFaultWithTheRestart(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		tests := []struct {
			name      string
			previous  *safety.Event // a fault latched before the crash
			wantCause string
		}{
			{name: "no fault before", wantCause: "the bridge restarted after an unclean shutdown"},
			{
				name:      "a fault latched before keeps its cause",
				previous:  &safety.Event{Kind: safety.EventFaultLatched, At: t0, TaskID: "t-1", By: "supervisor", Reason: "recovery failed"},
				wantCause: "recovery failed",
			},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				dir := t.TempDir()
				ctx := context.Background()
				// Given a store whose process died
				s, clk := e.open(t, dir)
				if tc.previous != nil {
					s.SafetyEvent(*tc.previous)
					require.NoError(t, s.SyncLatches(ctx))
				}
				crash(s)
				// When the next run recovers with the fault the bridge latched
				// for the crash
				s2, _ := e.open(t, dir, func(c *Conf) { c.Clock = clk })
				require.False(t, s2.Info().CleanShutdown)
				f := safety.FaultStatus{Latched: true, Reason: "the bridge restarted after an unclean shutdown", Since: t0.Add(time.Minute)}
				rep, err := s2.Recover(ctx, RecoverInput{By: "bridge", StopSent: true, CrashFault: &f})
				require.NoError(t, err)
				// Then the report has the fault, with its first cause
				require.True(t, rep.CrashFault)
				require.True(t, rep.Fault.Latched)
				require.Equal(t, tc.wantCause, rep.Fault.Reason)
				// And the fault is audited by the bridge, right before the
				// restart, which names it
				recs := auditAll(t, s2, AuditQuery{})
				last, fault := recs[len(recs)-1], recs[len(recs)-2]
				require.Equal(t, AuditBridgeRestart, last.Type)
				require.Contains(t, last.Summary, "after a crash")
				require.Contains(t, last.Summary, "fault latched: the bridge restarted after an unclean shutdown")
				require.Equal(t, "safety.fault_latched", fault.Type)
				require.Equal(t, "bridge", fault.Actor)
				require.Equal(t, f.Reason, fault.Reason)
				// And the latch is on the disk: a second crash before anyone
				// clears it still finds it
				crash(s2)
				s3, _ := e.open(t, dir)
				_, got, err := s3.Latches(ctx, "")
				require.NoError(t, err)
				require.True(t, got.Latched)
				require.Equal(t, tc.wantCause, got.Reason)
			})
		}
	})
}

// crash stops a store's goroutine and connections without the clean
// shutdown mark, like a kill -9 would (SQLite's files stay as they are).
func crash(s *Store) {
	s.closeMu.Lock()
	s.closed = true
	s.closeMu.Unlock()
	close(s.quit)
	<-s.done
	s.closeDBs()          // PostgreSQL drops the owner lock with its session
	_ = unlockDir(s.lock) // the kernel does this for a killed process
}

func TestOpen_SecondProcessIsLockedOut(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		dir := t.TempDir()
		// Given a store open in this data dir
		s, _ := e.open(t, dir)
		// When another opener tries the same store (for PostgreSQL from
		// another data dir: the database is what is shared)
		c := e.conf(t, dir)
		if e.driver == DriverPostgres {
			c.Dir = t.TempDir()
		}
		_, err := Open(context.Background(), c)
		// Then it is refused, naming the lock
		require.ErrorIs(t, err, ErrLocked)
		// And once the first closes, the store opens again
		require.NoError(t, s.Close())
		s2, _ := e.open(t, dir)
		require.False(t, s2.Info().Fresh)
	})
}

func TestOpen_RefusesMissingCorruptOrForeignDatabases(t *testing.T) {
	tests := []struct {
		name    string
		damage  func(t *testing.T, dir string)
		want    error
		wantMsg string
	}{
		{"database deleted, marker kept", func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, DefaultFile)))
		}, ErrMissing, "is missing"},
		{"database emptied", func(t *testing.T, dir string) {
			require.NoError(t, os.Truncate(filepath.Join(dir, DefaultFile), 0))
		}, ErrCorrupt, "empty"},
		{"header overwritten", func(t *testing.T, dir string) {
			overwrite(t, filepath.Join(dir, DefaultFile), 0, []byte("definitely not sqlite"))
		}, ErrCorrupt, "bad header"},
		{"pages overwritten", func(t *testing.T, dir string) {
			p := filepath.Join(dir, DefaultFile)
			fi, err := os.Stat(p)
			require.NoError(t, err)
			junk := make([]byte, fi.Size()-4096)
			for i := range junk {
				junk[i] = byte(i*7 + 3)
			}
			overwrite(t, p, 4096, junk)
		}, ErrCorrupt, ""},
		{"database from another data dir", func(t *testing.T, dir string) {
			other := t.TempDir()
			s, _ := openTest(t, other)
			require.NoError(t, s.Close())
			b, err := os.ReadFile(filepath.Join(other, DefaultFile))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, DefaultFile), b, 0o600))
		}, ErrForeign, "marker names store"},
		{"marker garbled", func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, DefaultFile+MarkerSuffix), []byte("{oops"), 0o600))
		}, ErrCorrupt, "marker"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given a store with a latched e-stop, closed cleanly
			dir := t.TempDir()
			s, _ := openTest(t, dir)
			s.SafetyEvent(safety.Event{Kind: safety.EventEStopPressed, At: t0, By: "op", Reason: "test"})
			require.NoError(t, s.Close())
			// When its files are damaged and it is opened again
			tc.damage(t, dir)
			_, err := Open(context.Background(), Conf{Dir: dir, Logger: quietLogger()})
			// Then Open refuses with a clear error instead of starting empty
			require.Error(t, err)
			require.ErrorIs(t, err, tc.want)
			var oe *OpenError
			require.ErrorAs(t, err, &oe, "%T %v", err, err)
			require.Contains(t, err.Error(), tc.wantMsg)
			require.NotEmpty(t, oe.Remedy)
		})
	}
}

func overwrite(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func TestOpen_MissingDatabaseWithoutMarkerStartsFresh(t *testing.T) {
	// Given a data dir whose database and marker were both removed on
	// purpose
	dir := t.TempDir()
	s, _ := openTest(t, dir)
	id := s.Info().StoreID
	require.NoError(t, s.Close())
	require.NoError(t, os.Remove(filepath.Join(dir, DefaultFile)))
	require.NoError(t, os.Remove(filepath.Join(dir, DefaultFile+MarkerSuffix)))
	// When it is opened
	s2, _ := openTest(t, dir)
	// Then a new store starts
	require.True(t, s2.Info().Fresh)
	require.NotEqual(t, id, s2.Info().StoreID)
}

func TestOpen_SchemaNewerThanBuildIsRefused(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		dir := t.TempDir()
		s, _ := e.open(t, dir)
		require.NoError(t, s.Close())
		// Given a database a newer build migrated further
		db := e.rawDB(t, dir)
		_, err := db.Exec(`INSERT INTO schema_migrations(version, name, applied_at) VALUES(99, 'future', 0)`)
		require.NoError(t, err)
		require.NoError(t, db.Close())
		// When this build opens it
		_, err = Open(context.Background(), e.conf(t, dir))
		// Then it refuses and says why
		require.ErrorIs(t, err, ErrCorrupt)
		require.Contains(t, err.Error(), "schema version 99")
	})
}

func TestOpen_ConfErrorsNameTheField(t *testing.T) {
	tests := []struct {
		name string
		conf Conf
		want string
	}{
		{"no dir", Conf{}, "Conf.Dir"},
		{"path as file", Conf{Dir: t.TempDir(), File: "../x.db"}, "Conf.File"},
		{"negative queue", Conf{Dir: t.TempDir(), QueueSize: -1}, "Conf.QueueSize"},
		{"negative latch retry", Conf{Dir: t.TempDir(), LatchRetry: -1}, "Conf.LatchRetry"},
		{"unknown driver", Conf{Dir: t.TempDir(), Driver: "mysql"}, "Conf.Driver"},
		{"postgres without a DSN", Conf{Driver: DriverPostgres}, "Conf.DSN is required"},
		{"a DSN for sqlite", Conf{Dir: t.TempDir(), DSN: "postgres://u:p@127.0.0.1/db"}, "Conf.DSN is for the postgres driver"},
		{"malformed DSN", Conf{Driver: DriverPostgres, DSN: "postgres://u:p4ss@[::1"}, "Conf.DSN is not a valid"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(context.Background(), tc.conf)
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), "p4ss", "the DSN's password is in the error")
		})
	}
}

func TestMigrate_V1DatabaseMigratesAndKeepsItsData(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		// Given a database created by a build that knew only migration 1, with
		// a task in it
		dir := t.TempDir()
		db := e.rawDB(t, dir)
		applied, v, err := migrateTo(context.Background(), e.dialect(), db, t0, 1)
		require.NoError(t, err)
		require.Equal(t, []int{1}, applied)
		require.Equal(t, 1, v)
		_, err = db.Exec(`INSERT INTO tasks(id, tool, arguments, status, created_at, updated_at) VALUES('task-old', 'move_base_to', '{}', 'executing', 1, 1)`)
		require.NoError(t, err)
		_, err = db.Exec(`INSERT INTO meta(key, value) VALUES('store_id', 'abc'), ('running', '1')`)
		require.NoError(t, err)
		require.NoError(t, db.Close())

		// When this build opens it
		s, _ := e.open(t, dir)

		// Then migrations 2 to 4 ran, in order, and the old data is still there
		require.Equal(t, []int{2, 3, 4, 5}, s.Info().Migrated)
		require.Equal(t, 5, s.Info().SchemaVersion)
		require.Equal(t, "abc", s.Info().StoreID)
		v1, err := s.Task(context.Background(), "task-old")
		require.NoError(t, err)
		require.Equal(t, fsm.Executing, v1.Status)
		var n int
		require.NoError(t, s.r.QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&n))
		require.Equal(t, 5, n)
		// And the new table works
		es, f, err := s.Latches(context.Background(), "")
		require.NoError(t, err)
		require.False(t, es.Active)
		require.False(t, f.Latched)
	})
}

func TestMigrate_FailedMigrationChangesNothing(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		// Given a v1 database whose latches table already exists (so
		// migration 2 fails half-way)
		dir := t.TempDir()
		db := e.rawDB(t, dir)
		_, _, err := migrateTo(context.Background(), e.dialect(), db, t0, 1)
		require.NoError(t, err)
		_, err = db.Exec(`CREATE INDEX audit_type ON audit(type)`)
		require.NoError(t, err)
		// When the migration runs
		_, v, err := migrate(context.Background(), e.dialect(), db, t0)
		// Then it fails, and its transaction left no trace
		require.Error(t, err)
		require.Equal(t, 1, v)
		require.False(t, e.tableExists(t, db, "latches"))
		var n int
		require.NoError(t, db.QueryRow(`SELECT MAX(version) FROM schema_migrations`).Scan(&n))
		require.Equal(t, 1, n)
		require.NoError(t, db.Close())
	})
}

func TestStore_PragmasAreDurable(t *testing.T) {
	s, _ := openTest(t, t.TempDir())
	var mode string
	var sync int
	require.NoError(t, s.w.QueryRow(`PRAGMA journal_mode`).Scan(&mode))
	require.NoError(t, s.w.QueryRow(`PRAGMA synchronous`).Scan(&sync))
	require.Equal(t, "wal", mode)
	require.Equal(t, 2, sync, "synchronous=FULL")
	require.NoError(t, s.Healthy(context.Background()))
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.Healthy(context.Background()), ErrClosed)
}

// TestOpen_ADatabaseOfTheBuildBeforeTheEngineLayerOpens opens
// testdata/sqlite-v2, written by the store as it was before PostgreSQL
// came (migrations in Go, schema version 2): a task executing, one
// waiting for approval, a completed idempotency key and a latched e-stop,
// closed cleanly.
func TestOpen_ADatabaseOfTheBuildBeforeTheEngineLayerOpens(t *testing.T) {
	// Given a copy of that data dir
	dir := t.TempDir()
	for _, f := range []string{DefaultFile, DefaultFile + MarkerSuffix} {
		b, err := os.ReadFile(filepath.Join("testdata", "sqlite-v2", f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o600))
	}
	ctx := context.Background()
	// When this build opens it
	s, _ := openTest(t, dir)
	// Then it is the same store, migrated to the fleet's version, after a
	// clean shutdown
	info := s.Info()
	require.Equal(t, "ad2ae85fadd32cae", info.StoreID)
	require.Equal(t, 5, info.SchemaVersion)
	require.Equal(t, []int{3, 4, 5}, info.Migrated)
	require.True(t, info.CleanShutdown)
	// And everything it held is there: the latch, the key, the tasks
	es, _, err := s.Latches(ctx, "")
	require.NoError(t, err)
	require.True(t, es.Active)
	require.Equal(t, "fixture e-stop", es.Reason)
	rec, ok, err := s.Lookup(ctx, "agent\x00key-fix")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "task-exec", rec.TaskID)
	before := auditAll(t, s, AuditQuery{})
	require.Equal(t, "safety.estop_pressed", before[len(before)-1].Type)
	rep, err := s.Recover(ctx, RecoverInput{StopSent: true})
	require.NoError(t, err)
	require.ElementsMatch(t, []InterruptedTask{{ID: "task-exec", Tool: "move_base_to", From: fsm.Executing}, {ID: "task-wait", Tool: "move_arm_to", From: fsm.AwaitingApproval}}, rep.Interrupted)
	require.Equal(t, []string{"apr_fix"}, rep.ExpiredApprovals)
	// And the audit trail continues where it ended
	after := auditAll(t, s, AuditQuery{})
	require.Equal(t, before, after[:len(before)])
	require.Equal(t, []string{"task.interrupted", "task.interrupted", "approval.expired", AuditBridgeRestart}, types(after[len(before):]))
}
