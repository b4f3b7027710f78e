package safety

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
)

// Goal semantics that match ROS: in move_base mode the robot's result is
// the controller's verdict. A goal the robot reported SUCCEEDED ends the
// step once the robot is at rest — never in a stall — and where the
// bridge's own pose check disagrees the task still succeeds, with a
// warning that states the measured error and the tolerance.

// reportingDriver is a fakeDriver whose robot runs its own controller and
// reports goals reached (GoalReporter), as the ROS driver in move_base
// mode does.
type reportingDriver struct {
	*fakeDriver
	rmu     sync.Mutex
	reached map[string]string // guarded by rmu: command id → robot's text
}

var _ GoalReporter = (*reportingDriver)(nil)

func (d *reportingDriver) GoalSucceeded(id string) (string, bool) {
	d.rmu.Lock()
	defer d.rmu.Unlock()
	text, ok := d.reached[id]
	return text, ok
}

// succeed makes the robot report the goal of every command sent so far
// reached.
func (d *reportingDriver) succeed(text string) {
	d.rmu.Lock()
	defer d.rmu.Unlock()
	for _, c := range d.sentCommands() {
		d.reached[c.ID] = text
	}
}

// newVerdictHarness is newHarness on the base-only minimal ROS fixture,
// with yaw_tolerance_deg 10, and a driver that reports goals reached when
// report is true (a plain fakeDriver otherwise).
func newVerdictHarness(t *testing.T, report bool) (*harness, *reportingDriver) {
	t.Helper()
	cfg, err := hwconfig.Load("../hw-configs/testdata/good/base-only-ros-minimal.yaml")
	require.NoError(t, err)
	cfg.Base.YawToleranceDeg = 10
	require.NoError(t, cfg.Validate())
	fc := clockwork.NewFakeClockAt(time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC))
	fd := &fakeDriver{clock: fc, link: true}
	rd := &reportingDriver{fakeDriver: fd, reached: map[string]string{}}
	var drv Driver = fd
	if report {
		drv = rd
	}
	h := &harness{t: t, fc: fc, cfg: cfg, drv: fd}
	sup, err := New(Conf{
		Config: cfg, Driver: drv, Grants: allowGrant, Clock: fc, Logger: quietLogger(),
		Observer: ObserverFunc(func(e Event) { h.evMu.Lock(); h.events = append(h.events, e); h.evMu.Unlock() }),
	})
	require.NoError(t, err)
	h.sup = sup
	h.st = robot.State{}
	require.NoError(t, sup.Start(context.Background()))
	t.Cleanup(func() { _ = sup.Close() })
	h.publish()
	return h, rd
}

// baseMotion drives to (x, y) facing thetaDeg under grant g-ok.
func baseMotion(step Step) Motion {
	return Motion{
		Auth:     Authorization{TaskID: "t1", Tool: "move_base_to", Args: map[string]any{"x": step.Command.Base.Target.X}, GrantID: "g-ok"},
		Steps:    []Step{step},
		Deadline: time.Minute,
	}
}

func goalStep(x, y, thetaDeg float64) Step {
	return BaseStep("drive to the desk", robot.BaseGoal{Target: robot.Pose2D{X: x, Y: y, Theta: robot.Radians(thetaDeg)}, MaxLinear: 0.5, MaxAngular: 1},
		0.05, robot.Radians(10))
}

// outcomeWithin steps the clock, publishing the state, until Execute
// returns or limit passes.
func outcomeWithin(t *testing.T, h *harness, out <-chan Outcome, limit time.Duration) Outcome {
	t.Helper()
	var o Outcome
	require.True(t, h.runUntil(limit, func() bool {
		select {
		case o = <-out:
			return true
		default:
			return false
		}
	}), "the motion did not end within %s", limit)
	return o
}

func TestGoalVerdict_SucceededOffHeadingIsASuccessWithAWarning(t *testing.T) {
	// Given a robot whose controller reports goals reached, driving to
	// (1, 0.5) facing 0°
	h, rd := newVerdictHarness(t, true)
	out := h.execute(context.Background(), baseMotion(goalStep(1, 0.5, 0)))
	h.waitActive()

	// When it stops at the target 27° off the requested heading (the
	// bridge's tolerance is 10°) and reports SUCCEEDED
	h.st.Base = robot.Pose2D{X: 1, Y: 0.5, Theta: robot.Radians(27)}
	h.publish()
	rd.succeed("Goal reached.")

	// Then the task succeeds, nothing stops or recovers, and the warning
	// states the measured error and the tolerance
	o := outcomeWithin(t, h, out, 2*time.Second)
	require.Equal(t, OutcomeSucceeded, o.Kind)
	require.Nil(t, o.Trip)
	require.Empty(t, h.drv.stopTimes(), "a goal the robot finished is not stopped")
	require.Len(t, o.Warnings, 1)
	w := o.Warnings[0]
	require.Equal(t, []string{"heading 27° off the requested 0°, outside the 10° tolerance"}, w.Misses)
	require.Equal(t, "drive to the desk", w.StepName)
	require.Equal(t, `the robot's controller reported drive to the desk finished ("Goal reached"), but the bridge's own check finds heading 27° off the requested 0°, outside the 10° tolerance`, w.Text())
}

func TestGoalVerdict_SucceededAwayFromTheTargetNamesTheDistance(t *testing.T) {
	// Given a robot driving to (1.35, 1.00)
	h, rd := newVerdictHarness(t, true)
	out := h.execute(context.Background(), baseMotion(goalStep(1.35, 1, 0)))
	h.waitActive()

	// When its controller reports SUCCEEDED 0.42 m short, heading right
	h.st.Base = robot.Pose2D{X: 1.35 - 0.42, Y: 1}
	h.publish()
	rd.succeed("")

	// Then it succeeds with the distance and the tolerance in the warning
	o := outcomeWithin(t, h, out, 2*time.Second)
	require.Equal(t, OutcomeSucceeded, o.Kind)
	require.Len(t, o.Warnings, 1)
	require.Equal(t, []string{"0.42 m from the requested (1.35, 1.00), outside the 0.05 m tolerance"}, o.Warnings[0].Misses)
	require.NotContains(t, o.Warnings[0].Text(), `("`, "no empty quote for a robot that said nothing")
}

func TestGoalVerdict_SucceededWithinToleranceHasNoWarning(t *testing.T) {
	// Given a robot driving to (1, 0.5) facing 90°
	h, rd := newVerdictHarness(t, true)
	out := h.execute(context.Background(), baseMotion(goalStep(1, 0.5, 90)))
	h.waitActive()

	// When it reports SUCCEEDED 3 cm and 4° off
	h.st.Base = robot.Pose2D{X: 1.03, Y: 0.5, Theta: robot.Radians(94)}
	h.publish()
	rd.succeed("done")

	// Then the task succeeds and both opinions agree
	o := outcomeWithin(t, h, out, 2*time.Second)
	require.Equal(t, OutcomeSucceeded, o.Kind)
	require.Empty(t, o.Warnings)
}

func TestGoalVerdict_StallNeverFiresOnAGoalTheRobotFinished(t *testing.T) {
	// Given a robot that reported its goal reached 27° off, but is still
	// creeping (not yet at rest), for longer than the stall timeout
	h, rd := newVerdictHarness(t, true)
	out := h.execute(context.Background(), baseMotion(goalStep(1, 0.5, 0)))
	h.waitActive()
	h.st.Base = robot.Pose2D{X: 1, Y: 0.5, Theta: robot.Radians(27)}
	h.st.Velocity = robot.Twist2D{W: 0.05}
	h.publish()
	rd.succeed("goal reached")
	stall := h.cfg.Safety.StallTimeout.D()
	require.False(t, h.runUntil(stall+time.Second, func() bool { return len(out) == 1 }),
		"the step must wait for the robot to come to rest")

	// Then nothing tripped meanwhile
	require.Empty(t, h.drv.stopTimes(), "no stall trip on a goal the robot finished")

	// When it comes to rest
	h.st.Velocity = robot.Twist2D{}
	o := outcomeWithin(t, h, out, time.Second)

	// Then it succeeds with the warning
	require.Equal(t, OutcomeSucceeded, o.Kind)
	require.Len(t, o.Warnings, 1)
	require.Empty(t, h.drv.stopTimes())
}

func TestGoalVerdict_WithoutAVerdictAStillRobotStalls(t *testing.T) {
	// Given a driver whose robot reports no verdict (the simulator, or
	// cmd_vel mode, where the bridge's own check is the only one)
	h, _ := newVerdictHarness(t, false)
	out := h.execute(context.Background(), baseMotion(goalStep(1, 0.5, 0)))
	h.waitActive()

	// When the base stops 27° off the requested heading and stays there
	h.st.Base = robot.Pose2D{X: 1, Y: 0.5, Theta: robot.Radians(27)}
	o := outcomeWithin(t, h, out, 20*time.Second)

	// Then the stall monitor ends it: the bridge's check is the verdict
	require.NotNil(t, o.Trip)
	require.Equal(t, TripStall, o.Trip.Kind, o.Trip.Detail)
	require.NotEmpty(t, h.drv.stopTimes())
	require.Empty(t, o.Warnings)
}

func TestGoalVerdict_AVerdictForAnotherCommandDoesNotEndTheStep(t *testing.T) {
	// Given a robot that reported some other goal reached
	h, rd := newVerdictHarness(t, true)
	rd.rmu.Lock()
	rd.reached["t0-1"] = "an older goal"
	rd.rmu.Unlock()
	out := h.execute(context.Background(), baseMotion(goalStep(1, 0.5, 0)))
	h.waitActive()

	// When the base stands still away from this goal
	h.st.Base = robot.Pose2D{X: 0.5, Y: 0.5}
	o := outcomeWithin(t, h, out, 20*time.Second)

	// Then this step is not taken as finished: it stalls
	require.NotNil(t, o.Trip)
	require.Equal(t, TripStall, o.Trip.Kind)
	require.Empty(t, o.Warnings)
}

func TestGoalVerdict_TheStepsOwnToleranceDecides(t *testing.T) {
	// Given a location whose yaw tolerance is 30° (BaseStep with its own
	// tolerance), and a robot that reports SUCCEEDED 27° off
	h, rd := newVerdictHarness(t, true)
	step := BaseStep("drive to dock", robot.BaseGoal{Target: robot.Pose2D{X: 1, Y: 0.5}, MaxLinear: 0.5, MaxAngular: 1}, 0.05, robot.Radians(30))
	out := h.execute(context.Background(), baseMotion(step))
	h.waitActive()
	h.st.Base = robot.Pose2D{X: 1, Y: 0.5, Theta: robot.Radians(27)}
	h.publish()
	rd.succeed("")

	// When it ends
	o := outcomeWithin(t, h, out, 2*time.Second)

	// Then the step's own tolerance holds: no warning
	require.Equal(t, OutcomeSucceeded, o.Kind)
	require.Empty(t, o.Warnings)
}

func TestBaseMisses(t *testing.T) {
	target := robot.Pose2D{X: 1.35, Y: 1, Theta: 0}
	tests := []struct {
		name        string
		pose        robot.Pose2D
		ignoreTheta bool
		want        []string
	}{
		{"on target", robot.Pose2D{X: 1.35, Y: 1}, false, nil},
		{
			"heading off",
			robot.Pose2D{X: 1.35, Y: 1, Theta: robot.Radians(-27)},
			false,
			[]string{"heading 27° off the requested 0°, outside the 10° tolerance"},
		},
		{"heading off but not asked for", robot.Pose2D{X: 1.35, Y: 1, Theta: robot.Radians(-27)}, true, nil},
		{"short and off", robot.Pose2D{X: 1.35, Y: 0.8, Theta: math.Pi}, false, []string{
			"0.20 m from the requested (1.35, 1.00), outside the 0.05 m tolerance",
			"heading 180° off the requested 0°, outside the 10° tolerance",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Given a pose, When it is checked against the target, Then
			// each tolerance it is outside of is one clause
			require.Equal(t, tt.want, BaseMisses(tt.pose, target, tt.ignoreTheta, 0.05, robot.Radians(10)))
		})
	}
}
