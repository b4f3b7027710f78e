package hwconfig

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/geom"
)

func TestHelpers_Manipulator(t *testing.T) {
	// Given the shipped mobile manipulator
	c := loadShipped(t)

	// Then the helpers describe it
	require.True(t, c.HasArm())
	require.True(t, c.HasGripper())
	require.True(t, c.HasCamera())
	require.Equal(t, []string{"shoulder_yaw", "shoulder_pitch", "elbow", "wrist"}, c.JointNames())
	require.Equal(t, []string{"reach_table", "ready", "stowed"}, c.PoseNames())
	require.Equal(t, []string{"dock", "home", "table"}, c.LocationNames())
	require.Equal(t, ActionTools, c.ToolNames())

	a, ok := c.ActionPolicy(ToolMoveBaseTo)
	require.True(t, ok)
	require.Equal(t, ApprovalRequired, a.Approval)
	_, ok = c.ActionPolicy("fly")
	require.False(t, ok)

	ws := c.Workspace()
	require.Len(t, ws, 4)
	require.True(t, ws.Contains(geom.Point{X: 0, Y: 0}))
	require.False(t, ws.Contains(geom.Point{X: 4.8, Y: 0}))
	require.True(t, c.WorldBounds().Contains(geom.Point{X: 4.8, Y: 0}))

	keep := c.KeepOuts()
	require.Len(t, keep, 1)
	require.Equal(t, "stairs", keep[0].Name)
	require.True(t, keep[0].Poly().Contains(geom.Point{X: 4, Y: -4}))
	require.True(t, c.World.Surfaces[0].Poly().Contains(geom.Point{X: 2.15, Y: 0.8}))
}

func TestHelpers_BaseOnly(t *testing.T) {
	// Given a robot with a base and nothing else
	c := loadBaseOnly(t)

	// Then arm helpers say so instead of panicking
	require.False(t, c.HasArm())
	require.False(t, c.HasGripper())
	require.False(t, c.HasCamera())
	require.Nil(t, c.JointNames())
	require.Empty(t, c.PoseNames())
	_, err := c.PoseJoints("stowed")
	require.ErrorIs(t, err, ErrNoArm)
	require.Equal(t, []string{ToolMoveBaseTo, ToolReturnToSafePose, ToolStop, ToolCancelTask}, c.ToolNames())
	require.Equal(t, []string{"lift_shaft"}, []string{c.KeepOuts()[0].Name})
}

func TestPoseJoints(t *testing.T) {
	c := loadShipped(t)
	tests := []struct {
		name    string
		pose    string
		want    []float64
		wantErr error
		errText string
	}{
		{name: "ordered like arm.joints", pose: "stowed", want: []float64{0, 1.2, -2.4, 1.2}},
		{name: "another pose", pose: "reach_table", want: []float64{0, 0.3, -0.3, -0.3}},
		{name: "unknown pose lists the known ones", pose: "wave", wantErr: ErrUnknownPose, errText: "known poses: reach_table, ready, stowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// When a pose is looked up
			got, err := c.PoseJoints(tt.pose)

			// Then it comes back in joint order, or with an error an agent can act on
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				require.ErrorContains(t, err, tt.errText)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestPoseJoints_UnvalidatedPoseMissingAJoint(t *testing.T) {
	// Given a config changed in code so a pose lacks a joint
	c := loadShipped(t)
	delete(c.Poses["ready"], "wrist")

	// When the pose is looked up
	_, err := c.PoseJoints("ready")

	// Then it is an error, not a zero that would move the wrist to 0 rad
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, `"wrist"`)
}

func TestClone_IsDeep(t *testing.T) {
	// Given a config and its clone
	c := loadShipped(t)
	d := c.Clone()
	require.Equal(t, c, d)

	// When the clone is changed everywhere it shares memory with nothing
	d.Base.Workspace[0][0] = 99
	d.Arm.Joints[0].Max = 99
	d.Arm.LinkLengths[0] = 99
	d.Poses["ready"]["elbow"] = 99
	d.Locations["home"] = Location{X: 99}
	d.Actions[ToolStop] = ActionConf{Approval: ApprovalRequired}
	d.World.Regions[0].Polygon[0][0] = 99
	d.World.Surfaces[0].Polygon[0][0] = 99
	d.Sim.Objects[0].X = 99
	d.Camera.Fx = 99
	d.Gripper.MaxForce = 99

	// Then the original is untouched
	require.NoError(t, c.Validate())
	require.Equal(t, loadShipped(t), c)
	require.Nil(t, (*Config)(nil).Clone())
}
