package grpcapi

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/events"
	"github.com/robot-bridge/robot-bridge/fsm"
	robotbridgev1 "github.com/robot-bridge/robot-bridge/gen/robotbridge/v1"
	"github.com/robot-bridge/robot-bridge/gen/robotbridge/v1/robotbridgev1connect"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

var t0 = time.Date(2026, 5, 1, 14, 0, 0, 0, time.UTC)

// taskAt is task t-1 of the agent in status st at t0+sec.
func taskAt(st fsm.State, fraction float64, sec int) actions.TaskView {
	return actions.TaskView{
		ID: "t-1", Tool: "move_base_to", Arguments: map[string]any{"x": 1.0, "y": 0.5}, Status: st,
		Progress: actions.Progress{Fraction: fraction, Text: "driving"}, Principal: "agent",
		CreatedAt: t0, UpdatedAt: t0.Add(time.Duration(sec) * time.Second),
	}
}

// watch opens WatchTask for id with token.
func watch(t *testing.T, s *testServer, proto, id, token string) *connect.ServerStreamForClient[robotbridgev1.WatchTaskResponse] {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := s.client(proto).WatchTask(ctx, request(&robotbridgev1.WatchTaskRequest{TaskId: id}, token))
	require.NoError(t, err)
	t.Cleanup(func() { _ = stream.Close() })
	return stream
}

// next receives the stream's next task, failing the test if it ended.
func next(t *testing.T, stream *connect.ServerStreamForClient[robotbridgev1.WatchTaskResponse]) *robotbridgev1.Task {
	t.Helper()
	require.True(t, stream.Receive(), "the stream ended early: %v", stream.Err())
	return stream.Msg().GetTask()
}

// requireEnded checks that the stream ended, with code (0: OK).
func requireEnded(t *testing.T, stream *connect.ServerStreamForClient[robotbridgev1.WatchTaskResponse], code connect.Code) {
	t.Helper()
	require.False(t, stream.Receive(), "one more message: %v", stream.Msg())
	if code == 0 {
		require.NoError(t, stream.Err())
		return
	}
	require.Equal(t, code, connect.CodeOf(stream.Err()), "err: %v", stream.Err())
}

func TestWatchTask_StreamsEveryChangeUntilTheTaskEnds(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			// Given an executing task of the agent's, and a stream that
			// sends every progress update
			s := startService(t, func(c *Conf) { c.ProgressInterval = time.Nanosecond }, nil)
			s.tasks.GetFn = func(string) (actions.TaskView, error) { return taskAt(fsm.Executing, 0.1, 1), nil }
			// When the agent watches it
			stream := watch(t, s, proto, "t-1", agentToken)
			// Then the task as it is comes first, with its times
			first := next(t, stream)
			require.Equal(t, "executing", first.GetStatus())
			require.InDelta(t, 0.1, first.GetProgress().GetFraction(), 1e-9)
			require.Equal(t, "agent", first.GetRequestedBy())
			require.Equal(t, map[string]any{"x": 1.0, "y": 0.5}, first.GetArguments().AsMap())
			require.Equal(t, t0.Add(time.Second), first.GetUpdatedAt().AsTime())
			// When it makes progress, another task's change is published,
			// and then it fails
			s.bus.Publish(events.TypeTask, t0, taskAt(fsm.Executing, 0.6, 2))
			other := taskAt(fsm.Succeeded, 1, 2)
			other.ID = "t-2"
			s.bus.Publish(events.TypeTask, t0, other)
			failed := taskAt(fsm.Failed, 0.6, 3)
			failed.Error = toolerr.New(toolerr.ActionFailed, "the base stalled").With("task_id", "t-1")
			s.bus.Publish(events.TypeTask, t0, failed)
			// Then the stream carries its own changes only, in order, and
			// ends with OK after the final task, which says why it failed
			require.InDelta(t, 0.6, next(t, stream).GetProgress().GetFraction(), 1e-9)
			last := next(t, stream)
			require.Equal(t, "failed", last.GetStatus())
			require.Equal(t, robotbridgev1.ErrorType_ACTION_FAILED, last.GetError().GetType())
			require.Equal(t, "the base stalled.", last.GetError().GetMessage(), "a sentence, as get_task says it")
			require.Equal(t, "t-1", last.GetError().GetDetails().AsMap()["task_id"])
			requireEnded(t, stream, 0)
		})
	}
}

func TestWatchTask_ProgressIsSentAtMostOncePerInterval(t *testing.T) {
	t.Run("progress held within the interval gives way to the transition", func(t *testing.T) {
		// Given a stream that sends progress at most once an hour
		s := startService(t, func(c *Conf) { c.ProgressInterval = time.Hour }, nil)
		s.tasks.GetFn = func(string) (actions.TaskView, error) { return taskAt(fsm.Executing, 0.1, 1), nil }
		stream := watch(t, s, "grpc", "t-1", agentToken)
		require.InDelta(t, 0.1, next(t, stream).GetProgress().GetFraction(), 1e-9)
		// When the runner reports progress at its control rate, then
		// the task succeeds
		for i, f := range []float64{0.2, 0.3, 0.4} {
			s.bus.Publish(events.TypeTask, t0, taskAt(fsm.Executing, f, 2+i))
		}
		s.bus.Publish(events.TypeTask, t0, taskAt(fsm.Succeeded, 1, 9))
		// Then the transition is sent at once, and the progress it
		// superseded is not
		require.Equal(t, "succeeded", next(t, stream).GetStatus())
		requireEnded(t, stream, 0)
	})
	t.Run("the newest held progress is sent when the interval has passed", func(t *testing.T) {
		// Given a stream that sends progress at most every 20 ms
		s := startService(t, func(c *Conf) { c.ProgressInterval = 20 * time.Millisecond }, nil)
		s.tasks.GetFn = func(string) (actions.TaskView, error) { return taskAt(fsm.Executing, 0.1, 1), nil }
		stream := watch(t, s, "connect", "t-1", agentToken)
		next(t, stream)
		// When progress is reported once and nothing else happens
		s.bus.Publish(events.TypeTask, t0, taskAt(fsm.Executing, 0.5, 2))
		// Then it is sent
		require.InDelta(t, 0.5, next(t, stream).GetProgress().GetFraction(), 1e-9)
	})
}

func TestWatchTask_NeverStepsBack(t *testing.T) {
	// Given a task whose changes race the snapshot: while the stream reads
	// the task, an older change (approved) and the snapshot's own change
	// are published, so they arrive after the snapshot
	s := startService(t, nil, nil)
	s.tasks.GetFn = func(string) (actions.TaskView, error) {
		s.bus.Publish(events.TypeTask, t0, taskAt(fsm.Approved, 0, 1))
		s.bus.Publish(events.TypeTask, t0, taskAt(fsm.Executing, 0.2, 2))
		return taskAt(fsm.Executing, 0.2, 2), nil
	}
	// When it is watched and then ends
	stream := watch(t, s, "grpc", "t-1", agentToken)
	require.Equal(t, "executing", next(t, stream).GetStatus())
	s.bus.Publish(events.TypeTask, t0, taskAt(fsm.Succeeded, 1, 3))
	// Then the stream goes straight from the snapshot to the end: neither
	// the older change nor the duplicate is sent
	require.Equal(t, "succeeded", next(t, stream).GetStatus())
	requireEnded(t, stream, 0)
}

func TestWatchTask_AnEndedTaskIsSentOnce(t *testing.T) {
	// Given a task that has ended
	s := startService(t, nil, nil)
	s.tasks.GetFn = func(string) (actions.TaskView, error) { return taskAt(fsm.Cancelled, 0.4, 5), nil }
	// When it is watched
	stream := watch(t, s, "connect", "t-1", agentToken)
	// Then it is sent once and the stream ends
	require.Equal(t, "cancelled", next(t, stream).GetStatus())
	requireEnded(t, stream, 0)
}

func TestWatchTask_Access(t *testing.T) {
	operatorsTask := taskAt(fsm.Executing, 0, 1)
	operatorsTask.Principal = "operator"
	tests := []struct {
		name     string
		id       string
		token    string
		task     actions.TaskView
		wantCode connect.Code // 0: the task is streamed
		wantMsg  string
	}{
		{"the agent's own task", "t-1", agentToken, taskAt(fsm.Executing, 0, 1), 0, ""},
		{"the operator watches the agent's task", "t-1", operatorToken, taskAt(fsm.Executing, 0, 1), 0, ""},
		{"the agent may not watch the operator's task", "t-1", agentToken, operatorsTask, connect.CodePermissionDenied, "another credential"},
		{"unknown task", "t-404", agentToken, actions.TaskView{}, connect.CodeNotFound, `no task "t-404"`},
		{"no task id", "", agentToken, actions.TaskView{}, connect.CodeInvalidArgument, "task_id: required"},
		{"over-long task id", strings.Repeat("t", maxIDLen+1), agentToken, actions.TaskView{}, connect.CodeInvalidArgument, "task_id"},
		{"no token", "t-1", "", taskAt(fsm.Executing, 0, 1), connect.CodeUnauthenticated, "bearer token"},
	}
	for _, proto := range protocols {
		for _, tc := range tests {
			t.Run(proto+"/"+tc.name, func(t *testing.T) {
				// Given the task
				s := startService(t, nil, nil)
				s.tasks.GetFn = func(id string) (actions.TaskView, error) {
					if id != tc.task.ID {
						return actions.TaskView{}, toolerr.New(toolerr.NotFound, "no task %q", id)
					}
					return tc.task, nil
				}
				// When it is watched
				stream := watch(t, s, proto, tc.id, tc.token)
				// Then it streams, or fails with the code and no message
				if tc.wantCode == 0 {
					require.Equal(t, "t-1", next(t, stream).GetId())
					return
				}
				requireEnded(t, stream, tc.wantCode)
				require.Contains(t, stream.Err().Error(), tc.wantMsg)
			})
		}
	}
}

func TestWatchTask_BoundsTheOpenStreams(t *testing.T) {
	// Given a service that serves one stream at a time, with one open
	s := startService(t, func(c *Conf) { c.MaxStreams = 1 }, nil)
	s.tasks.GetFn = func(string) (actions.TaskView, error) { return taskAt(fsm.Executing, 0, 1), nil }
	first := watch(t, s, "grpc", "t-1", agentToken)
	next(t, first)
	// When a second is opened
	second := watch(t, s, "grpc", "t-1", agentToken)
	// Then it is RESOURCE_EXHAUSTED, saying what to do instead
	requireEnded(t, second, connect.CodeResourceExhausted)
	require.Contains(t, second.Err().Error(), "GetTask")
	// And once the first is closed, a stream may be opened again
	require.NoError(t, first.Close())
	require.Eventually(t, func() bool {
		third, err := s.client("grpc").WatchTask(context.Background(), request(&robotbridgev1.WatchTaskRequest{TaskId: "t-1"}, agentToken))
		require.NoError(t, err)
		defer func() { _ = third.Close() }()
		return third.Receive()
	}, 10*time.Second, 10*time.Millisecond)
}

func TestWatchTask_ADroppedSubscriptionIsRenewed(t *testing.T) {
	// Given a bus that drops the stream's first subscription for falling
	// behind, while the task ends
	dropper := &dropFirst{bus: events.New(16), first: make(chan events.Event)}
	var status atomic.Value
	status.Store(fsm.Executing)
	tasks := &fakeTasks{GetFn: func(string) (actions.TaskView, error) { return taskAt(status.Load().(fsm.State), 0.5, 1), nil }}
	svc, err := New(Conf{Tools: &fakeTools{reg: testRegistry(t)}, Auth: testTokens, Tasks: tasks, Events: dropper})
	require.NoError(t, err)
	path, h := svc.Handler()
	mux := http.NewServeMux()
	mux.Handle(path, h)
	srv, h2c, _ := serveH2C(t, mux)
	client := robotbridgev1connect.NewToolServiceClient(h2c, srv.URL, connect.WithGRPC())
	stream, err := client.WatchTask(context.Background(), request(&robotbridgev1.WatchTaskRequest{TaskId: "t-1"}, agentToken))
	require.NoError(t, err)
	defer func() { _ = stream.Close() }()
	require.True(t, stream.Receive(), "err: %v", stream.Err())
	require.Equal(t, "executing", stream.Msg().GetTask().GetStatus())
	// When the subscription is dropped after the task succeeded
	status.Store(fsm.Succeeded)
	close(dropper.first)
	// Then the stream reads the task again and ends with it
	require.True(t, stream.Receive(), "err: %v", stream.Err())
	require.Equal(t, "succeeded", stream.Msg().GetTask().GetStatus())
	require.False(t, stream.Receive())
	require.NoError(t, stream.Err())
	require.Equal(t, 2, dropper.subscriptions())
}

func TestWatchTask_EndsWhenTheServerShutsDown(t *testing.T) {
	// Given a stream watching a task that does not end
	s := startService(t, nil, nil)
	s.tasks.GetFn = func(string) (actions.TaskView, error) { return taskAt(fsm.Executing, 0, 1), nil }
	stream := watch(t, s, "grpc", "t-1", agentToken)
	next(t, stream)
	// When the server shuts down
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		done <- s.srv.Config.Shutdown(ctx)
	}()
	// Then the stream ends with UNAVAILABLE, saying to watch again, and
	// the shutdown is not held up by it
	requireEnded(t, stream, connect.CodeUnavailable)
	require.Contains(t, stream.Err().Error(), "shutting down")
	require.NoError(t, <-done)
}

// dropFirst is a Subscriber whose first subscription is a channel the test
// closes, as the bus closes a subscriber that fell behind; later ones are
// the bus's.
type dropFirst struct {
	bus   *events.Bus
	first chan events.Event
	n     atomic.Int32
}

func (d *dropFirst) Subscribe(filter func(events.Event) bool) (<-chan events.Event, func()) {
	if d.n.Add(1) == 1 {
		return d.first, func() {}
	}
	return d.bus.Subscribe(filter)
}

func (d *dropFirst) subscriptions() int { return int(d.n.Load()) }
