package grpcapi

import (
	"context"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/fsm"
	robotbridgev1 "github.com/robot-bridge/robot-bridge/gen/robotbridge/v1"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// fakeRunner is a Tasks that records its calls and answers the task in the
// status the call leads to, or err.
type fakeRunner struct {
	mu    sync.Mutex
	calls []string
	err   error
}

var _ Tasks = (*fakeRunner)(nil)

func (f *fakeRunner) answer(call, id string, st fsm.State) (actions.TaskView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
	v := actions.TaskView{ID: id, Tool: "move_base_to", Status: st, Text: "It is " + string(st) + "."}
	return v, f.err
}

func (f *fakeRunner) Pause(_ context.Context, id, by, reason string) (actions.TaskView, error) {
	return f.answer("pause "+id+" by "+by+": "+reason, id, fsm.Paused)
}

func (f *fakeRunner) Resume(_ context.Context, id, by string) (actions.TaskView, error) {
	return f.answer("resume "+id+" by "+by, id, fsm.Executing)
}

func (f *fakeRunner) Abort(_ context.Context, id, by, reason string) (actions.TaskView, error) {
	return f.answer("abort "+id+" by "+by+": "+reason, id, fsm.Stopping)
}

func TestOperatorService_PauseTaskValidatesAndMapsRefusals(t *testing.T) {
	ft := &fakeRunner{}
	s := startOperator(t, nil, func(c *OperatorConf) { c.Tasks = ft })
	ctx := context.Background()
	c := s.client("connect")
	// A reason is required and bounded; nothing reaches the runner
	for _, reason := range []string{"", "   ", string(make([]byte, 1001))} {
		_, err := c.PauseTask(ctx, request(&robotbridgev1.PauseTaskRequest{TaskId: "task-1", Reason: reason}, operatorToken))
		require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%q: %v", reason, err)
	}
	require.Empty(t, ft.calls)
	// A good pause reaches it with the operator's name and the reason
	r, err := c.PauseTask(ctx, request(&robotbridgev1.PauseTaskRequest{TaskId: "task-1", Reason: " hold "}, operatorToken))
	require.NoError(t, err)
	require.Equal(t, "paused", r.Msg.GetTask().GetStatus())
	require.Equal(t, []string{"pause task-1 by operator: hold"}, ft.calls)
	// A runner's refusal keeps its type and carries the task
	ft.err = toolerr.New(toolerr.Conflict, "task task-1 (move_base_to) cannot be resumed: it succeeded")
	_, err = c.ResumeTask(ctx, request(&robotbridgev1.ResumeTaskRequest{TaskId: "task-1"}, operatorToken))
	require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err), "%v", err)
	require.Contains(t, err.Error(), "it succeeded")
	// Without Tasks the methods are unimplemented
	s2 := startOperator(t, nil, func(c *OperatorConf) { c.Tasks = nil })
	_, err = s2.client("connect").AbortTask(ctx, request(&robotbridgev1.AbortTaskRequest{TaskId: "task-1"}, operatorToken))
	require.Equal(t, connect.CodeUnimplemented, connect.CodeOf(err))
}
