package kinematics

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
)

// testArm mirrors the arm of hw-configs/sim-mobile-manipulator.yaml.
func testArm() *hwconfig.ArmConf {
	return &hwconfig.ArmConf{
		Mount:       hwconfig.Vec3Conf{X: 0.15, Y: 0, Z: 0.45},
		LinkLengths: []float64{0.40, 0.35, 0.12},
		Joints: []hwconfig.JointConf{
			{Name: "shoulder_yaw", Min: -2.9, Max: 2.9, MaxVelocity: 1},
			{Name: "shoulder_pitch", Min: -0.6, Max: 1.6, MaxVelocity: 0.8},
			{Name: "elbow", Min: -2.6, Max: 2.6, MaxVelocity: 1},
			{Name: "wrist", Min: -1.8, Max: 1.8, MaxVelocity: 1.5},
		},
	}
}

func requireNear(t *testing.T, want, got robot.Vec3, tol float64) {
	t.Helper()
	require.InDelta(t, want.X, got.X, tol, "x")
	require.InDelta(t, want.Y, got.Y, tol, "y")
	require.InDelta(t, want.Z, got.Z, tol, "z")
}

func TestFKKnownPoses(t *testing.T) {
	arm := testArm()
	for _, tc := range []struct {
		name string
		q    []float64
		want robot.Vec3
	}{
		{"all zero stretches forward", []float64{0, 0, 0, 0}, robot.Vec3{X: 0.15 + 0.87, Z: 0.45}},
		{"yaw 90 degrees points left", []float64{math.Pi / 2, 0, 0, 0}, robot.Vec3{X: 0.15, Y: 0.87, Z: 0.45}},
		{"shoulder up points at the ceiling", []float64{0, math.Pi / 2, 0, 0}, robot.Vec3{X: 0.15, Z: 0.45 + 0.87}},
		{"elbow folds forearm down", []float64{0, 0, -math.Pi / 2, 0}, robot.Vec3{X: 0.15 + 0.40, Z: 0.45 - 0.47}},
		{"missing joints count as zero", []float64{0}, robot.Vec3{X: 1.02, Z: 0.45}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requireNear(t, tc.want, FK(arm, tc.q), 1e-9)
		})
	}
	require.Equal(t, robot.Vec3{}, FK(nil, []float64{1, 2}), "a nil arm has its fingertip at the origin")
}

func TestFKRoomAndFrames(t *testing.T) {
	// Given a base at (1, 2) facing +y
	arm := testArm()
	base := robot.Pose2D{X: 1, Y: 2, Theta: math.Pi / 2}
	// When the arm stretches forward
	p := FKRoom(arm, base, []float64{0, 0, 0, 0})
	// Then the fingertip is 1.02 m along +y in the room
	requireNear(t, robot.Vec3{X: 1, Y: 3.02, Z: 0.45}, p, 1e-9)
	// And RoomToBase inverts BaseToRoom
	requireNear(t, FK(arm, []float64{0, 0, 0, 0}), RoomToBase(base, p), 1e-9)
}

func TestIKRoundTrip(t *testing.T) {
	arm := testArm()
	for _, tc := range []struct {
		name   string
		target robot.Vec3
	}{
		{"cup on the table from the table location", robot.Vec3{X: 0.80, Y: -0.20, Z: 0.80}},
		{"bottle on the table", robot.Vec3{X: 0.85, Y: 0.25, Z: 0.87}},
		{"straight ahead at mount height", robot.Vec3{X: 0.80, Y: 0, Z: 0.45}},
		{"low, in front", robot.Vec3{X: 0.60, Y: 0, Z: 0.10}},
		{"to the left", robot.Vec3{X: 0.15, Y: 0.6, Z: 0.6}},
		{"to the right and high", robot.Vec3{X: 0.4, Y: -0.4, Z: 0.9}},
		{"nearly full reach", robot.Vec3{X: 0.15 + 0.86, Y: 0, Z: 0.45}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := IK(arm, tc.target)
			require.NoError(t, err)
			require.Len(t, q, 4)
			require.NoError(t, WithinLimits(arm, q))
			requireNear(t, tc.target, FK(arm, q), 1e-6)
		})
	}
}

func TestIKPrefersPointingDown(t *testing.T) {
	// Given a target low in front of the robot that the wrist can reach pointing down
	arm := testArm()
	q, err := IK(arm, robot.Vec3{X: 0.55, Y: 0, Z: 0.25})
	require.NoError(t, err)
	// Then the last link points straight down
	require.InDelta(t, -math.Pi/2, q[1]+q[2]+q[3], 1e-9)
}

func TestIKErrors(t *testing.T) {
	arm := testArm()
	twoJoint := testArm()
	twoJoint.Joints = twoJoint.Joints[:2]
	for _, tc := range []struct {
		name    string
		arm     *hwconfig.ArmConf
		target  robot.Vec3
		is      error
		message string
	}{
		{"nil arm", nil, robot.Vec3{X: 1}, ErrInvalidInput, "no arm"},
		{"joint count mismatch", twoJoint, robot.Vec3{X: 1}, ErrInvalidInput, "2 joints but 3 link lengths"},
		{"NaN target", arm, robot.Vec3{X: math.NaN()}, ErrInvalidInput, "finite"},
		{"infinite target", arm, robot.Vec3{Z: math.Inf(-1)}, ErrInvalidInput, "finite"},
		{"far away", arm, robot.Vec3{X: 3, Z: 0.45}, ErrOutOfReach, "2.850 m from the arm mount (2.850 m horizontally), beyond the arm's reach of 0.870 m"},
		{"behind the robot beyond the yaw limit", arm, robot.Vec3{X: -0.5, Y: -0.01, Z: 0.45}, ErrJointLimits, "shoulder_yaw"},
		{"under the floor, straight down", arm, robot.Vec3{X: 0.15, Y: 0, Z: -0.35}, ErrJointLimits, "allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := IK(tc.arm, tc.target)
			require.Nil(t, q)
			require.ErrorIs(t, err, tc.is)
			require.ErrorContains(t, err, tc.message)
		})
	}
}

func TestIKReachErrorIsTyped(t *testing.T) {
	_, err := IK(testArm(), robot.Vec3{X: 5})
	var re *ReachError
	require.ErrorAs(t, err, &re)
	require.InDelta(t, 0.87, re.Reach, 1e-9)
	require.Greater(t, re.Distance, re.Reach)
}

func TestReachHonoursConfiguredReach(t *testing.T) {
	arm := testArm()
	require.InDelta(t, 0.87, Reach(arm), 1e-12)
	arm.Reach = 0.7
	require.InDelta(t, 0.7, Reach(arm), 1e-12)
	// Given a configured reach shorter than the links, a point within the
	// links but beyond the configured reach is out of reach.
	_, err := IK(arm, robot.Vec3{X: 0.15 + 0.8, Z: 0.45})
	require.ErrorIs(t, err, ErrOutOfReach)
	require.ErrorContains(t, err, "beyond the arm's reach of 0.700 m")
	require.Zero(t, Reach(nil))
}

func TestCheckJointPositions(t *testing.T) {
	arm := testArm()
	require.NoError(t, Check(arm, []float64{0, 0, 0, 0}))
	require.ErrorContains(t, Check(arm, []float64{0, 0}), "2 joint positions given, the arm has 4 joints")
	require.ErrorContains(t, Check(arm, []float64{0, math.Inf(1), 0, 0}), `joint "shoulder_pitch" position +Inf is not a finite number`)
	err := WithinLimits(arm, []float64{0, 0, 3, 0})
	require.ErrorIs(t, err, ErrJointLimits)
	require.ErrorContains(t, err, "elbow=3.000")
}

// FuzzIK checks that IK never panics and that every solution it returns is
// inside the limits and puts the fingertip on the target.
func FuzzIK(f *testing.F) {
	f.Add(0.8, -0.2, 0.8)
	f.Add(math.NaN(), 0.0, 0.0)
	f.Add(math.Inf(1), math.Inf(-1), 0.0)
	f.Add(0.15, 0.0, 0.45)
	f.Add(1e308, -1e308, 1e-308)
	arm := testArm()
	f.Fuzz(func(t *testing.T, x, y, z float64) {
		target := robot.Vec3{X: x, Y: y, Z: z}
		q, err := IK(arm, target)
		if err != nil {
			require.Nil(t, q)
			require.True(t, errors.Is(err, ErrInvalidInput) || errors.Is(err, ErrOutOfReach) || errors.Is(err, ErrJointLimits), "unexpected error class: %v", err)
			return
		}
		require.NoError(t, WithinLimits(arm, q))
		requireNear(t, target, FK(arm, q), 1e-6)
	})
}
