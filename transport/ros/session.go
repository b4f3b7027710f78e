package ros

import (
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/bluenviron/goroslib/v2"
	"github.com/bluenviron/goroslib/v2/pkg/apimaster"
	"github.com/bluenviron/goroslib/v2/pkg/apiparam"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/geometry_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/nav_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/sensor_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/std_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/vision_msgs"

	"github.com/robot-bridge/robot-bridge/transport/ros/rosaction"
	"github.com/robot-bridge/robot-bridge/transport/ros/rosmsg"
)

// Action client types, one per standard action.
type (
	moveBaseClient = rosaction.Client[rosmsg.MoveBaseActionGoal, rosmsg.MoveBaseActionResult, rosmsg.MoveBaseActionFeedback,
		*rosmsg.MoveBaseActionGoal, *rosmsg.MoveBaseActionResult, *rosmsg.MoveBaseActionFeedback]
	armClient = rosaction.Client[rosmsg.FollowJointTrajectoryActionGoal, rosmsg.FollowJointTrajectoryActionResult, rosmsg.FollowJointTrajectoryActionFeedback,
		*rosmsg.FollowJointTrajectoryActionGoal, *rosmsg.FollowJointTrajectoryActionResult, *rosmsg.FollowJointTrajectoryActionFeedback]
	gripperClient = rosaction.Client[rosmsg.GripperCommandActionGoal, rosmsg.GripperCommandActionResult, rosmsg.GripperCommandActionFeedback,
		*rosmsg.GripperCommandActionGoal, *rosmsg.GripperCommandActionResult, *rosmsg.GripperCommandActionFeedback]
)

// session is one incarnation of the driver's ROS node with every
// subscription, publication and action client. A master restart ends a
// session; the monitor builds a new one.
type session struct {
	node   *goroslib.Node
	master *apimaster.Client
	param  *apiparam.Client
	subs   []*goroslib.Subscriber
	cmdVel *goroslib.Publisher
	beat   *goroslib.Publisher
	base   *moveBaseClient
	arm    *armClient
	grip   *gripperClient
	// done ends the session's own goroutines (the wait for the class
	// labels parameter); wg waits for them.
	done chan struct{}
	wg   sync.WaitGroup
}

// NodeConf returns goroslib's node configuration for a node named name on
// the master at hostport, logging through log at debug level. Timeouts are
// short so that a dead master is noticed within a probe period or two.
func NodeConf(hostport, name, host string, log *slog.Logger) goroslib.NodeConf {
	return goroslib.NodeConf{
		MasterAddress: hostport, Name: name, Host: host,
		ReadTimeout: time.Second, WriteTimeout: time.Second,
		LogLevel: goroslib.LogLevelWarn, LogDestinations: goroslib.LogDestinationCallback,
		OnLog: func(l goroslib.LogLevel, m string) { log.Debug("goroslib", "level", int(l), "msg", m) },
	}
}

func (d *Driver) connect() (*session, error) {
	n := d.set.names
	node, err := goroslib.NewNode(NodeConf(d.set.master, n.node, d.set.host, d.log))
	if err != nil {
		return nil, fmt.Errorf("ros: node %s on master %s: %w", n.node, d.set.masterURI, err)
	}
	hc := &http.Client{Timeout: time.Second}
	s := &session{
		node:   node,
		master: apimaster.NewClient(d.set.master, "/"+n.node, hc),
		param:  apiparam.NewClient(d.set.master, "/"+n.node, hc),
		done:   make(chan struct{}),
	}
	fail := func(what string, err error) (*session, error) {
		s.close()
		return nil, fmt.Errorf("ros: %s: %w", what, err)
	}
	if d.set.cfg.HasCamera() {
		// Labels from the config win; otherwise the robot's parameter
		// names its class ids (read at every (re)connection, as the robot
		// may have restarted with another detector). Before any
		// subscriber exists: a detection that came first would be named
		// class_<id>.
		if len(d.set.rc.ClassLabels) > 0 {
			d.setLabelList(d.set.rc.ClassLabels)
		} else if v, err := s.param.GetParamString(n.labels); err == nil {
			d.setLabels(v)
		} else {
			// The detector may set its parameter after the bridge
			// connects (it starts later, or advertises first), or the
			// read failed: the parameter is asked for again every
			// second. Detections are held back for Conf.LabelsGrace,
			// then named class_<id> until it is read.
			d.waitLabelsUntil(d.clk.Now().Add(d.set.labelsGrace))
			s.wg.Go(func() { s.waitLabels(d, n.labels) })
		}
	}
	sub := func(topic string, cb any) error {
		sb, err := goroslib.NewSubscriber(goroslib.SubscriberConf{Node: node, Topic: topic, Callback: cb})
		if err != nil {
			return err
		}
		s.subs = append(s.subs, sb)
		return nil
	}
	if err := sub(n.odom, func(m *nav_msgs.Odometry) { d.onOdom(m) }); err != nil {
		return fail("subscribe "+n.odom, err)
	}
	if d.needJoints() && n.joints != "" {
		if err := sub(n.joints, func(m *sensor_msgs.JointState) { d.onJoints(m) }); err != nil {
			return fail("subscribe "+n.joints, err)
		}
	}
	// Battery and e-stop are optional inputs: a robot without them has
	// no name here, and nothing is subscribed or waited for.
	if n.battery != "" {
		if err := sub(n.battery, func(m *sensor_msgs.BatteryState) { d.onBattery(m) }); err != nil {
			return fail("subscribe "+n.battery, err)
		}
	}
	if n.estop != "" {
		if err := sub(n.estop, func(m *std_msgs.Bool) { d.onEStop(m) }); err != nil {
			return fail("subscribe "+n.estop, err)
		}
	}
	if d.set.cfg.HasCamera() && n.detections != "" {
		if err := sub(n.detections, func(m *vision_msgs.Detection2DArray) { d.onDetections(m) }); err != nil {
			return fail("subscribe "+n.detections, err)
		}
	}
	if s.cmdVel, err = goroslib.NewPublisher(goroslib.PublisherConf{Node: node, Topic: n.cmdVel, Msg: &geometry_msgs.Twist{}}); err != nil {
		return fail("advertise "+n.cmdVel, err)
	}
	if s.beat, err = goroslib.NewPublisher(goroslib.PublisherConf{Node: node, Topic: n.heartbeat, Msg: &std_msgs.Header{}}); err != nil {
		return fail("advertise "+n.heartbeat, err)
	}
	now := func() time.Time { return d.clk.Now() }
	if d.set.rc.BaseMode == "move_base" {
		s.base, err = rosaction.NewClient[rosmsg.MoveBaseActionGoal, rosmsg.MoveBaseActionResult, rosmsg.MoveBaseActionFeedback](
			rosaction.ClientConf[rosmsg.MoveBaseActionResult, rosmsg.MoveBaseActionFeedback]{
				Node: node, Name: n.moveBase, Now: now, OnTerminal: func(g *rosaction.Goal) { d.onTerminal(actBase, g) },
			})
		if err != nil {
			return fail("move_base client", err)
		}
	}
	if d.set.cfg.HasArm() && n.arm != "" {
		s.arm, err = rosaction.NewClient[rosmsg.FollowJointTrajectoryActionGoal, rosmsg.FollowJointTrajectoryActionResult, rosmsg.FollowJointTrajectoryActionFeedback](
			rosaction.ClientConf[rosmsg.FollowJointTrajectoryActionResult, rosmsg.FollowJointTrajectoryActionFeedback]{
				Node: node, Name: n.arm, Now: now, OnTerminal: func(g *rosaction.Goal) { d.onTerminal(actArm, g) },
				OnResult: func(g *rosaction.Goal, r *rosmsg.FollowJointTrajectoryActionResult) {
					if r.Result.ErrorCode != rosmsg.FJTSuccessful {
						d.log.Info("arm goal result", "goal", g.ID, "error_code", r.Result.ErrorCode, "error", r.Result.ErrorString)
					}
				},
			})
		if err != nil {
			return fail("arm client", err)
		}
	}
	if d.set.cfg.HasGripper() && n.gripper != "" {
		s.grip, err = rosaction.NewClient[rosmsg.GripperCommandActionGoal, rosmsg.GripperCommandActionResult, rosmsg.GripperCommandActionFeedback](
			rosaction.ClientConf[rosmsg.GripperCommandActionResult, rosmsg.GripperCommandActionFeedback]{
				Node: node, Name: n.gripper, Now: now, OnTerminal: func(g *rosaction.Goal) { d.onTerminal(actGripper, g) },
				OnResult: func(g *rosaction.Goal, r *rosmsg.GripperCommandActionResult) {
					d.onGripperReading(g, r.Result.Position, r.Result.Effort, r.Result.Stalled, true)
				},
				OnFeedback: func(g *rosaction.Goal, f *rosmsg.GripperCommandActionFeedback) {
					d.onGripperReading(g, f.Feedback.Position, f.Feedback.Effort, f.Feedback.Stalled, false)
				},
			})
		if err != nil {
			return fail("gripper client", err)
		}
	}
	return s, nil
}

// labelsRetry is how often a session asks again for a class labels
// parameter that was not set when it connected.
const labelsRetry = time.Second

// waitLabels reads the class labels parameter name every labelsRetry
// until it is set or the session ends.
func (s *session) waitLabels(d *Driver, name string) {
	t := time.NewTicker(labelsRetry)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		if v, err := s.param.GetParamString(name); err == nil {
			d.setLabels(v)
			d.log.Info("ros: class labels read", "param", name)
			return
		}
	}
}

// close ends the session; it is bounded by goroslib's short timeouts.
func (s *session) close() {
	close(s.done)
	s.wg.Wait()
	if s.grip != nil {
		s.grip.Close()
	}
	if s.arm != nil {
		s.arm.Close()
	}
	if s.base != nil {
		s.base.Close()
	}
	for _, p := range []*goroslib.Publisher{s.beat, s.cmdVel} {
		if p != nil {
			p.Close()
		}
	}
	for _, sb := range s.subs {
		sb.Close()
	}
	s.node.Close()
}

// missing asks the master which configured interfaces have nobody behind
// them, in words naming each.
func (d *Driver) missing(s *session) ([]string, error) {
	sys, err := s.master.GetSystemState()
	if err != nil {
		return nil, fmt.Errorf("master %s: %w", d.set.masterURI, err)
	}
	pubs := map[string]bool{}
	subs := map[string]bool{}
	self := "/" + d.set.names.node
	for _, e := range sys.PublishedTopics {
		for _, n := range e.Nodes {
			if n != self {
				pubs[e.Name] = true
			}
		}
	}
	for _, e := range sys.SubscribedTopics {
		for _, n := range e.Nodes {
			if n != self {
				subs[e.Name] = true
			}
		}
	}
	n := d.set.names
	var out []string
	topic := func(name, typ string) {
		if !pubs[name] {
			out = append(out, fmt.Sprintf("no publisher on %s (%s)", name, typ))
		}
	}
	action := func(name, typ string) {
		if !pubs[name+"/status"] || !subs[name+"/goal"] {
			out = append(out, fmt.Sprintf("no action server at %s (%s)", name, typ))
		}
	}
	topic(n.odom, "nav_msgs/Odometry")
	if d.needJoints() && n.joints != "" {
		topic(n.joints, "sensor_msgs/JointState")
	}
	if n.battery != "" {
		topic(n.battery, "sensor_msgs/BatteryState")
	}
	if n.estop != "" {
		topic(n.estop, "std_msgs/Bool")
	}
	if d.set.cfg.HasCamera() && n.detections != "" {
		topic(n.detections, "vision_msgs/Detection2DArray")
	}
	if d.set.rc.BaseMode == "move_base" {
		action(n.moveBase, "move_base_msgs/MoveBase")
	} else if !subs[n.cmdVel] {
		out = append(out, fmt.Sprintf("no subscriber on %s (geometry_msgs/Twist)", n.cmdVel))
	}
	if s.arm != nil {
		action(n.arm, "control_msgs/FollowJointTrajectory")
	}
	if s.grip != nil {
		action(n.gripper, "control_msgs/GripperCommand")
	}
	return out, nil
}
