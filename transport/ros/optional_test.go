package ros_test

import (
	"context"
	"testing"
	"time"

	"github.com/bluenviron/goroslib/v2"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/nav_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/sensor_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/std_msgs"
	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/transport/ros"
	"github.com/robot-bridge/robot-bridge/transport/ros/rosaction"
	"github.com/robot-bridge/robot-bridge/transport/ros/rosmsg"
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

// Optional inputs: a robot that publishes only what it has, and a config
// that says so, is bridged; a config that names an input nobody publishes
// is refused at start, naming it.

// sparseRobot is a goroslib robot that publishes /odom and serves
// /move_base (accepting every goal), plus whichever extra latched topics
// it is given.
type sparseRobot struct {
	srv *baseServer
	got chan *rosaction.ServerGoal
}

func startSparseRobot(t *testing.T, m *rostest.Master, extra map[string]any) *sparseRobot {
	t.Helper()
	n, err := goroslib.NewNode(goroslib.NodeConf{
		MasterAddress: m.HostPort, Name: "sparse_robot", Host: "127.0.0.1",
		LogDestinations: goroslib.LogDestinationCallback, OnLog: func(goroslib.LogLevel, string) {},
	})
	require.NoError(t, err)
	t.Cleanup(n.Close)
	odom, err := goroslib.NewPublisher(goroslib.PublisherConf{Node: n, Topic: "/odom", Msg: &nav_msgs.Odometry{}})
	require.NoError(t, err)
	t.Cleanup(odom.Close)
	for topic, msg := range extra {
		p, err := goroslib.NewPublisher(goroslib.PublisherConf{Node: n, Topic: topic, Msg: msg, Latch: true})
		require.NoError(t, err)
		t.Cleanup(p.Close)
		p.Write(msg)
	}
	r := &sparseRobot{got: make(chan *rosaction.ServerGoal, 4)}
	r.srv, err = rosaction.NewServer[rosmsg.MoveBaseActionGoal, rosmsg.MoveBaseActionResult, rosmsg.MoveBaseActionFeedback](
		rosaction.ServerConf[rosmsg.MoveBaseActionGoal]{
			Node: n, Name: "/move_base", StatusPeriod: 20 * time.Millisecond,
			OnGoal: func(g *rosaction.ServerGoal, _ *rosmsg.MoveBaseActionGoal) {
				r.srv.Accept(g)
				r.got <- g
			},
		})
	require.NoError(t, err)
	t.Cleanup(r.srv.Close)
	stop := make(chan struct{})
	go func() {
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				o := &nav_msgs.Odometry{Header: std_msgs.Header{Stamp: time.Now(), FrameId: "map"}}
				o.Pose.Pose.Orientation.W = 1
				odom.Write(o)
			}
		}
	}()
	t.Cleanup(func() { close(stop) })
	return r
}

// minimalConfig is the minimal base-only fixture on master uri.
func minimalConfig(t *testing.T, uri string, edit func(*hwconfig.ROSConf)) *hwconfig.Config {
	t.Helper()
	return loadConfig(t, "testdata/good/base-only-ros-minimal.yaml", uri, func(c *hwconfig.Config) {
		if edit != nil {
			edit(c.Transport.ROS)
		}
	})
}

func TestStart_OptionalInputsAbsent(t *testing.T) {
	tests := []struct {
		name string
		edit func(*hwconfig.ROSConf)
	}{
		{"e-stop and battery unset", nil},
		{"e-stop none", func(r *hwconfig.ROSConf) { r.EStopTopic = hwconfig.TopicNone }},
		{"battery none", func(r *hwconfig.ROSConf) { r.BatteryTopic = hwconfig.TopicNone }},
		{"joint states none on a robot without an arm", func(r *hwconfig.ROSConf) { r.JointStatesTopic = hwconfig.TopicNone }},
		{"detections none on a robot without a camera", func(r *hwconfig.ROSConf) { r.DetectionsTopic = hwconfig.TopicNone }},
		{"joint states and detections named on a robot without arm or camera", func(r *hwconfig.ROSConf) {
			r.JointStatesTopic, r.DetectionsTopic = "joint_states", "detections"
		}},
	}
	m := rostest.StartMaster(t)
	startSparseRobot(t, m, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Given a robot with only /odom and /move_base, and a config
			// without that optional input
			d := newDriver(t, minimalConfig(t, m.URI, tt.edit), func(c *ros.Conf) { c.ReadyTimeout = 5 * time.Second })

			// When the driver starts
			err := d.Start(context.Background())

			// Then the link comes up and the state carries no robot e-stop
			require.NoError(t, err)
			t.Cleanup(func() { _ = d.Close() })
			rostest.Eventually(t, 10*time.Second, d.LinkUp, "the link never came up")
			st := stateAfter(t, d, time.Now())
			require.False(t, st.EStop)
			require.Empty(t, st.Faults)
		})
	}
}

func TestStart_NamedInputsMustBePublished(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*hwconfig.ROSConf)
		missing string
	}{
		{"e-stop", func(r *hwconfig.ROSConf) { r.EStopTopic = "estop" }, "no publisher on /estop (std_msgs/Bool)"},
		{"battery", func(r *hwconfig.ROSConf) { r.BatteryTopic = "battery_state" }, "no publisher on /battery_state (sensor_msgs/BatteryState)"},
		{"odometry elsewhere", func(r *hwconfig.ROSConf) { r.OdomTopic = "/base/odom" }, "no publisher on /base/odom (nav_msgs/Odometry)"},
	}
	m := rostest.StartMaster(t)
	startSparseRobot(t, m, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Given a robot with only /odom and /move_base, and a config
			// naming an input it does not publish
			d := newDriver(t, minimalConfig(t, m.URI, tt.edit), func(c *ros.Conf) { c.ReadyTimeout = 400 * time.Millisecond })

			// When the driver starts
			err := d.Start(context.Background())

			// Then it refuses, naming exactly the missing input and its type
			var nr *ros.NotReadyError
			require.ErrorAs(t, err, &nr)
			require.Equal(t, []string{tt.missing}, nr.Missing)
		})
	}
}

func TestStart_NamedEStopIsRead(t *testing.T) {
	// Given a robot whose e-stop topic says engaged, and a config naming it
	m := rostest.StartMaster(t)
	startSparseRobot(t, m, map[string]any{
		"/estop":         &std_msgs.Bool{Data: true},
		"/battery_state": &sensor_msgs.BatteryState{Percentage: 0.5, Present: true},
	})
	d := newDriver(t, minimalConfig(t, m.URI, func(r *hwconfig.ROSConf) { r.EStopTopic, r.BatteryTopic = "estop", "battery_state" }), nil)

	// When the driver is up
	startDriver(t, d)

	// Then the state reports the robot's e-stop engaged and its battery
	rostest.Eventually(t, 10*time.Second, func() bool {
		st, ok := d.Latest()
		return ok && st.EStop && st.Battery.Percent == 50
	}, "the robot's e-stop and battery never reached the state")
}

func TestGoalSucceeded_OnlyForTheGoalTheRobotReportedReached(t *testing.T) {
	// Given a driver on a robot with only /odom and /move_base
	m := rostest.StartMaster(t)
	r := startSparseRobot(t, m, nil)
	d := newDriver(t, minimalConfig(t, m.URI, nil), nil)
	startDriver(t, d)
	cmd := func(id string) robot.Command {
		return robot.Command{ID: id, Kind: robot.CmdMoveBase, Base: &robot.BaseGoal{Target: robot.Pose2D{X: 1}}}
	}

	// When a goal is accepted and still running
	require.NoError(t, d.Send(context.Background(), cmd("task-1-1")))
	g := <-r.got

	// Then it is not reported reached
	_, ok := d.GoalSucceeded("task-1-1")
	require.False(t, ok)

	// When the robot reports it SUCCEEDED
	r.srv.Succeed(g, &rosmsg.MoveBaseActionResult{}, "goal reached, heading within 0.5 rad")

	// Then that goal, and only that one, is reported reached with the robot's words
	rostest.Eventually(t, 10*time.Second, func() bool { _, ok := d.GoalSucceeded("task-1-1"); return ok }, "never reported reached")
	text, _ := d.GoalSucceeded("task-1-1")
	require.Equal(t, "goal reached, heading within 0.5 rad", text)
	_, ok = d.GoalSucceeded("task-2-1")
	require.False(t, ok)

	// When the next goal is ABORTED instead
	require.NoError(t, d.Send(context.Background(), cmd("task-2-1")))
	g = <-r.got
	r.srv.Abort(g, &rosmsg.MoveBaseActionResult{}, "no plan")

	// Then it is a fault, never reported reached
	faultsSoon(t, d, time.Now(), "goal_aborted:/move_base")
	_, ok = d.GoalSucceeded("task-2-1")
	require.False(t, ok)
}
