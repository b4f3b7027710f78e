package store

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/fsm"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// openTest opens a SQLite store in dir on a fake clock and closes it
// when the test ends (closing twice is fine). Tests of both engines use
// testEngine.open.
func openTest(t testing.TB, dir string, edit ...func(*Conf)) (*Store, *clockwork.FakeClock) {
	t.Helper()
	return newTestEngine(t, DriverSQLite).open(t, dir, edit...)
}

// flush waits until the asynchronous writer has committed everything
// queued so far.
func flush(t testing.TB, s *Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.Sync(ctx))
}

// create records a new task the way the runner does.
func create(t testing.TB, s *Store, id, tool string, args map[string]any, by string, at time.Time) {
	t.Helper()
	require.NoError(t, s.RecordTransition(context.Background(), actions.TransitionRecord{
		TaskID: id, Tool: tool, Arguments: args, To: fsm.Requested, At: at, By: by, Reason: "preview of " + tool,
	}))
}

func move(t testing.TB, s *Store, id, tool string, from fsm.State, ev fsm.Event, at time.Time, by string) fsm.State {
	t.Helper()
	to, ok := fsm.Next(from, ev)
	require.True(t, ok, "%s --%s-->", from, ev)
	require.NoError(t, s.RecordTransition(context.Background(), actions.TransitionRecord{
		TaskID: id, Tool: tool, From: from, To: to, Event: ev, At: at, By: by,
	}))
	return to
}

func auditAll(t testing.TB, s *Store, q AuditQuery) []AuditRecord {
	t.Helper()
	var out []AuditRecord
	require.NoError(t, s.ExportAudit(context.Background(), q, func(r AuditRecord) error {
		out = append(out, r)
		return nil
	}))
	return out
}

func types(recs []AuditRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Type
	}
	return out
}
