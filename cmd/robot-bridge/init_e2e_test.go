package main

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

// `robot-bridge init` against a real robot: Debian's rosmaster and a
// rospy robot (testdata/odom_movebase_robot.py) that has only /odom,
// /cmd_vel and a move_base action — no e-stop, no battery. init writes a
// config, check-config accepts it, serve bridges the robot with exactly
// the base tools, and the robot's own log shows that nothing reached it
// before the operator approved, and that the approved goal did.

// odomRobotModules are what the script imports, with the Debian packages.
var odomRobotModules = map[string]string{
	"rospy": "python3-rospy", "actionlib": "python3-actionlib",
	"move_base_msgs.msg": "python3-move-base-msgs", "nav_msgs.msg": "python3-nav-msgs",
	"geometry_msgs.msg": "python3-geometry-msgs",
}

// odomRobot is the rospy robot's process.
type odomRobot struct {
	t    *testing.T
	proc *rostest.Proc
}

// startOdomRobot runs the script as /odom_robot at (x, y, theta) with the
// extra private parameters, and waits until it publishes odometry and
// serves move_base.
func startOdomRobot(t *testing.T, m *rostest.Master, x, y, theta float64, params ...string) *odomRobot {
	t.Helper()
	py := rostest.RequirePython(t, odomRobotModules)
	script, err := filepath.Abs(filepath.Join("testdata", "odom_movebase_robot.py"))
	require.NoError(t, err)
	argv := append([]string{
		py, script, "__name:=odom_robot",
		fmt.Sprintf("_x:=%g", x), fmt.Sprintf("_y:=%g", y), fmt.Sprintf("_theta:=%g", theta),
	}, params...)
	p := rostest.Start(t, m.Env(t), argv...)
	rostest.Eventually(t, 30*time.Second, func() bool {
		if done, err := p.Exited(); done {
			t.Fatalf("odom_movebase_robot.py exited (%v):\n%s", err, p.Output())
		}
		return slices.Contains(m.Publishers("/odom"), "/odom_robot") && slices.Contains(m.Publishers("/move_base/status"), "/odom_robot")
	}, "odom_movebase_robot.py never came up")
	return &odomRobot{t: t, proc: p}
}

// robotLine is one line of the robot's log: its kind, wall-clock time and
// fields.
type robotLine struct {
	kind   string
	at     time.Time
	fields []string
}

// lines returns the robot's log lines of the given kinds.
func (r *odomRobot) lines(kinds ...string) []robotLine {
	var out []robotLine
	for l := range strings.SplitSeq(r.proc.Output(), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || !slices.Contains(kinds, f[0]) {
			continue
		}
		sec, err := strconv.ParseFloat(f[1], 64)
		require.NoError(r.t, err, "robot log line %q", l)
		out = append(out, robotLine{kind: f[0], at: time.Unix(0, int64(sec*1e9)), fields: f[2:]})
	}
	return out
}

func (l robotLine) float(t *testing.T, i int) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(l.fields[i], 64)
	require.NoError(t, err, "%v", l)
	return v
}

// motionLines are the robot's goals and non-zero velocity commands: every
// command that could move it.
func (r *odomRobot) motionLines(t *testing.T) []robotLine {
	var out []robotLine
	for _, l := range r.lines("GOAL", "CMD_VEL") {
		if l.kind == "CMD_VEL" && l.float(t, 0) == 0 && l.float(t, 1) == 0 {
			continue // a stop
		}
		out = append(out, l)
	}
	return out
}

// runROSBinary runs the built binary with a ROS environment on master m.
func runROSBinary(t *testing.T, m *rostest.Master, bin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runEnv(t, m.Env(t), bin, args...)
}

// runEnv runs a command with env and returns its exit code and output.
func runEnv(t testing.TB, env []string, bin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		require.NoError(t, err, "run %s %v", bin, args)
	}
	return code, out.String(), errOut.String()
}

// initAndServe runs init against the robot on m, check-config on what it
// wrote, and serve on it; it returns the bridge and the written config.
func initAndServe(t *testing.T, m *rostest.Master, bin string) (*rosBridgeProc, *hwconfig.Config, string) {
	t.Helper()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "robot.yaml")
	code, stdout, stderr := runROSBinary(t, m, bin, "init", "--ros-master", m.URI, "--out", cfgPath)
	require.Equal(t, 0, code, "init failed:\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	code, ccOut, ccErr := runROSBinary(t, m, bin, "check-config", cfgPath)
	require.Equal(t, 0, code, "check-config refused init's config:\n%s%s", ccOut, ccErr)
	require.Contains(t, ccOut, "ok")
	cfg, err := hwconfig.Load(cfgPath)
	require.NoError(t, err)
	return startROSBridge(t, m, bin, cfgPath, t.TempDir()), cfg, stdout
}

// approveAndWait approves the task's pending approval as the operator and
// returns the task's envelope once it has ended.
func approveAndWait(t *testing.T, p *rosBridgeProc, taskID string) map[string]any {
	t.Helper()
	approvalID := pendingApprovalOf(t, p.bridgeProc, taskID)
	code, body := p.do(t, "POST", "/v1/approvals/"+approvalID+"/approve", crashOperatorToken, map[string]any{})
	require.Equal(t, http.StatusOK, code, "%v", body)
	var env map[string]any
	rostest.Eventually(t, 60*time.Second, func() bool {
		code, env = p.do(t, "GET", "/v1/tasks/"+taskID+"?wait_ms=2000", crashAgentToken, nil)
		require.Equal(t, http.StatusOK, code, "%v", env)
		data, _ := env["data"].(map[string]any)
		switch data["status"] {
		case "requested", "awaiting_approval", "approved", "executing", "stopping", "recovering":
			return false
		}
		return true
	}, "task %s never ended; bridge:\n%s", taskID, p.proc.Output())
	return env
}

func TestInit_BridgesARobotWithOnlyOdomCmdVelAndMoveBase(t *testing.T) {
	// Given rosmaster and a rospy robot with only /odom, /cmd_vel and
	// move_base, standing at (0.4, -0.3) facing 30°
	m := rostest.StartMaster(t)
	robot := startOdomRobot(t, m, 0.4, -0.3, 30*math.Pi/180)
	bin := buildBinary(t)

	// When init reads it, check-config checks what init wrote and serve
	// bridges it
	p, cfg, initOut := initAndServe(t, m, bin)
	t.Logf("init said:\n%s", initOut)

	// Then the config names the robot's interfaces, no e-stop and no
	// battery, and centres the workspace on the robot
	r := cfg.Transport.ROS
	require.Equal(t, "/odom", r.OdomTopic)
	require.Equal(t, "/cmd_vel", r.CmdVelTopic)
	require.Equal(t, "/move_base", r.MoveBaseAction)
	require.Equal(t, hwconfig.BaseModeMoveBase, r.BaseMode)
	require.Equal(t, "odom", r.Frame, "goals go in the odometry's frame")
	require.Equal(t, hwconfig.TopicNone, r.EStopTopic)
	require.Equal(t, hwconfig.TopicNone, r.BatteryTopic)
	require.Equal(t, []hwconfig.Point2{{-1.6, -2.3}, {2.4, -2.3}, {2.4, 1.7}, {-1.6, 1.7}}, cfg.Base.Workspace)
	for _, tool := range []string{hwconfig.ToolMoveBaseTo, hwconfig.ToolReturnToSafePose} {
		a, _ := cfg.ActionPolicy(tool)
		require.Equal(t, hwconfig.ApprovalRequired, a.Approval, tool)
	}
	// and init said what it could not determine
	require.Contains(t, initOut, "software e-stop is the only one")
	require.Contains(t, initOut, "REVIEW")

	// And the bridge serves exactly the base tools, with coordinates only
	code, body := p.do(t, "GET", "/v1/tools", crashAgentToken, nil)
	require.Equal(t, http.StatusOK, code, "%v", body)
	var actions, states []string
	var moveSchema map[string]any
	for _, x := range body["tools"].([]any) {
		tool := x.(map[string]any)
		if tool["kind"] == "action" {
			actions = append(actions, tool["name"].(string))
		} else {
			states = append(states, tool["name"].(string))
		}
		if tool["name"] == hwconfig.ToolMoveBaseTo {
			moveSchema = tool["input_schema"].(map[string]any)
		}
	}
	require.ElementsMatch(t, []string{"move_base_to", "return_to_safe_pose", "stop", "cancel_task"}, actions)
	require.Subset(t, states, []string{"get_robot_state", "get_safety_status"})
	require.NotContains(t, moveSchema["properties"], "location", "a robot without named locations offers coordinates only")

	// When the agent asks to move 0.5 m along x
	before := robot.motionLines(t)
	require.Empty(t, before, "nothing moved the robot before any request")
	env := p.call(t, "move_base_to", map[string]any{"arguments": map[string]any{"x": 0.9, "y": -0.3}, "session_id": "init-e2e"})
	require.Equal(t, true, env["ok"], "%v", env)
	task := env["task"].(map[string]any)
	require.Equal(t, "awaiting_approval", task["status"], "%v", env)
	taskID := task["id"].(string)

	// Then nothing reaches the robot while the operator has not approved
	code, env = p.do(t, "GET", "/v1/tasks/"+taskID+"?wait_ms=500", crashAgentToken, nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "awaiting_approval", env["data"].(map[string]any)["status"], "%v", env)
	require.Empty(t, robot.motionLines(t), "the robot's log shows a motion command before approval:\n%s", robot.proc.Output())

	// When the operator approves
	approvedAt := time.Now()
	env = approveAndWait(t, p, taskID)

	// Then the goal reached the robot after the approval, once, and the
	// task succeeded with the robot there
	require.Equal(t, "succeeded", env["data"].(map[string]any)["status"], "%v\nrobot:\n%s", env, robot.proc.Output())
	goals := robot.lines("GOAL")
	require.Len(t, goals, 1, "robot log:\n%s", robot.proc.Output())
	g := goals[0]
	require.False(t, g.at.Before(approvedAt.Add(-50*time.Millisecond)), "the goal reached the robot before the approval")
	require.InDelta(t, 0.9, g.float(t, 0), 1e-3)
	require.InDelta(t, -0.3, g.float(t, 1), 1e-3)
	require.Equal(t, "odom", g.fields[3], "the goal is in the odometry's frame")
	for _, l := range robot.motionLines(t) {
		require.False(t, l.at.Before(approvedAt.Add(-50*time.Millisecond)), "a motion command reached the robot before the approval: %v", l)
	}
}

func TestInit_TransportSimWritesTheSimulatorConfig(t *testing.T) {
	// Given the built binary
	bin := buildBinary(t)
	out := filepath.Join(t.TempDir(), "sim.yaml")

	// When init writes the simulator's config
	code, stdout, stderr := runBinary(t, bin, "init", "--transport", "sim", "--out", out)

	// Then it is the bundled simulator config, and check-config accepts it
	require.Equal(t, 0, code, "%s%s", stdout, stderr)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Equal(t, hwconfig.SimStarter(), b)
	code, stdout, stderr = runBinary(t, bin, "check-config", out)
	require.Equal(t, 0, code, "%s%s", stdout, stderr)

	// And a second run keeps the file unless forced
	code, _, stderr = runBinary(t, bin, "init", "--transport", "sim", "--out", out)
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--force")
	code, _, _ = runBinary(t, bin, "init", "--transport", "sim", "--out", out, "--force")
	require.Equal(t, 0, code)
}

func TestInit_BadUsage(t *testing.T) {
	bin := buildBinary(t)
	tests := []struct {
		name string
		args []string
		code int
		says string
	}{
		{"no master", []string{"init"}, 2, "--ros-master"},
		{"unknown transport", []string{"init", "--transport", "mqtt"}, 2, "allowed: ros, sim"},
		{"master for sim", []string{"init", "--transport", "sim", "--ros-master", "http://x:11311"}, 2, "--transport ros"},
		{"nobody at the master", []string{"init", "--ros-master", "http://127.0.0.1:" + strconv.Itoa(rostest.FreePort(t)), "--timeout", "1s"}, 1, "does not answer"},
		{"a positional argument", []string{"init", "robot.yaml"}, 2, "takes only flags"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Given init run wrongly (without ROS_MASTER_URI)
			t.Setenv("ROS_MASTER_URI", "")
			// When it runs
			code, stdout, stderr := runBinary(t, bin, tt.args...)
			// Then it fails with the code and says what to do, writing nothing
			require.Equal(t, tt.code, code, "%s%s", stdout, stderr)
			require.Contains(t, stderr, tt.says)
			require.Empty(t, stdout)
		})
	}
}

func TestInit_HelpNamesTheFlags(t *testing.T) {
	// Given the built binary
	bin := buildBinary(t)

	// When init is asked for its help
	code, out, errOut := runBinary(t, bin, "init", "--help")

	// Then it exits 0 and names every flag with its value
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "usage: robot-bridge init [flags]", strings.SplitN(out, "\n", 2)[0])
	for _, f := range []string{"-ros-master URL", "-transport KIND", "-out FILE", "-force", "-id ID", "-timeout DURATION"} {
		require.Contains(t, out, "\n  "+f, "init --help must list %s:\n%s", f, out)
	}
}
