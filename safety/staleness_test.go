package safety

// Two earlier fixes in motion.go, each pinned by a test that fails
// without it: a step is done only on a state received after its command
// (supervise), and a stop is confirmed only by a state received after it
// (waitStopped). Both run on the fake clock with a driver whose latest
// state, when the command or the stop goes out, was received at that very
// instant or before: stale, and showing exactly what the supervisor must
// not believe yet.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// waitIdleOrDone waits until Execute has returned (out holds the outcome)
// or its motion is blocked in phase, waiting for the next tick or state,
// with everything due now processed. It does not take the outcome.
func (h *harness) waitIdleOrDone(out <-chan Outcome, phase Phase) {
	h.t.Helper()
	now := h.fc.Now()
	waitFor(h.t, func() bool {
		if len(out) > 0 {
			return true
		}
		a := h.sup.Status().Active
		return a != nil && a.Phase == phase && SettledAt(h.sup, now)
	}, "the motion neither ended nor settled")
}

func TestExecute_StepDoneOnlyOnAStateReceivedAfterItsCommand(t *testing.T) {
	// Given the robot's latest state, received before the command, showing
	// the arm at the step's goal and at rest (where a previous motion
	// left it, inside the joint tolerance)
	h := newHarness(t, nil, allowGrant)
	q, _ := readyCmd(t, h)
	h.setJoints(q)
	h.publish()

	// When the step's command goes out, at the same instant, and no state
	// has arrived since
	out := h.execute(context.Background(), armMotion(q, 5*time.Second, "g-ok"))
	waitFor(t, func() bool { return len(h.drv.sentCommands()) == 1 }, "the command was never sent")
	h.waitIdleOrDone(out, PhaseExecuting)

	// Then the step is not done: that state says nothing of what the
	// robot does with the command
	require.Empty(t, out, "the step was declared done on a state received before its command")
	h.advance(h.sup.ControlPeriod())
	require.Empty(t, out, "the step was declared done with no state received since its command")

	// When the first state after the command shows the arm still moving
	// its last millimetres
	for i := range h.st.Joints {
		h.st.Joints[i].Velocity = 0.05
	}
	h.st.Joints[1].Position += 0.001
	h.publish()
	h.waitIdleOrDone(out, PhaseExecuting)
	// Then still not done
	require.Empty(t, out, "the step was declared done while the robot was moving")

	// When a later state shows it at the goal and at rest
	h.advance(h.sup.ControlPeriod())
	h.setJoints(q)
	for i := range h.st.Joints {
		h.st.Joints[i].Velocity = 0
	}
	h.publish()
	// Then, and only then, the step is done
	o := receive(t, out, "the step was not done on a fresh state at the goal")
	require.Equal(t, OutcomeSucceeded, o.Kind)
	require.Equal(t, 1, o.StepsDone)
	require.Empty(t, h.drv.stopTimes())
}

func TestExecute_StopConfirmedOnlyByAStateReceivedAfterIt(t *testing.T) {
	// Given an arm motion under way whose latest state — received at the
	// instant the stop will be requested — shows the arm at rest: the
	// trajectory accepted, the arm not yet accelerating
	h := newHarness(t, nil, allowGrant)
	q, _ := readyCmd(t, h)
	out := h.execute(context.Background(), armMotion(q, 5*time.Second, "g-ok"))
	h.waitActive()
	h.advance(h.sup.ControlPeriod())
	h.publish()
	require.False(t, h.st.Moving(RestLinear, RestAngular), "the state the stop will meet shows the robot at rest")

	// When a stop is requested now, with no state received since
	require.NoError(t, h.sup.StopTask(context.Background(), "t1", "operator-1", "stop now"))
	waitFor(t, func() bool { return len(h.drv.stopTimes()) > 0 }, "no stop was sent")
	h.waitIdleOrDone(out, PhaseStopping)

	// Then the stop is not confirmed: that state was sent before the
	// robot got the stop, while it was about to move
	require.Empty(t, out, "the stop was confirmed by a state received before it")
	h.advance(h.sup.ControlPeriod())
	require.Empty(t, out, "the stop was confirmed with no state received since it")

	// When the first state after the stop shows the arm moving (it had
	// started as the stop came, and is braking)
	for i := range h.st.Joints {
		h.st.Joints[i].Velocity = 0.4
	}
	h.publish()
	h.waitIdleOrDone(out, PhaseStopping)
	// Then still not confirmed
	require.Empty(t, out, "the stop was confirmed while the robot was moving")

	// When a later state shows it at rest
	h.advance(h.sup.ControlPeriod())
	for i := range h.st.Joints {
		h.st.Joints[i].Velocity = 0
	}
	h.publish()
	// Then the stop is confirmed and the motion ends cancelled, without a
	// fault
	o := receive(t, out, "the stop was not confirmed by a fresh state at rest")
	require.Equal(t, OutcomeCancelled, o.Kind, "%+v", o)
	require.True(t, o.StopConfirmed)
	require.False(t, h.sup.Status().Fault.Latched)
}

// receive waits at most 10 s for the outcome.
func receive(t *testing.T, out <-chan Outcome, msg string) Outcome {
	t.Helper()
	select {
	case o := <-out:
		return o
	case <-time.After(10 * time.Second):
		t.Fatal(msg)
	}
	return Outcome{}
}
