package hwconfig

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// decodeFixture decodes a fixture without defaults or validation.
func decodeFixture(t *testing.T, path string) *Config {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	c, err := Decode(b)
	require.NoError(t, err)
	return c
}

func TestApplyDefaults_FillsEveryDocumentedDefault(t *testing.T) {
	// Given a config that leaves every optional key out
	c := decodeFixture(t, "testdata/good/sim-manipulator-defaults.yaml")

	// When defaults are applied
	c.ApplyDefaults()

	// Then each optional field holds the default its doc comment states
	require.InDelta(t, 0.05, c.Base.GoalTolerance, 1e-12)
	require.InDelta(t, 3.0, c.Base.YawToleranceDeg, 1e-12)
	require.InDelta(t, 0.3, c.Base.Radius, 1e-12)
	require.InDelta(t, 0.6, c.Arm.Reach, 1e-12, "reach is the sum of the link lengths")
	require.InDelta(t, 10.0, c.Gripper.DefaultForce, 1e-12, "half of max_force")
	require.InDelta(t, 0.05, c.Gripper.GraspTolerance, 1e-12)
	require.Equal(t, "hold", c.SafePose.Gripper)
	require.InDelta(t, 0.3, c.SafePose.SpeedScale, 1e-12)
	require.InDelta(t, 6.0, c.Camera.MaxRange, 1e-12)
	require.InDelta(t, 5.0, c.Camera.RateHz, 1e-12)
	require.Equal(t, 20*time.Millisecond, c.Safety.ControlPeriod.D())
	require.Equal(t, 30*time.Minute, c.Safety.MaxGrantTTL.D())
	require.Equal(t, 5*time.Minute, c.Safety.MaxPause.D())
	require.Equal(t, 5*time.Minute, c.Perception.ForgetAfter.D())
	require.InDelta(t, 0.5, c.Perception.NMSIoU, 1e-12)
	require.Equal(t, 8, c.Perception.MaxObjects)
	require.InDelta(t, 100.0, c.Sim.PhysicsHz, 1e-12)
	require.InDelta(t, 50.0, c.Sim.StateHz, 1e-12)
	require.InDelta(t, 100.0, c.Sim.Battery, 1e-12)
	require.Zero(t, c.Actions[ToolMoveBaseTo].Timeout, "an action timeout stays zero: the deadline is computed per call")
	require.Equal(t, 20*time.Second, c.Actions[ToolMoveArmTo].Timeout.D())
}

func TestApplyDefaults_KeepsExplicitValues(t *testing.T) {
	// Given a config that sets optional keys to non-default values
	c := decodeFixture(t, "testdata/good/arm-no-gripper-mqtt.yaml")
	before := c.Clone()

	// When defaults are applied
	c.ApplyDefaults()

	// Then the explicit values are kept
	require.InDelta(t, 0.5, c.SafePose.SpeedScale, 1e-12)
	require.InDelta(t, 8.0, c.Camera.MaxRange, 1e-12)
	require.InDelta(t, 10.0, c.Camera.RateHz, 1e-12)
	require.Equal(t, 25*time.Millisecond, c.Safety.ControlPeriod.D())
	require.Equal(t, 10*time.Minute, c.Safety.MaxGrantTTL.D())
	require.InDelta(t, 0.4, c.Perception.NMSIoU, 1e-12)
	require.Equal(t, 5, c.Perception.MaxObjects)
	require.Equal(t, "lab/robots", c.Transport.MQTT.TopicPrefix)
	require.Equal(t, before.Camera, c.Camera)
}

func TestApplyDefaults_TransportNames(t *testing.T) {
	tests := []struct {
		name  string
		setup func(c *Config)
		check func(t *testing.T, c *Config)
	}{
		{
			name:  "ros names on a base-only robot",
			setup: func(*Config) {},
			check: func(t *testing.T, c *Config) {
				r := c.Transport.ROS
				require.Equal(t, "robot_bridge", r.NodeName)
				require.Equal(t, BaseModeMoveBase, r.BaseMode)
				require.Equal(t, "/courier/odom", r.OdomTopic, "explicit names are kept")
				require.Empty(t, r.JointStatesTopic, "no arm, no joint states")
				require.Empty(t, r.BatteryTopic, "a battery is read only when named")
				require.Empty(t, r.DetectionsTopic, "no camera, no detections")
				require.Empty(t, r.EStopTopic, "an e-stop is read only when named")
				require.Equal(t, "/courier/cmd_vel", r.CmdVelTopic)
				require.Equal(t, "/courier/move_base", r.MoveBaseAction)
				require.Equal(t, "map", r.Frame)
				require.Empty(t, r.ArmAction, "no arm, no arm action")
				require.Empty(t, r.GripperAction, "no gripper, no gripper action")
				require.Equal(t, "http://127.0.0.1:11311", r.MasterURI, "master_uri is never filled from the environment")
			},
		},
		{
			name: "ros arm and gripper actions when the robot has them",
			setup: func(c *Config) {
				c.Transport.ROS = &ROSConf{}
				c.Arm = &ArmConf{}
				c.Gripper = &GripperConf{}
			},
			check: func(t *testing.T, c *Config) {
				require.Equal(t, "arm_controller/follow_joint_trajectory", c.Transport.ROS.ArmAction)
				require.Equal(t, "gripper_controller/gripper_cmd", c.Transport.ROS.GripperAction)
				require.Equal(t, "odom", c.Transport.ROS.OdomTopic)
				require.Equal(t, "cmd_vel", c.Transport.ROS.CmdVelTopic)
				require.Equal(t, "move_base", c.Transport.ROS.MoveBaseAction)
			},
		},
		{
			name:  "mqtt topic prefix",
			setup: func(c *Config) { c.Transport.MQTT = &MQTTConf{} },
			check: func(t *testing.T, c *Config) {
				require.Equal(t, "robots", c.Transport.MQTT.TopicPrefix)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Given a transport section with names left out
			c := decodeFixture(t, "testdata/good/base-only-ros.yaml")
			tt.setup(c)

			// When defaults are applied
			c.ApplyDefaults()

			// Then the standard names fill the gaps
			tt.check(t, c)
		})
	}
}

func TestApplyDefaults_LeavesAbsentSectionsAbsent(t *testing.T) {
	// Given a base-only robot without camera or sim
	c := decodeFixture(t, "testdata/good/base-only-ros.yaml")

	// When defaults are applied
	c.ApplyDefaults()

	// Then no optional hardware appears
	require.Nil(t, c.Arm)
	require.Nil(t, c.Gripper)
	require.Nil(t, c.Camera)
	require.Nil(t, c.Sim)
	require.Nil(t, c.Transport.MQTT)
}

func TestApplyDefaults_IsIdempotent(t *testing.T) {
	for _, f := range []string{
		"testdata/good/sim-manipulator-defaults.yaml",
		"testdata/good/base-only-ros.yaml",
		"testdata/good/arm-no-gripper-mqtt.yaml",
		shippedConfig,
	} {
		t.Run(f, func(t *testing.T) {
			// Given a config with defaults applied once
			c := decodeFixture(t, f)
			c.ApplyDefaults()
			once := c.Clone()

			// When they are applied again
			c.ApplyDefaults()

			// Then nothing changes
			require.Equal(t, once, c)
		})
	}
}

func TestApplyDefaults_DoesNotHideInvalidValues(t *testing.T) {
	// Given negative values where defaults exist
	c := decodeFixture(t, "testdata/good/sim-manipulator-defaults.yaml")
	c.Base.GoalTolerance = -1
	c.Safety.ControlPeriod = Duration(-time.Second)

	// When defaults are applied and the config validated
	c.ApplyDefaults()
	err := c.Validate()

	// Then the bad values are still there to be refused
	require.InDelta(t, -1.0, c.Base.GoalTolerance, 1e-12)
	_ = requireProblem(t, err, "base.goal_tolerance", "> 0 m")
	_ = requireProblem(t, err, "safety.control_period", "positive duration")
}
