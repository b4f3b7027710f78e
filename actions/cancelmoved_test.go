package actions

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// A robot seen driving is never "cancelled before it moved", even when a
// cancel catches it a few millimetres from where it started (the grant
// revocation scenario stopped a base moving at 0.1 m/s 2.7 mm out).
func TestNoteMoved_AStateShowingMotionCounts(t *testing.T) {
	start := robot.State{Base: robot.Pose2D{X: 1, Y: 2}}
	cases := []struct {
		name  string
		st    robot.State
		moved bool
	}{
		{"at rest where it started", start, false},
		{"driving, 3 mm out", robot.State{Base: robot.Pose2D{X: 1.003, Y: 2}, Velocity: robot.Twist2D{V: 0.1}}, true},
		{"turning on the spot", robot.State{Base: robot.Pose2D{X: 1, Y: 2}, Velocity: robot.Twist2D{W: 0.3}}, true},
		{"at rest 5 cm away (pushed)", robot.State{Base: robot.Pose2D{X: 1.05, Y: 2}}, true},
		{"sensor noise at rest", robot.State{Base: robot.Pose2D{X: 1.002, Y: 2}, Velocity: robot.Twist2D{V: 0.004}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &Runner{}
			tk := &task{startState: start}
			r.noteMoved(tk, c.st)
			require.Equal(t, c.moved, tk.moved)
			// Once moved, a later state at rest does not undo it.
			r.noteMoved(tk, start)
			require.Equal(t, c.moved, tk.moved)
		})
	}
}

// A cancel someone asked for before the robot moved is no failure; a
// grant revoked or run out before then keeps its typed error, so the
// agent learns the operator withdrew permission.
func TestCancelledBeforeMovedError_ByCause(t *testing.T) {
	text := "move_base_to was cancelled before it moved: …"
	require.Nil(t, cancelledBeforeMovedError(safety.StopRequest{Cause: safety.StopByRequest, By: "agent-1"}, true, text))
	e := cancelledBeforeMovedError(safety.StopRequest{Cause: safety.StopGrantRevoked, By: "operator", Reason: "person near the table"}, true, text)
	require.NotNil(t, e)
	require.Equal(t, toolerr.ApprovalDenied, e.Type)
	require.Equal(t, text, e.Message, "the error says what the text says, once")
	require.Equal(t, "operator", e.Details["revoked_by"])
	e = cancelledBeforeMovedError(safety.StopRequest{Cause: safety.StopGrantExpired}, false, text)
	require.NotNil(t, e)
	require.Equal(t, toolerr.ApprovalExpired, e.Type)
	require.Equal(t, false, e.Details["stop_confirmed"])
}
