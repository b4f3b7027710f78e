package actions

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/safety"
)

type stillRobot struct{ hub robot.Hub }

func (d *stillRobot) Send(context.Context, robot.Command) error { return nil }
func (d *stillRobot) Refresh(context.Context) error             { return nil }
func (d *stillRobot) Stop(context.Context) error                { return nil }
func (d *stillRobot) Latest() (robot.State, bool)               { return d.hub.Latest() }
func (d *stillRobot) Subscribe() (<-chan robot.State, func())   { return d.hub.Subscribe() }
func (d *stillRobot) LinkUp() bool                              { return true }

func newPlanner(t *testing.T, mutate func(*hwconfig.Config)) *planner {
	t.Helper()
	cfg, err := hwconfig.Load("../hw-configs/sim-mobile-manipulator.yaml")
	require.NoError(t, err)
	if mutate != nil {
		mutate(cfg)
	}
	d := &stillRobot{}
	stowed, _ := cfg.PoseJoints("stowed")
	st := robot.State{Gripper: &robot.Gripper{Opening: 0.09}}
	for i, n := range cfg.JointNames() {
		st.Joints = append(st.Joints, robot.Joint{Name: n, Position: stowed[i]})
	}
	d.hub.Publish(st)
	sup, err := safety.New(safety.Conf{Config: cfg, Driver: d, Clock: clockwork.NewFakeClock()})
	require.NoError(t, err)
	require.NoError(t, sup.Start(context.Background()))
	t.Cleanup(func() { _ = sup.Close() })
	return &planner{cfg: cfg, sup: sup, armScale: 0.5}
}

func TestProfileTime(t *testing.T) {
	tests := []struct {
		name    string
		d, v, a float64
		want    time.Duration
	}{
		{"zero distance", 0, 1, 1, 0},
		{"trapezoid: cruise plus ramp", 4, 1, 1, 5 * time.Second},
		{"triangle: never reaches top speed", 1, 4, 1, 2 * time.Second},
		{"no acceleration limit", 3, 1.5, 0, 2 * time.Second},
		{"negative distance counts by magnitude", -4, 1, 1, 5 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.InDelta(t, tc.want.Seconds(), profileTime(tc.d, tc.v, tc.a).Seconds(), 1e-9)
		})
	}
}

func TestPlan_DeadlineIsMoveItRuleOrConfiguredTimeout(t *testing.T) {
	pl := newPlanner(t, nil)
	p, err := pl.plan(context.Background(), ToolMoveBaseTo, map[string]any{"x": 3.0, "y": 0.0})
	require.NoError(t, err)
	// Given 3 m straight ahead at 0.8 m/s with 90% of 0.6 m/s²: the
	// expected time is the profile plus the settle margin.
	want := profileTime(3, 0.8, 0.54) + 500*time.Millisecond
	require.Equal(t, want, p.expected)
	require.Equal(t, time.Duration(float64(want)*1.1)+500*time.Millisecond, p.deadline)
	require.Contains(t, p.preview, "move the base 3.0 m to (3.00, 0.00)")
	require.Contains(t, p.preview, "about 6 s")

	pl = newPlanner(t, func(c *hwconfig.Config) {
		c.Actions[ToolMoveBaseTo] = hwconfig.ActionConf{Approval: hwconfig.ApprovalRequired, Timeout: hwconfig.Duration(42 * time.Second)}
	})
	p, err = pl.plan(context.Background(), ToolMoveBaseTo, map[string]any{"x": 3.0, "y": 0.0})
	require.NoError(t, err)
	require.Equal(t, 42*time.Second, p.deadline)
}

func TestPlan_Previews(t *testing.T) {
	pl := newPlanner(t, nil)
	tests := []struct {
		tool string
		args map[string]any
		want string
	}{
		{ToolMoveBaseTo, map[string]any{"location": "table"}, "move the base 1.7 m to table (1.35, 1.00), facing 0°"},
		{ToolMoveBaseTo, map[string]any{"x": 1.0, "y": 1.0, "theta_deg": 90.0}, "facing 90°"},
		{ToolMoveArmTo, map[string]any{"pose": "ready"}, "move the arm to pose ready"},
		{ToolMoveArmTo, map[string]any{"joints": map[string]any{"elbow": -1.0}}, "keeping shoulder_yaw, shoulder_pitch, wrist where they are"},
		{ToolRelease, map[string]any{}, "open the gripper (it holds nothing)"},
		{ToolReturnToSafePose, map[string]any{}, "return the arm to the safe pose stowed at 30% speed"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			p, err := pl.plan(context.Background(), tc.tool, tc.args)
			require.NoError(t, err)
			require.Contains(t, p.preview, tc.want)
			require.Contains(t, p.preview, "about ")
			require.Positive(t, p.deadline)
			require.Greater(t, p.deadline, p.expected)
		})
	}
}

func TestPlan_ArmExpectedFromSlowestJoint(t *testing.T) {
	pl := newPlanner(t, nil)
	p, err := pl.plan(context.Background(), ToolMoveArmTo, map[string]any{"pose": "ready"})
	require.NoError(t, err)
	// stowed → ready: elbow moves 1.2 rad at 1.0 × 0.5 rad/s, the slowest.
	require.InDelta(t, (2400*time.Millisecond + armSettle).Seconds(), p.expected.Seconds(), 1e-6)
}

func TestPlan_MoveBaseUsesTheLocationsOwnTolerance(t *testing.T) {
	// Given a config whose table has a wide tolerance of its own
	// (0.4 m, 30°) while the base's is the default
	pl := newPlanner(t, func(c *hwconfig.Config) {
		l := c.Locations["table"]
		l.GoalTolerance, l.YawToleranceDeg = 0.4, 30
		c.Locations["table"] = l
	})
	table := pl.cfg.Locations["table"]
	// A robot at rest 0.3 m short of the table, 20° off its heading
	near := robot.State{Base: robot.Pose2D{X: table.X - 0.3, Y: table.Y, Theta: robot.Radians(table.ThetaDeg + 20)}}

	// When move_base_to is planned to the table and to the same point by
	// coordinates
	byName, err := pl.plan(context.Background(), ToolMoveBaseTo, map[string]any{"location": "table"})
	require.NoError(t, err)
	byXY, err := pl.plan(context.Background(), ToolMoveBaseTo, map[string]any{"x": table.X, "y": table.Y, "theta_deg": table.ThetaDeg})
	require.NoError(t, err)

	// Then the table's tolerance counts the robot as arrived; the base's
	// default, used for coordinates, does not
	require.True(t, byName.steps[0].Done(near), "inside the table's own 0.4 m / 30° tolerance")
	require.False(t, byXY.steps[0].Done(near), "outside the base's default tolerance")
}

func TestPlan_NoNamedLocationsSaysCoordinates(t *testing.T) {
	// Given a robot with no named locations
	pl := newPlanner(t, func(c *hwconfig.Config) { c.Locations = nil })
	// When a location or half a coordinate is asked for
	_, errLoc := pl.plan(context.Background(), ToolMoveBaseTo, map[string]any{"location": "dock"})
	_, errX := pl.plan(context.Background(), ToolMoveBaseTo, map[string]any{"x": 1.0})
	// Then both say the robot takes coordinates, never "(known: none)"
	for _, err := range []error{errLoc, errX} {
		require.Error(t, err)
		require.Contains(t, err.Error(), "this robot has no named locations, so give x and y")
		require.NotContains(t, err.Error(), "none")
	}
}
