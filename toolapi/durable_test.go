package toolapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/fsm"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/store"
	"github.com/robot-bridge/robot-bridge/toolapi"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// grantedStoreTasks is a runner under an active grant that keeps its
// tasks where the real one does: every Submit records the task's
// transitions in the store (requested → approved by grant g-1 →
// executing: one motion) before it returns, and Get reads the store, as
// the bridge does for tasks of a previous run. motions is shared by every
// run of the bridge in a test.
type grantedStoreTasks struct {
	st      *store.Store
	motions *atomic.Int32
}

var _ toolapi.Tasks = grantedStoreTasks{}

func (g grantedStoreTasks) Submit(ctx context.Context, r actions.Request) (actions.TaskView, error) {
	id := fmt.Sprintf("t-%d", g.motions.Add(1))
	rec := actions.TransitionRecord{TaskID: id, Tool: r.Tool, Arguments: r.Arguments, To: fsm.Requested, By: r.Principal}
	if err := g.st.RecordTransition(ctx, rec); err != nil {
		return actions.TaskView{}, err
	}
	for _, ev := range []fsm.Event{fsm.EvPreauthorized, fsm.EvStart} {
		to, ok := fsm.Next(rec.To, ev)
		if !ok {
			return actions.TaskView{}, fmt.Errorf("no transition %s from %s", ev, rec.To)
		}
		rec = actions.TransitionRecord{TaskID: id, Tool: r.Tool, From: rec.To, To: to, Event: ev, By: "supervisor", GrantID: "g-1"}
		if err := g.st.RecordTransition(ctx, rec); err != nil {
			return actions.TaskView{}, err
		}
	}
	return g.Get(id)
}

func (g grantedStoreTasks) Get(id string) (actions.TaskView, error) {
	v, err := g.st.Task(context.Background(), id)
	if errors.Is(err, store.ErrNotFound) {
		return v, toolerr.New(toolerr.NotFound, "there is no task %q", id)
	}
	return v, err
}

func (g grantedStoreTasks) Wait(_ context.Context, id string, _ time.Duration) (actions.TaskView, error) {
	return g.Get(id)
}

func (g grantedStoreTasks) Cancel(_ context.Context, id, _ string) (actions.TaskView, error) {
	return g.Get(id)
}

func (grantedStoreTasks) Stop(context.Context, string, string) (actions.StopReport, error) {
	return actions.StopReport{Text: "Stopped."}, nil
}

func (grantedStoreTasks) Active() (actions.TaskView, bool) { return actions.TaskView{}, false }

// lostCompletion is the store as a crash right after Submit leaves it: the
// key was reserved and the task recorded, but the key never learned its
// task from the tool API.
type lostCompletion struct{ toolapi.IdempotencyStore }

func (lostCompletion) Complete(context.Context, string, string, *toolapi.ErrorBody) error {
	return errors.New("the bridge crashed before the key was completed")
}

var durableTokens = toolapi.Tokens{Agent: "agent-token-0123456789", Operator: "operator-token-0123456789"}

// run is one run of the bridge's tool API over the store in dir.
type run struct {
	st *store.Store
	ts *httptest.Server
}

func startRun(t *testing.T, dir string, motions *atomic.Int32, idem func(*store.Store) toolapi.IdempotencyStore) *run {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, store.Conf{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	// What the bridge does before the listener opens.
	_, err = st.Recover(ctx, store.RecoverInput{StopSent: true})
	require.NoError(t, err)
	cfg, err := hwconfig.Load("../hw-configs/sim-mobile-manipulator.yaml")
	require.NoError(t, err)
	srv, err := toolapi.New(toolapi.Conf{
		HWConfig: cfg, Tasks: grantedStoreTasks{st: st, motions: motions}, Tokens: durableTokens,
		Idempotency: idem(st), Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return &run{st: st, ts: ts}
}

// stop ends the run; the store is closed so the next run can open it.
func (r *run) stop(t *testing.T) {
	t.Helper()
	r.ts.Close()
	require.NoError(t, r.st.Close())
}

type envelope struct {
	OK   bool             `json:"ok"`
	Task *toolapi.TaskRef `json:"task"`
	Text string           `json:"text"`
}

func (r *run) post(t *testing.T, msg any) envelope {
	t.Helper()
	raw, err := json.Marshal(msg)
	require.NoError(t, err)
	req, err := http.NewRequest("POST", r.ts.URL+"/v1/tool_calls", bytes.NewReader(raw))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+durableTokens.Agent)
	resp, err := r.ts.Client().Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	var res toolapi.ToolCallsResult
	require.NoError(t, json.Unmarshal(body, &res), string(body))
	require.Len(t, res.Messages, 1)
	var env envelope
	require.NoError(t, json.Unmarshal([]byte(res.Messages[0].Content), &env), res.Messages[0].Content)
	return env
}

func TestToolCalls_RepostAfterRestartDoesNotMoveTwice(t *testing.T) {
	same := func(st *store.Store) toolapi.IdempotencyStore { return st }
	cases := []struct {
		name string
		// firstRun is the idempotency store of the run before the restart.
		firstRun func(*store.Store) toolapi.IdempotencyStore
	}{
		{"after a restart", same},
		{"after a crash before the key learned its task", func(st *store.Store) toolapi.IdempotencyStore { return lostCompletion{st} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Given a bridge on a durable store with a grant that approves
			// move_base_to at once, and an assistant message that moved the
			// robot
			dir := t.TempDir()
			var motions atomic.Int32
			msg := map[string]any{"role": "assistant", "session_id": "conv-1", "tool_calls": []any{map[string]any{
				"id": "call_1", "type": "function", "function": map[string]any{"name": "move_base_to", "arguments": `{"location": "table"}`},
			}}}
			first := startRun(t, dir, &motions, tc.firstRun)
			env := first.post(t, msg)
			require.True(t, env.OK)
			require.Equal(t, fsm.Executing, env.Task.Status)
			require.EqualValues(t, 1, motions.Load())

			// When the bridge restarts and the host re-posts the message
			first.stop(t)
			second := startRun(t, dir, &motions, same)
			again := second.post(t, msg)

			// Then the answer is the same task as the restart left it, and
			// no second motion was submitted
			require.NotNil(t, again.Task, "%+v", again)
			require.Equal(t, env.Task.ID, again.Task.ID)
			require.Equal(t, fsm.Interrupted, again.Task.Status)
			require.Contains(t, again.Text, "nothing was sent to the robot again")
			require.EqualValues(t, 1, motions.Load())
		})
	}
}
