package safety

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

func readyCmd(t *testing.T, h *harness) ([]float64, robot.Command) {
	q, err := h.cfg.PoseJoints("ready")
	require.NoError(t, err)
	return q, armCmd(q, 0.5)
}

func armMotion(q []float64, deadline time.Duration, grant string) Motion {
	return Motion{
		Auth:     Authorization{TaskID: "t1", Tool: "move_arm_to", Args: map[string]any{"pose": "ready"}, GrantID: grant},
		Steps:    []Step{ArmStep("move the arm to ready", q, 0.5, JointTolerance)},
		Deadline: deadline,
	}
}

func midway(a, b []float64) []float64 {
	out := make([]float64, len(a))
	for i := range a {
		out[i] = (a[i] + b[i]) / 2
	}
	return out
}

func (h *harness) setJoints(q []float64) {
	for i := range q {
		h.st.Joints[i].Position = q[i]
	}
}

func (h *harness) waitActive() {
	waitFor(h.t, func() bool { return h.sup.Status().Active != nil }, "motion never became active")
	waitFor(h.t, func() bool { return SettledAt(h.sup, h.fc.Now()) }, "motion never settled")
}

func TestGate_RefusesInOrderAndDenyWins(t *testing.T) {
	_, cmd := readyCmd(t, newHarness(t, nil, nil))
	tests := []struct {
		name    string
		prepare func(h *harness)
		grant   string
		tool    string
		want    toolerr.Type
		is      error
	}{
		{"valid grant passes", nil, "g-ok", "move_arm_to", "", nil},
		{"approval never passes without grant", nil, "", "stop", "", nil},
		{"no grant is refused", nil, "", "move_arm_to", toolerr.PermissionDenied, ErrNotAuthorized},
		{"unknown grant is refused", nil, "g-bad", "move_arm_to", toolerr.PermissionDenied, ErrNotAuthorized},
		{"e-stop wins over a grant", func(h *harness) { require.NoError(t, h.sup.EStop(context.Background(), "op", "test")) }, "g-ok", "move_arm_to", toolerr.EStopActive, ErrEStopActive},
		{"fault wins over a grant", func(h *harness) { h.sup.latchFault("t0", "test fault", FaultWords{}) }, "g-ok", "move_arm_to", toolerr.SafetyViolation, ErrFaultLatched},
		{"e-stop before fault", func(h *harness) {
			h.sup.latchFault("t0", "test fault", FaultWords{})
			require.NoError(t, h.sup.EStop(context.Background(), "op", "test"))
		}, "g-ok", "move_arm_to", toolerr.EStopActive, ErrEStopActive},
		{"link down", func(h *harness) { h.drv.setLink(false) }, "g-ok", "move_arm_to", toolerr.Unavailable, ErrLinkDown},
		{"stale state", func(h *harness) { h.fc.Advance(time.Second) }, "g-ok", "move_arm_to", toolerr.Unavailable, ErrLinkDown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given a supervisor with a grant service
			h := newHarness(t, nil, allowGrant)
			if tc.prepare != nil {
				tc.prepare(h)
			}
			// When a command asks to pass
			err := h.sup.Admit(Authorization{TaskID: "t1", Tool: tc.tool, GrantID: tc.grant}, cmd)
			// Then the gate answers in its order
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.Equal(t, tc.want, toolerr.TypeOf(err), "%v", err)
			require.ErrorIs(t, err, tc.is)
			if tc.want == toolerr.Unavailable {
				require.Positive(t, toolerr.As(err).RetryAfter)
			}
		})
	}
}

func TestGate_LimitRefusalNamesLimit(t *testing.T) {
	// Given an authorized command whose target is beyond the workspace
	h := newHarness(t, nil, allowGrant)
	// When it asks to pass the gate
	err := h.sup.Admit(Authorization{Tool: "move_base_to", GrantID: "g-ok"}, baseCmd(9, 0))
	// Then it is refused naming the workspace limit, the field and the
	// largest x the base's centre may take: the workspace edge less the
	// base's radius, since its footprint must stay inside
	require.Equal(t, toolerr.SafetyViolation, toolerr.TypeOf(err))
	var le *LimitError
	require.ErrorAs(t, err, &le)
	require.Equal(t, LimitWorkspace, le.Limit)
	require.Equal(t, "x", le.Field)
	require.InDelta(t, 4.5-h.cfg.Base.Radius, le.Max, 1e-9)
	require.InDelta(t, 9, le.Value, 1e-9)
}

func TestGate_NoGrantServiceRefuses(t *testing.T) {
	h := newHarness(t, nil, nil)
	_, cmd := readyCmd(t, h)
	err := h.sup.Admit(Authorization{Tool: "move_arm_to", GrantID: "g-ok"}, cmd)
	require.ErrorIs(t, err, ErrNotAuthorized)
}

func TestCheckLimits_BeforeApproval(t *testing.T) {
	h := newHarness(t, nil, nil)
	// Given the robot at the origin, When a target beyond the workspace is checked
	err := h.sup.CheckLimits(baseCmd(7, 0))
	// Then it is a SAFETY_VIOLATION without any grant involved
	require.Equal(t, toolerr.SafetyViolation, toolerr.TypeOf(err))
	require.Empty(t, h.drv.sentCommands())
	require.NoError(t, h.sup.CheckLimits(baseCmd(1, 1)))
}

func TestExecute_SucceedsAndRefreshesEveryPeriod(t *testing.T) {
	h := newHarness(t, nil, allowGrant)
	q, _ := readyCmd(t, h)
	// Given an authorized arm motion
	out := h.execute(context.Background(), armMotion(q, 5*time.Second, "g-ok"))
	h.waitActive()
	require.Len(t, h.drv.sentCommands(), 1)
	// When the arm takes a few periods to arrive
	for range 5 {
		h.advance(h.sup.ControlPeriod())
		h.publish()
	}
	h.setJoints(q)
	h.publish()
	// Then the motion succeeds, with the watchdog refreshed every period
	o := <-out
	require.Equal(t, OutcomeSucceeded, o.Kind)
	require.GreaterOrEqual(t, h.drv.refreshCount(), 5)
	require.Empty(t, h.drv.stopTimes())
}

func TestExecute_DeadlineStopsWithinOnePeriodThenRecovers(t *testing.T) {
	h := newHarness(t, nil, allowGrant)
	q, _ := readyCmd(t, h)
	stowed, _ := h.cfg.PoseJoints("stowed")
	deadline := 300 * time.Millisecond
	start := h.fc.Now()
	// Given a motion whose arm stops half-way and never moves again
	out := h.execute(context.Background(), armMotion(q, deadline, "g-ok"))
	h.waitActive()
	h.setJoints(midway(stowed, q))
	// When time passes the deadline
	require.True(t, h.runUntil(2*time.Second, func() bool { return len(h.drv.stopTimes()) > 0 }))
	// Then the stop left within one control period of the deadline
	stopAt := h.drv.stopTimes()[0]
	require.LessOrEqual(t, stopAt.Sub(start.Add(deadline)), h.sup.ControlPeriod())
	// And recovery returns the arm to the safe pose at the configured speed
	require.True(t, h.runUntil(time.Second, func() bool { return len(h.drv.sentCommands()) == 2 }))
	rec := h.drv.sentCommands()[1]
	require.Equal(t, robot.CmdMoveArm, rec.Kind)
	require.Equal(t, stowed, rec.Arm.Positions)
	require.InDelta(t, 0.3, rec.Arm.VelocityScale, 1e-9)
	h.setJoints(stowed)
	require.True(t, h.runUntil(time.Second, func() bool { return len(out) == 1 }))
	o := <-out
	require.Equal(t, OutcomeRecovered, o.Kind)
	require.Equal(t, TripDeadline, o.Trip.Kind)
	require.True(t, o.Recovery.Succeeded)
	require.Contains(t, o.Recovery.Text, "stowed")
	require.False(t, h.sup.Status().Fault.Latched)
	// The stop event carries its latency from detection.
	require.NotEmpty(t, h.eventsOf(EventStopSent))
	require.NotEmpty(t, h.eventsOf(EventMonitorTripped))
}

func TestExecute_MonitorsTrip(t *testing.T) {
	tests := []struct {
		name   string
		inject func(h *harness)
		want   TripKind
		// keepPublishing false simulates a silent robot.
		silent bool
	}{
		{"state silence", nil, TripSilence, true},
		{"link down", func(h *harness) { h.drv.setLink(false) }, TripLinkDown, false},
		{"base leaves the workspace", func(h *harness) { h.st.Base.X = 4.8 }, TripLimitBreach, false},
		{"base enters keep-out", func(h *harness) { h.st.Base = robot.Pose2D{X: 4, Y: -4} }, TripLimitBreach, false},
		{"robot fault", func(h *harness) { h.st.Faults = []string{"motor_overcurrent"} }, TripRobotFault, false},
		{"driver refresh error", func(h *harness) {
			h.drv.mu.Lock()
			h.drv.RefreshFunc = func(context.Context) error { return errBoom }
			h.drv.mu.Unlock()
		}, TripDriverError, false},
		{"stall", nil, TripStall, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil, allowGrant)
			q, _ := readyCmd(t, h)
			out := h.execute(context.Background(), armMotion(q, time.Minute, "g-ok"))
			h.waitActive()
			if tc.inject != nil {
				tc.inject(h)
			}
			p := h.sup.ControlPeriod()
			tripped := func() bool { return len(h.drv.stopTimes()) > 0 }
			for el := time.Duration(0); el < 10*time.Second && !tripped(); el += p {
				h.advance(p)
				if !tc.silent {
					h.publish()
				}
			}
			require.True(t, tripped(), "no stop was sent")
			// Recover the fake robot so the outcome completes.
			h.drv.setLink(true)
			h.st.Faults = nil
			h.st.Base = robot.Pose2D{}
			stowed, _ := h.cfg.PoseJoints("stowed")
			h.setJoints(stowed)
			var o Outcome
			require.True(t, h.runUntil(20*time.Second, func() bool {
				select {
				case o = <-out:
					return true
				default:
					return false
				}
			}))
			require.NotNil(t, o.Trip)
			require.Equal(t, tc.want, o.Trip.Kind, o.Trip.Detail)
			require.Contains(t, []OutcomeKind{OutcomeRecovered, OutcomeFault}, o.Kind)
		})
	}
}

func TestExecute_RobotEStopLatchesOurs(t *testing.T) {
	h := newHarness(t, nil, allowGrant)
	q, _ := readyCmd(t, h)
	out := h.execute(context.Background(), armMotion(q, time.Minute, "g-ok"))
	h.waitActive()
	// When the robot reports its own e-stop
	h.st.EStop = true
	h.publish()
	require.True(t, h.runUntil(time.Second, func() bool { return len(out) == 1 }))
	o := <-out
	// Then our e-stop latches too, nothing recovers, and a reset is refused
	// while the robot's circuit is still engaged
	require.Equal(t, OutcomeEStopped, o.Kind)
	require.True(t, h.sup.Status().EStop.Active)
	require.Len(t, h.drv.sentCommands(), 1, "no recovery motion under e-stop")
	require.Equal(t, toolerr.EStopActive, toolerr.TypeOf(h.sup.ResetEStop("op")))
	h.st.EStop = false
	h.publish()
	require.NoError(t, h.sup.ResetEStop("op"))
	require.False(t, h.sup.Status().EStop.Active)
}

func TestExecute_RecoveryFailureLatchesFault(t *testing.T) {
	h := newHarness(t, func(c *hwconfig.Config) { c.SafePose.Timeout = hwconfig.Duration(500 * time.Millisecond) }, allowGrant)
	q, _ := readyCmd(t, h)
	stowed, _ := h.cfg.PoseJoints("stowed")
	out := h.execute(context.Background(), armMotion(q, 200*time.Millisecond, "g-ok"))
	h.waitActive()
	// Given an arm stuck half-way, When the deadline and then the
	// recovery deadline pass
	h.setJoints(midway(stowed, q))
	require.True(t, h.runUntil(5*time.Second, func() bool { return len(out) == 1 }))
	o := <-out
	// Then a fault latches and every motion is refused until cleared
	require.Equal(t, OutcomeFault, o.Kind)
	require.True(t, o.Recovery.Attempted)
	require.NotNil(t, o.Recovery.Trip)
	st := h.sup.Status()
	require.True(t, st.Fault.Latched)
	err := h.sup.Admit(Authorization{Tool: "move_arm_to", GrantID: "g-ok"}, armCmd(q, 0.5))
	require.ErrorIs(t, err, ErrFaultLatched)
	require.Contains(t, err.Error(), "operator")
	// never auto-reset
	h.advance(time.Hour)
	h.publish()
	require.True(t, h.sup.Status().Fault.Latched)
	require.NoError(t, h.sup.ClearFault("op"))
	require.NoError(t, h.sup.Admit(Authorization{Tool: "move_arm_to", GrantID: "g-ok"}, armCmd(q, 0.5)))
	require.Len(t, h.eventsOf(EventFaultLatched), 1)
	require.Len(t, h.eventsOf(EventFaultCleared), 1)
}

func TestExecute_NotPreauthorizedLatchesFault(t *testing.T) {
	h := newHarness(t, func(c *hwconfig.Config) { c.SafePose.Preauthorized = false }, allowGrant)
	q, _ := readyCmd(t, h)
	stowed, _ := h.cfg.PoseJoints("stowed")
	out := h.execute(context.Background(), armMotion(q, 100*time.Millisecond, "g-ok"))
	h.waitActive()
	h.setJoints(midway(stowed, q))
	require.True(t, h.runUntil(5*time.Second, func() bool { return len(out) == 1 }))
	o := <-out
	require.Equal(t, OutcomeFault, o.Kind)
	require.False(t, o.Recovery.Attempted)
	require.Len(t, h.drv.sentCommands(), 1, "no recovery motion without pre-authorization")
	require.Contains(t, o.FaultReason, "not pre-authorized")
}

func TestExecute_CancelReportsOnlyAfterConfirmedStop(t *testing.T) {
	h := newHarness(t, nil, allowGrant)
	q, _ := readyCmd(t, h)
	ctx, cancel := context.WithCancel(context.Background())
	out := h.execute(ctx, armMotion(q, time.Minute, "g-ok"))
	h.waitActive()
	// Given a moving arm
	h.st.Joints[1].Velocity = 0.5
	h.publish()
	// When the task is cancelled
	cancel()
	waitFor(t, func() bool { return len(h.drv.stopTimes()) == 1 }, "stop not sent")
	// Then it is not reported while the robot still moves
	h.advance(h.sup.ControlPeriod())
	h.publish()
	require.Empty(t, out)
	// and it is once a state shows it at rest
	h.st.Joints[1].Velocity = 0
	h.advance(h.sup.ControlPeriod())
	h.publish()
	o := <-out
	require.Equal(t, OutcomeCancelled, o.Kind)
	require.True(t, o.StopConfirmed)
	require.Len(t, h.drv.sentCommands(), 1, "a cancel never recovers")
}

func TestExecute_BeforeStartErrorSendsNothing(t *testing.T) {
	h := newHarness(t, nil, allowGrant)
	q, _ := readyCmd(t, h)
	m := armMotion(q, time.Minute, "g-ok")
	m.Hooks.BeforeStart = func() error { return errBoom }
	o := h.sup.Execute(context.Background(), m)
	require.Equal(t, OutcomeRejected, o.Kind)
	require.ErrorIs(t, o.Err, errBoom)
	require.Empty(t, h.drv.sentCommands())
}

func TestExecute_SecondConcurrentMotionIsBusy(t *testing.T) {
	h := newHarness(t, nil, allowGrant)
	q, _ := readyCmd(t, h)
	out := h.execute(context.Background(), armMotion(q, time.Minute, "g-ok"))
	h.waitActive()
	o := h.sup.Execute(context.Background(), armMotion(q, time.Minute, "g-ok"))
	require.Equal(t, OutcomeRejected, o.Kind)
	require.Equal(t, toolerr.RobotBusy, toolerr.TypeOf(o.Err))
	require.NoError(t, h.sup.Stop(context.Background(), "op", "end test"))
	require.True(t, h.runUntil(time.Second, func() bool { return len(out) == 1 }))
	require.Equal(t, OutcomeCancelled, (<-out).Kind)
}

func TestEStop_LatchesStopsAtOnceAndNeverAutoResets(t *testing.T) {
	h := newHarness(t, nil, allowGrant)
	q, cmd := readyCmd(t, h)
	out := h.execute(context.Background(), armMotion(q, time.Minute, "g-ok"))
	h.waitActive()
	// When an operator presses the e-stop
	require.NoError(t, h.sup.EStop(context.Background(), "alice", "person in the way"))
	// Then the stop left before EStop returned
	require.NotEmpty(t, h.drv.stopTimes())
	require.True(t, h.runUntil(5*time.Second, func() bool { return len(out) == 1 }))
	require.Equal(t, OutcomeEStopped, (<-out).Kind)
	st := h.sup.Status()
	require.True(t, st.EStop.Active)
	require.Equal(t, "alice", st.EStop.By)
	require.Equal(t, "person in the way", st.EStop.Reason)
	// And nothing passes, even with a grant, however long we wait
	h.advance(time.Hour)
	h.publish()
	require.ErrorIs(t, h.sup.Admit(Authorization{Tool: "move_arm_to", GrantID: "g-ok"}, cmd), ErrEStopActive)
	require.Len(t, h.drv.sentCommands(), 1)
	require.Error(t, h.sup.ResetEStop(""), "reset needs a name")
	require.NoError(t, h.sup.ResetEStop("bob"))
	require.NoError(t, h.sup.Admit(Authorization{Tool: "move_arm_to", GrantID: "g-ok"}, cmd))
	require.Len(t, h.eventsOf(EventEStopPressed), 1)
	require.Len(t, h.eventsOf(EventEStopReset), 1)
}

func TestEStop_DuringInFlightSendStopsAgainAfterIt(t *testing.T) {
	h := newHarness(t, nil, allowGrant)
	q, _ := readyCmd(t, h)
	entered, release := make(chan struct{}), make(chan struct{})
	h.drv.SendFunc = func(context.Context, robot.Command) error {
		close(entered)
		<-release
		return nil
	}
	out := h.execute(context.Background(), armMotion(q, time.Minute, "g-ok"))
	<-entered
	// When the e-stop is pressed while a command is in flight
	done := make(chan error, 1)
	go func() { done <- h.sup.EStop(context.Background(), "op", "test") }()
	// Then one stop goes out at once, not behind the command
	waitFor(t, func() bool { return len(h.drv.stopTimes()) == 1 }, "first stop not sent at once")
	// and the e-stop does not wait for the command in flight
	require.NoError(t, <-done)
	require.Empty(t, h.drv.sentCommands(), "the command is still in flight")
	close(release)
	// and a second stop follows the command that was in flight, sent by
	// the gate as soon as the command has left
	waitFor(t, func() bool { return len(h.drv.sentCommands()) == 1 && len(h.drv.stopTimes()) >= 2 }, "no stop after the command in flight")
	require.True(t, h.runUntil(5*time.Second, func() bool { return len(out) == 1 }))
	require.Equal(t, OutcomeEStopped, (<-out).Kind)
}

func TestClose_StopIsLastAct(t *testing.T) {
	h := newHarness(t, nil, allowGrant)
	q, _ := readyCmd(t, h)
	out := h.execute(context.Background(), armMotion(q, time.Minute, "g-ok"))
	h.waitActive()
	require.NoError(t, h.sup.Close())
	o := <-out
	require.Equal(t, OutcomeInterrupted, o.Kind)
	stops := h.drv.stopTimes()
	require.GreaterOrEqual(t, len(stops), 2, "the motion's stop and the final stop")
	ev := h.eventsOf(EventStopSent)
	require.Equal(t, "bridge shutting down", ev[len(ev)-1].Reason)
	o2 := h.sup.Execute(context.Background(), armMotion(q, time.Minute, "g-ok"))
	require.ErrorIs(t, o2.Err, ErrNotStarted)
}

func TestExecute_DriverSendErrorRecovers(t *testing.T) {
	h := newHarness(t, nil, allowGrant)
	q, _ := readyCmd(t, h)
	n := 0
	h.drv.SendFunc = func(context.Context, robot.Command) error {
		n++
		if n == 2 {
			return errBoom
		}
		return nil
	}
	// Given a two-step motion whose second send fails
	m := armMotion(q, time.Minute, "g-ok")
	m.Steps = append(m.Steps, GripperStep("close", true, 10, 0.09))
	h.setJoints(q)
	h.publish()
	out := h.execute(context.Background(), m)
	stowed, _ := h.cfg.PoseJoints("stowed")
	require.True(t, h.runUntil(5*time.Second, func() bool {
		if len(h.drv.sentCommands()) >= 2 {
			h.setJoints(stowed)
		}
		return len(out) == 1
	}))
	o := <-out
	require.Equal(t, TripDriverError, o.Trip.Kind)
	require.Equal(t, OutcomeRecovered, o.Kind)
	require.ErrorIs(t, o.Trip.Err, errBoom)
}

func TestNew_ValidatesConf(t *testing.T) {
	cfg := loadConfig(t)
	_, err := New(Conf{Driver: &fakeDriver{}})
	require.ErrorContains(t, err, "Config")
	_, err = New(Conf{Config: cfg})
	require.ErrorContains(t, err, "Driver")
	bad := cfg.Clone()
	bad.SafePose.Arm = "nope"
	_, err = New(Conf{Config: bad, Driver: &fakeDriver{}})
	require.ErrorContains(t, err, "safe_pose.arm")
}
