package safety

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

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
			require.True(t, errors.As(te, &le))
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
		{"on the edge within tolerance", robot.State{Base: robot.Pose2D{X: 4.53}}, ""},
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
