package ros

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
)

// Sentinel errors callers branch on.
var (
	// ErrLinkDown means the call could not reach the robot: no ROS master,
	// no node, or no recent odometry.
	ErrLinkDown = errors.New("ROS link to the robot is down")
	// ErrNotReady means a configured topic or action was missing when the
	// driver started; the *NotReadyError names them.
	ErrNotReady = errors.New("robot's ROS interfaces are not ready")
	// ErrGoalRejected means the action server REJECTED the goal.
	ErrGoalRejected = errors.New("goal rejected by the action server")
	// ErrGoalNotAccepted means the goal ended before it was accepted
	// (RECALLED, PREEMPTED, ABORTED or LOST at once).
	ErrGoalNotAccepted = errors.New("goal ended before the action server accepted it")
	// ErrNoAnswer means the action server never acknowledged the goal.
	ErrNoAnswer = errors.New("the action server did not answer the goal")
	// ErrNoInterface means the command needs an interface this robot does
	// not have (an arm goal to a base-only robot).
	ErrNoInterface = errors.New("the robot has no such interface")
	// ErrAlreadyStarted means Start was called twice.
	ErrAlreadyStarted = errors.New("ROS driver already started")
)

// NotReadyError lists what was missing when the readiness wait ended.
type NotReadyError struct {
	Master  string
	Waited  time.Duration
	Missing []string
}

// Error implements error.
func (e *NotReadyError) Error() string {
	return fmt.Sprintf("ros: robot not ready after %s on master %s: %s", e.Waited, e.Master, strings.Join(e.Missing, "; "))
}

// Unwrap returns ErrNotReady.
func (e *NotReadyError) Unwrap() error { return ErrNotReady }

// GoalError is an action goal that did not run: rejected, ended before
// acceptance, or never answered.
type GoalError struct {
	Action string
	// GoalID is the actionlib goal id, empty when no goal was published.
	GoalID string
	// State is the actionlib state reported, empty when none was.
	State string
	// Text is the action server's explanation, if any.
	Text string
	Err  error
}

// Error implements error.
func (e *GoalError) Error() string {
	s := fmt.Sprintf("ros action %s: %v", e.Action, e.Err)
	if e.State != "" {
		s += " (" + e.State + ")"
	}
	if e.Text != "" {
		s += ": " + e.Text
	}
	return s
}

// Unwrap returns the sentinel.
func (e *GoalError) Unwrap() error { return e.Err }

// Conf configures a Driver.
type Conf struct {
	// Config is the robot's hw-config; its transport.ros section names
	// every topic and action. Required.
	Config *hwconfig.Config
	// Env reads environment variables (optional): ROS_MASTER_URI when the
	// config has no master_uri, and ROS_IP or ROS_HOSTNAME for the address
	// other nodes reach this one at. It defaults to one returning "".
	Env func(string) string
	// Clock (optional) times odometry freshness, the cmd_vel controller
	// and acceptance waits. It defaults to the real clock.
	Clock clockwork.Clock
	// Logger (optional) receives logs with component=ros. It defaults to
	// slog.Default().
	Logger *slog.Logger
	// ReadyTimeout bounds how long Start waits for the master and for
	// every configured topic and action to appear (optional). It defaults
	// to 10s.
	ReadyTimeout time.Duration
	// LabelsGrace is how long detections are held back after connecting
	// while the robot's class labels parameter is not set yet (it is
	// asked for again every second), before objects are reported as
	// class_<id> (optional). It defaults to 3s.
	LabelsGrace time.Duration
	// AcceptTimeout bounds how long Send waits for an action server to
	// acknowledge a goal when the caller's context has no deadline
	// (optional). It defaults to 2s.
	AcceptTimeout time.Duration
	// LinkTimeout: odometry older than this means the link is down
	// (optional). It defaults to safety.state_timeout plus five
	// safety.control_period, so that when a robot goes quiet the
	// supervisor's own state-silence watchdog (which fires at
	// safety.state_timeout) is what stops the motion and names the cause,
	// and LinkUp reports the link lost a few control periods later; the
	// gate refuses motions on stale state either way.
	LinkTimeout time.Duration
	// ActionStatusTimeout: an accepted goal whose server has not published
	// status for this long is declared LOST (optional). It defaults to 2s
	// (actionlib servers publish status at 5 Hz by default).
	ActionStatusTimeout time.Duration
	// ProbePeriod is how often the master is probed (optional). It
	// defaults to 250ms.
	ProbePeriod time.Duration
	// ControlRate is the cmd_vel controller's rate in Hz (optional). It
	// defaults to 50.
	ControlRate float64
	// CommandTimeout: in cmd_vel mode the driver stops publishing
	// velocities when no Refresh came for this long (optional). It
	// defaults to sim.command_timeout, else 500ms.
	CommandTimeout time.Duration
}

// settings are the effective values after defaults.
type settings struct {
	cfg            *hwconfig.Config
	rc             hwconfig.ROSConf
	master         string // host:port
	masterURI      string
	host           string
	readyTimeout   time.Duration
	acceptTimeout  time.Duration
	labelsGrace    time.Duration
	linkTimeout    time.Duration
	statusTimeout  time.Duration
	probePeriod    time.Duration
	controlPeriod  time.Duration
	commandTimeout time.Duration
	// holdAge is the supervisor's control period (safety.control_period):
	// the oldest joint reading a stop may hold the arm at, and the
	// shortest time it gives the arm to get there.
	holdAge time.Duration
	names   names
}

// names are the resolved (absolute) graph names; an optional input the
// robot does not have (joints, battery, detections, estop) is "".
type names struct {
	node, odom, joints, battery, detections, estop, cmdVel, heartbeat string
	moveBase, arm, gripper, labels                                    string
}

// ResolveName makes a ROS graph name absolute the way a node in the root
// namespace named node does: "/x" stays, "~x" becomes "/node/x", "x"
// becomes "/x".
func ResolveName(node, name string) string {
	switch {
	case name == "":
		return ""
	case strings.HasPrefix(name, "/"):
		return name
	case strings.HasPrefix(name, "~"):
		return "/" + node + "/" + strings.TrimPrefix(strings.TrimPrefix(name, "~"), "/")
	}
	return "/" + name
}

// ResolveInput resolves an optional input topic (e-stop, battery, joint
// states, detections) like ResolveName, and returns "" when the config
// says the robot has no such input (unset or "none"): the driver then
// neither subscribes to it nor waits for its publisher.
func ResolveInput(node, name string) string {
	t, ok := hwconfig.InputTopic(name)
	if !ok {
		return ""
	}
	return ResolveName(node, t)
}

// MasterAddress returns the master's URI from the config or ROS_MASTER_URI,
// defaulting to http://127.0.0.1:11311 as every ROS tool does, and its
// host:port.
func MasterAddress(rc *hwconfig.ROSConf, env func(string) string) (uri, hostport string, err error) {
	uri = rc.MasterURI
	if uri == "" && env != nil {
		uri = env("ROS_MASTER_URI")
	}
	if uri == "" {
		uri = "http://127.0.0.1:11311"
	}
	u, perr := url.Parse(uri)
	if perr != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", "", fmt.Errorf("ros: master URI %q is not a URL like http://127.0.0.1:11311 (transport.ros.master_uri or ROS_MASTER_URI)", uri)
	}
	host := u.Host
	if u.Port() == "" {
		host += ":11311"
	}
	return uri, host, nil
}

func newSettings(c Conf) (settings, error) {
	if c.Config == nil {
		return settings{}, errors.New("ros: Conf.Config is required")
	}
	if c.Config.Transport.ROS == nil {
		return settings{}, errors.New("ros: the hw-config has no transport.ros section")
	}
	cfg := c.Config.Clone()
	cfg.ApplyDefaults()
	rc := *cfg.Transport.ROS
	uri, hp, err := MasterAddress(&rc, c.Env)
	if err != nil {
		return settings{}, err
	}
	s := settings{cfg: cfg, rc: rc, master: hp, masterURI: uri}
	if c.Env != nil {
		s.host = c.Env("ROS_IP")
		if s.host == "" {
			s.host = c.Env("ROS_HOSTNAME")
		}
	}
	pos := func(d, def time.Duration) time.Duration {
		if d > 0 {
			return d
		}
		return def
	}
	s.readyTimeout = pos(c.ReadyTimeout, 10*time.Second)
	s.acceptTimeout = pos(c.AcceptTimeout, 2*time.Second)
	s.labelsGrace = pos(c.LabelsGrace, 3*time.Second)
	s.linkTimeout = pos(c.LinkTimeout, pos(cfg.Safety.StateTimeout.D(), 500*time.Millisecond)+
		5*pos(cfg.Safety.ControlPeriod.D(), 20*time.Millisecond))
	s.holdAge = pos(cfg.Safety.ControlPeriod.D(), hwconfig.DefaultControlPeriod)
	s.statusTimeout = pos(c.ActionStatusTimeout, 2*time.Second)
	s.probePeriod = pos(c.ProbePeriod, 250*time.Millisecond)
	rate := c.ControlRate
	if rate <= 0 {
		rate = 50
	}
	s.controlPeriod = time.Duration(float64(time.Second) / rate)
	def := 500 * time.Millisecond
	if cfg.Sim != nil && cfg.Sim.CommandTimeout > 0 {
		def = cfg.Sim.CommandTimeout.D()
	}
	s.commandTimeout = pos(c.CommandTimeout, def)
	hb := HeartbeatTopic(&rc)
	n := rc.NodeName
	s.names = names{
		node: n, odom: ResolveName(n, rc.OdomTopic), joints: ResolveInput(n, rc.JointStatesTopic),
		battery: ResolveInput(n, rc.BatteryTopic), detections: ResolveInput(n, rc.DetectionsTopic),
		estop: ResolveInput(n, rc.EStopTopic), cmdVel: ResolveName(n, rc.CmdVelTopic),
		heartbeat: ResolveName(n, hb), moveBase: ResolveName(n, rc.MoveBaseAction),
		arm: ResolveName(n, rc.ArmAction), gripper: ResolveName(n, rc.GripperAction),
	}
	s.names.labels = LabelsParam(s.names.detections)
	return s, nil
}

// HeartbeatTopic is the heartbeat topic of a config as written
// (transport.ros.heartbeat_topic, by default ~heartbeat); resolve it with
// ResolveName against the bridge's node name, as both the driver and the
// simulator node do.
func HeartbeatTopic(rc *hwconfig.ROSConf) string {
	if rc.HeartbeatTopic != "" {
		return rc.HeartbeatTopic
	}
	return hwconfig.DefaultROSHeartbeatTopic
}

// LabelsParam is the ROS parameter that lists the detection class labels
// (comma-separated, class id = index) for a resolved detections topic.
// vision_msgs carries integer class ids and leaves the label database to
// the parameter server; this is where the driver looks.
func LabelsParam(detections string) string { return detections + "/class_labels" }
