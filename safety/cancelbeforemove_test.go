package safety_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/robot"
)

// A task cancelled between its first command leaving the gate and the
// robot moving was reported "ACTION_FAILED … stopped after it had barely
// started … 1.66 m short", once as its text and again as its error.
func TestRegression_CancelledBeforeItMovedSaysSo(t *testing.T) {
	r := newRig(t)
	// Given the first command of a move in the driver's hands, When the
	// agent cancels the task now
	v := r.mustSubmit("move_base_to", map[string]any{"x": 1.66, "y": 0.0})
	release := make(chan struct{})
	cancelled := make(chan error, 1)
	var once sync.Once
	r.drv.setFailSend(func(robot.Command) error {
		once.Do(func() {
			go func() {
				_, err := r.run.Cancel(context.Background(), v.ID, "agent-1")
				cancelled <- err
			}()
			waitUntil(t, func() bool { _, ok := r.sup.StopRequested(v.ID); return ok }, "cancel not recorded")
			close(release)
		})
		<-release
		return nil
	})
	r.approve(v)
	v = r.waitTerminal(v.ID, 10*time.Second)
	require.NoError(t, receive(t, cancelled, 15*time.Second, "the cancel never returned"))

	// Then the robot never moved, and the task says exactly that: no
	// failure, no distance short of the goal, one sentence of it
	require.Zero(t, r.sim.Odometer().BaseDistance)
	require.Equal(t, fsm.Cancelled, v.Status)
	require.Nil(t, v.Error, "a task cancelled before it moved is no failure")
	require.True(t, strings.HasPrefix(v.Text, "move_base_to was cancelled before it moved: agent-1 cancelled it; robot stopped. Now: base at (0.00, 0.00)"), v.Text)
	require.NotContains(t, v.Text, "short")
	require.Equal(t, 1, strings.Count(v.Text, "cancelled before it moved"))
}
