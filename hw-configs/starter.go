package hwconfig

import (
	"bytes"
	_ "embed"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// DefaultSimConfig is the bundled simulator's config
// (sim-mobile-manipulator.yaml), the one `make run` uses and `robot-bridge
// init --transport sim` writes.
//
//go:embed sim-mobile-manipulator.yaml
var DefaultSimConfig []byte

// Modeline is the first line of every bundled config: it points
// yaml-language-server at the schema beside it.
const Modeline = "# yaml-language-server: $schema=" + SchemaFileName + "\n"

// SchemaFileName is the JSON Schema of a hw-config, in hw-configs/.
const SchemaFileName = "hwconfig.schema.json"

// editorNote replaces the modeline in a config written elsewhere, where
// the schema is not beside it.
const editorNote = "# Editor support: make the first line\n#   # yaml-language-server: $schema=PATH/TO/robot-bridge/hw-configs/" + SchemaFileName + "\n"

// SimStarter is DefaultSimConfig as `robot-bridge init --transport sim`
// writes it: the same config, its modeline (which points beside the
// bundled file) replaced by how to point an editor at the schema.
func SimStarter() []byte {
	b := bytes.TrimPrefix(DefaultSimConfig, []byte(Modeline))
	return append([]byte(editorNote), b...)
}

// Conservative starter values of a config written from a live robot. Each
// is marked REVIEW in the file: they keep a first run slow and small, not
// what the robot can do.
const (
	StarterHalfSide        = 2.0 // m: the workspace is a square of 2 × this around the robot
	StarterLinearSpeed     = 0.3 // m/s
	StarterAngularSpeed    = 0.5 // rad/s
	StarterLinearAccel     = 0.3 // m/s²
	StarterAngularAccel    = 0.6 // rad/s²
	StarterRadius          = 0.3 // m
	StarterGoalTolerance   = 0.1 // m, move_base's own xy_goal_tolerance default
	StarterYawToleranceDeg = 5.0 // degrees
)

// ROSStarter is what `robot-bridge init` learned from a running ROS robot:
// the interface names it matched (empty: the robot has none) and where
// the robot is.
type ROSStarter struct {
	// RobotID becomes robot.id; an invalid or empty one becomes "ros-robot".
	RobotID   string
	MasterURI string
	// Odom and CmdVel are the topics found; empty ones are written as the
	// standard names with a note.
	Odom, CmdVel string
	// MoveBase is the move_base action found; without one the base is
	// driven in cmd_vel mode.
	MoveBase string
	// Battery and EStop are the optional inputs found; empty means none.
	Battery, EStop string
	// Frame is the frame of the odometry's poses, used for goals too.
	Frame string
	// Pose is the robot's pose when init ran; PoseKnown is false when no
	// odometry arrived (the workspace is then centred on the origin).
	Pose      [3]float64 // x, y, theta (rad)
	PoseKnown bool
	// OdomPeriod is the odometry's mean period (zero when unknown); the
	// state timeout is five of them, at least 500 ms.
	OdomPeriod time.Duration
	// Found lists interfaces seen but not configured (an arm, a camera),
	// one line each, written as comments for the operator to finish.
	Found []string
}

var starterIDPattern = regexp.MustCompile(`[^a-z0-9_-]+`)

// StarterID turns any name (a host name) into a valid robot id.
func StarterID(name string) string {
	id := strings.Trim(starterIDPattern.ReplaceAllString(strings.ToLower(name), "-"), "-_")
	if len(id) > 63 {
		id = strings.Trim(id[:63], "-_")
	}
	if id == "" || !robotIDPattern.MatchString(id) {
		return "ros-robot"
	}
	return id
}

// StateTimeoutFor returns the state timeout a config should use for
// odometry arriving every period: five periods, at least 500 ms, rounded
// up to 100 ms.
func StateTimeoutFor(period time.Duration) time.Duration {
	st := max(5*period, 500*time.Millisecond)
	return (st + 99*time.Millisecond).Truncate(100 * time.Millisecond)
}

// Render writes the starter config: a commented YAML file that Parse
// accepts, with every transport name filled in, limits left at the
// conservative Starter values marked REVIEW, the workspace a square around
// the robot, no named locations, and approval required for every motion.
func (s ROSStarter) Render() []byte {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	id := StarterID(s.RobotID)
	mode := BaseModeMoveBase
	if s.MoveBase == "" {
		mode = BaseModeCmdVel
	}
	odom, cmdVel, frame := or(s.Odom, DefaultROSOdomTopic), or(s.CmdVel, DefaultROSCmdVelTopic), or(s.Frame, DefaultROSFrame)
	x, y, th := s.Pose[0], s.Pose[1], s.Pose[2]
	h := StarterHalfSide
	stateTimeout := StateTimeoutFor(s.OdomPeriod)

	w("# Starter hw-config written by `robot-bridge init` from the ROS master at\n# %s", s.MasterURI)
	if s.PoseKnown {
		w(",\n# with the robot at (%s, %s) facing %s°.\n", num(x), num(y), num(math.Round(th*180/math.Pi)))
	} else {
		w(".\n# No odometry arrived, so the workspace is centred on (0, 0).\n")
	}
	w(`#
# Every value marked REVIEW is a deliberately conservative guess: check it
# against the robot before the first motion, then run
#   robot-bridge check-config THIS_FILE
# Units: metres, radians unless a key says _deg, durations like 500ms or 2s.
`)
	b.WriteString(editorNote)
	if len(s.Found) > 0 {
		w("#\n# Also found on the robot, not configured here (add them by hand):\n")
		for _, f := range s.Found {
			w("#   - %s\n", f)
		}
	}
	// kv writes "key: value" at indent, its comment aligned in one column.
	kv := func(indent int, key, val, comment string) {
		line := strings.Repeat(" ", indent) + key + ": " + val
		if comment != "" {
			line += strings.Repeat(" ", max(1, 36-len(line))) + "# " + comment
		}
		b.WriteString(line + "\n")
	}
	w("\nrobot:\n")
	kv(2, "id", id, "REVIEW: a name for this robot (lowercase, digits, - and _)")
	w("\ntransport:\n  kind: ros\n  ros:\n")
	kv(4, "master_uri", s.MasterURI, "")
	kv(4, "base_mode", mode, modeNote(mode))
	kv(4, "odom_topic", odom, TypeOdometryNote)
	kv(4, "cmd_vel_topic", cmdVel, "geometry_msgs/Twist: the bridge's stop goes there (and its driving, in cmd_vel mode)")
	if mode == BaseModeMoveBase {
		kv(4, "move_base_action", s.MoveBase, "move_base_msgs/MoveBase: its result is the controller's verdict")
	}
	if s.Battery != "" {
		kv(4, "battery_topic", s.Battery, "sensor_msgs/BatteryState")
	} else {
		kv(4, "battery_topic", TopicNone, "no sensor_msgs/BatteryState topic was found")
	}
	if s.EStop != "" {
		kv(4, "estop_topic", s.EStop, "std_msgs/Bool: the robot's hardware e-stop")
	} else {
		kv(4, "estop_topic", TopicNone, "no e-stop topic was found: the bridge's software e-stop is the only one")
	}
	kv(4, "frame", frame, "the odometry's frame; goals are sent in it too")
	w("\nbase:\n")
	kv(2, "max_linear_speed", num(StarterLinearSpeed), "REVIEW: m/s, conservative")
	kv(2, "max_angular_speed", num(StarterAngularSpeed), "REVIEW: rad/s, conservative")
	kv(2, "max_linear_accel", num(StarterLinearAccel), "REVIEW: m/s^2, conservative")
	kv(2, "max_angular_accel", num(StarterAngularAccel), "REVIEW: rad/s^2, conservative")
	kv(2, "goal_tolerance", num(StarterGoalTolerance), "REVIEW: m, the bridge's own check of a reached goal")
	kv(2, "yaw_tolerance_deg", num(StarterYawToleranceDeg), "REVIEW: degrees, likewise (a miss is a warning)")
	kv(2, "radius", num(StarterRadius), "REVIEW: m, the robot's footprint as a disc")
	w("  # REVIEW: a %s m x %s m square around where the robot stood when init ran.\n", num(2*h), num(2*h))
	w("  # The base's whole footprint must stay inside it; draw the real free floor.\n")
	kv(2, "workspace", fmt.Sprintf("[[%s, %s], [%s, %s], [%s, %s], [%s, %s]]",
		num(x-h), num(y-h), num(x+h), num(y-h), num(x+h), num(y+h), num(x-h), num(y+h)), "")
	w(`
# Named locations are optional; without any, the agent gives coordinates.
# locations:
#   dock: {x: 0.0, y: 0.0, theta_deg: 0, description: charger, yaw_tolerance_deg: 10}

safe_pose:
  base: stop                        # a base never drives on its own after a failure
  timeout: 10s
  preauthorized: true               # a base-only robot's recovery is "stay stopped": nothing moves

actions:                            # every motion waits for an operator's approval
  move_base_to:        {approval: required}
  return_to_safe_pose: {approval: required}
  stop:                {approval: never}      # stopping never waits for a human
  cancel_task:         {approval: never}

safety:
`)
	kv(2, "state_timeout", durText(stateTimeout), "REVIEW: "+stateTimeoutNote(s.OdomPeriod))
	kv(2, "stall_timeout", "5s", "")
	kv(2, "approval_ttl", "60s", "")
	kv(2, "uncommanded_motion", string(UncommandedLatchFault), "REVIEW: a robot that moves while no task commands it is stopped and a fault latches; stop or off for a robot people guide by hand")
	return []byte(b.String())
}

// TypeOdometryNote is the comment on odom_topic.
const TypeOdometryNote = "nav_msgs/Odometry: the robot's pose and velocity (required)"

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func modeNote(mode string) string {
	if mode == BaseModeCmdVel {
		return "no move_base action was found: the bridge drives on cmd_vel, closing the loop on odometry"
	}
	return "the robot's move_base action plans and drives"
}

func stateTimeoutNote(period time.Duration) string {
	if period <= 0 {
		return "the odometry rate is unknown; the state timeout must exceed the time between two odometry messages"
	}
	return fmt.Sprintf("odometry arrived every %s; a silent robot is noticed after five of them (at least 500ms)", durText(period.Round(time.Millisecond)))
}

// num writes a number for YAML: rounded to the millimetre, never "-0".
func num(v float64) string {
	v = math.Round(v*1000) / 1000
	if v == 0 {
		v = 0
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// durText writes a duration as the config's Duration does.
func durText(d time.Duration) string { return Duration(d).String() }
