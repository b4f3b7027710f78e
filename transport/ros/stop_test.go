package ros_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bluenviron/goroslib/v2"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/actionlib_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/nav_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/sensor_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/std_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/trajectory_msgs"
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

// What a stop sends the arm, observed on the robot's side of a real
// rosmaster: the trajectory goal is cancelled, and a hold trajectory, if
// one is sent at all, is at a joint reading no older than one control
// period and due no sooner than the joint velocity limits allow. A
// FollowJointTrajectory controller executes a point due at once
// (time_from_start 0) by jumping to it as fast as the hardware goes; a
// hold at an old reading pulls the arm back to where it was.

const armAction = "/arm_controller/follow_joint_trajectory"

type armServer = rosaction.Server[rosmsg.FollowJointTrajectoryActionGoal, rosmsg.FollowJointTrajectoryActionResult, rosmsg.FollowJointTrajectoryActionFeedback,
	*rosmsg.FollowJointTrajectoryActionGoal, *rosmsg.FollowJointTrajectoryActionResult, *rosmsg.FollowJointTrajectoryActionFeedback]

// armConfig is ros-sim.yaml without gripper and camera: a base with an
// arm, every joint read from joint_states.
func armConfig(t *testing.T, uri string, controlPeriod time.Duration) *hwconfig.Config {
	t.Helper()
	return loadConfig(t, "ros-sim.yaml", uri, func(c *hwconfig.Config) {
		c.Camera, c.Gripper = nil, nil
		c.Transport.ROS.GripperJoint, c.Transport.ROS.GripperAction, c.Transport.ROS.DetectionsTopic = "", "", ""
		delete(c.Actions, "grasp")
		delete(c.Actions, "release")
		if controlPeriod > 0 {
			c.Safety.ControlPeriod = hwconfig.Duration(controlPeriod)
		}
	})
}

// armGoalSeen is a trajectory goal as it reached the robot.
type armGoalSeen struct {
	sg *rosaction.ServerGoal
	// stamp is the goal id's stamp: the bridge's clock when it sent it.
	stamp time.Time
	names []string
	point trajectory_msgs.JointTrajectoryPoint
	// truth is where the arm was when the goal arrived.
	truth []float64
}

func (g armGoalSeen) String() string {
	return fmt.Sprintf("goal %s to %.3f due in %s (the arm was at %.3f)", g.sg.ID, g.point.Positions, g.point.TimeFromStart, g.truth)
}

// jointSample is one joint_states message as the robot published it.
type jointSample struct {
	at  time.Time
	pos []float64
}

// fakeArm is a mobile manipulator written against goroslib directly:
// odometry at 50 Hz, a move_base server that accepts everything, and an
// arm with a FollowJointTrajectory controller. The controller does what a
// real one does: it moves every joint to a goal's point at the speed that
// gets it there at time_from_start, no faster than the joint's limit (a
// point due at once: at the limit), preempts the previous goal, and holds
// the arm where it is when its goal is cancelled. joint_states stream
// every 5 ms until quiet is called, as if the state publisher hung while
// the controller drove on.
type fakeArm struct {
	joints []hwconfig.JointConf
	arm    *armServer

	mu      sync.Mutex
	from    []float64             // guarded by mu: the motion, from at t0 ...
	to      []float64             // guarded by mu: ... towards to ...
	speed   []float64             // guarded by mu: ... at speed (rad/s, per joint)
	t0      time.Time             // guarded by mu
	active  *rosaction.ServerGoal // guarded by mu
	goals   []armGoalSeen         // guarded by mu
	samples []jointSample         // guarded by mu
	stream  bool                  // guarded by mu
}

func startFakeArm(t *testing.T, m *rostest.Master, cfg *hwconfig.Config) *fakeArm {
	t.Helper()
	// Short socket timeouts: closing the node does not wait out writes to
	// the bridge's node, gone by then.
	n, err := goroslib.NewNode(ros.NodeConf(m.HostPort, "fake_arm", "127.0.0.1", quiet))
	require.NoError(t, err)
	t.Cleanup(n.Close)
	pub := func(topic string, msg any, latch bool) *goroslib.Publisher {
		p, err := goroslib.NewPublisher(goroslib.PublisherConf{Node: n, Topic: topic, Msg: msg, Latch: latch})
		require.NoError(t, err)
		t.Cleanup(p.Close)
		return p
	}
	odom := pub("/odom", &nav_msgs.Odometry{}, false)
	js := pub("/joint_states", &sensor_msgs.JointState{}, false)
	pub("/battery_state", &sensor_msgs.BatteryState{}, true).Write(&sensor_msgs.BatteryState{Percentage: 0.9, Voltage: 24})
	pub("/estop", &std_msgs.Bool{}, true).Write(&std_msgs.Bool{})
	nj := len(cfg.Arm.Joints)
	f := &fakeArm{joints: cfg.Arm.Joints, from: make([]float64, nj), to: make([]float64, nj), speed: make([]float64, nj), t0: time.Now(), stream: true}
	var base *baseServer
	base, err = rosaction.NewServer[rosmsg.MoveBaseActionGoal, rosmsg.MoveBaseActionResult, rosmsg.MoveBaseActionFeedback](
		rosaction.ServerConf[rosmsg.MoveBaseActionGoal]{
			Node: n, Name: "/move_base", StatusPeriod: 20 * time.Millisecond,
			OnGoal: func(g *rosaction.ServerGoal, _ *rosmsg.MoveBaseActionGoal) { base.Accept(g) },
		})
	require.NoError(t, err)
	t.Cleanup(base.Close)
	f.arm, err = rosaction.NewServer[rosmsg.FollowJointTrajectoryActionGoal, rosmsg.FollowJointTrajectoryActionResult, rosmsg.FollowJointTrajectoryActionFeedback](
		rosaction.ServerConf[rosmsg.FollowJointTrajectoryActionGoal]{
			Node: n, Name: armAction, StatusPeriod: 20 * time.Millisecond,
			OnGoal: f.onGoal, OnCancel: f.onCancel,
		})
	require.NoError(t, err)
	t.Cleanup(f.arm.Close)
	names := make([]string, nj)
	for i, j := range cfg.Arm.Joints {
		names[i] = j.Name
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tk := time.NewTicker(5 * time.Millisecond)
		defer tk.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tk.C:
			}
			now := time.Now()
			if i%4 == 0 {
				o := &nav_msgs.Odometry{Header: std_msgs.Header{Stamp: now, FrameId: "map"}}
				o.Pose.Pose.Orientation.W = 1
				odom.Write(o)
			}
			f.mu.Lock()
			if f.stream {
				pos, vel := f.stateLocked(now)
				js.Write(&sensor_msgs.JointState{Header: std_msgs.Header{Stamp: now}, Name: names, Position: pos, Velocity: vel})
				f.samples = append(f.samples, jointSample{at: now, pos: pos})
			}
			f.mu.Unlock()
		}
	})
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
	})
	return f
}

// stateLocked returns the arm's positions and velocities at t.
func (f *fakeArm) stateLocked(t time.Time) (pos, vel []float64) {
	pos, vel = make([]float64, len(f.from)), make([]float64, len(f.from))
	dt := t.Sub(f.t0).Seconds()
	for i := range f.from {
		d := f.to[i] - f.from[i]
		if step := f.speed[i] * dt; step < math.Abs(d) {
			pos[i] = f.from[i] + math.Copysign(step, d)
			vel[i] = math.Copysign(f.speed[i], d)
			continue
		}
		pos[i] = f.to[i]
	}
	return pos, vel
}

func (f *fakeArm) onGoal(g *rosaction.ServerGoal, m *rosmsg.FollowJointTrajectoryActionGoal) {
	now := time.Now()
	tr := m.Goal.Trajectory
	f.mu.Lock()
	truth, _ := f.stateLocked(now)
	seen := armGoalSeen{sg: g, stamp: m.GoalId.Stamp, names: tr.JointNames, truth: truth}
	if len(tr.Points) > 0 {
		seen.point = tr.Points[len(tr.Points)-1]
	}
	f.goals = append(f.goals, seen)
	prev := f.active
	if len(seen.point.Positions) == len(f.joints) {
		f.active = g
		// The controller's motion towards the point: each joint at the
		// speed that arrives at time_from_start, capped at its limit.
		f.from, f.to, f.t0 = truth, slices.Clone(seen.point.Positions), now
		for i, j := range f.joints {
			f.speed[i] = j.MaxVelocity
			if d := seen.point.TimeFromStart.Seconds(); d > 0 {
				f.speed[i] = math.Min(j.MaxVelocity, math.Abs(f.to[i]-f.from[i])/d)
			}
		}
	}
	f.mu.Unlock()
	if prev != nil && prev != g {
		f.arm.Canceled(prev, nil, "preempted by a newer trajectory")
	}
	if len(seen.point.Positions) != len(f.joints) {
		f.arm.Reject(g, nil, "bad trajectory")
		return
	}
	f.arm.Accept(g)
}

// onCancel holds the arm where it is, as joint_trajectory_controller does
// when its goal is cancelled.
func (f *fakeArm) onCancel(g *rosaction.ServerGoal) {
	now := time.Now()
	f.mu.Lock()
	if f.active == g {
		pos, _ := f.stateLocked(now)
		f.from, f.to, f.t0 = pos, slices.Clone(pos), now
		f.active = nil
	}
	f.mu.Unlock()
	f.arm.Canceled(g, nil, "cancelled")
}

// quiet stops the joint_states and returns the last one published.
func (f *fakeArm) quiet(t *testing.T) jointSample {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stream = false
	require.NotEmpty(t, f.samples, "no joint_states published yet")
	return f.samples[len(f.samples)-1]
}

// published reports whether pos is exactly a joint reading the robot
// published.
func (f *fakeArm) published(pos []float64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.samples {
		if slices.Equal(s.pos, pos) {
			return true
		}
	}
	return false
}

// goalsAfter returns the goals that reached the robot after g.
func (f *fakeArm) goalsAfter(g armGoalSeen) []armGoalSeen {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, s := range f.goals {
		if s.sg == g.sg {
			return slices.Clone(f.goals[i+1:])
		}
	}
	return nil
}

func (f *fakeArm) last(t *testing.T) armGoalSeen {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NotEmpty(t, f.goals, "no arm goal reached the robot")
	return f.goals[len(f.goals)-1]
}

// moveArm sends an arm command through the driver and returns the goal
// as it reached the robot (Send returns once the robot acknowledged it).
func moveArm(t *testing.T, d *ros.Driver, f *fakeArm, id string, q []float64, scale float64) armGoalSeen {
	t.Helper()
	require.NoError(t, d.Send(context.Background(), robot.Command{ID: id, Kind: robot.CmdMoveArm, Arm: &robot.ArmGoal{Positions: q, VelocityScale: scale}}))
	g := f.last(t)
	require.Equal(t, q, g.point.Positions, "the last goal on the robot is the command just sent")
	return g
}

// armMoving waits until the driver's state shows the arm moving.
func armMoving(t *testing.T, d *ros.Driver) {
	t.Helper()
	rostest.Eventually(t, 10*time.Second, func() bool {
		st, ok := d.Latest()
		return ok && len(st.Joints) > 0 && math.Abs(st.Joints[0].Velocity) > 0.05
	}, "the driver never saw the arm move")
}

func describe(gs []armGoalSeen) string {
	var b strings.Builder
	for _, g := range gs {
		b.WriteString("\n  " + g.String())
	}
	return b.String()
}

var (
	// reach is far enough that the arm is still moving when the tests stop it.
	reach = []float64{2.0, 1.2, -2.0, 1.5}
	// elsewhere is the command a test sends after a stop: on one topic goals
	// arrive in order, so whatever the stop sent the arm reached the robot
	// before it.
	elsewhere = []float64{-0.5, 0.2, -0.4, 0.3}
)

func TestStop_NeverSendsHoldFromStaleJointState(t *testing.T) {
	// Given an arm moving on a trajectory goal whose joint_states then go
	// quiet (the robot's state publisher hangs) while its controller drives
	// on, and a driver that still publishes states with the last joint
	// reading (a link timeout far away): the reading the driver holds ages
	m := rostest.StartMaster(t)
	cfg := armConfig(t, m.URI, 0)
	period := cfg.Safety.ControlPeriod.D()
	f := startFakeArm(t, m, cfg)
	d := newDriver(t, cfg, func(c *ros.Conf) { c.LinkTimeout = time.Minute })
	startDriver(t, d)
	motion := moveArm(t, d, f, "reach", reach, 0.25)
	armMoving(t, d)
	last := f.quiet(t)
	rostest.Eventually(t, 10*time.Second, func() bool {
		st, ok := d.Latest()
		return ok && slices.Equal(st.JointPositions(), last.pos)
	}, "the driver never got the last joint reading")
	// The driver has that reading; ten control periods later it is at
	// least that old, and the arm has moved on.
	time.Sleep(10 * period)
	cancels := watchCancelTopic(t, m, "arm_cancel_watch", armAction)

	// When the bridge stops
	require.NoError(t, d.Stop(context.Background()))

	// Then the robot gets its trajectory goal cancelled
	rostest.Eventually(t, 10*time.Second, func() bool { return cancels.cancel(motion) },
		"the trajectory goal was never cancelled on the robot")
	rostest.Eventually(t, 10*time.Second, func() bool { return f.arm.CancelRequested(motion.sg) },
		"the robot's controller never cancelled the trajectory goal")
	// and no hold: the next goal that reaches the robot is the bridge's
	// next command
	next := moveArm(t, d, f, "elsewhere", elsewhere, 0.25)
	after := f.goalsAfter(motion)
	require.Equal(t, []armGoalSeen{next}, after,
		"a stop sent the arm a hold at a joint reading at least %s old (the controller drives the arm back to it):%s", 10*period, describe(after))
}

func TestStop_HoldRespectsJointVelocityLimits(t *testing.T) {
	// Given an arm moving on a trajectory goal with its joint_states
	// streaming every 5 ms, and a control period (100 ms) that a reading
	// that frequent is always younger than: the driver may hold the arm
	const period = 100 * time.Millisecond
	m := rostest.StartMaster(t)
	cfg := armConfig(t, m.URI, period)
	f := startFakeArm(t, m, cfg)
	d := newDriver(t, cfg, nil)
	startDriver(t, d)
	cancels := watchCancelTopic(t, m, "arm_cancel_watch", armAction)
	motion := moveArm(t, d, f, "reach", reach, 0.25)
	armMoving(t, d)

	// When the bridge stops
	require.NoError(t, d.Stop(context.Background()))

	// Then the robot gets its trajectory goal cancelled and one hold
	rostest.Eventually(t, 10*time.Second, func() bool { return cancels.cancel(motion) },
		"the trajectory goal was never cancelled on the robot")
	rostest.Eventually(t, 10*time.Second, func() bool { return len(f.goalsAfter(motion)) > 0 },
		"no hold reached the robot although the joint reading was fresh")
	hold := f.goalsAfter(motion)[0]
	names := make([]string, len(cfg.Arm.Joints))
	for i, j := range cfg.Arm.Joints {
		names[i] = j.Name
	}
	require.Equal(t, names, hold.names)
	p := hold.point
	require.Equal(t, make([]float64, len(names)), p.Velocities, "a hold ends at rest")
	// at a joint reading the robot published
	require.True(t, f.published(p.Positions), "the hold %s is at no reading the robot published", hold)
	// never due at once: at least one control period
	require.GreaterOrEqual(t, p.TimeFromStart, period, "the hold %s is due sooner than one control period", hold)
	// and no sooner than every joint, at its velocity limit, gets from
	// where the arm was when the hold arrived to the hold
	for i, j := range cfg.Arm.Joints {
		need := math.Abs(p.Positions[i]-hold.truth[i]) / j.MaxVelocity
		require.GreaterOrEqual(t, p.TimeFromStart.Seconds(), need,
			"joint %s would have to exceed its %.2f rad/s limit to follow the hold %s", j.Name, j.MaxVelocity, hold)
	}
}

// cancelWatch records the cancel messages on one action's cancel topic.
type cancelWatch struct {
	mu   sync.Mutex
	msgs []actionlib_msgs.GoalID // guarded by mu
}

// cancel reports whether a cancel that covers g went out: g's id, or every
// goal stamped no later than the cancel (actionlib's rule).
func (w *cancelWatch) cancel(g armGoalSeen) bool {
	return slices.ContainsFunc(w.all(), func(c actionlib_msgs.GoalID) bool {
		return c.Id == g.sg.ID || c.Id == "" && (c.Stamp.IsZero() || !g.stamp.After(c.Stamp))
	})
}

func (w *cancelWatch) all() []actionlib_msgs.GoalID {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.msgs)
}

func watchCancelTopic(t *testing.T, m *rostest.Master, node, action string) *cancelWatch {
	t.Helper()
	w := &cancelWatch{}
	rostest.Subscribe(t, m.Node(t, node), action+"/cancel", func(msg *actionlib_msgs.GoalID) {
		w.mu.Lock()
		w.msgs = append(w.msgs, *msg)
		w.mu.Unlock()
	})
	rostest.Eventually(t, 10*time.Second, func() bool { return m.Connected("/robot_bridge", action+"/cancel", "/"+node) },
		"the cancel watcher on %s never connected", action)
	return w
}

func TestStopEcho_CancelsTheArmAgainButNeverRepeatsTheHold(t *testing.T) {
	// Given an arm moving on a trajectory goal with fresh joint readings,
	// and a node watching the arm's cancel topic
	const period = 100 * time.Millisecond
	m := rostest.StartMaster(t)
	cfg := armConfig(t, m.URI, period)
	f := startFakeArm(t, m, cfg)
	d := newDriver(t, cfg, nil)
	startDriver(t, d)
	cancels := watchCancelTopic(t, m, "arm_cancel_watch", armAction)
	motion := moveArm(t, d, f, "reach", reach, 0.25)
	armMoving(t, d)

	// When the bridge stops, and its stop is echoed for late subscribers
	require.NoError(t, d.Stop(context.Background()))

	// Then the echo repeats the arm's cancel, with the stop's own stamp
	rostest.Eventually(t, 10*time.Second, func() bool { return len(cancels.all()) >= 3 },
		"the stop's echo never repeated the arm's cancel (a robot whose cancel subscriber connected late would drive on)")
	rostest.Eventually(t, 10*time.Second, func() bool { return len(f.goalsAfter(motion)) > 0 }, "no hold reached the robot")
	// and ends with the next command, which reaches the robot right after
	// the one hold: the echo never sent the hold again
	next := moveArm(t, d, f, "elsewhere", elsewhere, 0.25)
	after := f.goalsAfter(motion)
	require.Len(t, after, 2, "goals after the stop:%s", describe(after))
	hold := after[0]
	require.Equal(t, next, after[1])
	for _, c := range cancels.all() {
		require.Empty(t, c.Id, "a stop cancels every goal")
		require.True(t, c.Stamp.Equal(cancels.all()[0].Stamp), "the echo repeats the stop's cancel, stamped %s, not %s", cancels.all()[0].Stamp, c.Stamp)
		require.True(t, hold.stamp.After(c.Stamp), "the hold (stamped %s) must survive the cancel stamped %s", hold.stamp, c.Stamp)
	}
	require.False(t, f.arm.CancelRequested(hold.sg), "no cancel of the stop's echo may cancel its hold")
}

func TestStop_OverTheSimulatorNodeTheArmIsNeverSentBack(t *testing.T) {
	tests := []struct {
		name string
		// period is safety.control_period.
		period time.Duration
		// stale drops the simulator's state publications before the stop
		// (drop_state), so that the driver's joint reading ages.
		stale bool
	}{
		{name: "joint reading older than a control period: the cancel alone", period: 20 * time.Millisecond, stale: true},
		{name: "fresh joint reading: a hold the arm follows within its limits", period: 200 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given the simulator node with its arm moving on a trajectory
			// goal, supervised (heartbeats) until the stop
			m := rostest.StartMaster(t)
			cfg := loadConfig(t, "ros-sim.yaml", m.URI, func(c *hwconfig.Config) { c.Safety.ControlPeriod = hwconfig.Duration(tc.period) })
			n, err := simnode.New(simnode.Conf{Config: cfg, Env: rosIP, Logger: quiet})
			require.NoError(t, err)
			require.NoError(t, n.Start(context.Background()))
			t.Cleanup(func() { _ = n.Close() })
			d := newDriver(t, cfg, func(c *ros.Conf) { c.LinkTimeout = time.Minute })
			startDriver(t, d)
			ctx := context.Background()
			beat := make(chan struct{})
			beating := make(chan struct{})
			go func() {
				defer close(beating)
				tk := time.NewTicker(20 * time.Millisecond)
				defer tk.Stop()
				for {
					select {
					case <-beat:
						return
					case <-tk.C:
						_ = d.Refresh(ctx)
					}
				}
			}()
			stopBeat := sync.OnceFunc(func() { close(beat); <-beating })
			t.Cleanup(stopBeat)
			rostest.Eventually(t, 10*time.Second, func() bool { st, ok := d.Latest(); return ok && len(st.Joints) == 4 }, "no arm state")
			require.NoError(t, d.Send(ctx, robot.Command{ID: "reach", Kind: robot.CmdMoveArm, Arm: &robot.ArmGoal{Positions: reach, VelocityScale: 0.5}}))
			armMoving(t, d)
			if tc.stale {
				// The robot's state publications stop while the arm drives
				// on; ten of them later the driver's reading is 200 ms old.
				_, err := n.Sim().Inject(sim.Fault{Kind: sim.FaultDropState})
				require.NoError(t, err)
				dropped := n.Sim().Counters().StatesDropped
				rostest.Eventually(t, 10*time.Second, func() bool { return n.Sim().Counters().StatesDropped >= dropped+10 },
					"the simulator kept publishing")
			}
			before := len(n.Sim().CommandLog())

			// When the bridge stops
			require.NoError(t, d.Stop(ctx))
			stopBeat()

			// Then the arm comes to rest short of the trajectory's end
			rostest.Eventually(t, 10*time.Second, func() bool { return !n.Sim().Truth().ArmGoal }, "the arm never came to rest")
			require.Less(t, n.Sim().Truth().Joints[0].Position, reach[0]/2, "the arm ran on to the trajectory's end")
			// and, up to the bridge's next command, no arm command but a
			// hold the arm follows below its velocity limits
			require.NoError(t, d.Send(ctx, robot.Command{ID: "elsewhere", Kind: robot.CmdMoveArm, Arm: &robot.ArmGoal{Positions: elsewhere, VelocityScale: 0.25}}))
			var arm []sim.LogEntry
			for _, e := range n.Sim().CommandLog()[before:] {
				if e.Op == "command" && e.Command != nil && e.Command.Arm != nil {
					arm = append(arm, e)
				}
			}
			require.NotEmpty(t, arm)
			require.Equal(t, elsewhere, arm[len(arm)-1].Command.Arm.Positions, "the bridge's next command is the last arm command")
			for _, e := range arm[:len(arm)-1] {
				a := e.Command.Arm
				require.False(t, tc.stale, "a stop sent the arm back to a joint reading at least 200 ms old: %.3f at %.0f %% speed", a.Positions, 100*a.VelocityScale)
				require.Less(t, a.VelocityScale, 1.0, "the stop's hold %.3f drives the arm at its full speed", a.Positions)
			}
		})
	}
}
