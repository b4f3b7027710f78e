package hwconfig

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
)

// Transport names how the bridge reaches the robot.
type Transport string

// Transports.
const (
	TransportSim  Transport = "sim"
	TransportROS  Transport = "ros"
	TransportMQTT Transport = "mqtt"
)

// Transports lists the allowed transport values.
var Transports = []Transport{TransportSim, TransportROS, TransportMQTT}

// UnmarshalText implements encoding.TextUnmarshaler and rejects unknown values.
func (t *Transport) UnmarshalText(b []byte) error {
	for _, v := range Transports {
		if string(b) == string(v) {
			*t = v
			return nil
		}
	}
	return fmt.Errorf("unknown transport %q (allowed: %s)", string(b), joinStrings(Transports))
}

// UnmarshalYAML implements yaml.NodeUnmarshaler so that an unknown value is
// reported with its field path, e.g. `transport.kind: unknown transport "zz"
// (allowed: sim, ros, mqtt)`. A null leaves the value empty, which Validate
// then reports as missing.
func (t *Transport) UnmarshalYAML(n ast.Node) error {
	s, ok, err := scalarText(n, "a transport name")
	if err != nil || !ok {
		return err
	}
	for _, v := range Transports {
		if s == string(v) {
			*t = v
			return nil
		}
	}
	return &FieldError{
		Field: nodePath(n), Value: s, Line: nodeLine(n),
		Problem: fmt.Sprintf("unknown transport %q", s),
		Allowed: joinStrings(Transports),
	}
}

// Approval is a tool's approval policy.
type Approval string

// Approvals lists the allowed approval policies.
var Approvals = []Approval{ApprovalRequired, ApprovalNever}

// Approval policies.
const (
	// ApprovalRequired means every call needs an operator's authorization.
	ApprovalRequired Approval = "required"
	// ApprovalNever means the config itself authorizes every call; only
	// stop, cancel_task and (explicitly) return_to_safe_pose should use it
	// on a real robot.
	ApprovalNever Approval = "never"
)

// UnmarshalText implements encoding.TextUnmarshaler and rejects unknown values.
func (a *Approval) UnmarshalText(b []byte) error {
	switch Approval(b) {
	case ApprovalRequired, ApprovalNever:
		*a = Approval(b)
		return nil
	}
	return fmt.Errorf("unknown approval policy %q (allowed: %s)", string(b), joinStrings(Approvals))
}

// UnmarshalYAML implements yaml.NodeUnmarshaler so that an unknown policy is
// reported with its field path, e.g. `actions.stop.approval`.
func (a *Approval) UnmarshalYAML(n ast.Node) error {
	s, ok, err := scalarText(n, "an approval policy")
	if err != nil || !ok {
		return err
	}
	for _, v := range Approvals {
		if s == string(v) {
			*a = v
			return nil
		}
	}
	return &FieldError{
		Field: nodePath(n), Value: s, Line: nodeLine(n),
		Problem: fmt.Sprintf("unknown approval policy %q", s),
		Allowed: joinStrings(Approvals),
	}
}

// Duration is a time.Duration written in YAML as a Go duration string
// ("500ms", "2s", "1m30s").
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("invalid duration %q (write it like 500ms, 2s or 1m30s)", string(b))
	}
	*d = Duration(v)
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// String returns the Go duration string, e.g. "1m30s".
func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML implements yaml.NodeUnmarshaler so that a malformed duration
// is reported with its field path. A bare number other than 0 is refused:
// "5" could mean seconds or milliseconds, and a safety timeout must not be
// guessed. A null leaves the value zero (absent).
func (d *Duration) UnmarshalYAML(n ast.Node) error {
	s, ok, err := scalarText(n, "a duration")
	if err != nil || !ok {
		return err
	}
	v, perr := time.ParseDuration(strings.TrimSpace(s))
	if perr != nil {
		return &FieldError{
			Field: nodePath(n), Value: s, Line: nodeLine(n),
			Problem: fmt.Sprintf("invalid duration %q", s),
			Allowed: durationAllowed,
		}
	}
	*d = Duration(v)
	return nil
}

// durationAllowed describes a valid duration for error messages.
const durationAllowed = "a Go duration with a unit, like 500ms, 2s or 1m30s"

// Point2 is a point [x, y] in metres in the room frame.
type Point2 [2]float64

// UnmarshalYAML implements yaml.NodeUnmarshaler. It insists on exactly two
// numbers: a fixed-size array would otherwise silently take [1] as (1, 0)
// and drop a third coordinate, moving a workspace corner without a word.
func (p *Point2) UnmarshalYAML(n ast.Node) error {
	seq, ok := unwrapNode(n).(*ast.SequenceNode)
	if !ok || len(seq.Values) != 2 {
		got := "a " + n.Type().YAMLName()
		if ok {
			got = fmt.Sprintf("%d numbers", len(seq.Values))
		}
		return &FieldError{
			Field: nodePath(n), Value: n.String(), Line: nodeLine(n),
			Problem: "a point must be exactly two numbers, got " + got,
			Allowed: "[x, y] in metres",
		}
	}
	var out Point2
	for i, v := range seq.Values {
		f, err := scalarFloat(v)
		if err != nil {
			return &FieldError{
				Field: nodePath(v), Value: v.String(), Line: nodeLine(v),
				Problem: fmt.Sprintf("%s is not a number", v.String()),
				Allowed: "[x, y] in metres",
			}
		}
		out[i] = f
	}
	*p = out
	return nil
}

// Config is one robot's hardware configuration.
type Config struct {
	// Robot names the robot.
	Robot RobotConf `yaml:"robot" jsonschema:"required"`
	// Transport says how the bridge reaches it.
	Transport TransportConf `yaml:"transport" jsonschema:"required"`
	// Base is the mobile base's limits and workspace.
	Base BaseConf `yaml:"base" jsonschema:"required"`
	// Arm describes the arm (optional: a base-only robot has none).
	Arm *ArmConf `yaml:"arm,omitempty"`
	// Gripper describes the gripper (optional, only with an arm).
	Gripper *GripperConf `yaml:"gripper,omitempty"`
	// Locations are named base poses the agent may drive to, by any names
	// (optional: without any, the agent gives coordinates).
	Locations map[string]Location `yaml:"locations,omitempty"`
	// Poses are named arm poses, joint name to radians (optional, only
	// with an arm).
	Poses map[string]ArmPose `yaml:"poses,omitempty"`
	// SafePose says what "safe" means and whether recovery to it is
	// pre-authorized.
	SafePose SafePoseConf `yaml:"safe_pose" jsonschema:"required"`
	// Camera is the camera model (optional).
	Camera *CameraConf `yaml:"camera,omitempty"`
	// World is the room: bounds, surfaces, regions (optional).
	World WorldConf `yaml:"world"`
	// Actions holds each action tool's approval policy and timeout; every
	// tool the robot's hardware allows needs an entry.
	Actions map[string]ActionConf `yaml:"actions" jsonschema:"required"`
	// Safety tunes the supervisor's monitors.
	Safety SafetyConf `yaml:"safety" jsonschema:"required"`
	// Perception tunes the scene summary (optional).
	Perception PerceptionConf `yaml:"perception"`
	// Sim configures the bundled simulator (required with transport.kind
	// sim).
	Sim *SimConf `yaml:"sim,omitempty"`
	// Fleet makes this config the template of several robots (optional):
	// see FleetConf. Without it the config is one robot, robot.id.
	Fleet *FleetConf `yaml:"fleet,omitempty"`

	// robots caches the fleet's per-robot configs, built and validated by
	// Parse.
	robots []*Config
}

// RobotConf identifies the robot.
type RobotConf struct {
	// ID is the robot's identifier: lowercase letters, digits, '-' and '_'.
	ID string `yaml:"id" jsonschema:"required"`
	// Name is a human-readable name (optional).
	Name string `yaml:"name,omitempty"`
}

// TransportConf selects and configures the transport.
type TransportConf struct {
	// Kind is sim (the bundled simulator, in-process), ros (a ROS1 robot,
	// configured by the ros section) or mqtt (configured by the mqtt
	// section).
	Kind Transport `yaml:"kind" jsonschema:"required"`
	// ROS names the robot's topics and actions; required with kind ros.
	ROS *ROSConf `yaml:"ros,omitempty"`
	// MQTT configures the broker; required with kind mqtt.
	MQTT *MQTTConf `yaml:"mqtt,omitempty"`
}

// ROSConf configures the ROS1 transport (names of topics and actions).
type ROSConf struct {
	// MasterURI is the ROS master (optional). It defaults to ROS_MASTER_URI.
	MasterURI string `yaml:"master_uri,omitempty"`
	// NodeName is the bridge's node name (optional). It defaults to robot_bridge.
	NodeName string `yaml:"node_name,omitempty"`
	// BaseMode is "move_base" (the robot's move_base action plans and
	// drives) or "cmd_vel" (the bridge closes the loop on odometry)
	// (optional). It defaults to move_base.
	BaseMode string `yaml:"base_mode,omitempty" jsonschema:"enum=move_base,enum=cmd_vel"`
	// OdomTopic carries nav_msgs/Odometry, the one input every robot must
	// have: the bridge refuses to start until it has a publisher, and "none"
	// is refused (optional). It defaults to odom.
	OdomTopic string `yaml:"odom_topic,omitempty"`
	// JointStatesTopic carries sensor_msgs/JointState, the arm's joints and
	// the gripper joint (optional). It defaults to joint_states on a robot
	// with an arm, which must have it; a robot without an arm reads none.
	JointStatesTopic string `yaml:"joint_states_topic,omitempty"`
	// BatteryTopic carries sensor_msgs/BatteryState (optional). Unset or
	// "none" means the robot reports no battery to the bridge; a name means
	// the bridge waits at start for its publisher. It defaults to none.
	BatteryTopic string `yaml:"battery_topic,omitempty"`
	// DetectionsTopic carries vision_msgs/Detection2DArray (optional). It
	// defaults to detections on a robot with a camera, which must have it;
	// a robot without a camera reads none.
	DetectionsTopic string `yaml:"detections_topic,omitempty"`
	// EStopTopic carries the robot's hardware e-stop state as std_msgs/Bool
	// (optional). Unset or "none" means the robot reports no hardware
	// e-stop: the bridge's software e-stop is then the only one, and
	// get_safety_status says so. A name means the bridge waits at start for
	// its publisher and latches its e-stop when the robot's engages. It
	// defaults to none.
	EStopTopic string `yaml:"estop_topic,omitempty"`
	// CmdVelTopic takes geometry_msgs/Twist (optional). It defaults to
	// cmd_vel.
	CmdVelTopic string `yaml:"cmd_vel_topic,omitempty"`
	// MoveBaseAction is the move_base-style action (optional). It defaults
	// to move_base.
	MoveBaseAction string `yaml:"move_base_action,omitempty"`
	// ArmAction is the control_msgs/FollowJointTrajectory action
	// (optional, only with an arm). It defaults to
	// arm_controller/follow_joint_trajectory.
	ArmAction string `yaml:"arm_action,omitempty"`
	// GripperAction is the control_msgs/GripperCommand action (optional,
	// only with a gripper). It defaults to gripper_controller/gripper_cmd.
	GripperAction string `yaml:"gripper_action,omitempty"`
	// GripperJoint is the JointState name that carries the gripper opening
	// (optional). When empty the opening comes from the gripper action's
	// feedback.
	GripperJoint string `yaml:"gripper_joint,omitempty"`
	// Frame is the fixed frame of goals (optional). It defaults to map.
	Frame string `yaml:"frame,omitempty"`
	// HeartbeatTopic carries the std_msgs/Header the bridge publishes at
	// every control period while it supervises a motion, so that a
	// robot-side command watchdog can stop the robot when the bridge goes
	// quiet (optional). A private name (~x) lives under the bridge's node.
	// It defaults to ~heartbeat, i.e. /<node_name>/heartbeat.
	HeartbeatTopic string `yaml:"heartbeat_topic,omitempty"`
	// ClassLabels names the integer class ids of vision_msgs detections:
	// id i is ClassLabels[i] (optional, only with a camera).
	// vision_msgs carries ids, not names, and leaves the label database to
	// each robot; when this list is empty the bridge reads the
	// comma-separated ROS parameter <detections_topic>/class_labels
	// instead, which the bundled simulator node sets. Ids without a label
	// become "class_<id>". It defaults to empty (use the parameter).
	ClassLabels []string `yaml:"class_labels,omitempty"`
}

// MQTTConf configures the MQTT transport.
type MQTTConf struct {
	// Broker is the broker URL, e.g. tcp://127.0.0.1:1883 (schemes tcp,
	// ssl, tls, mqtt, mqtts, ws, wss). Empty means the embedded broker.
	Broker string `yaml:"broker,omitempty"`
	// ClientID is the MQTT client identifier (optional). When empty the
	// transport derives one from robot.id.
	ClientID string `yaml:"client_id,omitempty"`
	// TopicPrefix is the first topic level, as in {prefix}/{id}/state
	// (optional). It defaults to robots.
	TopicPrefix string `yaml:"topic_prefix,omitempty"`
	// Listen is the loopback address the embedded broker listens on when
	// broker is empty (optional); robots (robot-bridge sim --transport
	// mqtt) connect there. It defaults to 127.0.0.1:1883. Only loopback
	// addresses are accepted: the embedded broker has no authentication.
	Listen string `yaml:"listen,omitempty"`
	// Username is the MQTT username (optional). It defaults to none.
	Username string `yaml:"username,omitempty"`
	// PasswordEnv names the environment variable holding the MQTT password
	// (optional). The password itself never appears in a config or a log.
	// It defaults to none.
	PasswordEnv string `yaml:"password_env,omitempty"`
	// PasswordFile is a file whose contents (trailing line break removed)
	// are the MQTT password (optional; not with password_env). It defaults
	// to none.
	PasswordFile string `yaml:"password_file,omitempty"`
	// CAFile is a PEM file of the certificate authorities that sign the
	// broker's certificate (optional; ssl, tls, mqtts and wss brokers).
	// It defaults to the system's roots.
	CAFile string `yaml:"ca_file,omitempty"`
	// CertFile and KeyFile are the bridge's PEM client certificate and key
	// (optional, both or neither) for brokers that authenticate clients by
	// certificate. They default to none.
	CertFile string `yaml:"cert_file,omitempty"`
	// KeyFile is the client certificate's private key; see CertFile.
	KeyFile string `yaml:"key_file,omitempty"`
	// QoS is the MQTT quality of service of commands and acks, 1 or 2
	// (optional). It defaults to 1: at least once, made idempotent by the
	// command ids.
	QoS int `yaml:"qos,omitempty" jsonschema:"enum=1,enum=2"`
	// AckTimeout is how long a command may wait for the robot's accepted
	// ack (optional); past it the command has failed and the supervisor
	// stops the robot. It is also the command's deadline: a robot refuses
	// a command that reaches it later. It defaults to 500ms.
	AckTimeout Duration `yaml:"ack_timeout,omitempty"`
	// KeepAlive is the MQTT keepalive (optional): a broker declares a
	// client gone, and publishes its last will, after 1.5 keepalives of
	// silence. It defaults to 5s.
	KeepAlive Duration `yaml:"keepalive,omitempty"`
	// ReconnectMax caps the reconnect backoff, which starts at 1s and
	// doubles (optional). It defaults to 10s.
	ReconnectMax Duration `yaml:"reconnect_max,omitempty"`
	// MaxClockSkew is how far in the future a robot's state stamp may be
	// and still be accepted (optional); robot and bridge clocks must agree
	// this well (NTP). It defaults to 250ms.
	MaxClockSkew Duration `yaml:"max_clock_skew,omitempty"`
}

// BaseConf holds the mobile base's limits.
type BaseConf struct {
	// MaxLinearSpeed in m/s, > 0.
	MaxLinearSpeed float64 `yaml:"max_linear_speed" jsonschema:"required"`
	// MaxAngularSpeed in rad/s, > 0.
	MaxAngularSpeed float64 `yaml:"max_angular_speed" jsonschema:"required"`
	// MaxLinearAccel in m/s², > 0.
	MaxLinearAccel float64 `yaml:"max_linear_accel" jsonschema:"required"`
	// MaxAngularAccel in rad/s², > 0.
	MaxAngularAccel float64 `yaml:"max_angular_accel" jsonschema:"required"`
	// GoalTolerance in metres, > 0: how close the bridge's own check wants
	// the base to a target (optional). A location may set its own. It
	// defaults to 0.05.
	GoalTolerance float64 `yaml:"goal_tolerance,omitempty"`
	// YawToleranceDeg in degrees, in (0, 180]: how close the bridge's own
	// check wants the heading to a requested one (optional). A location may
	// set its own. It defaults to 3.
	YawToleranceDeg float64 `yaml:"yaw_tolerance_deg,omitempty"`
	// Radius is the footprint radius in metres (optional). It defaults to
	// 0.3. The limits treat the base as a disc of this radius along its
	// whole path: it must fit inside the workspace and clear of every
	// surface and keep-out region.
	Radius float64 `yaml:"radius,omitempty"`
	// Workspace is the polygon (room frame, ≥ 3 vertices, simple, inside
	// world.bounds; it may be non-convex) the base's whole footprint must
	// stay inside, along the path too. Do not repeat the first vertex at
	// the end; the polygon closes itself.
	Workspace []Point2 `yaml:"workspace" jsonschema:"required"`
}

// ArmConf describes the arm. The kinematic model is a yaw joint followed by
// pitch joints in one vertical plane, as on most mobile manipulators.
type ArmConf struct {
	// Mount is the arm base's position relative to the robot base centre.
	Mount Vec3Conf `yaml:"mount"`
	// LinkLengths in metres, one per joint after the first (the first,
	// yaw, joint has none).
	LinkLengths []float64 `yaml:"link_lengths"`
	// Joints are the arm's joints in order from the base, with their
	// limits; at least one.
	Joints []JointConf `yaml:"joints" jsonschema:"required"`
	// Reach is the horizontal reach in metres from the arm mount, at most
	// the sum of the link lengths (optional). It defaults to that sum.
	Reach float64 `yaml:"reach,omitempty"`
}

// JointConf is one joint's limits.
type JointConf struct {
	// Name is the joint's name, as in sensor_msgs/JointState; unique.
	Name string `yaml:"name" jsonschema:"required"`
	// Min is the lower position limit in radians, below max.
	Min float64 `yaml:"min"`
	// Max is the upper position limit in radians.
	Max float64 `yaml:"max"`
	// MaxVelocity in rad/s, > 0.
	MaxVelocity float64 `yaml:"max_velocity" jsonschema:"required"`
}

// GripperConf describes a parallel gripper.
type GripperConf struct {
	// MaxOpening in metres, > 0.
	MaxOpening float64 `yaml:"max_opening" jsonschema:"required"`
	// MaxForce in newtons, > 0.
	MaxForce float64 `yaml:"max_force" jsonschema:"required"`
	// DefaultForce in newtons, in (0, MaxForce] (optional). It defaults to
	// half of MaxForce.
	DefaultForce float64 `yaml:"default_force,omitempty"`
	// GraspTolerance is how close (metres) the gripper must be to an object
	// for a grasp to hold it (optional). It defaults to 0.05.
	GraspTolerance float64 `yaml:"grasp_tolerance,omitempty"`
}

// Vec3Conf is a position in metres.
type Vec3Conf struct {
	// X is forward in metres.
	X float64 `yaml:"x"`
	// Y is to the left in metres.
	Y float64 `yaml:"y"`
	// Z is up in metres.
	Z float64 `yaml:"z"`
}

// Location is a named base pose in the room frame. The base's footprint at
// (x, y) must fit inside base.workspace, clear of surfaces and keep-out
// regions; a location that does not is refused when the config loads. No
// location name is required: a robot without named locations is driven by
// coordinates alone.
type Location struct {
	// X is the base centre's x in metres, room frame.
	X float64 `yaml:"x"`
	// Y is the base centre's y in metres, room frame.
	Y float64 `yaml:"y"`
	// ThetaDeg is the heading in degrees, counter-clockwise from +x, in
	// [-360, 360] (optional). It defaults to 0.
	ThetaDeg float64 `yaml:"theta_deg"`
	// Description says what is there, for the model (optional).
	Description string `yaml:"description,omitempty"`
	// GoalTolerance in metres, > 0: how close the bridge's own check wants
	// the base to this location (optional). It defaults to
	// base.goal_tolerance.
	GoalTolerance float64 `yaml:"goal_tolerance,omitempty"`
	// YawToleranceDeg in degrees, in (0, 180]: how close the bridge's own
	// check wants the heading to theta_deg (optional). It defaults to
	// base.yaw_tolerance_deg.
	YawToleranceDeg float64 `yaml:"yaw_tolerance_deg,omitempty"`
}

// ArmPose is a named arm pose: joint name → position in radians. Every arm
// joint must be named.
type ArmPose map[string]float64

// SafePoseConf says what "safe" means for this robot, and whether the
// config pre-authorizes returning to it after a failure.
type SafePoseConf struct {
	// Arm names the arm pose (a key of poses) the arm returns to. Required
	// when the robot has an arm.
	Arm string `yaml:"arm,omitempty"`
	// Base is what the base does: only "stop" (stay where it stopped) is
	// supported; a base never drives on its own after a failure.
	Base string `yaml:"base" jsonschema:"required"`
	// Gripper is "hold" (keep what it has) or "open" (optional). It
	// defaults to hold, so a failure never drops an object.
	Gripper string `yaml:"gripper,omitempty" jsonschema:"enum=hold,enum=open"`
	// SpeedScale is the fraction of the configured speed limits used for
	// recovery motion, in (0, 1] (optional). It defaults to 0.3.
	SpeedScale float64 `yaml:"speed_scale,omitempty"`
	// Timeout bounds the recovery motion, > 0; when it passes, a fault
	// latches.
	Timeout Duration `yaml:"timeout" jsonschema:"required"`
	// Preauthorized must be true for the supervisor to move the robot to
	// the safe pose after a failure without asking an operator. When false,
	// a failure ends with the robot stopped and a latched fault.
	Preauthorized bool `yaml:"preauthorized"`
}

// CameraConf is a pinhole camera's intrinsics and mount on the base. The
// principal point (cx, cy) must lie inside the width × height image.
type CameraConf struct {
	// Width of the image in pixels, > 0.
	Width int `yaml:"width" jsonschema:"required"`
	// Height of the image in pixels, > 0.
	Height int `yaml:"height" jsonschema:"required"`
	// Fx is the focal length along x in pixels, > 0.
	Fx float64 `yaml:"fx" jsonschema:"required"`
	// Fy is the focal length along y in pixels, > 0.
	Fy float64 `yaml:"fy" jsonschema:"required"`
	// Cx is the principal point's x in pixels, in [0, width].
	Cx float64 `yaml:"cx"`
	// Cy is the principal point's y in pixels, in [0, height].
	Cy float64 `yaml:"cy"`
	// Mount is the camera centre relative to the robot base centre (metres).
	Mount Vec3Conf `yaml:"mount"`
	// YawDeg turns the optical axis from the base's heading,
	// counter-clockwise, in [-180, 180] degrees.
	YawDeg float64 `yaml:"yaw_deg"`
	// PitchDeg tilts the optical axis down from horizontal, in [-90, 90]
	// degrees.
	PitchDeg float64 `yaml:"pitch_deg"`
	// MaxRange in metres beyond which nothing is detected (optional). It
	// defaults to 6.
	MaxRange float64 `yaml:"max_range,omitempty"`
	// RateHz is the detection rate (optional). It defaults to 5.
	RateHz float64 `yaml:"rate_hz,omitempty"`
}

// WorldConf describes the room: its bounds, the surfaces objects rest on and
// named regions.
type WorldConf struct {
	// Room names the room (optional). Robots of one bridge whose configs
	// name the same room share its floor: the safety gate treats each one,
	// and the corridor of its running base motion, as an obstacle to the
	// others. A robot without a room shares its floor with nobody (a
	// simulated fleet's robots each live in a world of their own); the
	// console shows it in "room".
	Room string `yaml:"room,omitempty"`
	// Bounds is the room's outline (room frame polygon) (optional). It
	// defaults to base.workspace.
	Bounds []Point2 `yaml:"bounds,omitempty"`
	// Surfaces are table tops and shelves: obstacles for the base, places
	// for objects (optional).
	Surfaces []SurfaceConf `yaml:"surfaces,omitempty"`
	// Regions are named floor areas, some of them keep-out (optional).
	Regions []RegionConf `yaml:"regions,omitempty"`
}

// SurfaceConf is a horizontal surface, like a table top or a shelf. Its
// polygon is an obstacle the base's footprint may not overlap.
type SurfaceConf struct {
	// Name is the surface's name, unique among surfaces.
	Name string `yaml:"name" jsonschema:"required"`
	// Polygon is the surface's outline, inside world.bounds.
	Polygon []Point2 `yaml:"polygon" jsonschema:"required"`
	// Height of the surface above the floor in metres, >= 0.
	Height float64 `yaml:"height"`
}

// RegionConf is a named floor region.
type RegionConf struct {
	// Name is the region's name, unique among regions.
	Name string `yaml:"name" jsonschema:"required"`
	// Polygon is the region's outline.
	Polygon []Point2 `yaml:"polygon" jsonschema:"required"`
	// KeepOut forbids the base's footprint (the disc of base.radius)
	// anywhere in the region, and any path through it.
	KeepOut bool `yaml:"keep_out,omitempty"`
}

// Action tool names: the keys of the actions section. They are the tool
// names the agent sees, so other packages should use these constants.
const (
	ToolMoveBaseTo       = "move_base_to"
	ToolMoveArmTo        = "move_arm_to"
	ToolGrasp            = "grasp"
	ToolRelease          = "release"
	ToolReturnToSafePose = "return_to_safe_pose"
	ToolStop             = "stop"
	ToolCancelTask       = "cancel_task"
)

// ActionTools lists every action tool name in the order tools are
// presented. Which of them a robot offers depends on its capabilities; see
// Config.ToolNames.
var ActionTools = []string{
	ToolMoveBaseTo, ToolMoveArmTo, ToolGrasp, ToolRelease,
	ToolReturnToSafePose, ToolStop, ToolCancelTask,
}

// ActionConf is one action tool's policy. Every tool the robot's
// capabilities allow must have an entry; stop and cancel_task must be
// "never", because stopping never waits for a human.
type ActionConf struct {
	// Approval is required or never.
	Approval Approval `yaml:"approval" jsonschema:"required"`
	// Timeout bounds the action (optional). When zero the deadline is the
	// expected duration × 1.1 + 0.5 s, computed per call.
	Timeout Duration `yaml:"timeout,omitempty"`
}

// SafetyConf tunes the supervisor.
type SafetyConf struct {
	// StateTimeout: robot state silence longer than this during motion is a
	// lost link (stop, recover). Required, > control_period.
	StateTimeout Duration `yaml:"state_timeout" jsonschema:"required"`
	// StallTimeout: no progress for this long during motion is a stall.
	// Required, > 0.
	StallTimeout Duration `yaml:"stall_timeout" jsonschema:"required"`
	// ControlPeriod is the supervisor's monitoring period (optional). It
	// defaults to 20ms.
	ControlPeriod Duration `yaml:"control_period,omitempty"`
	// ApprovalTTL is how long an approval request waits for an operator.
	// Required, > 0.
	ApprovalTTL Duration `yaml:"approval_ttl" jsonschema:"required"`
	// MaxGrantTTL caps a scoped grant's lifetime (optional). It defaults to 30m.
	MaxGrantTTL Duration `yaml:"max_grant_ttl,omitempty"`
	// MaxPause bounds how long an operator's pause may hold a task
	// (optional): a task paused for longer ends safely, through the same
	// stop and recovery path as a failed motion. It defaults to 5m; it
	// must be positive.
	MaxPause Duration `yaml:"max_pause,omitempty"`
	// AfterCrash is what a bridge that finds it was not shut down cleanly
	// (killed, crashed, power lost) does at start (optional): latch_fault,
	// the default, comes up with a latched fault "the bridge restarted
	// after an unclean shutdown" that only an operator clears; resume
	// comes up without it, which is less safe — nobody has to look at the
	// robot before it moves again.
	AfterCrash AfterCrash `yaml:"after_crash,omitempty"`
	// UncommandedMotion is what the supervisor does when the robot moves
	// while no task of this bridge commands it (optional): once the
	// robot has come to rest after the last supervised motion, its
	// reported velocity (base or a joint) above the rest thresholds for
	// more than one control period is uncommanded motion — another
	// controller, a goal left running, someone pushing it. latch_fault,
	// the default, commands a stop and latches a fault an operator must
	// clear; stop commands the stop and only reports it; off watches
	// nothing (for a robot that people guide by hand).
	UncommandedMotion UncommandedMotion `yaml:"uncommanded_motion,omitempty"`
}

// UncommandedMotion is the policy of safety.uncommanded_motion.
type UncommandedMotion string

// Uncommanded-motion policies.
const (
	// UncommandedLatchFault stops the robot and latches a fault.
	UncommandedLatchFault UncommandedMotion = "latch_fault"
	// UncommandedStop stops the robot and reports it, latching nothing.
	UncommandedStop UncommandedMotion = "stop"
	// UncommandedOff does not watch for uncommanded motion.
	UncommandedOff UncommandedMotion = "off"
)

// UncommandedMotionPolicies lists the allowed safety.uncommanded_motion
// values.
var UncommandedMotionPolicies = []UncommandedMotion{UncommandedLatchFault, UncommandedStop, UncommandedOff}

// Policy returns the effective policy: latch_fault when unset.
func (u UncommandedMotion) Policy() UncommandedMotion {
	if u == "" {
		return UncommandedLatchFault
	}
	return u
}

// Valid reports whether u is unset or one of UncommandedMotionPolicies.
func (u UncommandedMotion) Valid() bool {
	return u == "" || slices.Contains(UncommandedMotionPolicies, u)
}

// UnmarshalYAML implements yaml.NodeUnmarshaler so that an unknown policy is
// reported with its field path, `safety.uncommanded_motion`.
func (u *UncommandedMotion) UnmarshalYAML(n ast.Node) error {
	s, ok, err := scalarText(n, "an uncommanded-motion policy")
	if err != nil || !ok {
		return err
	}
	for _, v := range UncommandedMotionPolicies {
		if s == string(v) {
			*u = v
			return nil
		}
	}
	return &FieldError{
		Field: nodePath(n), Value: s, Line: nodeLine(n),
		Problem: fmt.Sprintf("unknown uncommanded-motion policy %q", s),
		Allowed: joinStrings(UncommandedMotionPolicies),
	}
}

// AfterCrash is the policy of safety.after_crash.
type AfterCrash string

// After-crash policies.
const (
	// AfterCrashLatchFault latches a fault an operator must clear.
	AfterCrashLatchFault AfterCrash = "latch_fault"
	// AfterCrashResume starts without a fault (less safe; opt-in).
	AfterCrashResume AfterCrash = "resume"
)

// AfterCrashPolicies lists the allowed safety.after_crash values.
var AfterCrashPolicies = []AfterCrash{AfterCrashLatchFault, AfterCrashResume}

// Policy returns the effective policy: latch_fault when unset.
func (a AfterCrash) Policy() AfterCrash {
	if a == "" {
		return AfterCrashLatchFault
	}
	return a
}

// Valid reports whether a is unset or one of AfterCrashPolicies.
func (a AfterCrash) Valid() bool {
	return a == "" || a == AfterCrashLatchFault || a == AfterCrashResume
}

// UnmarshalYAML implements yaml.NodeUnmarshaler so that an unknown policy is
// reported with its field path, `safety.after_crash`.
func (a *AfterCrash) UnmarshalYAML(n ast.Node) error {
	s, ok, err := scalarText(n, "an after-crash policy")
	if err != nil || !ok {
		return err
	}
	for _, v := range AfterCrashPolicies {
		if s == string(v) {
			*a = v
			return nil
		}
	}
	return &FieldError{
		Field: nodePath(n), Value: s, Line: nodeLine(n),
		Problem: fmt.Sprintf("unknown after-crash policy %q", s),
		Allowed: joinStrings(AfterCrashPolicies),
	}
}

// PerceptionConf tunes the perception summarizer.
type PerceptionConf struct {
	// MinConfidence, in [0, 1], below which objects are reported as
	// uncertain.
	MinConfidence float64 `yaml:"min_confidence"`
	// StaleAfter: older detections are reported as "last seen N s ago".
	// Required (> 0) when the robot has a camera.
	StaleAfter Duration `yaml:"stale_after"`
	// ForgetAfter: objects unseen for longer are dropped (optional). It
	// defaults to 5m.
	ForgetAfter Duration `yaml:"forget_after,omitempty"`
	// NMSIoU is the overlap above which two boxes of one label are one
	// object (optional). It defaults to 0.5.
	NMSIoU float64 `yaml:"nms_iou,omitempty"`
	// MaxObjects is the default budget of objects described (optional).
	// It defaults to 8.
	MaxObjects int `yaml:"max_objects,omitempty"`
}

// SimConf configures the bundled simulator.
type SimConf struct {
	// Seed makes runs reproducible.
	Seed int64 `yaml:"seed"`
	// PhysicsHz is the physics step rate (optional). It defaults to 100.
	PhysicsHz float64 `yaml:"physics_hz,omitempty"`
	// StateHz is the state publication rate (optional). It defaults to 50.
	StateHz float64 `yaml:"state_hz,omitempty"`
	// CommandTimeout: like a real base controller, the simulator stops the
	// base and holds the arm when no command refresh arrives this long.
	// Required, > 0.
	CommandTimeout Duration `yaml:"command_timeout" jsonschema:"required"`
	// Start is the robot's initial pose, inside base.workspace.
	Start Location `yaml:"start"`
	// Battery is the initial state of charge in percent, in (0, 100]
	// (optional). It defaults to 100.
	Battery float64 `yaml:"battery,omitempty"`
	// DetectionNoisePx is the std-dev of bbox noise in pixels (optional).
	DetectionNoisePx float64 `yaml:"detection_noise_px,omitempty"`
	// FalsePositiveRate is the chance, in [0, 1], per camera frame of a
	// spurious low-confidence detection (optional).
	FalsePositiveRate float64 `yaml:"false_positive_rate,omitempty"`
	// Objects are the things in the room; ids are unique.
	Objects []SimObj `yaml:"objects"`
}

// SimObj is an object in the simulated room.
type SimObj struct {
	// ID names the object, unique among objects.
	ID string `yaml:"id" jsonschema:"required"`
	// Label is its class, as a detector names it: cup, bottle, box.
	Label string `yaml:"label" jsonschema:"required"`
	// Color describes it for the model (optional).
	Color string `yaml:"color,omitempty"`
	// X is the object centre's x in metres, room frame, inside the room.
	X float64 `yaml:"x"`
	// Y is the object centre's y in metres, room frame.
	Y float64 `yaml:"y"`
	// Z is the object centre's height above the floor in metres, >= 0.
	Z float64 `yaml:"z"`
	// Size is the object's largest dimension in metres.
	Size float64 `yaml:"size" jsonschema:"required"`
	// Graspable says whether the gripper can hold it.
	Graspable bool `yaml:"graspable"`
}
