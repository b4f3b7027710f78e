package bridge

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

// Losing the robot and getting it back without restarting the bridge: the
// simulator's ROS node crashing mid-motion (Disconnect closes its ROS side
// abruptly while the simulated hardware runs on) and the ROS master itself
// being restarted. The rospy robot killed with SIGKILL is in
// ros_robot_test.go.

func TestROS_RobotNodeLostMidMotion(t *testing.T) {
	h := startROS(t, nil)
	safetyEvents := watchSafety(t, h.harness)

	// Given a motion under way
	id := startApproved(t, h.harness, "move_base_to", map[string]any{"x": -2.0, "y": -1.5})
	waitMoving(t, h.harness)
	watchdogBefore := h.node.Sim().WatchdogFires()

	// When the robot's ROS node dies
	lostAt := time.Now()
	h.node.Disconnect()

	// Then the supervisor's silence watchdog stops the motion
	trip := safetyEvents.wait(t, "monitor_tripped", id)
	require.Equal(t, "state_silence", fmt.Sprint(trip["monitor"]))
	stop := safetyEvents.wait(t, "stop_sent", id)
	t.Logf("node lost → stop sent: %s (state_timeout %s)", stop["at"].(time.Time).Sub(lostAt).Round(time.Millisecond),
		h.b.Supervisor().Status().Monitors.StateTimeout)
	// and the robot, cut off from the bridge's heartbeat, stops by itself
	rostest.Eventually(t, 10*time.Second, func() bool {
		tr := h.node.Sim().Truth()
		return h.node.Sim().WatchdogFires() > watchdogBefore && math.Abs(tr.Velocity.V) < 1e-3 && math.Abs(tr.Velocity.W) < 1e-3
	}, "the simulated robot never stopped on its own watchdog")
	// The task fails UNAVAILABLE; with no state the stop cannot be
	// confirmed, so a fault is latched for an operator.
	env := h.waitTask(id, 60*time.Second)
	e := taskError(t, env)
	require.Equal(t, "UNAVAILABLE", e["type"], "error: %v", e)
	require.Equal(t, "fault", taskData(env)["status"])
	waitLinkMetric(t, h.harness, 0, 10*time.Second)

	// When an operator clears the fault while the node is still gone,
	// Then motions fail fast with UNAVAILABLE and nothing reaches the robot
	clearFault(t, h.harness)
	commands := motionCommands(h.node.Sim())
	requireMotionUnavailable(t, h.harness, map[string]any{"x": 0.0, "y": 0.0})
	require.Equal(t, commands, motionCommands(h.node.Sim()))

	// When the node comes back
	require.NoError(t, h.node.Connect())

	// Then the link recovers without restarting the bridge, and a new
	// motion succeeds
	waitFresh(t, h.harness)
	waitLinkMetric(t, h.harness, 1, 10*time.Second)
	id = startApproved(t, h.harness, "move_base_to", map[string]any{"location": "home"})
	data := taskData(h.waitTask(id, 60*time.Second))
	require.Equal(t, "succeeded", data["status"], "task: %v", data)
}

func TestROS_MasterRestart(t *testing.T) {
	h := startROS(t, nil)

	// Given a bridge and a robot on a master
	require.InDelta(t, 1.0, linkUpMetric(t, h.harness), 1e-9)

	// When the master dies
	h.master.Kill()

	// Then the link goes down and motions fail fast with UNAVAILABLE
	waitLinkMetric(t, h.harness, 0, 10*time.Second)
	commands := motionCommands(h.node.Sim())
	requireMotionUnavailable(t, h.harness, map[string]any{"x": 0.5, "y": 0.0})
	require.Equal(t, commands, motionCommands(h.node.Sim()))

	// When an empty master starts on the same port (every registration is
	// gone: both nodes must notice and register again)
	h.master.Start()

	// Then the link recovers without restarting the bridge and a motion
	// succeeds over the new master
	rostest.Eventually(t, 10*time.Second, func() bool {
		return slices.Contains(h.master.Publishers("/move_base/goal"), "/robot_bridge") &&
			slices.Contains(h.master.Subscribers("/odom"), "/robot_bridge") &&
			slices.Contains(h.master.Publishers("/odom"), "/robot_sim") &&
			slices.Contains(h.master.Subscribers("/move_base/goal"), "/robot_sim")
	}, "bridge and robot never registered with the new master")
	waitFresh(t, h.harness)
	waitLinkMetric(t, h.harness, 1, 10*time.Second)
	id := startApproved(t, h.harness, "move_base_to", map[string]any{"x": 0.5, "y": 0.0})
	data := taskData(h.waitTask(id, 60*time.Second))
	require.Equal(t, "succeeded", data["status"], "task: %v", data)
}
