package safety

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// testFence is a lease that a test takes away: nil while held.
type testFence struct {
	mu  sync.Mutex
	err error
}

func (f *testFence) Hold() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (f *testFence) set(err error) { f.mu.Lock(); f.err = err; f.mu.Unlock() }

func fencedHarness(t *testing.T, f *testFence) *harness {
	t.Helper()
	return newHarnessConf(t, func(c *hwconfig.Config) {
		c.Actions[hwconfig.ToolMoveBaseTo] = hwconfig.ActionConf{Approval: hwconfig.ApprovalNever}
	}, nil, func(c *Conf) { c.Fence = f })
}

func TestFence_WithoutTheLeaseNothingIsSentAndTheFencesErrorReachesTheAgent(t *testing.T) {
	// Given a robot whose lease is held by another bridge
	f := &testFence{}
	h := fencedHarness(t, f)
	held := toolerr.New(toolerr.RobotBusy, "robot r01 is driven by bridge b; nothing was sent")
	held.Suggestion = "send the call to bridge b"
	f.set(held)

	// When a motion is asked for
	out := outcomeWithin(t, h, drive(h, context.Background(), "t1", 1, 0), 10*time.Second)

	// Then it is refused with the fence's own error, and nothing was sent
	require.Equal(t, OutcomeRejected, out.Kind)
	require.ErrorIs(t, out.Err, ErrFenced)
	te := toolerr.As(out.Err)
	require.Equal(t, toolerr.RobotBusy, te.Type)
	require.Equal(t, "send the call to bridge b", te.Suggestion)
	require.Empty(t, h.drv.sentCommands())

	// And a fence error that is not a tool error is UNAVAILABLE
	f.set(errors.New("the lease could not be renewed for 1.2 s"))
	out = outcomeWithin(t, h, drive(h, context.Background(), "t2", 1, 0), 10*time.Second)
	require.Equal(t, OutcomeRejected, out.Kind)
	require.ErrorIs(t, out.Err, ErrFenced)
	require.Equal(t, toolerr.Unavailable, toolerr.As(out.Err).Type)
	require.Contains(t, toolerr.As(out.Err).Message, "the lease could not be renewed for 1.2 s")
	require.Empty(t, h.drv.sentCommands())

	// And once the lease is back, the same motion goes
	f.set(nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := drive(h, ctx, "t3", 1, 0)
	waitFor(t, func() bool { return len(h.drv.sentCommands()) == 1 }, "the motion was not sent with the lease held")
	cancel()
	outcomeWithin(t, h, done, 10*time.Second)
}

func TestFence_LosingTheLeaseMidMotionStopsTheRobotAtOnce(t *testing.T) {
	// Given a robot driving under its lease
	f := &testFence{}
	h := fencedHarness(t, f)
	done := drive(h, context.Background(), "t1", 2, 0)
	waitFor(t, func() bool { return len(h.drv.sentCommands()) == 1 }, "the motion was not sent")
	stopsBefore := len(h.drv.stopTimes())

	// When the lease is lost
	f.set(errors.New("another bridge took the robot over"))

	// Then the next control period stops the robot, and the motion ends
	// on a lease_lost trip that says why
	h.advance(h.sup.ControlPeriod())
	waitFor(t, func() bool { return len(h.drv.stopTimes()) > stopsBefore }, "no stop was sent when the lease was lost")
	out := outcomeWithin(t, h, done, 30*time.Second)
	require.NotNil(t, out.Trip, "%+v", out)
	require.Equal(t, TripLeaseLost, out.Trip.Kind)
	require.Contains(t, out.Trip.Detail, "another bridge took the robot over")
	// And nothing but the first goal ever went out: no recovery motion
	// was sent without the lease
	require.Len(t, h.drv.sentCommands(), 1)
}

func TestFence_ALeaseThatLapsesWhileTheTransitionIsCommittedSendsNothing(t *testing.T) {
	// Given a robot whose lease is held when the gate admits the first
	// command, and lost while the runner commits the transition
	f := &testFence{}
	h := fencedHarness(t, f)
	m := Motion{
		Auth:     Authorization{TaskID: "t1", Tool: hwconfig.ToolMoveBaseTo, Args: map[string]any{"x": 1.0, "y": 0.0}},
		Steps:    []Step{goalStep(1, 0, 0)},
		Deadline: time.Minute,
		Hooks: Hooks{BeforeStart: func() error {
			f.set(errors.New("the lease could not be renewed in time"))
			return nil
		}},
	}

	// When the motion runs
	out := outcomeWithin(t, h, h.execute(context.Background(), m), 10*time.Second)

	// Then the command never left the gate
	require.Equal(t, OutcomeRejected, out.Kind, "%+v", out)
	require.ErrorIs(t, out.Err, ErrFenced)
	require.Empty(t, h.drv.sentCommands())
}

func TestMirrorLatches_SetsAndReleasesExactlyWhatTheOwnerRecorded(t *testing.T) {
	// Given a robot another bridge drives (this bridge holds no lease)
	f := &testFence{}
	f.set(errors.New("driven by bridge a"))
	h := fencedHarness(t, f)
	since := h.fc.Now()

	// When the owner's e-stop and fault are mirrored
	require.True(t, h.sup.MirrorLatches(EStopStatus{Active: true, By: "op", Reason: "pressed on bridge a", Since: since},
		FaultStatus{Latched: true, Reason: "recovery failed", Since: since}))

	// Then both are latched here, with the owner's cause, and no event was
	// emitted (the owner recorded them)
	st := h.sup.Status()
	require.True(t, st.EStop.Active)
	require.Equal(t, "pressed on bridge a", st.EStop.Reason)
	require.True(t, st.Fault.Latched)
	require.NotEmpty(t, st.Fault.What)
	require.Empty(t, h.eventsOf(EventEStopPressed))
	require.Empty(t, h.eventsOf(EventFaultLatched))
	require.False(t, h.sup.MirrorLatches(st.EStop, st.Fault), "mirroring the same latches again changed something")

	// When the owner resets both, the mirror releases both
	require.True(t, h.sup.MirrorLatches(EStopStatus{}, FaultStatus{}))
	st = h.sup.Status()
	require.False(t, st.EStop.Active)
	require.False(t, st.Fault.Latched)
	require.Empty(t, h.eventsOf(EventEStopReset))
}

func TestFence_CloseLeavesAnotherBridgesRobotAlone(t *testing.T) {
	// Given a robot another bridge drives
	f := &testFence{}
	f.set(errors.New("driven by bridge a"))
	h := fencedHarness(t, f)
	stops := len(h.drv.stopTimes())

	// When this bridge's supervisor closes
	require.NoError(t, h.sup.Close())

	// Then it sent no stop: its shutdown does not interrupt the owner
	require.Len(t, h.drv.stopTimes(), stops)

	// And a supervisor that holds its robot's lease still ends with a stop
	h2 := fencedHarness(t, &testFence{})
	stops = len(h2.drv.stopTimes())
	require.NoError(t, h2.sup.Close())
	require.Len(t, h2.drv.stopTimes(), stops+1)
}
