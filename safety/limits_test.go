package safety

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/geom"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

func baseCmd(x, y float64) robot.Command {
	return robot.Command{Kind: robot.CmdMoveBase, Base: &robot.BaseGoal{Target: robot.Pose2D{X: x, Y: y}, MaxLinear: 0.8, MaxAngular: 1.5}}
}

func armCmd(q []float64, scale float64) robot.Command {
	return robot.Command{Kind: robot.CmdMoveArm, Arm: &robot.ArmGoal{Positions: q, VelocityScale: scale}}
}

func TestLimits_Check(t *testing.T) {
	cfg := loadConfig(t)
	lim, err := NewLimits(cfg)
	require.NoError(t, err)
	origin := &robot.Pose2D{}
	ready, err := cfg.PoseJoints("ready")
	require.NoError(t, err)
	tooFar := append([]float64(nil), ready...)
	tooFar[2] = 2.7
	fast := baseCmd(1, 1)
	fast.Base.MaxLinear = 2
	spin := baseCmd(1, 1)
	spin.Base.MaxAngular = 0
	nan := baseCmd(math.NaN(), 1)

	tests := []struct {
		name  string
		cmd   robot.Command
		from  *robot.Pose2D
		limit string
		field string
	}{
		{"inside the workspace", baseCmd(1, 1), origin, "", ""},
		{"x outside the workspace", baseCmd(7, 0), origin, LimitWorkspace, "x"},
		{"y outside the workspace", baseCmd(0, -4.9), origin, LimitWorkspace, "y"},
		{"target in keep-out stairs", baseCmd(4, -4), origin, LimitKeepOut, "x"},
		{"straight path crosses stairs", baseCmd(4.2, -2.5), &robot.Pose2D{X: 3.0, Y: -4.2}, LimitPathKeepOut, "x"},
		{"path check skipped without a start", baseCmd(4.2, -2.5), nil, "", ""},
		{"linear speed above the cap", fast, origin, LimitLinearSpeed, "max_linear"},
		{"angular speed zero", spin, origin, LimitAngularSpeed, "max_angular"},
		{"NaN target", nan, origin, LimitNotFinite, "x"},
		{"arm inside limits", armCmd(ready, 0.5), nil, "", ""},
		{"elbow beyond its limit", armCmd(tooFar, 0.5), nil, LimitJointPosition, "joints.elbow"},
		{"wrong joint count", armCmd(ready[:2], 0.5), nil, LimitJointCount, "positions"},
		{"velocity scale above 1", armCmd(ready, 1.5), nil, LimitVelocityScale, "velocity_scale"},
		{"velocity scale zero", armCmd(ready, 0), nil, LimitVelocityScale, "velocity_scale"},
		{"gripper force inside", robot.Command{Kind: robot.CmdGripper, Gripper: &robot.GripperGoal{Close: true, Force: 20}}, nil, "", ""},
		{"gripper force above max", robot.Command{Kind: robot.CmdGripper, Gripper: &robot.GripperGoal{Close: true, Force: 41}}, nil, LimitGripperForce, "force"},
		{"gripper open needs no force", robot.Command{Kind: robot.CmdGripper, Gripper: &robot.GripperGoal{}}, nil, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := lim.Check(tc.cmd, tc.from)
			if tc.limit == "" {
				require.NoError(t, err)
				return
			}
			var le *LimitError
			require.ErrorAs(t, err, &le)
			require.ErrorIs(t, err, ErrLimitExceeded)
			require.Equal(t, tc.limit, le.Limit)
			require.Equal(t, tc.field, le.Field)
			require.NotEmpty(t, le.Allowed, "the error must name the allowed range")
			te := le.ToolError()
			require.Equal(t, toolerr.SafetyViolation, te.Type)
			require.Equal(t, tc.limit, te.Details["limit"])
			require.ErrorAs(t, te, &le)
		})
	}
}

func TestLimitError_MessageNamesFieldAndRange(t *testing.T) {
	lim, err := NewLimits(loadConfig(t))
	require.NoError(t, err)
	err = lim.Check(baseCmd(7, 0), nil)
	require.ErrorContains(t, err, "(7, 0) is outside the workspace")
	require.ErrorContains(t, err, "x in [-4.5, 4.5]")
}

func TestLimits_Breach(t *testing.T) {
	cfg := loadConfig(t)
	lim, err := NewLimits(cfg)
	require.NoError(t, err)
	tests := []struct {
		name string
		st   robot.State
		want string
	}{
		{"inside", robot.State{Base: robot.Pose2D{X: 1}}, ""},
		{"footprint over the edge within tolerance", robot.State{Base: robot.Pose2D{X: 4.23}}, ""},
		{"footprint over the edge beyond tolerance", robot.State{Base: robot.Pose2D{X: 4.3}}, "left the workspace"},
		{"outside the workspace", robot.State{Base: robot.Pose2D{X: 4.7}}, "left the workspace"},
		{"inside stairs", robot.State{Base: robot.Pose2D{X: 4.0, Y: -4.0}}, "keep-out region stairs"},
		{"joint beyond limit", robot.State{Joints: []robot.Joint{{Name: "shoulder_yaw", Position: 3.2}}}, "joint shoulder_yaw"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := lim.Breach(tc.st, 0.05)
			if tc.want == "" {
				require.Empty(t, got)
			} else {
				require.Contains(t, got, tc.want)
			}
		})
	}
}

// lShapedLimits returns the limits of the shipped robot in an L-shaped
// workspace: the south arm y in [-4.5, -1], the west arm x in [-4.5, -1],
// and the notch x > -1, y > -1 (where the table now stands) outside it.
func lShapedLimits(t *testing.T) *Limits {
	t.Helper()
	cfg := loadConfig(t)
	cfg.Base.Workspace = []hwconfig.Point2{{-4.5, -4.5}, {4.5, -4.5}, {4.5, -1}, {-1, -1}, {-1, 4.5}, {-4.5, 4.5}}
	lim, err := NewLimits(cfg)
	require.NoError(t, err)
	return lim
}

// pose is a start pose for Check.
func pose(x, y float64) *robot.Pose2D { return &robot.Pose2D{X: x, Y: y} }

// requireRefusal asserts that err is a *LimitError of limit naming
// obstacle, with a closest allowed point that the limits accept and that
// the agent receives in the tool error's details.
func requireRefusal(t *testing.T, lim *Limits, err error, limit, obstacle string) *LimitError {
	t.Helper()
	var le *LimitError
	require.ErrorAs(t, err, &le)
	require.Equal(t, limit, le.Limit, "%v", err)
	require.Equal(t, obstacle, le.Obstacle, "%v", err)
	require.Contains(t, err.Error(), obstacle, "the message names the obstacle")
	require.NotNil(t, le.ClosestAllowed, "%v", err)
	c := *le.ClosestAllowed
	require.NoError(t, lim.Check(baseCmd(round3(c.X), round3(c.Y)), nil), "the closest allowed point %v, rounded, is allowed", c)
	te := le.ToolError()
	require.Equal(t, obstacle, te.Details["obstacle"])
	require.Equal(t, map[string]float64{"x": round3(c.X), "y": round3(c.Y)}, te.Details["closest_allowed"])
	return le
}

func TestLimits_StraightPathLeavingLShapedRoomRefused(t *testing.T) {
	lim := lShapedLimits(t)
	tests := []struct {
		name     string
		from     *robot.Pose2D
		to       robot.Command
		limit    string
		obstacle string
	}{
		{"diagonal across the notch", pose(3, -2.5), baseCmd(-2.5, 3), LimitPathWorkspace, "workspace"},
		{"centre stays inside but the footprint clips the inner corner", pose(-2.7, 0), baseCmd(0.5, -2.2), LimitPathWorkspace, "workspace"},
		{"around the corner by the south arm", pose(3, -2.5), baseCmd(-2.5, -2.5), "", ""},
		{"up the west arm", pose(-2.5, -2.5), baseCmd(-2.5, 3), "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given both ends inside the L with room for the footprint
			require.NoError(t, lim.Check(tc.to, nil), "the target alone is allowed")

			// When the straight path between them is checked
			err := lim.Check(tc.to, tc.from)

			// Then a path whose footprint leaves the L is refused, with
			// the farthest point the base can reach along it
			if tc.limit == "" {
				require.NoError(t, err)
				return
			}
			le := requireRefusal(t, lim, err, tc.limit, tc.obstacle)
			c, a, b := *le.ClosestAllowed, geom.Point{X: tc.from.X, Y: tc.from.Y}, geom.Point{X: tc.to.Base.Target.X, Y: tc.to.Base.Target.Y}
			require.InDelta(t, 0, geom.SegmentDistance(c, a, b), 1e-9, "the closest allowed point is on the path")
			require.NoError(t, lim.Check(baseCmd(c.X, c.Y), tc.from), "the base can drive there")
		})
	}
}

func TestLimits_FootprintOverlappingTableRefused(t *testing.T) {
	lim, err := NewLimits(loadConfig(t))
	require.NoError(t, err)
	tests := []struct {
		name        string
		from        *robot.Pose2D
		to          robot.Command
		limit       string
		wantClosest *geom.Point
	}{
		{"centre 0.2 m from the table edge", nil, baseCmd(1.7, 1.0), LimitSurface, &geom.Point{X: 1.598, Y: 1.0}},
		{"centre on the table", nil, baseCmd(2.5, 1.0), LimitSurface, nil},
		{"straight path across the table", pose(0, 0), baseCmd(3.0, 2.0), LimitPathSurface, nil},
		{"from the table location through the table", pose(1.35, 1.0), baseCmd(3.6, 1.0), LimitPathSurface, &geom.Point{X: 1.598, Y: 1.0}},
		{"the table location leaves room for the base", pose(0, 0), baseCmd(1.35, 1.0), "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given the shipped room with its table (x in [1.9, 3.1], y in [0.5, 1.5])
			// When a target or path near the table is checked
			err := lim.Check(tc.to, tc.from)

			// Then one whose footprint touches the table is refused
			// naming the table and where the base fits
			if tc.limit == "" {
				require.NoError(t, err)
				return
			}
			le := requireRefusal(t, lim, err, tc.limit, "table")
			if tc.wantClosest != nil {
				require.InDelta(t, tc.wantClosest.X, le.ClosestAllowed.X, 1e-6)
				require.InDelta(t, tc.wantClosest.Y, le.ClosestAllowed.Y, 1e-6)
			}
		})
	}
}

func TestLimits_KeepOutInflatedByRadius(t *testing.T) {
	lim, err := NewLimits(loadConfig(t))
	require.NoError(t, err)
	tests := []struct {
		name  string
		from  *robot.Pose2D
		to    robot.Command
		limit string
	}{
		{"target centre 0.2 m from the stairs", nil, baseCmd(3.4, -4.0), LimitKeepOut},
		{"target centre exactly one radius from the stairs", nil, baseCmd(3.3, -4.0), ""},
		{"path passing the stairs corner 0.25 m away", pose(2.5, -3.6), baseCmd(3.8, -2.5), LimitPathKeepOut},
		{"path passing the stairs corner 0.35 m away", pose(2.4, -3.6), baseCmd(3.7, -2.5), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given the stairs keep-out (x in [3.6, 4.5], y in [-4.5, -3])
			// When a target or path near it is checked
			err := lim.Check(tc.to, tc.from)

			// Then the keep-out counts as inflated by the base radius
			if tc.limit == "" {
				require.NoError(t, err)
				return
			}
			_ = requireRefusal(t, lim, err, tc.limit, "stairs")
		})
	}
}

func TestLimits_OverlappingStartMayOnlyBackAway(t *testing.T) {
	lim, err := NewLimits(loadConfig(t))
	require.NoError(t, err)
	tests := []struct {
		name  string
		from  *robot.Pose2D
		to    robot.Command
		limit string
	}{
		{"footprint 0.05 m over the east edge backs away west", pose(4.25, 0), baseCmd(3, 0), ""},
		{"footprint 0.1 m over the stairs backs away north", pose(4.0, -2.8), baseCmd(4.0, -2.0), ""},
		{"footprint over the stairs slides deeper along them", pose(4.0, -2.8), baseCmd(3.0, -2.9), LimitPathKeepOut},
		{"centre inside the stairs", pose(4.0, -3.5), baseCmd(4.0, -2.0), LimitPathKeepOut},
		{"centre outside the workspace", pose(4.7, 0), baseCmd(3, 0), LimitWorkspace},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given a base that already overlaps a limit (pushed, or stopped past it)
			// When it is sent to an allowed target
			err := lim.Check(tc.to, tc.from)

			// Then it may move only if its footprint never gets deeper
			if tc.limit == "" {
				require.NoError(t, err)
				return
			}
			var le *LimitError
			require.ErrorAs(t, err, &le)
			require.Equal(t, tc.limit, le.Limit, "%v", err)
		})
	}
}

func TestLimits_BreachTripsBeforeBrakingDistanceCrossesEdge(t *testing.T) {
	cfg := loadConfig(t)
	lim, err := NewLimits(cfg)
	require.NoError(t, err)
	// At 0.8 m/s, one 20 ms control period and v²/2a at 0.6 m/s² carry
	// the centre 0.016 + 0.533 m further before it stops.
	moving := func(x, y, theta, v, w float64) robot.State {
		return robot.State{Base: robot.Pose2D{X: x, Y: y, Theta: theta}, Velocity: robot.Twist2D{V: v, W: w}}
	}
	tests := []struct {
		name string
		st   robot.State
		want string
	}{
		{"east at full speed, stops with room to spare", moving(3.5, 0, 0, 0.8, 0), ""},
		{"east at full speed, braking would cross the edge", moving(3.7, 0, 0, 0.8, 0), "leave the workspace"},
		{"same place, slow enough to stop inside", moving(3.7, 0, 0, 0.3, 0), ""},
		{"same place, driving away from the edge", moving(3.7, 0, math.Pi, 0.8, 0), ""},
		{"same place, reversing into the edge", moving(3.7, 0, math.Pi, -0.8, 0), "leave the workspace"},
		{"towards the table, stops short of it", moving(1.0, 1.0, 0, 0.8, 0), ""},
		{"towards the table, braking would reach it", moving(1.1, 1.0, 0, 0.8, 0), "onto surface table"},
		{"towards the stairs, braking would enter them", moving(3.0, -4.0, 0, 0.8, 0), "keep-out region stairs"},
		{"north along the east edge, straight", moving(4.1, 0, math.Pi/2, 0.8, 0), ""},
		{"north along the east edge, braking along an arc into it", moving(4.1, 0, math.Pi/2, 0.8, -1.5), "leave the workspace"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given a base moving at a measured speed
			// When the breach monitor looks at it
			got := lim.Breach(tc.st, cfg.Base.GoalTolerance)

			// Then it trips while braking can still stop the footprint inside
			if tc.want == "" {
				require.Empty(t, got)
				return
			}
			require.Contains(t, got, tc.want)
			require.Contains(t, got, "braking from")
		})
	}
}
