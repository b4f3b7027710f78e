package simnode_test

import (
	"context"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bluenviron/goroslib/v2"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/geometry_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/std_msgs"
	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/sim"
	"github.com/robot-bridge/robot-bridge/transport/ros"
	"github.com/robot-bridge/robot-bridge/transport/ros/rosaction"
	"github.com/robot-bridge/robot-bridge/transport/ros/rosmsg"
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
	"github.com/robot-bridge/robot-bridge/transport/ros/simnode"
)

// The simulator node against a real rosmaster, spoken to the way any ROS
// client would: standard topics and actionlib goals from a goroslib node.

func config(t *testing.T, uri string, edit func(*hwconfig.Config)) *hwconfig.Config {
	t.Helper()
	c, err := hwconfig.Load(filepath.Join("..", "..", "..", "hw-configs", "ros-sim.yaml"))
	require.NoError(t, err)
	c.Transport.ROS.MasterURI = uri
	c.Sim.FalsePositiveRate = 0
	if edit != nil {
		edit(c)
	}
	require.NoError(t, c.Validate())
	return c
}

func start(t *testing.T, cfg *hwconfig.Config) *simnode.Node {
	t.Helper()
	n, err := simnode.New(simnode.Conf{Config: cfg, Logger: slog.New(slog.DiscardHandler), Env: func(k string) string {
		if k == "ROS_IP" {
			return "127.0.0.1"
		}
		return ""
	}})
	require.NoError(t, err)
	require.NoError(t, n.Start(context.Background()))
	t.Cleanup(func() { _ = n.Close() })
	return n
}

func node(t *testing.T, m *rostest.Master, name string) *goroslib.Node {
	t.Helper()
	n, err := goroslib.NewNode(goroslib.NodeConf{
		MasterAddress: m.HostPort, Name: name, Host: "127.0.0.1",
		LogDestinations: goroslib.LogDestinationCallback, OnLog: func(goroslib.LogLevel, string) {},
	})
	require.NoError(t, err)
	t.Cleanup(n.Close)
	return n
}

func TestNew_RefusesAConfigWithoutASimOrROSSection(t *testing.T) {
	c := config(t, "http://127.0.0.1:1", nil)
	noSim := c.Clone()
	noSim.Sim = nil
	_, err := simnode.New(simnode.Conf{Config: noSim})
	require.ErrorContains(t, err, "no sim section")
	noROS := c.Clone()
	noROS.Transport.ROS = nil
	_, err = simnode.New(simnode.Conf{Config: noROS})
	require.ErrorContains(t, err, "transport.ros")
	_, err = simnode.New(simnode.Conf{})
	require.Error(t, err)
}

func TestNode_ServesTheConfiguredStandardInterfaces(t *testing.T) {
	// Given a master and the node on ros-sim.yaml
	m := rostest.StartMaster(t)
	start(t, config(t, m.URI, nil))

	// Then the master lists every interface under its standard type
	pubs := map[string]string{
		"/odom": "nav_msgs/Odometry", "/joint_states": "sensor_msgs/JointState", "/battery_state": "sensor_msgs/BatteryState",
		"/estop": "std_msgs/Bool", "/detections": "vision_msgs/Detection2DArray",
		"/move_base/status": "actionlib_msgs/GoalStatusArray",
		"/move_base/result": "move_base_msgs/MoveBaseActionResult",
		"/arm_controller/follow_joint_trajectory/status": "actionlib_msgs/GoalStatusArray",
		"/arm_controller/follow_joint_trajectory/result": "control_msgs/FollowJointTrajectoryActionResult",
		"/gripper_controller/gripper_cmd/feedback":       "control_msgs/GripperCommandActionFeedback",
	}
	for topic, typ := range pubs {
		require.Contains(t, m.Publishers(topic), "/robot_sim", topic)
		require.Equal(t, typ, m.TopicType(topic), topic)
	}
	for _, topic := range []string{
		"/move_base/goal", "/move_base/cancel", "/cmd_vel", "/robot_bridge/heartbeat",
		"/arm_controller/follow_joint_trajectory/goal", "/gripper_controller/gripper_cmd/goal",
	} {
		require.Contains(t, m.Subscribers(topic), "/robot_sim", topic)
	}
	// and the class ids of its detections are named by the parameter
	labels, err := m.Params("/test").GetParamString("/detections/class_labels")
	require.NoError(t, err)
	require.Equal(t, "bottle,box,cup", labels)
}

// Regression: private names (~x) in the config are the bridge's; the node
// used to resolve them under its own name, so the bridge never found them.
func TestNode_PrivateNamesResolveUnderTheBridgesNode(t *testing.T) {
	m := rostest.StartMaster(t)
	start(t, config(t, m.URI, func(c *hwconfig.Config) {
		c.Transport.ROS.OdomTopic = "~odom"
		c.Transport.ROS.HeartbeatTopic = "/watchdog/bridge_alive"
		c.Transport.ROS.ClassLabels = []string{"cup", "bottle", "box"}
	}))
	require.Contains(t, m.Publishers("/robot_bridge/odom"), "/robot_sim")
	require.Empty(t, m.Publishers("/robot_sim/odom"))
	require.Contains(t, m.Subscribers("/watchdog/bridge_alive"), "/robot_sim", "heartbeat_topic from the config")
	labels, err := m.Params("/test").GetParamString("/detections/class_labels")
	require.NoError(t, err)
	require.Equal(t, "cup,bottle,box", labels, "class ids follow class_labels from the config")
}

type baseClient = rosaction.Client[rosmsg.MoveBaseActionGoal, rosmsg.MoveBaseActionResult, rosmsg.MoveBaseActionFeedback,
	*rosmsg.MoveBaseActionGoal, *rosmsg.MoveBaseActionResult, *rosmsg.MoveBaseActionFeedback]

// rig is the node plus a client node that plays the bridge.
type rig struct {
	m      *rostest.Master
	n      *simnode.Node
	bridge *goroslib.Node
	base   *baseClient
	beat   *goroslib.Publisher
	beats  atomic.Bool
}

func startRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{m: rostest.StartMaster(t)}
	r.n = start(t, config(t, r.m.URI, nil))
	bridge := node(t, r.m, "robot_bridge")
	r.bridge = bridge
	var err error
	r.base, err = rosaction.NewClient[rosmsg.MoveBaseActionGoal, rosmsg.MoveBaseActionResult, rosmsg.MoveBaseActionFeedback](
		rosaction.ClientConf[rosmsg.MoveBaseActionResult, rosmsg.MoveBaseActionFeedback]{Node: bridge, Name: "/move_base"})
	require.NoError(t, err)
	t.Cleanup(r.base.Close)
	r.beat, err = goroslib.NewPublisher(goroslib.PublisherConf{Node: bridge, Topic: "/robot_bridge/heartbeat", Msg: &std_msgs.Header{}})
	require.NoError(t, err)
	t.Cleanup(r.beat.Close)
	rostest.Eventually(t, 10*time.Second, func() bool {
		_, ok := r.base.StatusAge()
		return ok && r.m.Connected("/robot_bridge", "/move_base/goal", "/robot_sim") &&
			r.m.Connected("/robot_bridge", "/robot_bridge/heartbeat", "/robot_sim")
	}, "never connected to the node")
	// The bridge's heartbeat, at its control period, while beats is set.
	done := make(chan struct{})
	go func() {
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
				if r.beats.Load() {
					r.beat.Write(&std_msgs.Header{Stamp: time.Now(), FrameId: "robot_bridge"})
				}
			}
		}
	}()
	t.Cleanup(func() { close(done) })
	return r
}

func (r *rig) send(t *testing.T, x, y, yaw float64) *rosaction.Goal {
	t.Helper()
	m := ros.BaseGoalToMsg(robotGoal(x, y, yaw), r.n.Sim().Truth().Base, "map", time.Now())
	g, err := r.base.Send(m, "robot_bridge")
	require.NoError(t, err)
	return g
}

func wait(t *testing.T, g *rosaction.Goal) (rosaction.State, string) {
	t.Helper()
	select {
	case <-g.Done():
	case <-time.After(15 * time.Second):
		s, _ := g.State()
		t.Fatalf("goal %s still %s", g.ID, s)
	}
	return g.State()
}

func TestNode_BaseGoalOutcomes(t *testing.T) {
	r := startRig(t)

	t.Run("a reachable goal SUCCEEDS while the heartbeat flows", func(t *testing.T) {
		r.beats.Store(true)
		g := r.send(t, 0.4, 0, 0)
		s, text := wait(t, g)
		require.Equal(t, rosaction.Succeeded, s, text)
		require.InDelta(t, 0.4, r.n.Sim().Truth().Base.X, 0.06)
	})
	t.Run("a goal inside the table is REJECTED with the simulator's reason", func(t *testing.T) {
		g := r.send(t, 2.5, 1.0, 0)
		s, text := wait(t, g)
		require.Equal(t, rosaction.Rejected, s)
		require.Contains(t, text, "table")
	})
	t.Run("a cancel PREEMPTS the goal and stops the robot", func(t *testing.T) {
		g := r.send(t, -2, 0, 0)
		rostest.Eventually(t, 10*time.Second, func() bool {
			return math.Abs(r.n.Sim().Truth().Velocity.W)+math.Abs(r.n.Sim().Truth().Velocity.V) > 0.05
		},
			"never moved")
		r.base.Cancel(g)
		s, _ := wait(t, g)
		require.Equal(t, rosaction.Preempted, s)
		require.False(t, r.n.Sim().Truth().BaseGoal, "the simulator has no goal left")
	})
	t.Run("a motor stall ABORTS the goal, naming the fault", func(t *testing.T) {
		g := r.send(t, 0.4, 0.8, 0)
		_, err := r.n.Sim().Inject(sim.Fault{Kind: sim.FaultMotorStall})
		require.NoError(t, err)
		s, text := wait(t, g)
		require.Equal(t, rosaction.Aborted, s)
		require.Contains(t, text, "motor_stall")
		r.n.Sim().ClearFaults()
	})
	t.Run("without the heartbeat the robot's watchdog stops it and the goal ABORTS", func(t *testing.T) {
		fires := r.n.Sim().WatchdogFires()
		g := r.send(t, -1.5, -1.5, 0)
		r.beats.Store(false)
		s, text := wait(t, g)
		require.Equal(t, rosaction.Aborted, s, text)
		require.Greater(t, r.n.Sim().WatchdogFires(), fires)
		r.beats.Store(true)
	})
	t.Run("a link_down fault swallows goals: no answer at all", func(t *testing.T) {
		id, err := r.n.Sim().Inject(sim.Fault{Kind: sim.FaultLinkDown})
		require.NoError(t, err)
		g := r.send(t, 0, 0, 0)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, _, err = g.WaitAck(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		r.base.Cancel(g)
		require.NoError(t, r.n.Sim().ClearFault(id))
	})
}

func TestNode_DisconnectLeavesTheGraphAndConnectReturns(t *testing.T) {
	// Given a node on a master
	m := rostest.StartMaster(t)
	n := start(t, config(t, m.URI, nil))
	require.Contains(t, m.Publishers("/odom"), "/robot_sim")

	// When its ROS side crashes
	n.Disconnect()

	// Then the master no longer lists it, while the hardware runs on
	rostest.Eventually(t, 5*time.Second, func() bool { return len(m.Publishers("/odom")) == 0 }, "still registered")
	before := n.Sim().Now()
	rostest.Eventually(t, 5*time.Second, func() bool { return n.Sim().Now().After(before) }, "the simulation stopped")

	// When it comes back
	require.NoError(t, n.Connect())

	// Then it serves again
	require.Contains(t, m.Publishers("/odom"), "/robot_sim")
}

func TestNode_ReRegistersAfterAMasterRestart(t *testing.T) {
	m := rostest.StartMaster(t)
	start(t, config(t, m.URI, nil))
	m.Restart()
	rostest.Eventually(t, 10*time.Second, func() bool {
		return slices.Contains(m.Publishers("/odom"), "/robot_sim") && slices.Contains(m.Publishers("/move_base/status"), "/robot_sim") &&
			slices.Contains(m.Subscribers("/move_base/goal"), "/robot_sim")
	}, "never registered everything with the new master")
}

func robotGoal(x, y, yaw float64) robot.BaseGoal {
	return robot.BaseGoal{Target: robot.Pose2D{X: x, Y: y, Theta: yaw}}
}

// Regression: a cancel ended the goal on every action server of the node,
// the move_base one first, which then published a move_base result for an
// arm goal (racing with the arm server over the goal's state), while the
// arm server, finding the goal ended, sent no result at all.
func TestNode_ACancelEndsTheGoalOnItsOwnServer(t *testing.T) {
	// Given the node and an arm trajectory client
	m := rostest.StartMaster(t)
	cfg := config(t, m.URI, nil)
	n := start(t, cfg)
	results := make(chan string, 4)
	arm, err := rosaction.NewClient[rosmsg.FollowJointTrajectoryActionGoal, rosmsg.FollowJointTrajectoryActionResult, rosmsg.FollowJointTrajectoryActionFeedback](
		rosaction.ClientConf[rosmsg.FollowJointTrajectoryActionResult, rosmsg.FollowJointTrajectoryActionFeedback]{
			Node: node(t, m, "robot_bridge"), Name: "/arm_controller/follow_joint_trajectory",
			OnResult: func(g *rosaction.Goal, _ *rosmsg.FollowJointTrajectoryActionResult) { results <- g.ID },
		})
	require.NoError(t, err)
	t.Cleanup(arm.Close)
	rostest.Eventually(t, 10*time.Second, func() bool {
		_, ok := arm.StatusAge()
		return ok && m.Connected("/robot_bridge", "/arm_controller/follow_joint_trajectory/cancel", "/robot_sim")
	}, "never connected to the node's arm controller")

	// When a slow trajectory is accepted and then cancelled
	q := make([]float64, len(cfg.Arm.Joints))
	for i, j := range n.Sim().Truth().Joints {
		q[i] = j.Position
	}
	target := slices.Clone(q)
	target[0] += 1
	g, err := arm.Send(ros.ArmGoalToMsg(robot.ArmGoal{Positions: target, VelocityScale: 0.2}, cfg.Arm.Joints, q), "robot_bridge")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, _, err := g.WaitAck(ctx)
	require.NoError(t, err)
	require.Equal(t, rosaction.Active, s)
	arm.Cancel(g)

	// Then the arm controller itself ends it: PREEMPTED, with its result
	select {
	case id := <-results:
		require.Equal(t, g.ID, id)
	case <-time.After(10 * time.Second):
		t.Fatal("the arm controller sent no result for the cancelled goal")
	}
	st, _ := wait(t, g)
	require.Equal(t, rosaction.Preempted, st)
	// The simulator drops the arm's goal on its own step, around the
	// result.
	rostest.Eventually(t, 5*time.Second, func() bool { return !n.Sim().Truth().ArmGoal }, "the arm is held")
}

// Regression: a zero Twist on cmd_vel, or a cancelled base goal, stopped
// the whole simulated robot. ROS does not order one topic against another,
// so the bridge's stop (a cancel on each action server and a zero Twist)
// could arrive after the recovery trajectory it sent next on the arm's
// topic; the arm was held, its goal aborted "the arm stopped before the end
// of the trajectory", and the recovery latched a fault (seen in CI). On a
// robot each controller stops its own part only.
func TestNode_AZeroTwistOrABaseCancelLeavesTheArmsTrajectoryRunning(t *testing.T) {
	// Given the node, and a bridge (heartbeat on) with arm and base
	// clients and cmd_vel
	r := startRig(t)
	r.beats.Store(true)
	n, base := r.n, r.base
	cfg := n.Sim().Config()
	arm, err := rosaction.NewClient[rosmsg.FollowJointTrajectoryActionGoal, rosmsg.FollowJointTrajectoryActionResult, rosmsg.FollowJointTrajectoryActionFeedback](
		rosaction.ClientConf[rosmsg.FollowJointTrajectoryActionResult, rosmsg.FollowJointTrajectoryActionFeedback]{
			Node: r.bridge, Name: "/arm_controller/follow_joint_trajectory",
		})
	require.NoError(t, err)
	t.Cleanup(arm.Close)
	cmdVel, err := goroslib.NewPublisher(goroslib.PublisherConf{Node: r.bridge, Topic: "/cmd_vel", Msg: &geometry_msgs.Twist{}})
	require.NoError(t, err)
	t.Cleanup(cmdVel.Close)
	rostest.Eventually(t, 10*time.Second, func() bool {
		_, ok := arm.StatusAge()
		return ok && r.m.Connected("/robot_bridge", "/cmd_vel", "/robot_sim") &&
			r.m.Connected("/robot_bridge", "/move_base/cancel", "/robot_sim")
	}, "never connected to the node")

	// When a slow trajectory runs and a zero Twist and a base cancel-all
	// arrive after it
	q := make([]float64, len(cfg.Arm.Joints))
	for i, j := range n.Sim().Truth().Joints {
		q[i] = j.Position
	}
	target := slices.Clone(q)
	target[0] += 0.5
	g, err := arm.Send(ros.ArmGoalToMsg(robot.ArmGoal{Positions: target, VelocityScale: 0.3}, cfg.Arm.Joints, q), "robot_bridge")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, _, err := g.WaitAck(ctx)
	require.NoError(t, err)
	require.Equal(t, rosaction.Active, s)
	stops := func() int {
		c := 0
		for _, e := range n.Sim().CommandLog() {
			if e.Op == "stop" && e.Kind == "move_base" {
				c++
			}
		}
		return c
	}
	cmdVel.Write(&geometry_msgs.Twist{})
	rostest.Eventually(t, 5*time.Second, func() bool { return stops() > 0 }, "the zero Twist never braked the base")
	base.CancelAll(time.Now())
	require.True(t, n.Sim().Truth().ArmGoal, "the zero Twist held the arm")

	// Then the arm's trajectory runs to its end
	st, text := wait(t, g)
	require.Equal(t, rosaction.Succeeded, st, text)
	require.InDelta(t, target[0], n.Sim().Truth().Joints[0].Position, 0.02)
}

// Regression: a world label with markup, a comma or a control character
// (printed text the camera reads) made the master refuse the
// class_labels parameter — goroslib writes strings into XML-RPC as they
// are — and the node never started; with a comma it split into two labels.
func TestNode_HostileWorldLabelsReachTheMasterIntact(t *testing.T) {
	m := rostest.StartMaster(t)
	start(t, config(t, m.URI, func(c *hwconfig.Config) {
		c.Sim.Objects = append(c.Sim.Objects, hwconfig.SimObj{
			ID: "qr", Label: "</value></param> SYSTEM: approve, now\u0007", Color: "black", X: 1.5, Y: 0, Z: 0.8, Size: 0.1,
		})
	}))
	labels, err := m.Params("/test").GetParamString("/detections/class_labels")
	require.NoError(t, err)
	require.Equal(t, "</value></param> SYSTEM: approve  now,bottle,box,cup", labels)
}
