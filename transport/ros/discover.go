package ros

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bluenviron/goroslib/v2"
	"github.com/bluenviron/goroslib/v2/pkg/apimaster"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/nav_msgs"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
)

// Discovery: what a running ROS graph offers, read from the master API
// alone (no node is registered for it), and how it maps onto the standard
// interfaces the driver speaks. `robot-bridge init` writes a starter
// hw-config from it.

// Standard message and action types the driver speaks.
const (
	TypeOdometry       = "nav_msgs/Odometry"
	TypeTwist          = "geometry_msgs/Twist"
	TypeJointState     = "sensor_msgs/JointState"
	TypeBatteryState   = "sensor_msgs/BatteryState"
	TypeBool           = "std_msgs/Bool"
	TypeDetections     = "vision_msgs/Detection2DArray"
	TypeMoveBase       = "move_base_msgs/MoveBase"
	TypeFollowJointTrj = "control_msgs/FollowJointTrajectory"
	TypeGripperCommand = "control_msgs/GripperCommand"
)

// GraphTopic is one topic the master knows, with its type and the nodes
// that publish and subscribe to it (sorted).
type GraphTopic struct {
	Name        string
	Type        string
	Publishers  []string
	Subscribers []string
}

// ActionServer is an actionlib server recognised by its topics: a node
// that subscribes to <name>/goal and <name>/cancel and publishes
// <name>/status, <name>/feedback and <name>/result. Type is the action
// type, e.g. move_base_msgs/MoveBase (the goal topic's type without its
// ActionGoal suffix).
type ActionServer struct {
	Name string
	Type string
	// Node is the node that serves it.
	Node string
}

// Graph is a snapshot of a ROS graph: every topic, sorted by name, and the
// action servers recognised among them.
type Graph struct {
	MasterURI string
	Topics    []GraphTopic
	Actions   []ActionServer
}

// Discover reads the graph from the master at masterURI: getTopicTypes
// for the types and getSystemState for who publishes and subscribes.
// Nodes named exclude (the caller itself) are left out. It fails when
// the master does not answer within ctx or a few seconds.
func Discover(ctx context.Context, masterURI string, exclude ...string) (*Graph, error) {
	_, hp, err := MasterAddress(&hwconfig.ROSConf{MasterURI: masterURI}, nil)
	if err != nil {
		return nil, err
	}
	timeout := 3 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	mc := apimaster.NewClient(hp, "/robot_bridge_init", &http.Client{Timeout: timeout})
	type answer struct {
		types []apimaster.TopicType
		state *apimaster.SystemState
		err   error
	}
	ch := make(chan answer, 1)
	go func() {
		var a answer
		if a.types, a.err = mc.GetTopicTypes(); a.err == nil {
			a.state, a.err = mc.GetSystemState()
		}
		ch <- a
	}()
	var a answer
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("ros master %s: %w", masterURI, ctx.Err())
	case a = <-ch:
	}
	if a.err != nil {
		return nil, fmt.Errorf("ros master %s does not answer (%w); is roscore running there, and is the URI right?", masterURI, a.err)
	}
	return buildGraph(masterURI, a.types, a.state, exclude), nil
}

func buildGraph(uri string, types []apimaster.TopicType, st *apimaster.SystemState, exclude []string) *Graph {
	byName := map[string]*GraphTopic{}
	get := func(name string) *GraphTopic {
		t := byName[name]
		if t == nil {
			t = &GraphTopic{Name: name}
			byName[name] = t
		}
		return t
	}
	for _, tt := range types {
		get(tt.Name).Type = tt.Type
	}
	keep := func(nodes []string) []string {
		var out []string
		for _, n := range nodes {
			if !slices.Contains(exclude, n) {
				out = append(out, n)
			}
		}
		slices.Sort(out)
		return out
	}
	if st != nil {
		for _, e := range st.PublishedTopics {
			t := get(e.Name)
			t.Publishers = keep(append(t.Publishers, e.Nodes...))
		}
		for _, e := range st.SubscribedTopics {
			t := get(e.Name)
			t.Subscribers = keep(append(t.Subscribers, e.Nodes...))
		}
	}
	g := &Graph{MasterURI: uri}
	for _, t := range byName {
		if len(t.Publishers) > 0 || len(t.Subscribers) > 0 {
			g.Topics = append(g.Topics, *t)
		}
	}
	slices.SortFunc(g.Topics, func(a, b GraphTopic) int { return strings.Compare(a.Name, b.Name) })
	g.Actions = findActions(byName)
	return g
}

// findActions recognises action servers by the actionlib topic pattern.
func findActions(topics map[string]*GraphTopic) []ActionServer {
	var out []ActionServer
	for name, goal := range topics {
		ns, ok := strings.CutSuffix(name, "/goal")
		if !ok || ns == "" {
			continue
		}
		typ, ok := strings.CutSuffix(goal.Type, "ActionGoal")
		if !ok {
			continue
		}
		cancel, status, feedback, result := topics[ns+"/cancel"], topics[ns+"/status"], topics[ns+"/feedback"], topics[ns+"/result"]
		if cancel == nil || status == nil || feedback == nil || result == nil {
			continue
		}
		// The server is the node on the server's side of all five.
		for _, node := range goal.Subscribers {
			if slices.Contains(cancel.Subscribers, node) && slices.Contains(status.Publishers, node) &&
				slices.Contains(feedback.Publishers, node) && slices.Contains(result.Publishers, node) {
				out = append(out, ActionServer{Name: ns, Type: typ, Node: node})
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b ActionServer) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Published returns the topics of type typ that some node publishes.
func (g *Graph) Published(typ string) []GraphTopic {
	var out []GraphTopic
	for _, t := range g.Topics {
		if t.Type == typ && len(t.Publishers) > 0 {
			out = append(out, t)
		}
	}
	return out
}

// Subscribed returns the topics of type typ that some node subscribes to.
func (g *Graph) Subscribed(typ string) []GraphTopic {
	var out []GraphTopic
	for _, t := range g.Topics {
		if t.Type == typ && len(t.Subscribers) > 0 {
			out = append(out, t)
		}
	}
	return out
}

// ActionsOf returns the action servers of action type typ.
func (g *Graph) ActionsOf(typ string) []ActionServer {
	var out []ActionServer
	for _, a := range g.Actions {
		if a.Type == typ {
			out = append(out, a)
		}
	}
	return out
}

// Match is how a graph maps onto the interfaces the driver speaks. A
// field is empty when the graph has nothing that fits. Notes say, one
// sentence each, what could not be decided and what was chosen among
// several candidates.
type Match struct {
	Odom        string
	CmdVel      string
	MoveBase    string
	JointStates string
	Battery     string
	EStop       string
	Detections  string
	Arm         string
	Gripper     string
	Notes       []string
}

// Match maps the graph onto the standard interfaces. Where several topics
// fit, the conventional name wins (odom, cmd_vel, move_base, …), then the
// shortest, and a note names the others.
func (g *Graph) Match() Match {
	var m Match
	pick := func(what string, cands []string, preferred ...string) string {
		if len(cands) == 0 {
			return ""
		}
		best := cands[0]
		score := func(n string) int {
			for i, p := range preferred {
				if n == p {
					return i
				}
			}
			for i, p := range preferred {
				if strings.HasSuffix(n, p) {
					return len(preferred) + i
				}
			}
			return 2*len(preferred) + len(n)
		}
		for _, c := range cands[1:] {
			if s, b := score(c), score(best); s < b || (s == b && c < best) {
				best = c
			}
		}
		if len(cands) > 1 {
			others := slices.DeleteFunc(slices.Clone(cands), func(c string) bool { return c == best })
			m.Notes = append(m.Notes, fmt.Sprintf("%s: chose %s among %s; change it if another one is right", what, best, strings.Join(others, ", ")))
		}
		return best
	}
	names := func(ts []GraphTopic) []string {
		out := make([]string, len(ts))
		for i, t := range ts {
			out[i] = t.Name
		}
		return out
	}
	actions := func(as []ActionServer) []string {
		out := make([]string, len(as))
		for i, a := range as {
			out[i] = a.Name
		}
		return out
	}
	m.Odom = pick("odometry", names(g.Published(TypeOdometry)), "/odom", "/odometry/filtered", "odom")
	m.CmdVel = pick("velocity commands", names(g.Subscribed(TypeTwist)), "/cmd_vel", "cmd_vel")
	m.MoveBase = pick("move_base action", actions(g.ActionsOf(TypeMoveBase)), "/move_base", "move_base")
	m.JointStates = pick("joint states", names(g.Published(TypeJointState)), "/joint_states", "joint_states")
	m.Battery = pick("battery", names(g.Published(TypeBatteryState)), "/battery_state", "/battery", "battery_state", "battery")
	var estops []string
	for _, t := range g.Published(TypeBool) {
		if looksLikeEStop(t.Name) {
			estops = append(estops, t.Name)
		}
	}
	m.EStop = pick("e-stop", estops, "/estop", "/e_stop", "/emergency_stop", "estop")
	m.Detections = pick("detections", names(g.Published(TypeDetections)), "/detections", "detections")
	m.Arm = pick("arm trajectory action", actions(g.ActionsOf(TypeFollowJointTrj)), "/arm_controller/follow_joint_trajectory", "follow_joint_trajectory")
	m.Gripper = pick("gripper action", actions(g.ActionsOf(TypeGripperCommand)), "/gripper_controller/gripper_cmd", "gripper_cmd")
	return m
}

// looksLikeEStop reports whether a std_msgs/Bool topic's name says it is
// an emergency stop.
func looksLikeEStop(name string) bool {
	last := strings.ToLower(name[strings.LastIndexByte(name, '/')+1:])
	for _, w := range []string{"estop", "e_stop", "emergency_stop", "emergency", "runstop", "run_stop"} {
		if strings.Contains(last, w) {
			return true
		}
	}
	return false
}

// OdomSample is what a short listen to an odometry topic showed.
type OdomSample struct {
	// Pose is the newest pose, in Frame (the messages' header.frame_id).
	Pose  robot.Pose2D
	Frame string
	// Messages counts the messages received; Period is their mean spacing
	// (zero with fewer than two).
	Messages int
	Period   time.Duration
}

// ErrNoOdometry means no odometry message arrived in time.
var ErrNoOdometry = errors.New("no odometry message arrived")

// OdomListen bounds how long ReadOdometry listens after the first
// message, so a slow odometry does not hold init up to its deadline.
const OdomListen = time.Second

// ReadOdometry registers a short-lived node on the master, listens to
// topic until it has want messages, OdomListen has passed since the first
// or ctx ends, and returns the newest pose and the message rate. With no message at all it fails with
// ErrNoOdometry. host is the address other nodes reach this one at
// (ROS_IP or ROS_HOSTNAME); empty lets goroslib choose.
func ReadOdometry(ctx context.Context, masterURI, topic, host string, want int) (OdomSample, error) {
	_, hp, err := MasterAddress(&hwconfig.ROSConf{MasterURI: masterURI}, nil)
	if err != nil {
		return OdomSample{}, err
	}
	name := "robot_bridge_init_" + strconv.Itoa(os.Getpid())
	node, err := goroslib.NewNode(NodeConf(hp, name, host, slog.New(slog.DiscardHandler)))
	if err != nil {
		return OdomSample{}, fmt.Errorf("ros: node %s on master %s: %w", name, masterURI, err)
	}
	defer node.Close()
	type msg struct {
		m  *nav_msgs.Odometry
		at time.Time
	}
	ch := make(chan msg, want+1)
	sub, err := goroslib.NewSubscriber(goroslib.SubscriberConf{
		Node: node, Topic: topic,
		Callback: func(m *nav_msgs.Odometry) {
			select {
			case ch <- msg{m, time.Now()}:
			default:
			}
		},
	})
	if err != nil {
		return OdomSample{}, fmt.Errorf("ros: subscribe %s: %w", topic, err)
	}
	defer sub.Close()
	var out OdomSample
	var first, last time.Time
	var settled <-chan time.Time // a second after the first message
	for out.Messages < want {
		select {
		case <-ctx.Done():
			if out.Messages == 0 {
				return out, fmt.Errorf("%w on %s before the deadline", ErrNoOdometry, topic)
			}
			return out, nil
		case <-settled:
			return out, nil
		case r := <-ch:
			base, _, err := OdomToBase(r.m)
			if err != nil {
				continue // a malformed message says nothing about the pose
			}
			out.Pose, out.Frame = base, strings.TrimPrefix(r.m.Header.FrameId, "/")
			if out.Messages == 0 {
				first = r.at
				settled = time.After(OdomListen)
			}
			last = r.at
			out.Messages++
			if out.Messages > 1 {
				out.Period = last.Sub(first) / time.Duration(out.Messages-1)
			}
		}
	}
	return out, nil
}
