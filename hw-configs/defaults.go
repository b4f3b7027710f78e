package hwconfig

import (
	"slices"
	"time"
)

// Documented defaults. Each matches the "It defaults to …" sentence on its
// field; other packages may read them (e.g. to describe a config) but must
// not change them.
const (
	DefaultGoalTolerance   = 0.05
	DefaultYawToleranceDeg = 3.0
	DefaultBaseRadius      = 0.3
	DefaultGraspTolerance  = 0.05
	DefaultSafeGripper     = "hold"
	DefaultSpeedScale      = 0.3
	DefaultCameraMaxRange  = 6.0
	DefaultCameraRateHz    = 5.0
	DefaultControlPeriod   = 20 * time.Millisecond
	DefaultMaxGrantTTL     = 30 * time.Minute
	DefaultMaxPause        = 5 * time.Minute
	DefaultForgetAfter     = 5 * time.Minute
	DefaultNMSIoU          = 0.5
	DefaultMaxObjects      = 8
	DefaultPhysicsHz       = 100.0
	DefaultStateHz         = 50.0
	DefaultBattery         = 100.0

	DefaultROSNodeName  = "robot_bridge"
	DefaultROSBaseMode  = BaseModeMoveBase
	DefaultROSOdomTopic = "odom"
	// DefaultROSJointStates is the joint_states_topic of a robot with an
	// arm; one without reads no joints.
	DefaultROSJointStates = "joint_states"
	// DefaultROSDetections is the detections_topic of a robot with a
	// camera; one without reads no detections.
	DefaultROSDetections     = "detections"
	DefaultROSCmdVelTopic    = "cmd_vel"
	DefaultROSMoveBaseAction = "move_base"
	DefaultROSArmAction      = "arm_controller/follow_joint_trajectory"
	DefaultROSGripperAction  = "gripper_controller/gripper_cmd"
	DefaultROSFrame          = "map"
	// DefaultROSHeartbeatTopic is private to the bridge's node:
	// /<node_name>/heartbeat.
	DefaultROSHeartbeatTopic = "~heartbeat"

	DefaultMQTTTopicPrefix = "robots"
	// DefaultMQTTListen is the embedded broker's address.
	DefaultMQTTListen       = "127.0.0.1:1883"
	DefaultMQTTQoS          = 1
	DefaultMQTTAckTimeout   = 500 * time.Millisecond
	DefaultMQTTKeepAlive    = 5 * time.Second
	DefaultMQTTReconnectMax = 10 * time.Second
	DefaultMQTTMaxClockSkew = 250 * time.Millisecond
)

// TopicNone is the name that, for an optional input topic (estop_topic,
// battery_topic, and joint_states_topic or detections_topic on a robot
// without an arm or camera), says that the robot has no such input. A
// topic really called "none" is written "/none".
const TopicNone = "none"

// ROS base modes (ROSConf.BaseMode).
const (
	BaseModeMoveBase = "move_base"
	BaseModeCmdVel   = "cmd_vel"
)

// ApplyDefaults fills every optional field that is zero with its documented
// default. It only fills zeros, so it is idempotent, and it never replaces
// a value the file set, even an invalid one: Validate must still see a
// negative or NaN value to reject it. Sections that are absent (arm,
// gripper, camera, sim, transport.ros, transport.mqtt) stay absent.
func (c *Config) ApplyDefaults() {
	b := &c.Base
	setF(&b.GoalTolerance, DefaultGoalTolerance)
	if len(c.World.Bounds) == 0 {
		// The room is at least the workspace: a robot whose limits are its
		// workspace needs no second outline.
		c.World.Bounds = slices.Clone(b.Workspace)
	}
	setF(&b.YawToleranceDeg, DefaultYawToleranceDeg)
	setF(&b.Radius, DefaultBaseRadius)

	if a := c.Arm; a != nil && a.Reach == 0 {
		sum := 0.0
		for _, l := range a.LinkLengths {
			sum += l
		}
		a.Reach = sum
	}
	if g := c.Gripper; g != nil {
		setF(&g.DefaultForce, g.MaxForce/2)
		setF(&g.GraspTolerance, DefaultGraspTolerance)
	}

	sp := &c.SafePose
	if sp.Gripper == "" {
		sp.Gripper = DefaultSafeGripper
	}
	setF(&sp.SpeedScale, DefaultSpeedScale)

	if cam := c.Camera; cam != nil {
		setF(&cam.MaxRange, DefaultCameraMaxRange)
		setF(&cam.RateHz, DefaultCameraRateHz)
	}

	s := &c.Safety
	setD(&s.ControlPeriod, DefaultControlPeriod)
	setD(&s.MaxGrantTTL, DefaultMaxGrantTTL)
	setD(&s.MaxPause, DefaultMaxPause)

	p := &c.Perception
	setD(&p.ForgetAfter, DefaultForgetAfter)
	setF(&p.NMSIoU, DefaultNMSIoU)
	if p.MaxObjects == 0 {
		p.MaxObjects = DefaultMaxObjects
	}

	if sim := c.Sim; sim != nil {
		setF(&sim.PhysicsHz, DefaultPhysicsHz)
		setF(&sim.StateHz, DefaultStateHz)
		setF(&sim.Battery, DefaultBattery)
	}

	if r := c.Transport.ROS; r != nil {
		setS(&r.NodeName, DefaultROSNodeName)
		setS(&r.BaseMode, DefaultROSBaseMode)
		setS(&r.OdomTopic, DefaultROSOdomTopic)
		// Optional inputs: joints only on a robot with an arm, detections
		// only with a camera; battery and e-stop only when named, because a
		// default name nobody publishes would keep the bridge from starting
		// and a robot without them is common.
		if c.HasArm() {
			setS(&r.JointStatesTopic, DefaultROSJointStates)
		}
		if c.HasCamera() {
			setS(&r.DetectionsTopic, DefaultROSDetections)
		}
		setS(&r.CmdVelTopic, DefaultROSCmdVelTopic)
		setS(&r.MoveBaseAction, DefaultROSMoveBaseAction)
		setS(&r.Frame, DefaultROSFrame)
		setS(&r.HeartbeatTopic, DefaultROSHeartbeatTopic)
		// Arm and gripper action names only mean something on a robot that
		// has the hardware; leaving them empty otherwise keeps a base-only
		// config free of names nobody serves.
		if c.HasArm() {
			setS(&r.ArmAction, DefaultROSArmAction)
		}
		if c.HasGripper() {
			setS(&r.GripperAction, DefaultROSGripperAction)
		}
	}
	if m := c.Transport.MQTT; m != nil {
		setS(&m.TopicPrefix, DefaultMQTTTopicPrefix)
		if m.Broker == "" {
			setS(&m.Listen, DefaultMQTTListen)
		}
		if m.QoS == 0 {
			m.QoS = DefaultMQTTQoS
		}
		for _, d := range []struct {
			p *Duration
			v time.Duration
		}{
			{&m.AckTimeout, DefaultMQTTAckTimeout},
			{&m.KeepAlive, DefaultMQTTKeepAlive},
			{&m.ReconnectMax, DefaultMQTTReconnectMax},
			{&m.MaxClockSkew, DefaultMQTTMaxClockSkew},
		} {
			if *d.p == 0 {
				*d.p = Duration(d.v)
			}
		}
	}
}

// setF sets *p to v when *p is zero.
func setF(p *float64, v float64) {
	if *p == 0 {
		*p = v
	}
}

// setD sets *p to v when *p is zero.
func setD(p *Duration, v time.Duration) {
	if *p == 0 {
		*p = Duration(v)
	}
}

// setS sets *p to v when *p is empty.
func setS(p *string, v string) {
	if *p == "" {
		*p = v
	}
}
