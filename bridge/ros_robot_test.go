package bridge

import (
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

// A different robot: transport/ros/testdata/base_robot.py, written with
// rospy and python3-actionlib against nothing but standard interfaces
// (nav_msgs/Odometry, sensor_msgs/JointState and BatteryState,
// std_msgs/Bool, a move_base_msgs/MoveBase action server), run by Debian's
// python3 as its own process. The bridge reaches it through
// hw-configs/ros-base-only.yaml alone, and the agent drives it through
// the real HTTP API with an operator approving each motion.

// rospyModules are what the script imports, with the Debian packages.
var rospyModules = map[string]string{
	"rospy": "python3-rospy", "actionlib": "python3-actionlib", "actionlib_msgs.msg": "python3-actionlib-msgs",
	"move_base_msgs.msg": "python3-move-base-msgs", "nav_msgs.msg": "python3-nav-msgs",
	"sensor_msgs.msg": "python3-sensor-msgs", "geometry_msgs.msg": "python3-geometry-msgs", "std_msgs.msg": "python3-std-msgs",
}

// baseRobot is the rospy robot's process on a master.
type baseRobot struct {
	t    *testing.T
	m    *rostest.Master
	proc *rostest.Proc
}

// startBaseRobot runs the script as node /base_robot starting at pose
// (x, y, theta) and waits until it publishes odometry and serves move_base.
func startBaseRobot(t *testing.T, m *rostest.Master, x, y, theta float64) *baseRobot {
	t.Helper()
	py := rostest.RequirePython(t, rospyModules)
	script, err := filepath.Abs(filepath.Join("..", "transport", "ros", "testdata", "base_robot.py"))
	require.NoError(t, err)
	p := rostest.Start(t, m.Env(t), py, script, "__name:=base_robot",
		fmt.Sprintf("_x:=%g", x), fmt.Sprintf("_y:=%g", y), fmt.Sprintf("_theta:=%g", theta), "_silence:=1.5")
	r := &baseRobot{t: t, m: m, proc: p}
	rostest.Eventually(t, 30*time.Second, func() bool {
		if done, err := p.Exited(); done {
			t.Fatalf("base_robot.py exited (%v):\n%s", err, p.Output())
		}
		return contains(m.Publishers("/odom"), "/base_robot") && contains(m.Publishers("/move_base/status"), "/base_robot")
	}, "base_robot.py never came up")
	return r
}

func contains(list []string, s string) bool {
	return slices.Contains(list, s)
}

// onNextGoal sets how the robot answers the next goal (the script's
// ~on_goal parameter): succeed, abort, reject or silent.
func (r *baseRobot) onNextGoal(mode string) {
	r.t.Helper()
	require.NoError(r.t, r.m.Params("/test").SetParamString("/base_robot/on_goal", mode))
}

// startBaseOnly boots the bridge on ros-base-only.yaml against the rospy
// robot.
func startBaseOnly(t *testing.T) (*harness, *rostest.Master, *baseRobot) {
	t.Helper()
	m := rostest.StartMaster(t)
	robot := startBaseRobot(t, m, 0, 0, 0)
	cfg := rosConfig(t, "ros-base-only.yaml", m.URI, nil)
	h := bootROSBridge(t, cfg)
	h.sim = nil // the robot is not the simulator
	h.waitReady()
	return h, m, robot
}

func TestROS_ThirdPartyRobot(t *testing.T) {
	h, _, robot := startBaseOnly(t)
	safetyEvents := watchSafety(t, h)

	t.Run("tools follow the capabilities: no arm or gripper tools", func(t *testing.T) {
		code, body := h.do("GET", "/v1/tools", h.agent, nil)
		require.Equal(t, http.StatusOK, code)
		var names []string
		desc := map[string]string{}
		for _, x := range body["tools"].([]any) {
			tool := x.(map[string]any)
			n := tool["name"].(string)
			names = append(names, n)
			desc[n] = tool["description"].(string)
		}
		require.Subset(t, names, []string{"move_base_to", "return_to_safe_pose", "stop", "cancel_task", "get_robot_state"})
		for _, armOrGripper := range []string{"move_arm_to", "grasp", "release"} {
			require.NotContains(t, names, armOrGripper)
		}
		// Its safe pose is "base stopped".
		require.True(t, strings.HasPrefix(desc["return_to_safe_pose"], "Stop the base and keep it where it is"), desc["return_to_safe_pose"])
	})

	t.Run("safety status and console say there is no hardware e-stop", func(t *testing.T) {
		env := h.call("get_safety_status", map[string]any{})
		require.Contains(t, env["text"], "no hardware e-stop", "%v", env)
		require.Equal(t, false, env["data"].(map[string]any)["hardware_estop"], "%v", env)
		br := startBrowser(t)
		signInConsole(br, h)
		br.poll("the e-stop note", `document.getElementById('app').dataset.hardwareEstop === 'none'`, 10*time.Second)
		note := evalJS[string](br, `document.getElementById('estop-source').textContent`)
		require.Equal(t, "This robot reports no hardware e-stop: the E-STOP button here is the only e-stop.", note)
		require.True(t, evalJS[bool](br, `(() => { const r = document.getElementById('estop-source').getBoundingClientRect(); return r.width > 0 && r.height > 0; })()`), "the note is on screen")
	})

	t.Run("a goal the robot completes succeeds", func(t *testing.T) {
		robot.onNextGoal("succeed")
		id := startApproved(t, h, "move_base_to", map[string]any{"x": 0.4, "y": 0.2, "theta_deg": 45})
		data := taskData(h.waitTask(id, 60*time.Second))
		require.Equal(t, "succeeded", data["status"], "task: %v", data)
		st := latest(t, h)
		require.InDelta(t, 0.4, st.Base.X, 0.05)
		require.InDelta(t, 0.2, st.Base.Y, 0.05)
		require.InDelta(t, math.Pi/4, st.Base.Theta, 0.06)
	})

	t.Run("a goal the robot ABORTs fails, stopped, with the robot's reason", func(t *testing.T) {
		robot.onNextGoal("abort")
		id := startApproved(t, h, "move_base_to", map[string]any{"x": 2.0, "y": 0.3})
		env := h.waitTask(id, 60*time.Second)
		data := taskData(env)
		// Stopped, then recovered to the safe pose, which for a
		// base-only robot is the base stopped.
		require.Equal(t, "recovered", data["status"], "task: %v", data)
		e := taskError(t, env)
		require.Equal(t, "ACTION_FAILED", e["type"], "error: %v", e)
		require.Contains(t, e["message"], "goal_aborted:/move_base")
		require.Contains(t, e["message"], "no valid plan: the path is blocked", "the robot's own words reach the agent")
		require.Contains(t, e["message"], "robot stopped; base stopped")
		details := e["details"].(map[string]any)
		require.Equal(t, "robot_fault", details["monitor"])
		require.Equal(t, "base stopped", details["recovery"])
		require.Contains(t, env["robot"], "stopped at", "the envelope says where the robot is now")
		safetyEvents.wait(t, "stop_sent", id)
		require.False(t, latest(t, h).Moving(0.01, 0.02))
	})

	t.Run("a goal the robot accepts and then goes silent on: the silence watchdog stops it", func(t *testing.T) {
		robot.onNextGoal("silent")
		id := startApproved(t, h, "move_base_to", map[string]any{"x": 0.0, "y": -1.0})
		env := h.waitTask(id, 60*time.Second)
		data := taskData(env)
		e := taskError(t, env)
		require.Equal(t, "UNAVAILABLE", e["type"], "task: %v", data)
		require.Equal(t, true, e["retryable"])
		details := e["details"].(map[string]any)
		require.Equal(t, "state_silence", details["monitor"], "the supervisor's silence watchdog, not a deadline, ended it")
		require.Contains(t, e["message"], "sent no state")
		trip := safetyEvents.wait(t, "monitor_tripped", id)
		require.Equal(t, "state_silence", fmt.Sprint(trip["monitor"]))
		safetyEvents.wait(t, "stop_sent", id)
		// The robot answered again 1.5 s later, at rest, so the stop was
		// confirmed and the safe pose ("base stopped") reached.
		require.Equal(t, "recovered", data["status"], "task: %v", data)
		require.Equal(t, "base stopped", details["recovery"])
		h.waitReady()
	})

	t.Run("a goal the robot REJECTs fails at once and nothing moves", func(t *testing.T) {
		robot.onNextGoal("reject")
		before := latest(t, h).Base
		id := startApproved(t, h, "move_base_to", map[string]any{"x": 1.0, "y": 1.0})
		env := h.waitTask(id, 60*time.Second)
		e := taskError(t, env)
		require.Contains(t, e["message"], "REJECTED", "error: %v", e)
		require.Contains(t, e["message"], "not allowed in this area")
		t.Logf("agent sees: %s", e["message"])
		after := latest(t, h).Base
		require.InDelta(t, before.X, after.X, 0.01)
		require.InDelta(t, before.Y, after.Y, 0.01)
		clearFaultIfLatched(t, h)
	})
}

func TestROS_ThirdPartyRobotKilledMidMotion(t *testing.T) {
	h, m, robot := startBaseOnly(t)
	safetyEvents := watchSafety(t, h)
	stateTimeout := h.b.Supervisor().Status().Monitors.StateTimeout

	// Given a motion under way
	robot.onNextGoal("succeed")
	id := startApproved(t, h, "move_base_to", map[string]any{"x": 3.5, "y": 0.0})
	waitMoving(t, h)

	// When the robot's process is killed (SIGKILL: no goodbye to the master)
	killedAt := time.Now()
	robot.proc.Kill()

	// Then the supervisor's silence watchdog stops the motion
	trip := safetyEvents.wait(t, "monitor_tripped", id)
	require.Equal(t, "state_silence", fmt.Sprint(trip["monitor"]))
	stop := safetyEvents.wait(t, "stop_sent", id)
	t.Logf("kill → stop sent: %s (state_timeout %s)", stop["at"].(time.Time).Sub(killedAt).Round(time.Millisecond), stateTimeout)
	// and the task fails UNAVAILABLE; the stop cannot be confirmed with
	// the robot gone, so a fault is latched for an operator to look at.
	env := h.waitTask(id, 60*time.Second)
	e := taskError(t, env)
	require.Equal(t, "UNAVAILABLE", e["type"], "error: %v", e)
	require.Equal(t, "fault", taskData(env)["status"])
	waitLinkMetric(t, h, 0, 10*time.Second)
	require.False(t, h.b.Supervisor().Status().LinkUp)

	// When the operator clears the fault while the robot is still gone,
	// Then new motions fail fast with UNAVAILABLE
	clearFault(t, h)
	requireMotionUnavailable(t, h, map[string]any{"x": 0.0, "y": 0.0})

	// When the robot's process comes back (same node name, where it was)
	last := latest(t, h).Base
	robot = startBaseRobot(t, m, last.X, last.Y, last.Theta)

	// Then the link recovers without restarting the bridge, and a new
	// motion succeeds
	waitFresh(t, h)
	waitLinkMetric(t, h, 1, 10*time.Second)
	robot.onNextGoal("succeed")
	id = startApproved(t, h, "move_base_to", map[string]any{"x": 0.5, "y": 0.0})
	data := taskData(h.waitTask(id, 60*time.Second))
	require.Equal(t, "succeeded", data["status"], "task: %v", data)
}
