package safety_test

// The safety invariants of docs/DESIGN.md §4, each run against the simulator
// with fault injection, checking what the simulator actually did (its
// command log, odometer and ground truth), not only what the bridge says.
// Invariant 8 (crash safety) belongs to the store; invariants 10 and 11
// are in stopwins_test.go, invariant 13 (nothing moves while paused) in
// pause_test.go.
//
// Every scenario runs in two worlds (rig_test.go): TestInvariantN_... in
// process on the fake clock, TestROS_InvariantN_... over ROS against
// `robot-bridge sim --transport ros` as its own process. A scenario is one
// function taking the world's newRigFunc; where the worlds differ by
// nature (latency, who dedupes a re-sent goal) the scenario says so at
// the assertion.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/sim"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

func withActionTimeout(tool string, d time.Duration) rigOpt {
	return func(c *hwconfig.Config) {
		a := c.Actions[tool]
		a.Timeout = hwconfig.Duration(d)
		c.Actions[tool] = a
	}
}

func withApprovalTTL(d time.Duration) rigOpt {
	return func(c *hwconfig.Config) { c.Safety.ApprovalTTL = hwconfig.Duration(d) }
}

// requireNothingMoved: no motion command reached the robot and the
// odometer shows no motion at all.
func (r *rig) requireNothingMoved() {
	r.t.Helper()
	require.Empty(r.t, r.motionCommands(), "the simulator received a motion command")
	odo := r.sim.Odometer()
	require.Zero(r.t, odo.BaseDistance)
	require.Zero(r.t, odo.JointTravel)
}

func TestInvariant1_NoMotionWithoutAuthorization(t *testing.T) {
	invariant1NoMotionWithoutAuthorization(t, newRig)
}

func TestROS_Invariant1_NoMotionWithoutAuthorization(t *testing.T) {
	invariant1NoMotionWithoutAuthorization(t, newROSEnv(t).newRig)
}

func invariant1NoMotionWithoutAuthorization(t *testing.T, newRig newRigFunc) {
	r := newRig(t, withApprovalTTL(2*time.Second))
	args := map[string]any{"x": 2.0, "y": -1.0}

	// Given a move that waits for an operator, When time passes, Then
	// nothing reaches the robot.
	v := r.mustSubmit("move_base_to", args)
	require.Equal(t, "awaiting_approval", string(v.Status))
	r.stepFor(time.Second)
	r.requireNothingMoved()

	// When the operator denies it, Then it ends denied with the operator's
	// words and nothing moved.
	_, err := r.appr.Deny(context.Background(), v.ApprovalID, "operator-1", "the hallway is being cleaned")
	require.NoError(t, err)
	waitUntil(t, func() bool { return r.get(v.ID).Terminal() }, "denial not applied")
	v = r.get(v.ID)
	require.Equal(t, "denied", string(v.Status))
	require.Equal(t, toolerr.ApprovalDenied, v.Error.Type)
	require.Contains(t, v.Error.Message, `"the hallway is being cleaned"`)
	r.requireNothingMoved()

	// When no one decides, Then the request expires and nothing moves.
	v = r.mustSubmit("move_base_to", args)
	v = r.waitTerminal(v.ID, 5*time.Second)
	require.Equal(t, "expired", string(v.Status))
	require.Equal(t, toolerr.ApprovalExpired, v.Error.Type)
	r.requireNothingMoved()

	// When a motion presents a forged grant at the gate, Then it is refused.
	q, err := r.cfg.PoseJoints("ready")
	require.NoError(t, err)
	forged := safety.Motion{
		Auth:     safety.Authorization{TaskID: "forged", Tool: "move_arm_to", Args: map[string]any{"pose": "ready"}, GrantID: "grt_forged"},
		Steps:    []safety.Step{safety.ArmStep("forged", q, 0.5, safety.JointTolerance)},
		Deadline: 10 * time.Second,
	}
	out := r.executeRefused(forged)
	require.Equal(t, safety.OutcomeRejected, out.Kind)
	require.ErrorIs(t, out.Err, safety.ErrNotAuthorized)
	r.requireNothingMoved()

	// When an operator approves one call, Then only that task moves.
	v = r.mustSubmit("move_base_to", args)
	r.approve(v)
	v = r.waitTerminal(v.ID, 30*time.Second)
	require.Equal(t, "succeeded", string(v.Status), "%v", v.Error)
	require.NotEmpty(t, r.motionCommands())
	a, err := r.appr.Get(v.ApprovalID)
	require.NoError(t, err)

	// And its approve-once grant does not authorize another task, even
	// with the same arguments.
	n := len(r.motionCommands())
	require.NotEmpty(t, a.GrantID)
	reuse := safety.Motion{
		Auth: safety.Authorization{TaskID: "another-task", Tool: "move_base_to", Args: a.Arguments, GrantID: a.GrantID},
		Steps: []safety.Step{{
			Name: "reuse", Command: robot.Command{
				Kind: robot.CmdMoveBase,
				Base: &robot.BaseGoal{Target: robot.Pose2D{X: 2, Y: -1}, MaxLinear: 0.8, MaxAngular: 1.5},
			},
			Done: func(robot.State) bool { return false },
		}},
		Deadline: 10 * time.Second,
	}
	out = r.executeRefused(reuse)
	require.Equal(t, safety.OutcomeRejected, out.Kind)
	require.ErrorIs(t, out.Err, safety.ErrNotAuthorized)
	require.Len(t, r.motionCommands(), n)
	require.NoError(t, r.checkEveryCommandAuthorized())
}

func TestInvariant2_TimeoutStoppedWithinOnePeriodThenRecovered(t *testing.T) {
	invariant2TimeoutStoppedWithinOnePeriodThenRecovered(t, newRig)
}

func TestROS_Invariant2_TimeoutStoppedWithinOnePeriodThenRecovered(t *testing.T) {
	invariant2TimeoutStoppedWithinOnePeriodThenRecovered(t, newROSEnv(t).newRig)
}

func invariant2TimeoutStoppedWithinOnePeriodThenRecovered(t *testing.T, newRig newRigFunc) {
	tests := []struct {
		name string
		tool string
		args map[string]any
	}{
		{"arm motion past its timeout", "move_arm_to", map[string]any{"pose": "reach_table"}},
		{"base motion past its timeout", "move_base_to", map[string]any{"x": 3.0, "y": -2.0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			timeout := 1500 * time.Millisecond
			r := newRig(t, withActionTimeout(tc.tool, timeout))
			// Given an approved motion that needs longer than its timeout
			v := r.mustSubmit(tc.tool, tc.args)
			r.approve(v)
			// When it runs past the timeout
			v = r.waitTerminal(v.ID, 30*time.Second)
			// Then the simulator received a stop within one control period
			// of the deadline
			cmds := r.motionCommands()
			require.NotEmpty(t, cmds)
			deadline := cmds[0].Time.Add(timeout)
			early := time.Duration(0)
			if r.world.wire() {
				// Over ROS the robot receives the command a transport
				// latency after the supervisor started the motion's
				// clock, so the deadline is taken from the supervisor's
				// start of the Send, on the robot's clock; that mapping
				// is good to a physics period and an HTTP round trip,
				// which the budget allows on the early side.
				s, ok := r.sendOf(cmds[0].ID)
				require.True(t, ok, "no Send sent %s", cmds[0].ID)
				deadline, early = r.world.robotTime(s.Start).Add(timeout), r.world.budget()
			}
			stops := r.stopsAfter(cmds[0].Time)
			require.NotEmpty(t, stops, "no stop reached the simulator")
			late := stops[0].Time.Sub(deadline)
			if r.world.wire() {
				t.Logf("the stop reached the robot %s after the deadline (allowed %s + budget %s)", late, r.sup.ControlPeriod(), r.world.budget())
			}
			require.GreaterOrEqual(t, late, -early, "stopped before the deadline: the task ended %s (%v); safety events %v", v.Status, v.Error, r.eventsOf(safety.EventMonitorTripped))
			require.LessOrEqual(t, late, r.within(r.sup.ControlPeriod()), "stop %s after the deadline (%s world)", late, r.world.name())
			// And then recovered: the arm went back to the safe pose at
			// reduced speed, the base stayed where it stopped
			require.Equal(t, "recovered", string(v.Status), v.Text)
			require.Equal(t, toolerr.Timeout, v.Error.Type)
			require.Contains(t, v.Error.Message, "stowed")
			require.Contains(t, v.Error.Message, "no task running")
			stowed, _ := r.cfg.PoseJoints("stowed")
			tr := r.sim.Truth()
			for i, j := range tr.Joints {
				require.InDelta(t, stowed[i], j.Position, 0.03, j.Name)
			}
			for _, c := range r.motionCommands() {
				if task, rec := taskOfCommand(c.ID); rec {
					require.Equal(t, v.ID, task)
					require.Equal(t, "move_arm", c.Kind, "recovery never drives the base")
					require.InDelta(t, r.cfg.SafePose.SpeedScale, c.Command.Arm.VelocityScale, 1e-9)
				}
			}
			require.True(t, r.atRest())
			require.False(t, r.sup.Status().Fault.Latched)
			require.NoError(t, r.checkEveryCommandAuthorized())
		})
	}
}

func TestInvariant3_FailureBreachOrLinkLossStopsThenRecovers(t *testing.T) {
	invariant3FailureBreachOrLinkLossStopsThenRecovers(t, newRig)
}

func TestROS_Invariant3_FailureBreachOrLinkLossStopsThenRecovers(t *testing.T) {
	invariant3FailureBreachOrLinkLossStopsThenRecovers(t, newROSEnv(t).newRig)
}

func invariant3FailureBreachOrLinkLossStopsThenRecovers(t *testing.T, newRig newRigFunc) {
	tests := []struct {
		name    string
		opts    []rigOpt
		tool    string
		args    map[string]any
		prepare func(r *rig)
		// inject runs once the motion is under way.
		inject  func(r *rig)
		monitor string
		// rosMonitor, when set, is the monitor that trips over ROS
		// instead.
		rosMonitor string
		errType    toolerr.Type
		check      func(t *testing.T, r *rig)
	}{
		{
			name: "driver fails to send a grasp step", tool: "grasp", args: map[string]any{"object_id": "red_cup"},
			prepare: func(r *rig) { r.runTask("move_base_to", map[string]any{"location": "table"}) },
			inject: func(r *rig) {
				r.drv.setFailSend(func(c robot.Command) error {
					if c.Kind == robot.CmdMoveArm && !strings.HasPrefix(c.ID, safety.RecoveryCommandPrefix) {
						return errors.New("controller rejected the trajectory")
					}
					return nil
				})
			},
			monitor: "driver_error", errType: toolerr.ActionFailed,
		},
		{
			name: "odometry reports the base in the keep-out stairs", tool: "move_base_to", args: map[string]any{"x": 3.3, "y": -3.4},
			inject: func(r *rig) {
				r.inject(sim.Fault{Kind: sim.FaultSensorNoise, OdomStd: 0.8})
				// The noise lasts until the breach has stopped the motion:
				// odometry that keeps jumping 0.8 m through the recovery
				// may report the base on a surface, which is rightly a
				// fault, not a recovery (seen over MQTT in real time).
				r.stepUntil(10*time.Second, func() bool {
					a := r.sup.Status().Active
					return a == nil || a.Phase != safety.PhaseExecuting
				})
				r.sim.ClearFaults()
			},
			monitor: "limit_breach", errType: toolerr.ActionFailed,
		},
		{
			name: "link lost during an arm motion", tool: "move_arm_to", args: map[string]any{"pose": "reach_table"},
			inject: func(r *rig) {
				r.inject(sim.Fault{Kind: sim.FaultLinkDown, Duration: time.Second})
			},
			// Over ROS the driver declares the link down only a few
			// control periods after the state stopped (ros.Conf
			// LinkTimeout), so that the supervisor's own state-silence
			// watchdog is what stops the motion and names the cause.
			monitor: "link_down", rosMonitor: "state_silence", errType: toolerr.Unavailable,
			check: func(t *testing.T, r *rig) {
				// The stop could not cross the dead link: the robot's own
				// watchdog stopped the arm (invariant 9 at work).
				require.GreaterOrEqual(t, r.sim.WatchdogFires(), 1)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.opts...)
			if tc.prepare != nil {
				tc.prepare(r)
			}
			before := len(r.motionCommands())
			v := r.mustSubmit(tc.tool, tc.args)
			r.approve(v)
			r.stepUntil(5*time.Second, func() bool { return len(r.motionCommands()) > before })
			r.stepFor(300 * time.Millisecond)
			tc.inject(r)
			v = r.waitTerminal(v.ID, 60*time.Second)
			require.Equal(t, "recovered", string(v.Status), "%s: %v", v.Text, v.Error)
			require.Equal(t, tc.errType, v.Error.Type, v.Error.Message)
			monitor := tc.monitor
			if r.world.wire() && tc.rosMonitor != "" {
				monitor = tc.rosMonitor
			}
			require.Equal(t, monitor, v.Error.Details["monitor"], v.Error.Message)
			require.Contains(t, v.Error.Message, "arm ")
			// What the simulator did: a stop after the injection, then the
			// arm back in the safe pose, the robot at rest.
			stowed, _ := r.cfg.PoseJoints("stowed")
			tr := r.sim.Truth()
			for i, j := range tr.Joints {
				require.InDelta(t, stowed[i], j.Position, 0.03, j.Name)
			}
			require.True(t, r.atRest())
			require.GreaterOrEqual(t, r.sim.Counters().Stops+r.sim.WatchdogFires(), 1)
			if tc.check != nil {
				tc.check(t, r)
			}
			require.NoError(t, r.checkEveryCommandAuthorized())
		})
	}
}

// runTask submits, approves and finishes one task, failing the test if it
// does not succeed.
func (r *rig) runTask(tool string, args map[string]any) actions.TaskView {
	r.t.Helper()
	v := r.mustSubmit(tool, args)
	r.approve(v)
	v = r.waitTerminal(v.ID, 60*time.Second)
	require.Equal(r.t, "succeeded", string(v.Status), "%s %v: %v", tool, args, v.Error)
	return v
}

func TestInvariant4_EStopLatchesStopsAtOnceRefusesUntilReset(t *testing.T) {
	invariant4EStopLatchesStopsAtOnceRefusesUntilReset(t, newRig)
}

func TestROS_Invariant4_EStopLatchesStopsAtOnceRefusesUntilReset(t *testing.T) {
	invariant4EStopLatchesStopsAtOnceRefusesUntilReset(t, newROSEnv(t).newRig)
}

func invariant4EStopLatchesStopsAtOnceRefusesUntilReset(t *testing.T, newRig newRigFunc) {
	r := newRig(t)
	// Given the base driving (a straight path clear of the table: the
	// base's footprint may not cross it)
	v := r.mustSubmit("move_base_to", map[string]any{"x": 3.0, "y": -2.0})
	r.approve(v)
	r.stepFor(1500 * time.Millisecond)
	require.Greater(t, r.sim.Truth().Velocity.V, 0.1)
	pressed := r.sim.Now()
	// When an operator presses the e-stop
	require.NoError(t, r.sup.EStop(context.Background(), "operator-1", "someone walked in"))
	// Then the stop reached the simulator at that very instant (over ROS:
	// within the transport's budget)
	require.True(t, r.stepUntil(r.world.budget(), func() bool { return len(r.stopsAfter(pressed)) > 0 }), "no stop reached the robot")
	stops := r.stopsAfter(pressed)
	r.requireLatency(stops[0].Time.Sub(pressed), 0, "the e-stop's stop")
	v = r.waitTerminal(v.ID, 10*time.Second)
	require.Equal(t, "estopped", string(v.Status))
	require.Equal(t, toolerr.EStopActive, v.Error.Type)
	require.True(t, r.atRest())
	n := len(r.motionCommands())

	// And every motion is refused, however long we wait, without recovery
	_, err := r.submit("move_arm_to", map[string]any{"pose": "ready"})
	require.Equal(t, toolerr.EStopActive, toolerr.TypeOf(err))
	r.stepFor(3 * time.Second)
	_, err = r.submit("return_to_safe_pose", map[string]any{})
	require.Equal(t, toolerr.EStopActive, toolerr.TypeOf(err))
	require.Len(t, r.motionCommands(), n, "nothing may be sent while the e-stop is latched")
	require.True(t, r.sup.Status().EStop.Active)

	// When an operator resets it, Then motion is possible again
	require.NoError(t, r.sup.ResetEStop("operator-2"))
	r.runTask("move_arm_to", map[string]any{"pose": "ready"})

	// And a robot-side e-stop latches ours too
	v = r.mustSubmit("move_arm_to", map[string]any{"pose": "reach_table"})
	r.approve(v)
	r.stepFor(500 * time.Millisecond)
	id := r.inject(sim.Fault{Kind: sim.FaultRobotEStop, Duration: 500 * time.Millisecond})
	_ = id
	v = r.waitTerminal(v.ID, 10*time.Second)
	require.Equal(t, "estopped", string(v.Status))
	r.stepFor(2 * time.Second) // the robot's circuit has released by now
	st := r.sup.Status()
	require.True(t, st.EStop.Active, "a robot e-stop latches ours and never auto-resets")
	require.False(t, st.RobotEStop)
	_, err = r.submit("move_arm_to", map[string]any{"pose": "stowed"})
	require.Equal(t, toolerr.EStopActive, toolerr.TypeOf(err))
	require.NoError(t, r.sup.ResetEStop("operator-2"))
	require.NoError(t, r.checkEveryCommandAuthorized())
}

func TestInvariant5_LimitsRefusedBeforeAnOperatorIsAsked(t *testing.T) {
	invariant5LimitsRefusedBeforeAnOperatorIsAsked(t, newRig)
}

func TestROS_Invariant5_LimitsRefusedBeforeAnOperatorIsAsked(t *testing.T) {
	invariant5LimitsRefusedBeforeAnOperatorIsAsked(t, newROSEnv(t).newRig)
}

func invariant5LimitsRefusedBeforeAnOperatorIsAsked(t *testing.T, newRig newRigFunc) {
	r := newRig(t)
	// Given the base parked next to the stairs (one approved motion)
	r.runTask("move_base_to", map[string]any{"x": 3.0, "y": -4.2})
	approvals, commands := len(r.appr.List("")), len(r.motionCommands())
	tests := []struct {
		name   string
		tool   string
		args   map[string]any
		field  string
		limit  string
		allows string
	}{
		{"x beyond the workspace", "move_base_to", map[string]any{"x": 7.0, "y": 0.0}, "x", safety.LimitWorkspace, "x in [-4.5, 4.5]"},
		{"y beyond the workspace", "move_base_to", map[string]any{"x": 0.0, "y": -6.0}, "y", safety.LimitWorkspace, "y in [-4.5, 4.5]"},
		{"target in a keep-out region", "move_base_to", map[string]any{"x": 4.0, "y": -4.0}, "x", safety.LimitKeepOut, "stairs"},
		{"straight path through a keep-out region", "move_base_to", map[string]any{"x": 4.2, "y": -2.5}, "x", safety.LimitPathKeepOut, "stairs"},
		{"joint beyond its limit", "move_arm_to", map[string]any{"joints": map[string]any{"elbow": 3.0}}, "joints.elbow", safety.LimitJointPosition, "elbow in [-2.6, 2.6]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// When the agent asks for a motion outside the limits
			_, err := r.submit(tc.tool, tc.args)
			// Then it is refused with the limit and the allowed range
			te := toolerr.As(err)
			require.Equal(t, toolerr.SafetyViolation, te.Type, "%v", err)
			require.Equal(t, tc.field, te.Details["field"])
			require.Equal(t, tc.limit, te.Details["limit"])
			require.Contains(t, te.Message, tc.allows)
			_, busy := r.run.Active()
			require.False(t, busy, "no task was created")
		})
	}
	// And no operator was asked about any of them, and nothing more moved.
	require.Len(t, r.appr.List(""), approvals)
	require.Len(t, r.motionCommands(), commands)
}

func TestInvariant6_FailedRecoveryLatchesFault(t *testing.T) {
	invariant6FailedRecoveryLatchesFault(t, newRig)
}

func TestROS_Invariant6_FailedRecoveryLatchesFault(t *testing.T) {
	invariant6FailedRecoveryLatchesFault(t, newROSEnv(t).newRig)
}

func invariant6FailedRecoveryLatchesFault(t *testing.T, newRig newRigFunc) {
	r := newRig(t, func(c *hwconfig.Config) { c.SafePose.Timeout = hwconfig.Duration(3 * time.Second) })
	// Given an arm motion whose shoulder jams half-way
	v := r.mustSubmit("move_arm_to", map[string]any{"pose": "reach_table"})
	r.approve(v)
	r.stepFor(700 * time.Millisecond)
	r.inject(sim.Fault{Kind: sim.FaultJointStuck, Joint: "shoulder_pitch"})
	// When the supervisor stops it and recovery cannot move the joint
	v = r.waitTerminal(v.ID, 30*time.Second)
	// Then a fault latches
	require.Equal(t, "fault", string(v.Status), v.Text)
	require.Equal(t, true, v.Error.Details["fault_latched"])
	require.Contains(t, v.Error.Message, "operator")
	st := r.sup.Status()
	require.True(t, st.Fault.Latched)
	require.True(t, r.atRest())
	n := len(r.motionCommands())

	// And nothing moves until an operator clears it, even after the
	// robot is healthy again and a long time has passed
	r.sim.ClearFaults()
	r.stepFor(5 * time.Second)
	_, err := r.submit("return_to_safe_pose", map[string]any{})
	require.Equal(t, toolerr.SafetyViolation, toolerr.TypeOf(err))
	require.ErrorIs(t, err, safety.ErrFaultLatched)
	require.Len(t, r.motionCommands(), n)
	require.True(t, r.sup.Status().Fault.Latched, "a fault never clears itself")

	require.NoError(t, r.sup.ClearFault("operator-1"))
	r.runTask("return_to_safe_pose", map[string]any{})
	require.NoError(t, r.checkEveryCommandAuthorized())
}

func TestInvariant6_RecoveryNotPreauthorizedLatchesFault(t *testing.T) {
	invariant6RecoveryNotPreauthorizedLatchesFault(t, newRig)
}

func TestROS_Invariant6_RecoveryNotPreauthorizedLatchesFault(t *testing.T) {
	invariant6RecoveryNotPreauthorizedLatchesFault(t, newROSEnv(t).newRig)
}

func invariant6RecoveryNotPreauthorizedLatchesFault(t *testing.T, newRig newRigFunc) {
	r := newRig(t, func(c *hwconfig.Config) { c.SafePose.Preauthorized = false }, withActionTimeout("move_arm_to", time.Second))
	v := r.mustSubmit("move_arm_to", map[string]any{"pose": "reach_table"})
	r.approve(v)
	v = r.waitTerminal(v.ID, 30*time.Second)
	require.Equal(t, "fault", string(v.Status))
	require.Contains(t, v.Error.Message, "not pre-authorized")
	for _, c := range r.motionCommands() {
		_, rec := taskOfCommand(c.ID)
		require.False(t, rec, "no recovery motion without pre-authorization")
	}
	require.True(t, r.atRest())
}

func TestInvariant7_OneCallProducesOneMotion(t *testing.T) {
	invariant7OneCallProducesOneMotion(t, newRig)
}

func TestROS_Invariant7_OneCallProducesOneMotion(t *testing.T) {
	invariant7OneCallProducesOneMotion(t, newROSEnv(t).newRig)
}

func invariant7OneCallProducesOneMotion(t *testing.T, newRig newRigFunc) {
	// Idempotency keys live in the tool API; the runner and the gate
	// guarantee what the keys rely on: one live motion at a time, an
	// approve-once grant used by one task, and command ids the robot
	// dedupes.
	r := newRig(t)
	args := map[string]any{"x": 1.0, "y": 1.0}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		views []actions.TaskView
		errs  []error
	)
	for range 20 {
		wg.Go(func() {
			v, err := r.submit("move_base_to", args)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else {
				views = append(views, v)
			}
		})
	}
	wg.Wait()
	require.Len(t, views, 1, "exactly one task")
	require.Len(t, errs, 19)
	for _, err := range errs {
		te := toolerr.As(err)
		require.Equal(t, toolerr.RobotBusy, te.Type)
		require.Equal(t, views[0].ID, te.Details["task_id"])
		require.Contains(t, te.Message, views[0].ID)
	}
	require.Len(t, r.appr.List(""), 1, "one approval request")
	r.approve(views[0])
	v := r.waitTerminal(views[0].ID, 30*time.Second)
	require.Equal(t, "succeeded", string(v.Status))
	require.Len(t, r.motionCommands(), 1, "the simulator saw exactly one motion command")
	task, _ := taskOfCommand(r.motionCommands()[0].ID)
	require.Equal(t, views[0].ID, task, "the command the robot got is the task's (over ROS: attributed by its goal id's stamp)")
	odo := r.sim.Odometer().BaseDistance
	require.InDelta(t, 1.414, odo, 0.1, "the base drove the distance once")

	// The same command delivered twice (a transport retry) moves once.
	log := r.sim.CommandLog()
	first := slices.IndexFunc(log, func(e sim.LogEntry) bool { return e.Op == "command" })
	before := r.sim.Counters()
	r.world.redeliver(first)
	r.stepFor(time.Second)
	require.InDelta(t, odo, r.sim.Odometer().BaseDistance, 1e-9)
	after := r.sim.Counters()
	require.Equal(t, before.Accepted, after.Accepted, "the copy was accepted as a new command")
	if !r.world.copyReachesRobot() {
		// Over ROS the copy is the same actionlib goal id again, which
		// the robot's action server drops (as actionlib does): the
		// simulator never sees it.
		require.Len(t, r.sim.CommandLog(), len(log), "the re-sent goal reached the simulator")
	} else {
		// In process, and over MQTT (a QoS 1 copy), the simulator itself
		// gets the copy and acknowledges the known id without acting.
		require.Equal(t, before.Duplicates+1, after.Duplicates, "the simulator did not see the copy as a duplicate")
	}
}

func TestInvariant9_SimStopsWithoutCommands(t *testing.T) {
	t.Run("simulator alone", func(t *testing.T) {
		cfg := loadCfg(t)
		s, err := sim.New(cfg)
		require.NoError(t, err)
		// Given the base sent on a long drive and then never refreshed
		require.NoError(t, s.Command(robot.Command{
			ID: "c1", Kind: robot.CmdMoveBase,
			Base: &robot.BaseGoal{Target: robot.Pose2D{X: 4, Y: 0}, MaxLinear: 0.8, MaxAngular: 1.5},
		}))
		timeout := s.CommandTimeout()
		s.Step(timeout)
		require.Greater(t, s.Truth().Velocity.V, 0.1, "it was driving")
		// When the command timeout passes with no command, Then the
		// simulator stops by itself within its braking time
		brake := time.Duration(cfg.Base.MaxLinearSpeed / cfg.Base.MaxLinearAccel * float64(time.Second))
		s.Step(brake + 100*time.Millisecond)
		tr := s.Truth()
		require.InDelta(t, 0, tr.Velocity.V, 1e-9)
		require.False(t, tr.BaseGoal)
		require.Equal(t, 1, s.WatchdogFires())
		at := tr.Base
		s.Step(5 * time.Second)
		require.Equal(t, at, s.Truth().Base, "and stays stopped")
	})
	t.Run("bridge goes silent mid-motion", func(t *testing.T) { invariant9BridgeGoesSilent(t, newRig) })
}

func TestROS_Invariant9_SimStopsWithoutCommands(t *testing.T) {
	// (The simulator alone has no ROS in it; the ROS simulator node's
	// watchdog is what the bridge's silence meets.)
	env := newROSEnv(t)
	t.Run("bridge goes silent mid-motion", func(t *testing.T) { invariant9BridgeGoesSilent(t, env.newRig) })
}

func invariant9BridgeGoesSilent(t *testing.T, newRig newRigFunc) {
	{
		r := newRig(t)
		v := r.mustSubmit("move_base_to", map[string]any{"x": -3.0, "y": 2.0})
		r.approve(v)
		r.stepFor(2 * time.Second)
		require.Greater(t, abs(r.sim.Truth().Velocity.V)+abs(r.sim.Truth().Velocity.W), 0.1)
		// When every driver call is lost (the bridge is cut off)
		cut := r.sim.Now()
		r.inject(sim.Fault{Kind: sim.FaultLinkDown})
		// Then the robot stops on its own within the command timeout plus
		// its braking time, although no stop command reached it
		brake := time.Duration(r.cfg.Base.MaxLinearSpeed / r.cfg.Base.MaxLinearAccel * float64(time.Second))
		ok := r.stepUntil(r.within(r.sim.CommandTimeout()+brake+200*time.Millisecond), r.atRest)
		require.True(t, ok, "robot still moving %s after the link was cut", r.sim.Now().Sub(cut))
		require.Empty(t, r.stopsAfter(cut), "no stop got through the dead link")
		require.Equal(t, 1, r.sim.WatchdogFires())
		r.sim.ClearFaults()
		v = r.waitTerminal(v.ID, 30*time.Second)
		require.Contains(t, []string{"recovered", "fault"}, string(v.Status), fmt.Sprint(v.Error))
	}
}
