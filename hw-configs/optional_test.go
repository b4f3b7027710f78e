package hwconfig

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Configs that fit real robots: nothing a robot may lack is mandatory.
// Each case edits the minimal base-only ROS fixture as text and parses it,
// so the whole loader (decode, defaults, validation) decides.

const minimalFixture = "testdata/good/base-only-ros-minimal.yaml"

// minimalWith returns the minimal fixture with its `ros: {}` line replaced
// by ros, and every other edit applied (old → new, each exactly once).
func minimalWith(t *testing.T, ros string, edits ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(minimalFixture)
	require.NoError(t, err)
	src := string(b)
	require.Contains(t, src, "  ros: {}\n")
	src = strings.Replace(src, "  ros: {}\n", ros, 1)
	require.Zero(t, len(edits)%2, "edits come in old/new pairs")
	for i := 0; i < len(edits); i += 2 {
		require.Contains(t, src, edits[i])
		src = strings.Replace(src, edits[i], edits[i+1], 1)
	}
	return []byte(src)
}

// withArm adds an arm (and its safe pose) to the minimal fixture.
var withArm = []string{
	"safe_pose:\n  base: stop\n",
	"arm:\n  mount: {x: 0, y: 0, z: 0.3}\n  link_lengths: [0.3]\n  joints:\n" +
		"    - {name: yaw, min: -1, max: 1, max_velocity: 1}\n" +
		"    - {name: pitch, min: -1, max: 1, max_velocity: 1}\n" +
		"poses:\n  stowed: {yaw: 0, pitch: 0}\n" +
		"safe_pose:\n  arm: stowed\n  base: stop\n",
	"  return_to_safe_pose: {approval: required}\n",
	"  return_to_safe_pose: {approval: required}\n  move_arm_to: {approval: required}\n",
}

// withCamera adds a camera (and the perception keys it needs).
var withCamera = []string{
	"safety:\n",
	"camera: {width: 640, height: 480, fx: 500, fy: 500, cx: 320, cy: 240, mount: {x: 0.1, y: 0, z: 0.5}, yaw_deg: 0, pitch_deg: 10}\n" +
		"perception: {min_confidence: 0.5, stale_after: 5s}\n" +
		"safety:\n",
}

func TestOptionalInputs_EachCanBeAbsent(t *testing.T) {
	tests := []struct {
		name  string
		ros   string
		edits []string
		// topic reads the input's name after loading.
		topic func(r *ROSConf) string
	}{
		{"e-stop unset", "  ros: {}\n", nil, func(r *ROSConf) string { return r.EStopTopic }},
		{"e-stop none", "  ros: {estop_topic: none}\n", nil, func(r *ROSConf) string { return r.EStopTopic }},
		{"battery unset", "  ros: {}\n", nil, func(r *ROSConf) string { return r.BatteryTopic }},
		{"battery none", "  ros: {battery_topic: none}\n", nil, func(r *ROSConf) string { return r.BatteryTopic }},
		{"joint states unset without an arm", "  ros: {}\n", nil, func(r *ROSConf) string { return r.JointStatesTopic }},
		{"joint states none without an arm", "  ros: {joint_states_topic: none}\n", nil, func(r *ROSConf) string { return r.JointStatesTopic }},
		{"detections unset without a camera", "  ros: {}\n", nil, func(r *ROSConf) string { return r.DetectionsTopic }},
		{"detections none without a camera", "  ros: {detections_topic: none}\n", nil, func(r *ROSConf) string { return r.DetectionsTopic }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Given a base-only ROS config without that input
			src := minimalWith(t, tt.ros, tt.edits...)

			// When it is loaded
			c, err := Parse(src)

			// Then it is valid and the input reads as absent
			require.NoError(t, err)
			_, present := InputTopic(tt.topic(c.Transport.ROS))
			require.False(t, present)
		})
	}
}

func TestOptionalInputs_NamedInputsAreKept(t *testing.T) {
	// Given a ROS config naming every optional input, on a robot with an
	// arm and a camera
	ros := "  ros: {estop_topic: /safety/estop, battery_topic: battery, joint_states_topic: /arm/joint_states, detections_topic: /cam/detections}\n"
	edits := append(append([]string{}, withArm...), withCamera...)

	// When it is loaded
	c, err := Parse(minimalWith(t, ros, edits...))

	// Then each input is present with its name
	require.NoError(t, err)
	r := c.Transport.ROS
	for name, want := range map[string]string{
		r.EStopTopic: "/safety/estop", r.BatteryTopic: "battery",
		r.JointStatesTopic: "/arm/joint_states", r.DetectionsTopic: "/cam/detections",
	} {
		got, ok := InputTopic(name)
		require.True(t, ok, want)
		require.Equal(t, want, got)
	}
}

func TestOptionalInputs_HardwareInputsDefaultWithTheHardware(t *testing.T) {
	// Given a ROS robot with an arm and a camera that names neither input
	// When it is loaded
	c, err := Parse(minimalWith(t, "  ros: {}\n", append(append([]string{}, withArm...), withCamera...)...))

	// Then it reads the standard topics, which its hardware needs
	require.NoError(t, err)
	require.Equal(t, DefaultROSJointStates, c.Transport.ROS.JointStatesTopic)
	require.Equal(t, DefaultROSDetections, c.Transport.ROS.DetectionsTopic)
}

func TestOptionalInputs_RequiredInputsCannotBeNone(t *testing.T) {
	tests := []struct {
		name    string
		ros     string
		edits   []string
		field   string
		allowed string
		why     string
	}{
		{"odometry", "  ros: {odom_topic: none}\n", nil, "transport.ros.odom_topic", "nav_msgs/Odometry", "odometry is the robot's pose"},
		{"cmd_vel", "  ros: {cmd_vel_topic: none}\n", nil, "transport.ros.cmd_vel_topic", "geometry_msgs/Twist", "zero-velocity stop"},
		{"move_base in move_base mode", "  ros: {move_base_action: none}\n", nil, "transport.ros.move_base_action", "base_mode: cmd_vel", "sends every base goal"},
		{"joint states with an arm", "  ros: {joint_states_topic: none}\n", withArm, "transport.ros.joint_states_topic", "sensor_msgs/JointState", "arm's joint positions"},
		{"detections with a camera", "  ros: {detections_topic: none}\n", withCamera, "transport.ros.detections_topic", "no camera section", "camera's detections"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Given a config that says the robot lacks an input it cannot do without
			src := minimalWith(t, tt.ros, tt.edits...)

			// When it is loaded
			c, err := Parse(src)

			// Then it is refused naming the field, why, and what to write
			require.Nil(t, c)
			fe := requireProblem(t, err, tt.field, tt.allowed)
			require.Contains(t, fe.Problem, "cannot be none")
			require.Contains(t, fe.Problem, tt.why)
		})
	}
}

func TestOptionalInputs_MoveBaseNoneInCmdVelMode(t *testing.T) {
	// Given a cmd_vel robot that has no move_base action
	// When it is loaded
	c, err := Parse(minimalWith(t, "  ros: {base_mode: cmd_vel, move_base_action: none}\n"))

	// Then it is valid: the bridge drives it on cmd_vel itself
	require.NoError(t, err)
	require.Equal(t, BaseModeCmdVel, c.Transport.ROS.BaseMode)
}

func TestHardwareEStop_SaysWhetherTheRobotReportsOne(t *testing.T) {
	tests := []struct {
		name   string
		ros    string
		want   bool
		source string
	}{
		{"unset", "  ros: {}\n", false, ""},
		{"none", "  ros: {estop_topic: none}\n", false, ""},
		{"named", "  ros: {estop_topic: /safety/estop}\n", true, "/safety/estop (std_msgs/Bool)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Given a ROS config with that e-stop topic
			c, err := Parse(minimalWith(t, tt.ros))
			require.NoError(t, err)

			// When asked where the robot reports its e-stop
			source, ok := c.HardwareEStop()

			// Then it names the topic only when there is one
			require.Equal(t, tt.want, ok)
			if tt.want {
				require.Contains(t, source, tt.source)
			} else {
				require.Empty(t, source)
			}
		})
	}
	t.Run("simulator", func(t *testing.T) {
		// Given the simulator, which has an e-stop of its own
		// When asked
		source, ok := loadShipped(t).HardwareEStop()

		// Then it reports one
		require.True(t, ok)
		require.Equal(t, "the simulator's e-stop", source)
	})
}

func TestLocations_NoneRequired(t *testing.T) {
	// Given a config with no locations section at all
	// When it is loaded
	c, err := Parse(minimalWith(t, "  ros: {}\n"))

	// Then it is valid and names no location
	require.NoError(t, err)
	require.Empty(t, c.LocationNames())

	// And a single location of any valid name is enough
	c, err = Parse(minimalWith(t, "  ros: {}\n", "safe_pose:\n", "locations:\n  charger: {x: 1, y: 1}\nsafe_pose:\n"))
	require.NoError(t, err)
	require.Equal(t, []string{"charger"}, c.LocationNames())
}

func TestWorldBounds_DefaultToTheWorkspace(t *testing.T) {
	// Given a config without a world section
	// When it is loaded
	c, err := Parse(minimalWith(t, "  ros: {}\n"))

	// Then the room is the workspace
	require.NoError(t, err)
	require.Equal(t, c.Base.Workspace, c.World.Bounds)
	require.Equal(t, c.Workspace(), c.WorldBounds())
}

func TestWorldBounds_DefaultStillBoundsSurfaces(t *testing.T) {
	// Given a config without bounds whose surface lies beyond the workspace
	src := minimalWith(t, "  ros: {}\n", "safety:\n",
		"world:\n  surfaces:\n    - {name: bench, height: 0.8, polygon: [[3, 0], [4, 0], [4, 1], [3, 1]]}\nsafety:\n")

	// When it is loaded
	_, err := Parse(src)

	// Then the surface is refused against the defaulted bounds
	fe := requireProblem(t, err, "world.surfaces[0].polygon", "inside world.bounds: x in [-2, 2], y in [-2, 2]")
	require.Contains(t, fe.Problem, "not inside the room")
}

func TestWorldBounds_BrokenWorkspaceIsReportedOnce(t *testing.T) {
	// Given a config without bounds whose workspace has two points
	src := minimalWith(t, "  ros: {}\n", "workspace: [[-2, -2], [2, -2], [2, 2], [-2, 2]]", "workspace: [[-2, -2], [2, -2]]")

	// When it is loaded
	_, err := Parse(src)

	// Then the workspace is the one problem, not its defaulted copy too
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	_ = requireProblem(t, err, "base.workspace", "at least 3")
	require.Nil(t, ve.Field("world.bounds"), "got:\n%v", err)
}

func TestLocationTolerances(t *testing.T) {
	loc := "locations:\n  dock: {x: 1, y: 1, theta_deg: 90, goal_tolerance: 0.2, yaw_tolerance_deg: 15}\n  desk: {x: -1, y: 0}\nsafe_pose:\n"

	t.Run("set per location", func(t *testing.T) {
		// Given a location with its own tolerances and one without
		c, err := Parse(minimalWith(t, "  ros: {}\n", "safe_pose:\n", loc))
		require.NoError(t, err)

		// When the goal tolerances are asked for
		dm, dy := c.GoalTolerance("dock")
		km, ky := c.GoalTolerance("desk")
		xm, xy := c.GoalTolerance("")

		// Then the location's own win, the others are the base's
		require.InDelta(t, 0.2, dm, 1e-12)
		require.InDelta(t, 15.0, dy, 1e-12)
		require.InDelta(t, DefaultGoalTolerance, km, 1e-12)
		require.InDelta(t, DefaultYawToleranceDeg, ky, 1e-12)
		require.InDelta(t, DefaultGoalTolerance, xm, 1e-12)
		require.InDelta(t, DefaultYawToleranceDeg, xy, 1e-12)
	})

	bad := []struct {
		name, old, new, field, allowed string
	}{
		{"negative goal tolerance", "goal_tolerance: 0.2", "goal_tolerance: -0.2", "locations.dock.goal_tolerance", "> 0 m"},
		{"yaw tolerance above 180", "yaw_tolerance_deg: 15", "yaw_tolerance_deg: 190", "locations.dock.yaw_tolerance_deg", "(0, 180] degrees"},
		{"negative yaw tolerance", "yaw_tolerance_deg: 15", "yaw_tolerance_deg: -1", "locations.dock.yaw_tolerance_deg", "(0, 180] degrees"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			// Given a location tolerance out of range
			src := minimalWith(t, "  ros: {}\n", "safe_pose:\n", strings.Replace(loc, tt.old, tt.new, 1))

			// When it is loaded
			c, err := Parse(src)

			// Then it is refused naming the location's field
			require.Nil(t, c)
			_ = requireProblem(t, err, tt.field, tt.allowed)
		})
	}
}
