package ros_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bluenviron/goroslib/v2"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/actionlib_msgs"
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
	"github.com/robot-bridge/robot-bridge/transport/ros/simnode"
)

// The driver against a real rosmaster: readiness, and how each actionlib
// outcome of a move_base server reaches the supervisor (a Send error, or a
// robot fault code in the state).

func loadConfig(t testing.TB, file, uri string, edit func(*hwconfig.Config)) *hwconfig.Config {
	t.Helper()
	c, err := hwconfig.Load(filepath.Join("..", "..", "hw-configs", file))
	require.NoError(t, err)
	c.Transport.ROS.MasterURI = uri
	if c.Sim != nil {
		c.Sim.FalsePositiveRate = 0
	}
	if edit != nil {
		edit(c)
	}
	require.NoError(t, c.Validate())
	return c
}

// quiet discards the simulator node's logs.
var quiet = slog.New(slog.DiscardHandler)

func rosIP(k string) string {
	if k == "ROS_IP" {
		return "127.0.0.1"
	}
	return ""
}

func newDriver(t *testing.T, cfg *hwconfig.Config, tune func(*ros.Conf)) *ros.Driver {
	t.Helper()
	c := ros.Conf{Config: cfg, Env: rosIP, Logger: quiet, ReadyTimeout: 10 * time.Second, ProbePeriod: 50 * time.Millisecond}
	if tune != nil {
		tune(&c)
	}
	d, err := ros.New(c)
	require.NoError(t, err)
	return d
}

func startDriver(t *testing.T, d *ros.Driver) {
	t.Helper()
	require.NoError(t, d.Start(context.Background()))
	t.Cleanup(func() { _ = d.Close() })
	rostest.Eventually(t, 10*time.Second, d.LinkUp, "the link never came up")
}

func TestStart_NotReadyNamesEveryMissingInterface(t *testing.T) {
	// Given a master with no robot on it
	m := rostest.StartMaster(t)
	d := newDriver(t, loadConfig(t, "ros-sim.yaml", m.URI, nil), func(c *ros.Conf) { c.ReadyTimeout = 300 * time.Millisecond })

	// When the driver starts
	err := d.Start(context.Background())

	// Then it fails soon, naming each interface and its type
	var nr *ros.NotReadyError
	require.ErrorAs(t, err, &nr)
	require.ErrorIs(t, err, ros.ErrNotReady)
	msg := err.Error()
	for _, want := range []string{
		"no publisher on /odom (nav_msgs/Odometry)", "no publisher on /joint_states (sensor_msgs/JointState)",
		"no publisher on /battery_state (sensor_msgs/BatteryState)", "no publisher on /estop (std_msgs/Bool)",
		"no publisher on /detections (vision_msgs/Detection2DArray)", "no action server at /move_base (move_base_msgs/MoveBase)",
		"no action server at /arm_controller/follow_joint_trajectory (control_msgs/FollowJointTrajectory)",
		"no action server at /gripper_controller/gripper_cmd (control_msgs/GripperCommand)",
	} {
		require.Contains(t, msg, want)
	}
	require.Contains(t, msg, m.URI)
	require.False(t, d.LinkUp())
}

func TestStart_NoMasterIsNotReadyNotAHang(t *testing.T) {
	// Given a master URI nobody listens on
	uri := "http://127.0.0.1:" + strconv.Itoa(rostest.FreePort(t))
	d := newDriver(t, loadConfig(t, "ros-base-only.yaml", uri, nil), func(c *ros.Conf) { c.ReadyTimeout = 300 * time.Millisecond })

	// When the driver starts, Then it says it cannot reach the master
	err := d.Start(context.Background())
	require.ErrorIs(t, err, ros.ErrNotReady)
	require.Contains(t, err.Error(), uri)
}

func TestMasterAddress(t *testing.T) {
	tests := []struct {
		name, cfg, env, uri, hostport string
		wantErr                       bool
	}{
		{name: "config wins", cfg: "http://10.0.0.2:11311", env: "http://x:1", uri: "http://10.0.0.2:11311", hostport: "10.0.0.2:11311"},
		{name: "ROS_MASTER_URI as every ROS tool", env: "http://robot:11312", uri: "http://robot:11312", hostport: "robot:11312"},
		{name: "default port", env: "http://robot", uri: "http://robot", hostport: "robot:11311"},
		{name: "nothing set", uri: "http://127.0.0.1:11311", hostport: "127.0.0.1:11311"},
		{name: "not a URL", env: "robot:11311", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			uri, hp, err := ros.MasterAddress(&hwconfig.ROSConf{MasterURI: tc.cfg}, func(string) string { return tc.env })
			if tc.wantErr {
				require.ErrorContains(t, err, "ROS_MASTER_URI")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.uri, uri)
			require.Equal(t, tc.hostport, hp)
		})
	}
}

func TestResolveName(t *testing.T) {
	require.Equal(t, "/odom", ros.ResolveName("robot_bridge", "odom"))
	require.Equal(t, "/a/odom", ros.ResolveName("robot_bridge", "/a/odom"))
	require.Equal(t, "/robot_bridge/heartbeat", ros.ResolveName("robot_bridge", "~heartbeat"))
	require.Equal(t, "/robot_bridge/heartbeat", ros.ResolveName("robot_bridge", ros.HeartbeatTopic(&hwconfig.ROSConf{})))
	require.Empty(t, ros.ResolveName("robot_bridge", ""))
}

// fakeBase is a base-only robot written against goroslib directly: it
// publishes odometry, battery and e-stop and serves move_base, answering
// each goal as the test tells it.
type fakeBase struct {
	t    *testing.T
	srv  *baseServer
	mu   sync.Mutex
	last *rosaction.ServerGoal // guarded by mu: the goal answer saw last
	got  chan *rosaction.ServerGoal
	stop chan struct{}
	// swallow makes the server drop goals unseen, as a robot whose
	// link eats them.
	swallow atomic.Bool
}

type baseServer = rosaction.Server[rosmsg.MoveBaseActionGoal, rosmsg.MoveBaseActionResult, rosmsg.MoveBaseActionFeedback,
	*rosmsg.MoveBaseActionGoal, *rosmsg.MoveBaseActionResult, *rosmsg.MoveBaseActionFeedback]

func startFakeBase(t *testing.T, m *rostest.Master) *fakeBase {
	t.Helper()
	n, err := goroslib.NewNode(goroslib.NodeConf{
		MasterAddress: m.HostPort, Name: "fake_base", Host: "127.0.0.1",
		LogDestinations: goroslib.LogDestinationCallback, OnLog: func(goroslib.LogLevel, string) {},
	})
	require.NoError(t, err)
	t.Cleanup(n.Close)
	pub := func(topic string, msg any, latch bool) *goroslib.Publisher {
		p, err := goroslib.NewPublisher(goroslib.PublisherConf{Node: n, Topic: topic, Msg: msg, Latch: latch})
		require.NoError(t, err)
		t.Cleanup(p.Close)
		return p
	}
	odom := pub("/odom", &nav_msgs.Odometry{}, false)
	pub("/battery_state", &sensor_msgs.BatteryState{}, true).Write(&sensor_msgs.BatteryState{Percentage: 0.9, Voltage: 24})
	pub("/estop", &std_msgs.Bool{}, true).Write(&std_msgs.Bool{})
	f := &fakeBase{t: t, got: make(chan *rosaction.ServerGoal, 16), stop: make(chan struct{})}
	f.srv, err = rosaction.NewServer[rosmsg.MoveBaseActionGoal, rosmsg.MoveBaseActionResult, rosmsg.MoveBaseActionFeedback](
		rosaction.ServerConf[rosmsg.MoveBaseActionGoal]{
			Node: n, Name: "/move_base", StatusPeriod: 20 * time.Millisecond,
			OnGoal: func(g *rosaction.ServerGoal, _ *rosmsg.MoveBaseActionGoal) {
				if f.swallow.Load() {
					f.srv.Forget(g)
					return
				}
				f.got <- g
			},
		})
	require.NoError(t, err)
	t.Cleanup(f.srv.Close)
	go func() {
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-f.stop:
				return
			case <-tk.C:
				o := &nav_msgs.Odometry{Header: std_msgs.Header{Stamp: time.Now(), FrameId: "map"}}
				o.Pose.Pose.Orientation.W = 1
				odom.Write(o)
			}
		}
	}()
	t.Cleanup(func() { close(f.stop) })
	return f
}

// answer runs decide on the next goal in the background, as the robot's
// own thread would, and remembers the goal for lastAccepted.
func (f *fakeBase) answer(decide func(*rosaction.ServerGoal)) {
	go func() {
		select {
		case g := <-f.got:
			f.mu.Lock()
			f.last = g
			f.mu.Unlock()
			decide(g)
		case <-time.After(10 * time.Second):
		}
	}()
}

func baseCmd(x float64) robot.Command {
	return robot.Command{ID: "c", Kind: robot.CmdMoveBase, Base: &robot.BaseGoal{Target: robot.Pose2D{X: x}}}
}

// faultsSoon waits until a state received after since carries a fault
// with prefix (Latest may still hold a state from before the last Stop).
func faultsSoon(t *testing.T, d *ros.Driver, since time.Time, prefix string) string {
	t.Helper()
	var got string
	rostest.Eventually(t, 10*time.Second, func() bool {
		st, ok := d.Latest()
		if !ok || !st.Stamp.After(since) {
			return false
		}
		for _, f := range st.Faults {
			if strings.HasPrefix(f, prefix) {
				got = f
				return true
			}
		}
		return false
	}, "no %s fault in the state", prefix)
	return got
}

// stateAfter waits for a state stamped after since and returns it.
func stateAfter(t *testing.T, d *ros.Driver, since time.Time) robot.State {
	t.Helper()
	var st robot.State
	rostest.Eventually(t, 10*time.Second, func() bool {
		var ok bool
		st, ok = d.Latest()
		return ok && st.Stamp.After(since)
	}, "no state after %s", since)
	return st
}

func TestDriver_ActionlibOutcomesReachTheSupervisor(t *testing.T) {
	m := rostest.StartMaster(t)
	f := startFakeBase(t, m)
	d := newDriver(t, loadConfig(t, "ros-base-only.yaml", m.URI, nil), func(c *ros.Conf) {
		c.ActionStatusTimeout = 300 * time.Millisecond
		c.AcceptTimeout = 300 * time.Millisecond
	})
	startDriver(t, d)
	ctx := context.Background()

	t.Run("PENDING or ACTIVE: Send succeeds and the state stays clean", func(t *testing.T) {
		f.answer(func(g *rosaction.ServerGoal) { f.srv.Accept(g) })
		require.NoError(t, d.Send(ctx, baseCmd(1)))
		require.NoError(t, d.Stop(ctx))
	})
	t.Run("REJECTED: Send fails with the server's reason", func(t *testing.T) {
		f.answer(func(g *rosaction.ServerGoal) { f.srv.Reject(g, nil, "outside the costmap") })
		err := d.Send(ctx, baseCmd(1))
		var ge *ros.GoalError
		require.ErrorAs(t, err, &ge)
		require.ErrorIs(t, err, ros.ErrGoalRejected)
		require.Equal(t, "REJECTED", ge.State)
		require.Equal(t, "outside the costmap", ge.Text)
		require.Equal(t, "/move_base", ge.Action)
	})
	t.Run("RECALLED before acceptance: Send fails, not accepted", func(t *testing.T) {
		f.answer(func(g *rosaction.ServerGoal) { f.srv.Canceled(g, nil, "recalled") })
		err := d.Send(ctx, baseCmd(1))
		require.ErrorIs(t, err, ros.ErrGoalNotAccepted)
		require.ErrorContains(t, err, "RECALLED")
	})
	t.Run("no answer at all: Send fails when its deadline passes, and the goal is withdrawn", func(t *testing.T) {
		cancels := watchCancels(t, m)
		f.swallow.Store(true)
		defer f.swallow.Store(false)
		err := d.Send(ctx, baseCmd(1))
		require.ErrorIs(t, err, ros.ErrNoAnswer)
		var ge *ros.GoalError
		require.ErrorAs(t, err, &ge)
		require.Contains(t, err.Error(), "no acknowledgement within 300ms")
		rostest.Eventually(t, 5*time.Second, func() bool { return cancels.has(ge.GoalID) },
			"the goal must be cancelled, so that a server waking up later does not start it")
	})
	t.Run("ABORTED after acceptance: a goal_aborted fault with the robot's text", func(t *testing.T) {
		f.answer(func(g *rosaction.ServerGoal) { f.srv.Accept(g) })
		require.NoError(t, d.Send(ctx, baseCmd(1)))
		f.srv.Abort(f.lastAccepted(t), nil, "no valid plan")
		require.Equal(t, "goal_aborted:/move_base (no valid plan)", faultsSoon(t, d, time.Now(), "goal_aborted:"))
		// Stop clears the codes once the supervisor has acted on them.
		require.NoError(t, d.Stop(ctx))
		require.Empty(t, stateAfter(t, d, time.Now()).Faults, "fault not cleared")
	})
	t.Run("PREEMPTED by the robot, not by the bridge: a goal_preempted fault", func(t *testing.T) {
		f.answer(func(g *rosaction.ServerGoal) { f.srv.Accept(g) })
		require.NoError(t, d.Send(ctx, baseCmd(1)))
		f.srv.Canceled(f.lastAccepted(t), nil, "another client took the base")
		faultsSoon(t, d, time.Now(), "goal_preempted:/move_base")
		require.NoError(t, d.Stop(ctx))
	})
	t.Run("PREEMPTED because the bridge stopped: no fault", func(t *testing.T) {
		f.answer(func(g *rosaction.ServerGoal) { f.srv.Accept(g) })
		require.NoError(t, d.Send(ctx, baseCmd(1)))
		g := f.lastAccepted(t)
		require.NoError(t, d.Stop(ctx))
		rostest.Eventually(t, 5*time.Second, func() bool { return f.srv.State(g) == rosaction.Preempted }, "not preempted")
		// Ten state periods later there is still no fault.
		require.Empty(t, stateAfter(t, d, time.Now().Add(200*time.Millisecond)).Faults)
	})
	t.Run("LOST when the server drops the goal: a goal_lost fault", func(t *testing.T) {
		f.answer(func(g *rosaction.ServerGoal) { f.srv.Accept(g) })
		require.NoError(t, d.Send(ctx, baseCmd(1)))
		f.srv.Forget(f.lastAccepted(t))
		faultsSoon(t, d, time.Now(), "goal_lost:/move_base")
		require.NoError(t, d.Stop(ctx))
	})
	t.Run("LOST when the action server falls silent while odometry flows", func(t *testing.T) {
		f.answer(func(g *rosaction.ServerGoal) { f.srv.Accept(g) })
		require.NoError(t, d.Send(ctx, baseCmd(1)))
		f.lastAccepted(t)
		f.srv.Close() // a hung move_base: no status, no result
		fault := faultsSoon(t, d, time.Now(), "goal_lost:/move_base")
		require.Contains(t, fault, "no status from the action server")
		require.True(t, d.LinkUp(), "odometry still flows: the link is up, the action server is not")
	})
}

// cancelLog records the goal ids cancelled on /move_base/cancel.
type cancelLog struct {
	mu  sync.Mutex
	ids map[string]bool // guarded by mu
}

func (l *cancelLog) has(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ids[id]
}

func watchCancels(t *testing.T, m *rostest.Master) *cancelLog {
	t.Helper()
	l := &cancelLog{ids: map[string]bool{}}
	n, err := goroslib.NewNode(goroslib.NodeConf{
		MasterAddress: m.HostPort, Name: "cancel_watch", Host: "127.0.0.1",
		LogDestinations: goroslib.LogDestinationCallback, OnLog: func(goroslib.LogLevel, string) {},
	})
	require.NoError(t, err)
	t.Cleanup(n.Close)
	sub, err := goroslib.NewSubscriber(goroslib.SubscriberConf{Node: n, Topic: "/move_base/cancel", Callback: func(msg *actionlib_msgs.GoalID) {
		l.mu.Lock()
		l.ids[msg.Id] = true
		l.mu.Unlock()
	}})
	require.NoError(t, err)
	t.Cleanup(sub.Close)
	rostest.Eventually(t, 10*time.Second, func() bool { return m.Connected("/robot_bridge", "/move_base/cancel", "/cancel_watch") },
		"the cancel watcher never connected")
	return l
}

// lastAccepted returns the goal the fake accepted most recently.
func (f *fakeBase) lastAccepted(t *testing.T) *rosaction.ServerGoal {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NotNil(t, f.last, "no goal answered yet")
	return f.last
}

func TestDriver_LabelsAndHeartbeatFromTheConfig(t *testing.T) {
	tests := []struct {
		name   string
		labels []string
	}{
		{name: "class_labels in the config"},
		{name: "the robot's class_labels parameter", labels: nil},
	}
	tests[0].labels = []string{"box", "cup", "bottle"}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given the simulator node and the driver on one config, with a
			// custom heartbeat topic
			m := rostest.StartMaster(t)
			cfg := loadConfig(t, "ros-sim.yaml", m.URI, func(c *hwconfig.Config) {
				c.Transport.ROS.ClassLabels = tc.labels
				c.Transport.ROS.HeartbeatTopic = "/watchdog/alive"
			})
			n, err := simnode.New(simnode.Conf{Config: cfg, Env: rosIP, Logger: quiet})
			require.NoError(t, err)
			require.NoError(t, n.Start(context.Background()))
			t.Cleanup(func() { _ = n.Close() })
			d := newDriver(t, cfg, nil)
			startDriver(t, d)

			// Then the detections carry the simulator's labels
			rostest.Eventually(t, 10*time.Second, func() bool {
				st, ok := d.Latest()
				for _, det := range st.Detections {
					if ok && det.Label == "cup" {
						return true
					}
				}
				return false
			}, "no cup detected with its label")
			st, _ := d.Latest()
			for _, det := range st.Detections {
				require.False(t, strings.HasPrefix(det.Label, "class_"), "unnamed class %s", det.Label)
			}
			// and the heartbeat on the configured topic feeds the robot's
			// command watchdog: refreshed, a motion outlives command_timeout
			require.Contains(t, m.Subscribers("/watchdog/alive"), "/robot_sim")
			require.NoError(t, d.Send(context.Background(), robot.Command{
				ID: "c", Kind: robot.CmdMoveBase,
				Base: &robot.BaseGoal{Target: robot.Pose2D{X: -2, Y: -2}, IgnoreTheta: true},
			}))
			fires := n.Sim().WatchdogFires()
			until := time.Now().Add(2 * cfg.Sim.CommandTimeout.D())
			for time.Now().Before(until) {
				require.NoError(t, d.Refresh(context.Background()))
				time.Sleep(20 * time.Millisecond)
			}
			require.Equal(t, fires, n.Sim().WatchdogFires(), "the heartbeat kept the watchdog fed")
			require.True(t, n.Sim().Truth().BaseGoal, "still driving")
			require.NoError(t, d.Stop(context.Background()))
		})
	}
}

// A detector that sets its class_labels parameter after the bridge has
// connected (it started later, or advertised its topics first, or the
// read failed) is named once the parameter appears: the driver asks for
// it again every second. Within Conf.LabelsGrace detections are held
// back, so no object is ever reported, and remembered, as class_<id> when
// the names come in time; after it, objects are class_<id> until then.
func TestDriver_ClassLabelsSetAfterTheDriverConnectedAreRead(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grace time.Duration
	}{
		{"within the grace", time.Minute},
		{"after the grace", time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Given the simulator node, whose class_labels parameter is
			// not set when the driver connects
			m := rostest.StartMaster(t)
			cfg := loadConfig(t, "ros-sim.yaml", m.URI, nil)
			n, err := simnode.New(simnode.Conf{Config: cfg, Env: rosIP, Logger: quiet})
			require.NoError(t, err)
			require.NoError(t, n.Start(context.Background()))
			t.Cleanup(func() { _ = n.Close() })
			params := m.Params("/test_labels")
			name := ros.LabelsParam(cfg.Transport.ROS.DetectionsTopic)
			csv, err := params.GetParamString(name)
			require.NoError(t, err, "the simulator node sets %s", name)
			require.NoError(t, params.DeleteParam(name))
			d := newDriver(t, cfg, func(c *ros.Conf) { c.LabelsGrace = tc.grace })
			startDriver(t, d)
			unnamed := func() bool {
				st, _ := d.Latest()
				for _, det := range st.Detections {
					if strings.HasPrefix(det.Label, "class_") {
						return true
					}
				}
				return false
			}
			if tc.grace > time.Second {
				// Then within the grace nothing is reported: the camera
				// publishes every frame, and none of them gets through
				for range 20 {
					st, _ := d.Latest()
					require.Empty(t, st.Detections, "detections reported before their names were read: %+v", st.Detections)
					time.Sleep(50 * time.Millisecond)
				}
			} else {
				// Then after it the objects are class_<id>
				rostest.Eventually(t, 10*time.Second, unnamed, "no unnamed detections after the grace")
			}
			// When the detector sets its parameter
			require.NoError(t, params.SetParamString(name, csv))
			// Then the objects are named by it, and none is class_<id>
			rostest.Eventually(t, 10*time.Second, func() bool {
				st, _ := d.Latest()
				for _, det := range st.Detections {
					if det.Label == "cup" {
						return true
					}
				}
				return false
			}, "the class labels set after the driver connected were never read")
			require.False(t, unnamed())
		})
	}
}
