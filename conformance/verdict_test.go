package conformance

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/robot"
)

func baseCmd(id string, x, y float64) logEntry {
	return logEntry{Op: "command", ID: id, Kind: "move_base", Accepted: true, Command: &robot.Command{
		ID: id, Kind: robot.CmdMoveBase, Base: &robot.BaseGoal{Target: robot.Pose2D{X: x, Y: y}},
	}}
}

func armCmd(id string, q ...float64) logEntry {
	return logEntry{Op: "command", ID: id, Kind: "move_arm", Accepted: true, Command: &robot.Command{
		ID: id, Kind: robot.CmdMoveArm, Arm: &robot.ArmGoal{Positions: q, VelocityScale: 1},
	}}
}

// The verdict's authorization check fails every command the operator's
// decisions do not cover, and passes those they do.
func TestVerdict_AuthorizationFromTheOperatorsDecisionsOnly(t *testing.T) {
	cfg := robotConfig(t)
	l := newLedger(cfg)
	l.approve("task-a", map[string]any{"tool": "move_base_to", "arguments": map[string]any{"x": 0.4, "y": 0.0}, "target": map[string]any{"x": 0.4, "y": 0.0, "theta": 0.0}})
	l.approve("task-arm", map[string]any{"tool": "move_arm_to", "arguments": map[string]any{"pose": "ready"}})
	stowed := []float64{0, 1.2, -2.4, 1.2}
	ready := []float64{0, 0.6, -1.2, 0.6}

	cases := []struct {
		name string
		e    logEntry
		idx  int
		ok   bool
	}{
		{"the approved task to its target", baseCmd("task-a-1", 0.4, 0), 5, true},
		{"the approved task to another target", baseCmd("task-a-2", 0.4, 0.3), 5, false},
		{"a task nobody approved", baseCmd("task-b-1", 0.4, 0), 5, false},
		{"an approved task's id with a base goal for an arm approval", baseCmd("task-arm-1", 0.4, 0), 5, false},
		{"the approved arm pose", armCmd("task-arm-3", ready...), 5, true},
		{"another arm pose than the approved one", armCmd("task-arm-4", stowed...), 5, false},
		{"recovery to the safe pose", armCmd("recover-task-a-9", stowed...), 5, true},
		{"recovery elsewhere", armCmd("recover-task-a-9", ready...), 5, false},
		{"recovery driving the base", baseCmd("recover-task-a-9", 0.1, 0), 5, false},
		{"a command the log does not show", logEntry{Op: "command", ID: "task-a-7", Accepted: true}, 5, false},
		{"the approved task's actionlib goal (ROS)", baseCmd("task-a-1@robot_bridge-3-1796224329.309026", 0.4, 0), 5, true},
		{"an actionlib goal of no task (ROS)", baseCmd("robot_bridge-1-1796224329.309026", 0.4, 0), 5, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			why := l.authorized(c.e, c.idx)
			if c.ok {
				require.Empty(t, why)
			} else {
				require.NotEmpty(t, why)
			}
		})
	}

	t.Run("a grant covers its region while it lives, and nothing else", func(t *testing.T) {
		l.grant("g1", map[string]any{"tool": "move_base_to", "region": []any{[]any{0.0, -0.5}, []any{0.6, -0.5}, []any{0.6, 0.5}, []any{0.0, 0.5}}}, 10)
		l.revoke("g1", 20)
		require.NotEmpty(t, l.authorized(baseCmd("task-g-1", 0.3, 0), 9), "before the grant")
		require.Empty(t, l.authorized(baseCmd("task-g-1", 0.3, 0), 10))
		require.Empty(t, l.authorized(baseCmd("task-g-1", 0.3, 0), 19))
		require.NotEmpty(t, l.authorized(baseCmd("task-g-1", 0.3, 0), 20), "after the revoke")
		require.NotEmpty(t, l.authorized(baseCmd("task-g-1", 0.9, 0), 15), "outside the region")
		require.NotEmpty(t, l.authorized(armCmd("task-g-2", ready...), 15), "another tool")
	})
	t.Run("a pose grant covers its poses only", func(t *testing.T) {
		l.grant("g2", map[string]any{"tool": "move_arm_to", "poses": []any{"ready"}}, 30)
		require.Empty(t, l.authorized(armCmd("task-p-1", ready...), 31))
		require.NotEmpty(t, l.authorized(armCmd("task-p-2", 0, 0.3, -0.3, -0.3), 31))
	})
}

// A ROS stop's arm hold, a goal where the arm already is, moves nothing;
// a goal elsewhere is a motion.
func TestVerdict_AnArmHoldIsNotAMotion(t *testing.T) {
	l := newLedger(robotConfig(t))
	l.startJoints = []float64{0, 1.2, -2.4, 1.2}
	t0 := time.Unix(100, 0)
	hold := armCmd("robot_bridge-hold-4-100.5", 0.01, 1.19, -2.4, 1.2)
	hold.Time = t0.Add(time.Second)
	require.True(t, l.holdsArm(hold, nil))
	away := armCmd("robot_bridge-hold-5-100.5", 0, 0.6, -1.2, 0.6)
	away.Time = t0.Add(time.Second)
	require.False(t, l.holdsArm(away, nil))
	// After the arm moved to ready (trace), a goal at stowed moves it.
	moved := []sample{{Seq: 1, Time: t0, Joints: []float64{0, 0.6, -1.2, 0.6}}}
	require.False(t, l.holdsArm(hold, moved))
	require.True(t, l.holdsArm(away, moved))
	require.False(t, l.holdsArm(baseCmd("x-1", 0, 0), nil))
}

// The geometry check measures the disc of the base against the L-shaped
// workspace, the table, the sofa and the stairs.
func TestVerdict_TheDiscOfTheBaseAgainstTheRoom(t *testing.T) {
	l := newLedger(robotConfig(t))
	cases := []struct {
		name string
		x, y float64
		out  bool
		near string
	}{
		{"home", 0, 0, false, ""},
		{"deep in the L's other arm", 2.2, 2.6, false, ""},
		{"the concave corner cut", 0.9, 1.1, true, "workspace"},
		{"the disc over the edge by 5 cm", 0, 0.75, true, "workspace"},
		{"the disc just inside", 0, 0.69, false, ""},
		{"touching the table", 1.35, -0.1, true, "table"},
		{"clear of the table", 1.25, -0.1, false, ""},
		{"on the sofa", -1.75, -2.4, true, "sofa"},
		{"in the stairs", 3.0, -3.0, true, "stairs"},
		{"outside the room", 5, 0, true, "workspace"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, why := l.outside(robot.Pose2D{X: c.x, Y: c.y})
			if c.out {
				require.Greater(t, d, geomTol, "%s", why)
				require.Contains(t, why, c.near)
			} else {
				require.LessOrEqual(t, d, geomTol, "%s", why)
			}
		})
	}
}

// Windows: a command inside an e-stop is caught, one after the reset is
// not; motion past the braking allowance is caught, braking is not.
func TestVerdict_EStopAndPauseWindows(t *testing.T) {
	t0 := time.Unix(1000, 0)
	open := window{from: cursor{log: 10, trace: 100, at: t0}, to: cursor{log: -1}}
	closed := window{from: cursor{log: 10, trace: 100, at: t0}, to: cursor{log: 20, trace: 200, at: t0.Add(5 * time.Second)}}
	require.False(t, open.holds(9))
	require.True(t, open.holds(10))
	require.True(t, open.holds(1e6))
	require.True(t, closed.holds(19))
	require.False(t, closed.holds(20))

	brake := brakeTime(robotConfig(t))
	require.Greater(t, brake, time.Second, "0.8 m/s at 0.8 m/s² takes a second")
	mv := func(seq uint64, after time.Duration) sample {
		return sample{Seq: seq, Time: t0.Add(after), Velocity: robot.Twist2D{V: 0.2}}
	}
	require.False(t, open.moving(mv(101, brake/2), brake), "still braking")
	require.True(t, open.moving(mv(150, brake+time.Millisecond), brake))
	require.False(t, open.moving(mv(99, brake*2), brake), "before the window")
	require.False(t, closed.moving(mv(201, brake*2), brake), "after the reset")
}

func TestVerdict_PolygonHelpers(t *testing.T) {
	sq := [][2]float64{{0, 0}, {1, 0}, {1, 1}, {0, 1}}
	require.True(t, contains(sq, 0.5, 0.5))
	require.False(t, contains(sq, 1.5, 0.5))
	require.InDelta(t, 0.25, edgeDist(sq, 0.5, 0.25), 1e-12)
	require.InDelta(t, math.Sqrt2, edgeDist(sq, 2, 2), 1e-12)
}
