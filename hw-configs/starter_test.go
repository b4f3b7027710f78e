package hwconfig

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestROSStarter_RendersAValidConfig(t *testing.T) {
	tests := []struct {
		name  string
		s     ROSStarter
		check func(t *testing.T, c *Config)
	}{
		{
			name: "odometry, cmd_vel and move_base only",
			s: ROSStarter{
				RobotID: "Lab Bot #2", MasterURI: "http://10.0.0.5:11311", Odom: "/odom", CmdVel: "/cmd_vel", MoveBase: "/move_base",
				Frame: "odom", Pose: [3]float64{1.5, -0.25, math.Pi / 2}, PoseKnown: true, OdomPeriod: 20 * time.Millisecond,
			},
			check: func(t *testing.T, c *Config) {
				r := c.Transport.ROS
				require.Equal(t, "lab-bot-2", c.Robot.ID)
				require.Equal(t, "http://10.0.0.5:11311", r.MasterURI)
				require.Equal(t, BaseModeMoveBase, r.BaseMode)
				require.Equal(t, "/odom", r.OdomTopic)
				require.Equal(t, "/cmd_vel", r.CmdVelTopic)
				require.Equal(t, "/move_base", r.MoveBaseAction)
				require.Equal(t, "odom", r.Frame)
				require.Equal(t, TopicNone, r.EStopTopic)
				require.Equal(t, TopicNone, r.BatteryTopic)
				_, hw := c.HardwareEStop()
				require.False(t, hw)
				require.Equal(t, []Point2{{-0.5, -2.25}, {3.5, -2.25}, {3.5, 1.75}, {-0.5, 1.75}}, c.Base.Workspace)
				require.Equal(t, c.Base.Workspace, c.World.Bounds)
				require.Equal(t, 500*time.Millisecond, c.Safety.StateTimeout.D())
				require.Empty(t, c.Locations)
			},
		},
		{
			name: "with battery and e-stop, slow odometry",
			s: ROSStarter{
				MasterURI: "http://robot:11311", Odom: "/base/odom", CmdVel: "/base/cmd_vel", MoveBase: "/nav/move_base",
				Battery: "/battery", EStop: "/safety/estop", Frame: "map", PoseKnown: true, OdomPeriod: 250 * time.Millisecond,
				Found: []string{"an arm trajectory action at /arm/follow_joint_trajectory"},
			},
			check: func(t *testing.T, c *Config) {
				r := c.Transport.ROS
				require.Equal(t, "ros-robot", c.Robot.ID)
				require.Equal(t, "/battery", r.BatteryTopic)
				require.Equal(t, "/safety/estop", r.EStopTopic)
				source, hw := c.HardwareEStop()
				require.True(t, hw)
				require.Contains(t, source, "/safety/estop")
				require.Equal(t, 1300*time.Millisecond, c.Safety.StateTimeout.D(), "five odometry periods, rounded up")
			},
		},
		{
			name: "no move_base and no odometry",
			s:    ROSStarter{MasterURI: "http://robot:11311", CmdVel: "/cmd_vel"},
			check: func(t *testing.T, c *Config) {
				r := c.Transport.ROS
				require.Equal(t, BaseModeCmdVel, r.BaseMode)
				require.Equal(t, "odom", r.OdomTopic)
				require.Equal(t, "map", r.Frame)
				require.Equal(t, []Point2{{-2, -2}, {2, -2}, {2, 2}, {-2, 2}}, c.Base.Workspace)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Given what init learned from a robot
			// When the starter config is rendered and loaded
			src := tt.s.Render()
			c, err := Parse(src)

			// Then it is valid, every motion needs approval, and it says
			// what it found
			require.NoError(t, err, "%s", src)
			for _, tool := range []string{ToolMoveBaseTo, ToolReturnToSafePose} {
				a, ok := c.ActionPolicy(tool)
				require.True(t, ok)
				require.Equal(t, ApprovalRequired, a.Approval, tool)
			}
			require.Equal(t, []string{ToolMoveBaseTo, ToolReturnToSafePose, ToolStop, ToolCancelTask}, c.ToolNames())
			require.Contains(t, string(src), "REVIEW")
			for _, f := range tt.s.Found {
				require.Contains(t, string(src), f)
			}
			tt.check(t, c)
		})
	}
}

func TestROSStarter_MarksEveryGuessedLimit(t *testing.T) {
	// Given a rendered starter config
	src := string(ROSStarter{MasterURI: "http://robot:11311", PoseKnown: true}.Render())

	// Then every limit it guessed is marked REVIEW on its own line
	for _, key := range []string{"max_linear_speed:", "max_angular_speed:", "max_linear_accel:", "max_angular_accel:", "radius:", "goal_tolerance:", "yaw_tolerance_deg:", "state_timeout:"} {
		var line string
		for l := range strings.SplitSeq(src, "\n") {
			if strings.Contains(l, key) && !strings.HasPrefix(strings.TrimSpace(l), "#") {
				line = l
			}
		}
		require.Contains(t, line, "# REVIEW", key)
	}
}

func TestStarterID(t *testing.T) {
	for in, want := range map[string]string{
		"":            "ros-robot",
		"Lab Bot #2":  "lab-bot-2",
		"robot.local": "robot-local",
		"___":         "ros-robot",
		"turtlebot3":  "turtlebot3",
	} {
		require.Equal(t, want, StarterID(in), in)
	}
}

func TestDefaultSimConfig_IsTheBundledSimulator(t *testing.T) {
	// Given the embedded default simulator config
	// When it is parsed
	c, err := Parse(DefaultSimConfig)

	// Then it is the sim config make run uses
	require.NoError(t, err)
	require.Equal(t, TransportSim, c.Transport.Kind)
	require.Equal(t, "sim-1", c.Robot.ID)
}

func TestSimStarter_PointsTheEditorAtTheSchema(t *testing.T) {
	// Given the bundled simulator config, whose first line is the modeline
	require.True(t, strings.HasPrefix(string(DefaultSimConfig), Modeline))

	// When init writes it elsewhere
	b := SimStarter()

	// Then the modeline became how to set one, and the config is unchanged
	require.NotContains(t, string(b), Modeline)
	require.Contains(t, string(b), "yaml-language-server: $schema=PATH/TO/robot-bridge/hw-configs/hwconfig.schema.json")
	c, err := Parse(b)
	require.NoError(t, err)
	require.Equal(t, "sim-1", c.Robot.ID)
}

func TestBundledConfigs_StartWithTheModeline(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		// Given a bundled config, Then its first line points the editor at the schema
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(string(b), Modeline), "%s must start with %q", f, Modeline)
	}
}
