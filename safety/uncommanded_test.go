package safety_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/fsm"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// The uncommanded-motion monitor: a robot that moves while no task of the
// bridge commands it (another controller, a goal left running, someone
// pushing it) is stopped at once, and a fault latches that only an
// operator clears (safety.uncommanded_motion: latch_fault, the default).
func TestUncommandedMotion_IsStoppedAndLatchesAFault(t *testing.T) {
	uncommandedMotionIsStoppedAndLatchesAFault(t, newRig)
}

func TestROS_UncommandedMotion_IsStoppedAndLatchesAFault(t *testing.T) {
	uncommandedMotionIsStoppedAndLatchesAFault(t, newROSEnv(t).newRig)
}

func TestMQTT_UncommandedMotion_IsStoppedAndLatchesAFault(t *testing.T) {
	uncommandedMotionIsStoppedAndLatchesAFault(t, newMQTTEnv(t).newRig)
}

func uncommandedMotionIsStoppedAndLatchesAFault(t *testing.T, newRig newRigFunc) {
	r := newRig(t)
	// Given a robot that finished a supervised motion and came to rest
	// (no trip while it brakes at the end of it)
	v := r.runTask("move_base_to", map[string]any{"x": 1.0, "y": 0.0})
	require.Equal(t, fsm.Succeeded, v.Status, "%v", v.Error)
	r.stepFor(time.Second)
	require.False(t, r.sup.Status().Fault.Latched, "%+v", r.sup.Status().Fault)
	require.Empty(t, r.eventsOfMonitor(safety.TripUncommandedMotion))
	from := r.sim.Truth().Base
	at := r.logLen()
	fires := r.sim.WatchdogFires()

	// When something other than the bridge drives it
	r.world.rogue("rogue-1", robot.BaseGoal{Target: robot.Pose2D{X: 4.0, Y: 0.0}})

	// Then the supervisor stops it and latches a fault, in words
	require.True(t, r.stepUntil(10*time.Second, func() bool { return r.sup.Status().Fault.Latched }), "no fault latched for the robot driving on its own")
	st := r.sup.Status().Fault
	require.Contains(t, st.Reason, "the robot moved while no task was commanding it: the base was moving at")
	require.True(t, strings.HasPrefix(st.What, "The robot moved while no task was commanding it: the base was moving at "), st.What)
	require.Equal(t, "The bridge commanded a stop.", st.RobotDid)
	require.Contains(t, st.Check, "Find what moved the robot")
	require.NotEmpty(t, r.stopsAfter(r.sim.CommandLog()[at].Time), "no stop after the robot moved")
	require.True(t, r.stepUntil(10*time.Second, r.atRest), "the robot never came to rest")
	// the bridge's stop, before the robot's own command watchdog (which
	// stops a goal nobody refreshes) had to
	require.Equal(t, fires, r.sim.WatchdogFires(), "the robot's watchdog stopped it, not the bridge")
	to := r.sim.Truth().Base
	require.Less(t, math.Hypot(to.X-from.X, to.Y-from.Y), 0.1, "the rogue goal drove the robot from %v to %v", from, to)
	require.Len(t, r.eventsOfMonitor(safety.TripUncommandedMotion), 1, "one trip, one stop")
	trips := r.eventsOf(safety.EventMonitorTripped)
	require.Len(t, trips, 1)
	require.Equal(t, safety.TripUncommandedMotion, trips[0].Monitor)

	// And nothing of the agent's moves until an operator clears it
	n := len(r.motionCommands())
	_, err := r.submit("move_base_to", map[string]any{"x": 1.5, "y": 0.0})
	require.Equal(t, toolerr.SafetyViolation, toolerr.TypeOf(err), "%v", err)
	require.ErrorIs(t, err, safety.ErrFaultLatched)
	require.Len(t, r.motionCommands(), n)
	require.NoError(t, r.sup.ClearFault("operator-1"))
	v = r.runTask("move_base_to", map[string]any{"x": 1.5, "y": 0.0})
	require.Equal(t, fsm.Succeeded, v.Status, "%v", v.Error)
}

// With safety.uncommanded_motion: stop the robot is stopped and the trip
// reported, and nothing latches; with off nothing watches, and only the
// robot's own command watchdog stops a goal nobody refreshes.
func TestUncommandedMotion_Policies(t *testing.T) {
	for _, policy := range []hwconfig.UncommandedMotion{hwconfig.UncommandedStop, hwconfig.UncommandedOff} {
		t.Run(string(policy), func(t *testing.T) {
			r := newRig(t, func(c *hwconfig.Config) { c.Safety.UncommandedMotion = policy })
			r.stepFor(time.Second)
			from, fires := r.sim.Truth().Base, r.sim.WatchdogFires()
			at := r.logLen()
			r.world.rogue("rogue-1", robot.BaseGoal{Target: robot.Pose2D{X: 3.0, Y: 0.0}})
			r.stepFor(3 * time.Second)
			require.True(t, r.atRest())
			to := r.sim.Truth().Base
			d := math.Hypot(to.X-from.X, to.Y-from.Y)
			require.False(t, r.sup.Status().Fault.Latched, "%+v", r.sup.Status().Fault)
			trips := r.eventsOfMonitor(safety.TripUncommandedMotion)
			stops := r.stopsAfter(r.sim.CommandLog()[at].Time)
			if policy == hwconfig.UncommandedStop {
				require.Len(t, trips, 1)
				require.Contains(t, trips[0].Reason, "the robot moved while no task was commanding it")
				require.NotEmpty(t, stops)
				require.Equal(t, fires, r.sim.WatchdogFires(), "the robot's watchdog stopped it, not the bridge")
				require.Less(t, d, 0.1)
				return
			}
			require.Empty(t, trips)
			require.Empty(t, stops)
			require.Equal(t, fires+1, r.sim.WatchdogFires(), "the robot's own watchdog did not stop it")
			require.Greater(t, d, 0.1, "the rogue goal did not drive the robot")
		})
	}
}

// eventsOfMonitor returns the stops the monitor m sent.
func (r *rig) eventsOfMonitor(m safety.TripKind) []safety.Event {
	var out []safety.Event
	for _, e := range r.eventsOf(safety.EventStopSent) {
		if e.Monitor == m {
			out = append(out, e)
		}
	}
	return out
}
