package store

import (
	"bytes"
	"context"
	"database/sql"
	"log/slog"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/store/pgtest"
	"github.com/robot-bridge/robot-bridge/toolapi"
)

// columns lists "table.column" of every table in the store's database.
func columns(t *testing.T, s *Store) []string {
	t.Helper()
	q := `SELECT m.name || '.' || p.name FROM sqlite_master m, pragma_table_info(m.name) p
		WHERE m.type='table' AND m.name NOT LIKE 'sqlite_%'`
	if s.d.driver == DriverPostgres {
		q = `SELECT table_name || '.' || column_name FROM information_schema.columns WHERE table_schema=current_schema()`
	}
	rows, err := s.w.Query(q)
	require.NoError(t, err)
	defer closeRead(rows)
	var out []string
	for rows.Next() {
		var c string
		require.NoError(t, rows.Scan(&c))
		out = append(out, c)
	}
	require.NoError(t, rows.Err())
	sort.Strings(out)
	return out
}

func TestSchema_BothEnginesHoldTheSameTablesAndColumns(t *testing.T) {
	// Given a store migrated to the latest version on each engine
	got := map[Driver][]string{}
	versions := map[Driver]int{}
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		s, _ := e.open(t, t.TempDir())
		got[e.driver] = columns(t, s)
		versions[e.driver] = s.Info().SchemaVersion
	})
	// Then both have the same version and the same tables and columns, so
	// the shared SQL means the same on both and the two histories cannot
	// drift apart
	require.Len(t, sqliteMigrations, len(postgresMigrations))
	for i := range sqliteMigrations {
		require.Equal(t, sqliteMigrations[i].name, postgresMigrations[i].name, "migration %d", i+1)
	}
	require.Equal(t, versions[DriverSQLite], versions[DriverPostgres])
	require.Contains(t, got[DriverSQLite], "transitions.to_state")
	require.Contains(t, got[DriverSQLite], "schema_migrations.version")
	require.Equal(t, got[DriverSQLite], got[DriverPostgres])
}

func TestRecordTransition_AnyTextIsRecorded(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		s, _ := e.open(t, t.TempDir())
		ctx := context.Background()
		// Given a reason and arguments with a NUL byte and invalid UTF-8, as
		// an agent or an operator may send them
		reason := "stop\x00here \xff"
		create(t, s, "task-n", "grasp", map[string]any{"object_id": "cup\x00"}, "agent", t0)
		// When a transition with it is recorded
		err := s.RecordTransition(ctx, actions.TransitionRecord{
			TaskID: "task-n", Tool: "grasp", From: fsm.Requested, To: fsm.Cancelled, Event: fsm.EvCancel, At: t0, By: "op\x00", Reason: reason,
		})
		// Then it is written (PostgreSQL's text refuses NUL bytes and invalid
		// UTF-8: they are replaced, never a reason to lose the record)
		require.NoError(t, err)
		trs, err := s.Transitions(ctx, "task-n")
		require.NoError(t, err)
		require.Len(t, trs, 2)
		require.Equal(t, e.storedText(reason), trs[1].Reason)
		require.Equal(t, e.storedText("op\x00"), trs[1].By)
		v, err := s.Task(ctx, "task-n")
		require.NoError(t, err)
		require.Equal(t, "cup\x00", v.Arguments["object_id"], "JSON escapes the NUL, on both engines")
	})
}

func TestPostgres_SessionsCommitSynchronouslyWhateverTheDSNSays(t *testing.T) {
	e := newTestEngine(t, DriverPostgres)
	dir := t.TempDir()
	// Given a DSN that asks for asynchronous commits
	c := e.conf(t, dir)
	off := c.DSN + "&options=" + strings.ReplaceAll(url.QueryEscape("-c synchronous_commit=off"), "+", "%20")
	s, _ := e.open(t, dir, func(c *Conf) { c.DSN = off })
	// Then every connection of the store commits synchronously
	for range pgPoolSize + 1 {
		var v string
		require.NoError(t, s.w.QueryRow(`SHOW synchronous_commit`).Scan(&v))
		require.Equal(t, "on", v)
	}
	require.NoError(t, s.Healthy(context.Background()))
}

func TestPostgres_EmptyOrForeignDatabaseIsRefused(t *testing.T) {
	e := newTestEngine(t, DriverPostgres)
	ctx := context.Background()
	// Given a bridge's data dir that used a PostgreSQL store, closed cleanly
	dir := t.TempDir()
	s, _ := e.open(t, dir)
	s.SafetyEvent(safety.Event{Kind: safety.EventEStopPressed, At: t0, By: "op", Reason: "test"})
	require.NoError(t, s.Close())
	// When the DSN names an empty database
	c := e.conf(t, dir)
	c.DSN = e.pg.CreateDB(t)
	_, err := Open(ctx, c)
	// Then Open refuses instead of starting empty and forgetting the e-stop
	require.ErrorIs(t, err, ErrMissing)
	require.ErrorContains(t, err, "the database is empty")
	// And the empty database stayed empty
	empty, err := sql.Open("pgx", c.DSN)
	require.NoError(t, err)
	defer func() { _ = empty.Close() }()
	require.False(t, e.tableExists(t, empty, "schema_migrations"))
	// When it names another store's database
	other := t.TempDir()
	s2, _ := e.open(t, other)
	require.NoError(t, s2.Close())
	c.DSN = e.dsn(t, other)
	_, err = Open(ctx, c)
	// Then Open refuses that too
	require.ErrorIs(t, err, ErrForeign)
}

// syncBuffer is a log sink tests read while the store writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestPostgres_ServerRestartMidRunIsUnavailableThenResumes(t *testing.T) {
	// Given a store on a server of its own, logging everything, with a task
	// executing and an idempotency key reserved
	pg := pgtest.New(t)
	logs := &syncBuffer{}
	clk := clockwork.NewFakeClockAt(t0)
	s, err := Open(context.Background(), Conf{
		Driver: DriverPostgres, DSN: pg.CreateDB(t), Dir: t.TempDir(), Clock: clk, LatchRetry: 10 * time.Millisecond,
		BusyTimeout: 2 * time.Second, Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	create(t, s, "task-1", "move_base_to", map[string]any{"x": 1.0}, "agent", t0)
	st := move(t, s, "task-1", "move_base_to", fsm.Requested, fsm.EvPreauthorized, t0, "config")
	_, reserved, err := s.Reserve(ctx, "agent\x00k-1", "move_base_to", "h1")
	require.NoError(t, err)
	require.True(t, reserved)

	// When the server goes away
	require.NoError(t, pg.Stop())

	// Then the transition that would allow the motion is refused with a
	// clear error the bridge answers UNAVAILABLE, naming the server without
	// the password
	err = s.RecordTransition(ctx, actions.TransitionRecord{
		TaskID: "task-1", Tool: "move_base_to", From: st, To: fsm.Executing, Event: fsm.EvStart, At: t0, By: "supervisor",
	})
	require.ErrorIs(t, err, ErrUnavailable)
	require.ErrorContains(t, err, "the PostgreSQL server at postgres://bridge@"+pg.Addr())
	require.NotContains(t, err.Error(), pgtest.Password)
	// And so is a new idempotency key, and the store is not healthy
	_, _, err = s.Reserve(ctx, "agent\x00k-2", "move_base_to", "h2")
	require.ErrorIs(t, err, ErrUnavailable)
	require.ErrorIs(t, s.Healthy(ctx), ErrUnavailable)
	// And an e-stop pressed now is in force but reported not recorded
	s.SafetyEvent(safety.Event{Kind: safety.EventEStopPressed, At: t0.Add(time.Second), By: "alice", Reason: "outage drill"})
	err = s.SyncLatches(ctx)
	require.ErrorIs(t, err, ErrLatchNotRecorded)
	require.ErrorIs(t, err, ErrUnavailable)
	require.ErrorIs(t, s.Healthy(ctx), ErrLatchNotRecorded)

	// When the server is back, without a restart of the store
	require.NoError(t, pg.Start())

	// Then the latch lane's own retry records the e-stop
	require.Eventually(t, func() bool { return s.SyncLatches(ctx) == nil }, 30*time.Second, 10*time.Millisecond)
	es, _, err := s.Latches(ctx, "")
	require.NoError(t, err)
	require.True(t, es.Active)
	require.Equal(t, "outage drill", es.Reason)
	// And durable writes work again
	require.NoError(t, s.RecordTransition(ctx, actions.TransitionRecord{
		TaskID: "task-1", Tool: "move_base_to", From: st, To: fsm.Executing, Event: fsm.EvStart, At: t0.Add(2 * time.Second), By: "supervisor",
	}))
	_, reserved, err = s.Reserve(ctx, "agent\x00k-2", "move_base_to", "h2")
	require.NoError(t, err)
	require.True(t, reserved)
	require.NoError(t, s.Healthy(ctx))
	// And nothing from the outage was written twice or half: one
	// executing transition, the one after the server came back
	trs, err := s.Transitions(ctx, "task-1")
	require.NoError(t, err)
	require.Equal(t, []fsm.State{fsm.Requested, fsm.Approved, fsm.Executing}, []fsm.State{trs[0].To, trs[1].To, trs[2].To})
	require.Len(t, trs, 3)
	require.Equal(t, t0.Add(2*time.Second), trs[2].At)
	// And the store took its lock again: a second opener is still refused
	_, err = Open(ctx, Conf{Driver: DriverPostgres, DSN: s.conf.DSN, Logger: quietLogger()})
	require.ErrorIs(t, err, ErrLocked)
	// And no log line carried the password
	require.NoError(t, s.Close())
	require.Contains(t, logs.String(), "latch change not recorded")
	require.NotContains(t, logs.String(), pgtest.Password)
}

func TestPostgres_ACommittedTransitionSurvivesAServerCrash(t *testing.T) {
	// Given a store on a server of its own
	pg := pgtest.New(t)
	dsn := pg.CreateDB(t)
	dir := t.TempDir()
	open := func() *Store {
		s, err := Open(context.Background(), Conf{Driver: DriverPostgres, DSN: dsn, Dir: dir, Clock: clockwork.NewFakeClockAt(t0), Logger: quietLogger()})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	s := open()
	create(t, s, "task-c", "move_arm_to", map[string]any{"pose": "ready"}, "agent", t0)
	st := move(t, s, "task-c", "move_arm_to", fsm.Requested, fsm.EvPreauthorized, t0, "config")
	// When the executing transition returns — the moment the runner sends
	// the command — and the server dies at once, without a checkpoint
	move(t, s, "task-c", "move_arm_to", st, fsm.EvStart, t0, "supervisor")
	require.NoError(t, pg.Crash())
	crash(s)
	// Then after the server's crash recovery the transition is there
	require.NoError(t, pg.Start())
	s2 := open()
	v, err := s2.Task(context.Background(), "task-c")
	require.NoError(t, err)
	require.Equal(t, fsm.Executing, v.Status)
	require.False(t, s2.Info().CleanShutdown)
}

func TestIdempotency_ConcurrentReservesOfOneKeyMakeOneTask(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		s, _ := e.open(t, t.TempDir())
		ctx := context.Background()
		hash := safety.ArgsHash("move_base_to", map[string]any{"x": 1.0})
		// Given two requests with the same key racing, each creating its
		// task only when it reserved the key (as the tool API does)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var tasks []string
		start := make(chan struct{})
		for i := range 2 {
			wg.Go(func() {
				<-start
				rec, reserved, err := s.Reserve(ctx, "agent\x00same", "move_base_to", hash)
				if err != nil {
					t.Errorf("Reserve: %v", err)
					return
				}
				if !reserved {
					if rec.State != toolapi.IdemPending && rec.State != toolapi.IdemDone {
						t.Errorf("the loser read a record in state %q", rec.State)
					}
					return
				}
				id := []string{"task-a", "task-b"}[i]
				if err := s.RecordTransition(ctx, actions.TransitionRecord{TaskID: id, Tool: "move_base_to", Arguments: map[string]any{"x": 1.0}, To: fsm.Requested, At: t0, By: "agent"}); err != nil {
					t.Errorf("RecordTransition: %v", err)
					return
				}
				mu.Lock()
				tasks = append(tasks, id)
				mu.Unlock()
			})
		}
		close(start)
		wg.Wait()
		// Then exactly one task exists, and the key names it
		require.Len(t, tasks, 1)
		rec, ok, err := s.Lookup(ctx, "agent\x00same")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, tasks[0], rec.TaskID)
		all, err := s.Transitions(ctx, "")
		require.NoError(t, err)
		require.Len(t, all, 1)
	})
}

func TestPostgres_HealthyAgainOnceTheServerIsBack(t *testing.T) {
	// Given a store whose last write failed because the server was down
	pg := pgtest.New(t)
	s, err := Open(context.Background(), Conf{Driver: DriverPostgres, DSN: pg.CreateDB(t), Clock: clockwork.NewFakeClockAt(t0), Logger: quietLogger()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	require.NoError(t, pg.Stop())
	_, _, err = s.Reserve(ctx, "agent\x00k", "grasp", "h")
	require.ErrorIs(t, err, ErrUnavailable)
	require.ErrorIs(t, s.Healthy(ctx), ErrUnavailable)
	// When the server is back, and nothing has written since
	require.NoError(t, pg.Start())
	// Then the store reports itself writable (for /readyz), without a
	// write having to prove it first
	require.Eventually(t, func() bool { return s.Healthy(ctx) == nil }, 30*time.Second, 10*time.Millisecond)
}

func TestPostgres_AWrongPasswordIsAClearErrorWithoutThePassword(t *testing.T) {
	// Given a DSN with a wrong password
	e := newTestEngine(t, DriverPostgres)
	good := e.dsn(t, t.TempDir())
	bad := strings.Replace(good, pgtest.Password, "Wr0ng-Secret-42", 1)
	require.NotEqual(t, good, bad)
	logs := &syncBuffer{}
	// When the store opens it
	_, err := Open(context.Background(), Conf{Driver: DriverPostgres, DSN: bad, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	// Then the error says what the server said and names the database,
	// and neither it nor the log holds the password
	require.ErrorContains(t, err, "password authentication failed")
	require.ErrorContains(t, err, "postgres://bridge@"+e.pg.Addr())
	require.NotContains(t, err.Error(), "Wr0ng-Secret-42")
	require.NotContains(t, logs.String(), "Wr0ng-Secret-42")
}

func FuzzSafeText(f *testing.F) {
	for _, s := range []string{"", "plain", "nul\x00byte", "bad \xff utf8", "\x00\x00", "ünïcödé"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := safeText(s)
		// PostgreSQL's text takes it: valid UTF-8, no NUL byte
		require.True(t, utf8.ValidString(out))
		require.NotContains(t, out, "\x00")
		// And text it already took is kept as it is
		if utf8.ValidString(s) && !strings.Contains(s, "\x00") {
			require.Equal(t, s, out)
		}
	})
}

func TestPostgres_AStoreThatLostItsLockToAnotherNeverWritesAgain(t *testing.T) {
	e := newTestEngine(t, DriverPostgres)
	ctx := context.Background()
	// Given a store open on a database
	dir := t.TempDir()
	a, _ := e.open(t, dir)
	create(t, a, "task-a", "move_base_to", map[string]any{"x": 1.0}, "agent", t0)
	// When its lock's session is killed (as a lost connection would end
	// it) and another process opens the same store meanwhile
	a.own.mu.Lock()
	pid := a.own.pid
	a.own.mu.Unlock()
	var killed bool
	require.NoError(t, a.w.QueryRowContext(ctx, `SELECT pg_terminate_backend($1)`, pid).Scan(&killed))
	require.True(t, killed)
	var b *Store
	require.Eventually(t, func() bool {
		s, err := Open(ctx, Conf{Driver: DriverPostgres, DSN: e.dsn(t, dir), Clock: clockwork.NewFakeClockAt(t0), Logger: quietLogger()})
		b = s
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	t.Cleanup(func() { _ = b.Close() })
	// Then the first store's writes are refused, naming the lock, and
	// nothing of them lands
	err := a.RecordTransition(ctx, actions.TransitionRecord{TaskID: "task-a", Tool: "move_base_to", From: fsm.Requested, To: fsm.Cancelled, Event: fsm.EvCancel, At: t0, By: "agent"})
	require.ErrorIs(t, err, ErrLocked)
	require.ErrorIs(t, a.Healthy(ctx), ErrLocked)
	trs, err := b.Transitions(ctx, "task-a")
	require.NoError(t, err)
	require.Len(t, trs, 1)
	// And the store that holds the lock writes
	move(t, b, "task-a", "move_base_to", fsm.Requested, fsm.EvCancel, t0, "agent")
}

func TestPostgres_AServerWithoutFsyncIsRefused(t *testing.T) {
	// Given a server that does not flush its commits to the disk
	pg := pgtest.New(t, "fsync=off")
	// When a store opens a database on it
	_, err := Open(context.Background(), Conf{Driver: DriverPostgres, DSN: pg.CreateDB(t), Logger: quietLogger()})
	// Then it refuses, saying why and what to change
	require.ErrorIs(t, err, ErrNotDurable)
	var oe *OpenError
	require.ErrorAs(t, err, &oe)
	require.Contains(t, oe.Problem, "fsync=off")
	require.Contains(t, oe.Remedy, "turn fsync on")
}
