package simnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/bluenviron/goroslib/v2"
	"github.com/bluenviron/goroslib/v2/pkg/apimaster"
	"github.com/bluenviron/goroslib/v2/pkg/apiparam"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/geometry_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/nav_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/sensor_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/std_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/vision_msgs"
	"github.com/jonboulle/clockwork"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/sim"
	"github.com/robot-bridge/robot-bridge/transport/ros"
	"github.com/robot-bridge/robot-bridge/transport/ros/rosaction"
	"github.com/robot-bridge/robot-bridge/transport/ros/rosmsg"
)

// Conf configures a Node.
type Conf struct {
	// Config is the robot's hw-config: transport.ros names the interfaces
	// and the sim section describes the world. Required.
	Config *hwconfig.Config
	// Sim (optional) is the simulator to serve. It defaults to one built
	// from Config with its epoch at Clock's now.
	Sim *sim.Sim
	// Env (optional) reads ROS_MASTER_URI and ROS_IP. It defaults to one
	// returning "".
	Env func(string) string
	// Clock (optional) drives the simulation. It defaults to the real clock.
	Clock clockwork.Clock
	// Logger (optional) receives logs with component=simnode. It defaults
	// to slog.Default().
	Logger *slog.Logger
	// NodeName (optional) is the node's name. It defaults to robot_sim.
	NodeName string
	// StatusPeriod (optional) is the action servers' status period. It
	// defaults to 50ms.
	StatusPeriod time.Duration
	// ProbePeriod (optional) is how often the master is probed to notice a
	// restart. It defaults to 250ms.
	ProbePeriod time.Duration
}

type (
	baseServer = rosaction.Server[rosmsg.MoveBaseActionGoal, rosmsg.MoveBaseActionResult, rosmsg.MoveBaseActionFeedback,
		*rosmsg.MoveBaseActionGoal, *rosmsg.MoveBaseActionResult, *rosmsg.MoveBaseActionFeedback]
	armServer = rosaction.Server[rosmsg.FollowJointTrajectoryActionGoal, rosmsg.FollowJointTrajectoryActionResult, rosmsg.FollowJointTrajectoryActionFeedback,
		*rosmsg.FollowJointTrajectoryActionGoal, *rosmsg.FollowJointTrajectoryActionResult, *rosmsg.FollowJointTrajectoryActionFeedback]
	gripServer = rosaction.Server[rosmsg.GripperCommandActionGoal, rosmsg.GripperCommandActionResult, rosmsg.GripperCommandActionFeedback,
		*rosmsg.GripperCommandActionGoal, *rosmsg.GripperCommandActionResult, *rosmsg.GripperCommandActionFeedback]
)

// Node is the simulator as a ROS node.
type Node struct {
	cfg     *hwconfig.Config
	rc      hwconfig.ROSConf
	sim     *sim.Sim
	clk     clockwork.Clock
	log     *slog.Logger
	name    string
	master  string
	host    string
	status  time.Duration
	probe   time.Duration
	gripJ   string
	labels  []string
	topics  topicNames
	started bool

	mu        sync.Mutex
	sess      *session // guarded by mu
	wantLink  bool     // guarded by mu: Disconnect clears it
	lastDets  time.Time
	tick      int
	cancel    context.CancelFunc
	done      chan struct{}
	goalsMu   sync.Mutex
	baseGoal  *goal // guarded by goalsMu
	armGoal   *goal // guarded by goalsMu
	gripGoal  *goal // guarded by goalsMu
	cmdVelSeq int   // guarded by goalsMu
}

type topicNames struct {
	odom, joints, battery, detections, estop, cmdVel, heartbeat, moveBase, arm, gripper, labels string
}

type session struct {
	node  *goroslib.Node
	mc    *apimaster.Client
	odom  *goroslib.Publisher
	js    *goroslib.Publisher
	bat   *goroslib.Publisher
	dets  *goroslib.Publisher
	estop *goroslib.Publisher
	subs  []*goroslib.Subscriber
	base  *baseServer
	arm   *armServer
	grip  *gripServer
}

// goal is an accepted goal the node watches on every state period.
type goal struct {
	sg     *rosaction.ServerGoal
	target robot.Pose2D
	joints []float64
	close  bool
	since  time.Time
}

// New builds the node (and the simulator unless Conf.Sim is set). It does
// not touch the network; call Start.
func New(conf Conf) (*Node, error) {
	if conf.Config == nil || conf.Config.Transport.ROS == nil {
		return nil, errors.New("simnode: Conf.Config with a transport.ros section is required")
	}
	cfg := conf.Config.Clone()
	cfg.ApplyDefaults()
	if cfg.Sim == nil {
		return nil, errors.New("simnode: the hw-config has no sim section (it describes the simulated world)")
	}
	if conf.Clock == nil {
		conf.Clock = clockwork.NewRealClock()
	}
	if conf.Logger == nil {
		conf.Logger = slog.Default()
	}
	if conf.NodeName == "" {
		conf.NodeName = "robot_sim"
	}
	if conf.StatusPeriod <= 0 {
		conf.StatusPeriod = 50 * time.Millisecond
	}
	if conf.ProbePeriod <= 0 {
		conf.ProbePeriod = 250 * time.Millisecond
	}
	s := conf.Sim
	if s == nil {
		var err error
		if s, err = sim.New(cfg, sim.WithEpoch(conf.Clock.Now())); err != nil {
			return nil, fmt.Errorf("simnode: %w", err)
		}
	}
	rc := *cfg.Transport.ROS
	_, hp, err := ros.MasterAddress(&rc, conf.Env)
	if err != nil {
		return nil, fmt.Errorf("simnode: %w", err)
	}
	n := &Node{
		cfg: cfg, rc: rc, sim: s, clk: conf.Clock, log: conf.Logger.With("component", "simnode"),
		name: conf.NodeName, master: hp, status: conf.StatusPeriod, probe: conf.ProbePeriod, gripJ: rc.GripperJoint,
	}
	if n.gripJ == "" {
		n.gripJ = "gripper"
	}
	if conf.Env != nil {
		n.host = conf.Env("ROS_IP")
	}
	// Every name is resolved as the bridge resolves it: a private name in
	// the config (~odom) is private to the bridge's node, so the robot
	// side must serve it there, not under its own node name.
	r := func(x string) string { return ros.ResolveName(rc.NodeName, x) }
	n.topics = topicNames{
		odom: r(rc.OdomTopic), joints: ros.ResolveInput(rc.NodeName, rc.JointStatesTopic),
		battery: ros.ResolveInput(rc.NodeName, rc.BatteryTopic), detections: ros.ResolveInput(rc.NodeName, rc.DetectionsTopic),
		estop: ros.ResolveInput(rc.NodeName, rc.EStopTopic), cmdVel: r(rc.CmdVelTopic), heartbeat: r(ros.HeartbeatTopic(&rc)),
		moveBase: r(rc.MoveBaseAction), arm: r(rc.ArmAction), gripper: r(rc.GripperAction),
	}
	n.topics.labels = ros.LabelsParam(n.topics.detections)
	// Class ids follow transport.ros.class_labels when the config has
	// them (the bridge then reads them from there); otherwise the node
	// numbers the world's labels itself and publishes the list as the
	// class_labels parameter.
	n.labels = append(n.labels, rc.ClassLabels...)
	if len(n.labels) == 0 {
		for _, o := range cfg.Sim.Objects {
			if !slices.Contains(n.labels, o.Label) {
				n.labels = append(n.labels, o.Label)
			}
		}
		slices.Sort(n.labels)
	}
	return n, nil
}

// Sim returns the simulator the node serves.
func (n *Node) Sim() *sim.Sim { return n.sim }

// Start registers the node with the master and runs the simulation until
// ctx ends or Close is called. The master must be reachable.
func (n *Node) Start(ctx context.Context) error {
	n.mu.Lock()
	if n.started {
		n.mu.Unlock()
		return errors.New("simnode: already started")
	}
	n.started = true
	n.wantLink = true
	n.mu.Unlock()
	if err := n.Connect(); err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	n.mu.Lock()
	n.cancel, n.done = cancel, done
	n.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		n.sim.Run(rctx, n.clk, n.publish)
	}()
	go func() {
		defer wg.Done()
		n.monitor(rctx)
	}()
	go func() {
		wg.Wait()
		close(done)
	}()
	n.log.Info("simulator node up", "node", n.name, "master", n.master)
	return nil
}

// Close stops the simulation and the robot, and leaves the ROS graph.
func (n *Node) Close() error {
	n.mu.Lock()
	cancel, done := n.cancel, n.done
	n.cancel = nil
	n.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	n.sim.Stop()
	n.Disconnect()
	return nil
}

// Connect (re)registers the node with the master.
func (n *Node) Connect() error {
	s, err := n.connect()
	if err != nil {
		return err
	}
	n.mu.Lock()
	old := n.sess
	n.sess, n.wantLink = s, true
	n.mu.Unlock()
	if old != nil {
		old.close()
	}
	return nil
}

// Disconnect closes the ROS side abruptly, as if the robot's ROS process
// crashed: goals in flight get no answer and nothing is published, while
// the simulated hardware runs on under its own command watchdog. The node
// stays disconnected until Connect.
func (n *Node) Disconnect() {
	n.mu.Lock()
	s := n.sess
	n.sess, n.wantLink = nil, false
	n.mu.Unlock()
	n.goalsMu.Lock()
	n.baseGoal, n.armGoal, n.gripGoal = nil, nil, nil
	n.goalsMu.Unlock()
	if s != nil {
		s.close()
	}
}

func (n *Node) session() *session {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.sess
}

func (n *Node) monitor(ctx context.Context) {
	t := n.clk.NewTicker(n.probe)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
		n.mu.Lock()
		s, want := n.sess, n.wantLink
		n.mu.Unlock()
		if !want {
			continue
		}
		if s != nil {
			if _, err := s.mc.LookupNode("/" + n.name); err == nil {
				continue
			}
			n.log.Warn("master lost or restarted; registering again")
		}
		// The old session keeps publishing over its existing peer
		// connections (they outlive the master) until the new one is
		// registered, as a real robot's drivers would.
		ns, err := n.connect()
		if err != nil {
			continue
		}
		n.mu.Lock()
		if n.wantLink && n.sess == s {
			n.sess, ns = ns, s
		}
		n.mu.Unlock()
		if ns != nil {
			go ns.close()
		}
	}
}

func (n *Node) connect() (*session, error) {
	node, err := goroslib.NewNode(ros.NodeConf(n.master, n.name, n.host, n.log))
	if err != nil {
		return nil, fmt.Errorf("simnode: register %s with master %s: %w", n.name, n.master, err)
	}
	s := &session{node: node, mc: apimaster.NewClient(n.master, "/"+n.name, &http.Client{Timeout: time.Second})}
	fail := func(what string, err error) (*session, error) {
		s.close()
		return nil, fmt.Errorf("simnode: %s: %w", what, err)
	}
	pub := func(topic string, msg any) (*goroslib.Publisher, error) {
		return goroslib.NewPublisher(goroslib.PublisherConf{Node: node, Topic: topic, Msg: msg})
	}
	t := n.topics
	if n.cfg.HasCamera() && t.detections != "" {
		// The class names before any topic: a bridge reads them when it
		// connects, which it may do as soon as it finds the robot's
		// state topics (it asks again until they are set, but objects
		// are named class_<id> until then).
		pc := apiparam.NewClient(n.master, "/"+n.name, &http.Client{Timeout: time.Second})
		if err := pc.SetParamString(t.labels, labelsParam(n.labels)); err != nil {
			return fail("set "+t.labels, err)
		}
	}
	if s.odom, err = pub(t.odom, &nav_msgs.Odometry{}); err != nil {
		return fail("advertise "+t.odom, err)
	}
	// The node publishes what the config says the robot has: an optional
	// input the config leaves out (battery, e-stop) is not published, as
	// on a robot without it.
	if (n.cfg.HasArm() || n.cfg.HasGripper()) && t.joints != "" {
		if s.js, err = pub(t.joints, &sensor_msgs.JointState{}); err != nil {
			return fail("advertise "+t.joints, err)
		}
	}
	if t.battery != "" {
		if s.bat, err = pub(t.battery, &sensor_msgs.BatteryState{}); err != nil {
			return fail("advertise "+t.battery, err)
		}
	}
	if t.estop != "" {
		if s.estop, err = goroslib.NewPublisher(goroslib.PublisherConf{Node: node, Topic: t.estop, Msg: &std_msgs.Bool{}, Latch: true}); err != nil {
			return fail("advertise "+t.estop, err)
		}
	}
	if n.cfg.HasCamera() && t.detections != "" {
		if s.dets, err = pub(t.detections, &vision_msgs.Detection2DArray{}); err != nil {
			return fail("advertise "+t.detections, err)
		}
	}
	sub := func(topic string, cb any) error {
		sb, err := goroslib.NewSubscriber(goroslib.SubscriberConf{Node: node, Topic: topic, Callback: cb})
		if err == nil {
			s.subs = append(s.subs, sb)
		}
		return err
	}
	if err := sub(t.heartbeat, func(*std_msgs.Header) {
		if !n.sim.LinkDrop() {
			n.sim.Refresh()
		}
	}); err != nil {
		return fail("subscribe "+t.heartbeat, err)
	}
	if err := sub(t.cmdVel, n.onCmdVel); err != nil {
		return fail("subscribe "+t.cmdVel, err)
	}
	if n.rc.BaseMode == hwconfig.BaseModeMoveBase {
		s.base, err = rosaction.NewServer[rosmsg.MoveBaseActionGoal, rosmsg.MoveBaseActionResult, rosmsg.MoveBaseActionFeedback](
			rosaction.ServerConf[rosmsg.MoveBaseActionGoal]{
				Node: node, Name: t.moveBase, StatusPeriod: n.status,
				OnGoal:   func(g *rosaction.ServerGoal, m *rosmsg.MoveBaseActionGoal) { n.onBaseGoal(g, m) },
				OnCancel: func(g *rosaction.ServerGoal) { n.onCancel(g, &n.baseGoal) },
			})
		if err != nil {
			return fail("move_base server", err)
		}
	}
	if n.cfg.HasArm() && t.arm != "" {
		s.arm, err = rosaction.NewServer[rosmsg.FollowJointTrajectoryActionGoal, rosmsg.FollowJointTrajectoryActionResult, rosmsg.FollowJointTrajectoryActionFeedback](
			rosaction.ServerConf[rosmsg.FollowJointTrajectoryActionGoal]{
				Node: node, Name: t.arm, StatusPeriod: n.status,
				OnGoal:   func(g *rosaction.ServerGoal, m *rosmsg.FollowJointTrajectoryActionGoal) { n.onArmGoal(g, m) },
				OnCancel: func(g *rosaction.ServerGoal) { n.onCancel(g, &n.armGoal) },
			})
		if err != nil {
			return fail("arm server", err)
		}
	}
	if n.cfg.HasGripper() && t.gripper != "" {
		s.grip, err = rosaction.NewServer[rosmsg.GripperCommandActionGoal, rosmsg.GripperCommandActionResult, rosmsg.GripperCommandActionFeedback](
			rosaction.ServerConf[rosmsg.GripperCommandActionGoal]{
				Node: node, Name: t.gripper, StatusPeriod: n.status,
				OnGoal:   func(g *rosaction.ServerGoal, m *rosmsg.GripperCommandActionGoal) { n.onGripGoal(g, m) },
				OnCancel: func(g *rosaction.ServerGoal) { n.onCancel(g, &n.gripGoal) },
			})
		if err != nil {
			return fail("gripper server", err)
		}
	}
	return s, nil
}

func (s *session) close() {
	if s.grip != nil {
		s.grip.Close()
	}
	if s.arm != nil {
		s.arm.Close()
	}
	if s.base != nil {
		s.base.Close()
	}
	for _, sb := range s.subs {
		sb.Close()
	}
	for _, p := range []*goroslib.Publisher{s.odom, s.js, s.bat, s.estop, s.dets} {
		if p != nil {
			p.Close()
		}
	}
	s.node.Close()
}

// ackDelay waits out a delay_ack fault.
func (n *Node) ackDelay() {
	if d := n.sim.AckDelay(); d > 0 {
		<-n.clk.After(d)
	}
}

func (n *Node) onBaseGoal(g *rosaction.ServerGoal, m *rosmsg.MoveBaseActionGoal) {
	s := n.session()
	if s == nil || s.base == nil {
		return
	}
	if n.sim.LinkDrop() {
		s.base.Forget(g)
		return
	}
	n.ackDelay()
	target, err := ros.BaseGoalFromMsg(&m.Goal)
	if err != nil {
		s.base.Reject(g, nil, err.Error())
		return
	}
	bc := n.cfg.Base
	cmd := robot.Command{ID: g.ID, Kind: robot.CmdMoveBase, Base: &robot.BaseGoal{Target: target, MaxLinear: bc.MaxLinearSpeed, MaxAngular: bc.MaxAngularSpeed}}
	n.goalsMu.Lock()
	prev := n.baseGoal
	n.baseGoal = nil
	n.goalsMu.Unlock()
	if prev != nil {
		s.base.Canceled(prev.sg, nil, "preempted by a newer goal")
	}
	if err := n.sim.Command(cmd); err != nil {
		s.base.Reject(g, nil, err.Error())
		return
	}
	s.base.Accept(g)
	n.goalsMu.Lock()
	n.baseGoal = &goal{sg: g, target: target, since: n.sim.Now()}
	n.goalsMu.Unlock()
}

func (n *Node) onArmGoal(g *rosaction.ServerGoal, m *rosmsg.FollowJointTrajectoryActionGoal) {
	s := n.session()
	if s == nil || s.arm == nil {
		return
	}
	if n.sim.LinkDrop() {
		s.arm.Forget(g)
		return
	}
	n.ackDelay()
	cur := n.sim.Truth()
	q := make([]float64, len(cur.Joints))
	for i, j := range cur.Joints {
		q[i] = j.Position
	}
	ag, err := ros.ArmGoalFromMsg(&m.Goal, n.cfg.Arm.Joints, q)
	if err != nil {
		res := &rosmsg.FollowJointTrajectoryActionResult{}
		res.Result.ErrorCode, res.Result.ErrorString = rosmsg.FJTInvalidJoints, err.Error()
		s.arm.Reject(g, res, err.Error())
		return
	}
	n.goalsMu.Lock()
	prev := n.armGoal
	n.armGoal = nil
	n.goalsMu.Unlock()
	if prev != nil {
		s.arm.Canceled(prev.sg, nil, "preempted by a newer trajectory")
	}
	hold := true
	for i := range q {
		if math.Abs(ag.Positions[i]-q[i]) > 1e-3 {
			hold = false
		}
	}
	if hold {
		// A trajectory to where the arm is: hold it (stop its motion; the
		// base and gripper carry on, as with a real arm controller).
		if cur.ArmGoal {
			n.sim.StopPart(robot.CmdMoveArm)
		}
		s.arm.Accept(g)
		s.arm.Succeed(g, nil, "holding")
		return
	}
	if err := n.sim.Command(robot.Command{ID: g.ID, Kind: robot.CmdMoveArm, Arm: &ag}); err != nil {
		res := &rosmsg.FollowJointTrajectoryActionResult{}
		res.Result.ErrorCode, res.Result.ErrorString = rosmsg.FJTInvalidGoal, err.Error()
		s.arm.Reject(g, res, err.Error())
		return
	}
	s.arm.Accept(g)
	n.goalsMu.Lock()
	n.armGoal = &goal{sg: g, joints: ag.Positions, since: n.sim.Now()}
	n.goalsMu.Unlock()
}

func (n *Node) onGripGoal(g *rosaction.ServerGoal, m *rosmsg.GripperCommandActionGoal) {
	s := n.session()
	if s == nil || s.grip == nil {
		return
	}
	if n.sim.LinkDrop() {
		s.grip.Forget(g)
		return
	}
	n.ackDelay()
	gc := n.cfg.Gripper
	c := m.Goal.Command
	if math.IsNaN(c.Position) || math.IsNaN(c.MaxEffort) {
		s.grip.Reject(g, nil, "position and max_effort must be numbers")
		return
	}
	closeIt := c.Position < gc.MaxOpening/2
	force := c.MaxEffort
	if force <= 0 {
		force = gc.DefaultForce
	}
	gg := robot.GripperGoal{Close: closeIt}
	if closeIt {
		gg.Force = force
	}
	n.goalsMu.Lock()
	prev := n.gripGoal
	n.gripGoal = nil
	n.goalsMu.Unlock()
	if prev != nil {
		s.grip.Canceled(prev.sg, nil, "preempted by a newer command")
	}
	if err := n.sim.Command(robot.Command{ID: g.ID, Kind: robot.CmdGripper, Gripper: &gg}); err != nil {
		s.grip.Reject(g, nil, err.Error())
		return
	}
	s.grip.Accept(g)
	n.goalsMu.Lock()
	n.gripGoal = &goal{sg: g, close: closeIt, since: n.sim.Now()}
	n.goalsMu.Unlock()
}

// onCancel ends g, a goal of the server watched belongs to, and stops
// that server's part of the robot if g is the goal it runs. A cancelled
// base goal does not hold the arm, nor a cancelled trajectory the base:
// each controller has its own action server, as on a real robot, and a
// cancel that arrives late (the transports do not order one topic against
// another) must not stop a goal another server started since.
func (n *Node) onCancel(g *rosaction.ServerGoal, watched **goal) {
	s := n.session()
	if s == nil {
		return
	}
	n.goalsMu.Lock()
	if *watched != nil && (*watched).sg == g {
		*watched = nil
		switch watched {
		case &n.baseGoal:
			n.sim.StopPart(robot.CmdMoveBase)
		case &n.armGoal:
			n.sim.StopPart(robot.CmdMoveArm)
		case &n.gripGoal:
			n.sim.StopPart(robot.CmdGripper)
		}
	}
	n.goalsMu.Unlock()
	// End g on the server that owns it, and on no other: a ServerGoal's
	// state is guarded by its own server's lock, and another server ending
	// it would publish a result for a goal it never had.
	switch watched {
	case &n.baseGoal:
		if s.base != nil {
			s.base.Canceled(g, nil, "cancelled")
		}
	case &n.armGoal:
		if s.arm != nil {
			s.arm.Canceled(g, nil, "cancelled")
		}
	case &n.gripGoal:
		if s.grip != nil {
			s.grip.Canceled(g, nil, "cancelled")
		}
	}
}

// carrotHorizon is how far ahead a cmd_vel Twist is turned into a goal.
const carrotHorizon = 0.5 // s

// onCmdVel emulates a velocity interface on the simulator's pose
// controller: a Twist becomes a goal (a carrot) capped at the Twist's
// speeds and far enough ahead that the controller neither counts it as
// reached (it would be inside the goal tolerance for a slow Twist) nor
// brakes before the next Twist replaces it. A zero Twist stops.
func (n *Node) onCmdVel(m *geometry_msgs.Twist) {
	if n.sim.LinkDrop() {
		return
	}
	v, w := m.Linear.X, m.Angular.Z
	if math.IsNaN(v) || math.IsNaN(w) || math.IsInf(v, 0) || math.IsInf(w, 0) {
		return
	}
	if v == 0 && w == 0 {
		// A zero Twist brakes the base, and only the base: it may arrive
		// after a trajectory sent later on another topic, which it must
		// not stop.
		n.sim.StopPart(robot.CmdMoveBase)
		return
	}
	bc := n.cfg.Base
	p := n.sim.Truth().Base
	goal := robot.BaseGoal{MaxLinear: math.Max(math.Abs(v), 0.01), MaxAngular: math.Max(math.Abs(w), 0.01)}
	if v == 0 {
		// Turning in place: a heading goal beyond the yaw tolerance.
		ang := math.Abs(w)*carrotHorizon + w*w/(2*bc.MaxAngularAccel) + 2*robot.Radians(bc.YawToleranceDeg)
		goal.Target = robot.Pose2D{X: p.X, Y: p.Y, Theta: robot.NormalizeAngle(p.Theta + math.Copysign(ang, w))}
	} else {
		// Driving: a point ahead along the arc's mean heading; the final
		// heading does not matter, the next Twist moves the carrot.
		lin := math.Abs(v)*carrotHorizon + v*v/(2*bc.MaxLinearAccel) + 2*bc.GoalTolerance
		mid := p.Theta + w*carrotHorizon/2
		goal.IgnoreTheta = true
		for _, l := range []float64{lin, lin / 2, 2 * bc.GoalTolerance} {
			// Near a wall the far carrot may be refused; come closer.
			goal.Target = robot.Pose2D{X: p.X + math.Copysign(l, v)*math.Cos(mid), Y: p.Y + math.Copysign(l, v)*math.Sin(mid), Theta: mid}
			if n.commandCmdVel(goal) == nil {
				n.sim.Refresh()
				return
			}
		}
		return
	}
	_ = n.commandCmdVel(goal)
	n.sim.Refresh()
}

func (n *Node) commandCmdVel(g robot.BaseGoal) error {
	n.goalsMu.Lock()
	n.cmdVelSeq++
	id := fmt.Sprintf("cmd_vel-%d", n.cmdVelSeq)
	n.goalsMu.Unlock()
	return n.sim.Command(robot.Command{ID: id, Kind: robot.CmdMoveBase, Base: &g})
}

// publish is the simulator's state callback: it publishes the state on
// every topic and advances the watched goals.
func (n *Node) publish(st robot.State) {
	s := n.session()
	if s == nil {
		return
	}
	n.tick++
	stamp := st.Stamp
	odom := &nav_msgs.Odometry{Header: std_msgs.Header{Stamp: stamp, FrameId: "odom"}, ChildFrameId: "base_link"}
	odom.Pose.Pose.Position = geometry_msgs.Point{X: st.Base.X, Y: st.Base.Y}
	odom.Pose.Pose.Orientation = ros.QuaternionFromYaw(st.Base.Theta)
	odom.Twist.Twist.Linear.X, odom.Twist.Twist.Angular.Z = st.Velocity.V, st.Velocity.W
	if s.js != nil {
		js := &sensor_msgs.JointState{Header: std_msgs.Header{Stamp: stamp}}
		for _, j := range st.Joints {
			js.Name = append(js.Name, j.Name)
			js.Position = append(js.Position, j.Position)
			js.Velocity = append(js.Velocity, j.Velocity)
		}
		if st.Gripper != nil {
			js.Name = append(js.Name, n.gripJ)
			js.Position = append(js.Position, st.Gripper.Opening)
			js.Velocity = append(js.Velocity, 0)
		}
		s.js.Write(js)
	}
	s.odom.Write(odom)
	if s.estop != nil {
		s.estop.Write(&std_msgs.Bool{Data: st.EStop})
	}
	if s.bat != nil && n.tick%10 == 1 {
		status := sensor_msgs.BatteryState_POWER_SUPPLY_STATUS_DISCHARGING
		if st.Battery.Charging {
			status = sensor_msgs.BatteryState_POWER_SUPPLY_STATUS_CHARGING
		}
		s.bat.Write(&sensor_msgs.BatteryState{
			Header: std_msgs.Header{Stamp: stamp}, Voltage: float32(st.Battery.Voltage),
			Percentage: float32(st.Battery.Percent / 100), PowerSupplyStatus: status, Present: true,
			Charge: float32(math.NaN()), Capacity: float32(math.NaN()), DesignCapacity: float32(math.NaN()),
			Current: float32(math.NaN()), Temperature: float32(math.NaN()),
		})
	}
	if s.dets != nil && len(st.Detections) > 0 && !st.Detections[0].Stamp.Equal(n.lastDets) {
		n.lastDets = st.Detections[0].Stamp
		s.dets.Write(ros.DetectionsToMsg(st.Detections, n.classOf, "camera", st.Detections[0].Stamp))
	}
	n.advance(s, st)
}

// labelsParam is the class_labels parameter of labels: what a ROS1
// detector can publish. The parameter is one comma-separated string sent
// over XML-RPC, so a world label (printed text the camera reads, which
// may be anything) loses what XML 1.0 cannot carry (control characters
// other than tab and newline, U+FFFE, U+FFFF) and has its commas turned
// into spaces: a comma would split one label into several and shift
// every class id after it. Markup is escaped: goroslib v2.1.5 writes a
// string into its XML-RPC request as it is, so a label "</value>" would
// break the request (or rewrite it); the master decodes the entities
// back to the label's own characters.
func labelsParam(labels []string) string {
	out := make([]string, len(labels))
	for i, l := range labels {
		out[i] = strings.Map(func(r rune) rune {
			switch {
			case r == ',':
				return ' '
			case r == '\t' || r == '\n' || r == '\r':
				return r
			case r < 0x20, r == 0xFFFE, r == 0xFFFF, r == utf8.RuneError:
				return -1
			}
			return r
		}, l)
	}
	return xmlEscaper.Replace(strings.Join(out, ","))
}

var xmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

func (n *Node) classOf(label string) int64 {
	i := slices.Index(n.labels, label)
	if i < 0 {
		return int64(len(n.labels) + 1000)
	}
	return int64(i)
}

// advance ends the watched goals that finished, failed or stalled.
func (n *Node) advance(s *session, st robot.State) {
	tr := n.sim.Truth()
	has := func(prefix string) string {
		for _, f := range tr.FaultCodes {
			if strings.HasPrefix(f, prefix) {
				return f
			}
		}
		return ""
	}
	n.goalsMu.Lock()
	bg, ag, gg := n.baseGoal, n.armGoal, n.gripGoal
	n.goalsMu.Unlock()
	clear := func(p **goal, g *goal) {
		n.goalsMu.Lock()
		if *p == g {
			*p = nil
		}
		n.goalsMu.Unlock()
	}
	if bg != nil && s.base != nil {
		bc := n.cfg.Base
		reached := math.Hypot(tr.Base.X-bg.target.X, tr.Base.Y-bg.target.Y) <= bc.GoalTolerance &&
			math.Abs(robot.NormalizeAngle(tr.Base.Theta-bg.target.Theta)) <= robot.Radians(bc.YawToleranceDeg)
		switch f := has("motor_stall"); {
		case f != "":
			clear(&n.baseGoal, bg)
			n.sim.Stop()
			s.base.Abort(bg.sg, nil, "base controller: "+f)
		case !tr.BaseGoal && reached && !st.Moving(0.01, 0.02):
			clear(&n.baseGoal, bg)
			s.base.Succeed(bg.sg, nil, "goal reached")
		case !tr.BaseGoal && !reached:
			clear(&n.baseGoal, bg)
			s.base.Abort(bg.sg, nil, "the base stopped before reaching the goal")
		}
	}
	if ag != nil && s.arm != nil {
		reached := len(tr.Joints) == len(ag.joints)
		for i, j := range tr.Joints {
			if i < len(ag.joints) && math.Abs(j.Position-ag.joints[i]) > 0.02 {
				reached = false
			}
		}
		switch f := has("joint_stuck"); {
		case f != "":
			clear(&n.armGoal, ag)
			n.sim.Stop()
			res := &rosmsg.FollowJointTrajectoryActionResult{}
			res.Result.ErrorCode, res.Result.ErrorString = rosmsg.FJTPathToleranceViolated, f
			s.arm.Abort(ag.sg, res, "arm controller: "+f)
		case !tr.ArmGoal && reached:
			clear(&n.armGoal, ag)
			s.arm.Succeed(ag.sg, nil, "trajectory executed")
		case !tr.ArmGoal && !reached:
			clear(&n.armGoal, ag)
			res := &rosmsg.FollowJointTrajectoryActionResult{}
			res.Result.ErrorCode, res.Result.ErrorString = rosmsg.FJTGoalToleranceViolated, "the arm stopped before the end of the trajectory"
			s.arm.Abort(ag.sg, res, res.Result.ErrorString)
		}
	}
	if gg != nil && s.grip != nil && tr.Gripper != nil {
		g := tr.Gripper
		max := n.cfg.Gripper.MaxOpening
		res := &rosmsg.GripperCommandActionResult{}
		res.Result.Position, res.Result.Effort = g.Opening, g.Force
		switch {
		case gg.close && g.Closed:
			clear(&n.gripGoal, gg)
			res.Result.Stalled, res.Result.ReachedGoal = g.Holding != "", g.Holding == ""
			s.grip.Succeed(gg.sg, res, "closed")
		case !gg.close && g.Opening >= 0.9*max && !g.Closed:
			clear(&n.gripGoal, gg)
			res.Result.ReachedGoal = true
			s.grip.Succeed(gg.sg, res, "open")
		case n.sim.Now().Sub(gg.since) > 10*time.Second:
			clear(&n.gripGoal, gg)
			s.grip.Abort(gg.sg, res, "the gripper did not finish within 10 s")
		default:
			fb := &rosmsg.GripperCommandActionFeedback{}
			fb.Feedback.Position, fb.Feedback.Effort = g.Opening, g.Force
			s.grip.Feedback(gg.sg, fb)
		}
	}
}
