package bridge

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/bluenviron/goroslib/v2"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/geometry_msgs"
	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

// Interop with independent ROS tools: Debian's `rostopic echo` (Python,
// decoding with Debian's own message classes) must see the bridge's
// commands with the standard types, and every topic the bridge publishes
// must be registered under a real ROS type, never goroslib's placeholder.

func TestROS_InteropRostopicSeesTheBridgesCommands(t *testing.T) {
	h := startROS(t, nil)
	m := h.master

	t.Run("every topic the bridge publishes has a standard type", func(t *testing.T) {
		want := map[string]string{
			"/move_base/goal":         "move_base_msgs/MoveBaseActionGoal",
			"/move_base/cancel":       "actionlib_msgs/GoalID",
			"/cmd_vel":                "geometry_msgs/Twist",
			"/robot_bridge/heartbeat": "std_msgs/Header",
			"/arm_controller/follow_joint_trajectory/goal": "control_msgs/FollowJointTrajectoryActionGoal",
			"/gripper_controller/gripper_cmd/goal":         "control_msgs/GripperCommandActionGoal",
		}
		for topic, typ := range want {
			require.Contains(t, m.Publishers(topic), "/robot_bridge", topic)
			require.Equal(t, typ, m.TopicType(topic), topic)
		}
	})

	t.Run("a goal and the heartbeat while the bridge supervises it", func(t *testing.T) {
		// Given rostopic echo connected to the goal and heartbeat topics
		goal := rostest.Echo(t, m, "/move_base/goal", "/robot_bridge")
		beat := rostest.Echo(t, m, "/robot_bridge/heartbeat", "/robot_bridge")

		// When an approved move_base_to runs
		id := startApproved(t, h.harness, "move_base_to", map[string]any{"x": 0.7, "y": -0.4})

		// Then rostopic decodes a move_base_msgs/MoveBaseActionGoal with the
		// target in the configured frame, and std_msgs/Header heartbeats
		require.NoError(t, goal.Wait(20*time.Second), goal.Output())
		out := goal.Output()
		// (the goal id names the task's command: "<command id>@<node>-…")
		for _, s := range []string{"goal_id:", `id: "` + id + `-`, `@robot_bridge-`, "target_pose:", `frame_id: "map"`, "x: 0.7", "y: -0.4"} {
			require.Contains(t, out, s, "rostopic echo /move_base/goal:\n%s", out)
		}
		require.NoError(t, beat.Wait(20*time.Second), beat.Output())
		require.Contains(t, beat.Output(), `frame_id: "robot_bridge"`, beat.Output())
		require.Contains(t, beat.Output(), "stamp:", beat.Output())
		data := taskData(h.waitTask(id, 60*time.Second))
		require.Equal(t, "succeeded", data["status"], "task: %v", data)
	})

	t.Run("stop: a cancel-all and a zero Twist", func(t *testing.T) {
		// Given a motion under way and rostopic listening
		id := startApproved(t, h.harness, "move_base_to", map[string]any{"x": -1.5, "y": 1.0})
		waitMoving(t, h.harness)
		cancel := rostest.Echo(t, m, "/move_base/cancel", "/robot_bridge")
		twist := rostest.Echo(t, m, "/cmd_vel", "/robot_bridge")

		// When the agent calls stop
		env := h.call("stop", args(map[string]any{"reason": "interop test"}))
		require.Equal(t, true, env["ok"], "%v", env)

		// Then rostopic sees actionlib's cancel-everything (empty id) and a
		// zero geometry_msgs/Twist
		require.NoError(t, cancel.Wait(20*time.Second), cancel.Output())
		require.Contains(t, cancel.Output(), `id: ''`, cancel.Output())
		require.NoError(t, twist.Wait(20*time.Second), twist.Output())
		tw := twist.Output()
		require.Contains(t, tw, "linear:", tw)
		require.Contains(t, tw, "angular:", tw)
		require.NotRegexp(t, `x: [-]?[1-9]|x: [-]?0\.0*[1-9]`, tw, "the stop Twist is zero")
		data := taskData(h.waitTask(id, 60*time.Second))
		require.Equal(t, "cancelled", data["status"], "task: %v", data)
	})
}

// twistLog records every Twist on a topic, as a base controller would
// receive them.
type twistLog struct {
	mu  sync.Mutex
	all []twistAt // guarded by mu
}

type twistAt struct {
	at   time.Time
	v, w float64
}

func watchTwists(t *testing.T, m *rostest.Master, topic string) *twistLog {
	t.Helper()
	l := &twistLog{}
	n, err := goroslib.NewNode(goroslib.NodeConf{
		MasterAddress: m.HostPort, Name: "twist_watch", Host: "127.0.0.1",
		LogDestinations: goroslib.LogDestinationCallback, OnLog: func(goroslib.LogLevel, string) {},
	})
	require.NoError(t, err)
	t.Cleanup(n.Close)
	sub, err := goroslib.NewSubscriber(goroslib.SubscriberConf{Node: n, Topic: topic, Callback: func(msg *geometry_msgs.Twist) {
		l.mu.Lock()
		l.all = append(l.all, twistAt{time.Now(), msg.Linear.X, msg.Angular.Z})
		l.mu.Unlock()
	}})
	require.NoError(t, err)
	t.Cleanup(sub.Close)
	rostest.Eventually(t, 10*time.Second, func() bool { return m.Connected("/robot_bridge", topic, "/twist_watch") },
		"the twist watcher never connected")
	return l
}

func (l *twistLog) snapshot() []twistAt {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]twistAt(nil), l.all...)
}

func TestROS_CmdVelMode(t *testing.T) {
	// Given a config whose base is driven by the bridge on cmd_vel, closing
	// the loop on odometry, against the simulator node (which then serves
	// no move_base action)
	h := startROS(t, func(c *hwconfig.Config) { c.Transport.ROS.BaseMode = hwconfig.BaseModeCmdVel })
	require.Empty(t, h.master.Publishers("/move_base/status"), "no move_base server in cmd_vel mode")
	twists := watchTwists(t, h.master, "/cmd_vel")
	echo := rostest.Echo(t, h.master, "/cmd_vel", "/robot_bridge")

	// When an approved move_base_to runs
	began := time.Now()
	id := startApproved(t, h.harness, "move_base_to", map[string]any{"x": 1.0, "y": 0.5, "theta_deg": 0})
	data := taskData(h.waitTask(id, 60*time.Second))
	t.Logf("cmd_vel drive took %s", time.Since(began).Round(time.Millisecond))

	// Then it succeeds at the target
	require.Equal(t, "succeeded", data["status"], "task: %v", data)
	st := latest(t, h.harness)
	require.InDelta(t, 1.0, st.Base.X, 0.06)
	require.InDelta(t, 0.5, st.Base.Y, 0.06)
	// and it was driven by Twists that rostopic decodes as geometry_msgs/Twist
	require.NoError(t, echo.Wait(20*time.Second), echo.Output())
	require.Contains(t, echo.Output(), "linear:", echo.Output())
	seen := twists.snapshot()
	moving := 0
	for _, tw := range seen {
		if tw.v != 0 || tw.w != 0 {
			moving++
		}
	}
	require.Greater(t, moving, 10, "the bridge drove the base with velocity commands")
	// And the Twists stop when the task ends: the last one is zero, and
	// no velocity command follows (watched for 20 control periods)
	require.NotEmpty(t, seen)
	last := seen[len(seen)-1]
	require.Zero(t, last.v, "last Twist")
	require.Zero(t, last.w, "last Twist")
	ended := time.Now()
	time.Sleep(20 * h.cfg.Safety.ControlPeriod.D())
	for _, tw := range twists.snapshot() {
		if tw.at.After(ended) {
			require.True(t, tw.v == 0 && tw.w == 0, "a velocity command after the task ended: %+v", tw)
		}
	}
	require.False(t, latest(t, h.harness).Moving(0.01, 0.02))
	require.Less(t, math.Abs(h.node.Sim().Truth().Velocity.V), 0.01)
}
