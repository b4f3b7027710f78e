package perception

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
)

func TestCamera_AgreesWithIndependentPinhole(t *testing.T) {
	cases := []struct {
		name       string
		yaw, pitch float64
	}{
		{"level", 0, 0},
		{"pitched down like the sim robot", 0, 25},
		{"yawed left and pitched", 30, 15},
		{"yawed right and pitched up", -45, -10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Given a camera and the tests' own pinhole model of it
			conf := hwconfig.CameraConf{
				Width: 640, Height: 480, Fx: 525, Fy: 520, Cx: 320, Cy: 240,
				Mount: hwconfig.Vec3Conf{X: 0.1, Y: 0.05, Z: 1.2}, YawDeg: tc.yaw, PitchDeg: tc.pitch, MaxRange: 6,
			}
			cam, err := NewCamera(&conf)
			require.NoError(t, err)
			ref := newPinhole(conf)
			pose := robot.Pose2D{X: 1, Y: -2, Theta: 0.7}
			for _, uv := range [][2]float64{{320, 240}, {0, 0}, {640, 480}, {100, 400}, {500, 30}} {
				// When a pixel's ray is followed to depth 2.5 m
				p := add(cam.Origin(), scale(cam.Ray(uv[0], uv[1]), 2.5))
				// Then both models project the point back to the pixel and depth
				u, v, z, ok := cam.Project(p)
				require.True(t, ok)
				require.InDelta(t, uv[0], u, 1e-9)
				require.InDelta(t, uv[1], v, 1e-9)
				require.InDelta(t, 2.5, z, 1e-9)
				u, v, z, ok = ref.project(pose, ToRoom(pose, p))
				require.True(t, ok)
				require.InDelta(t, uv[0], u, 1e-9)
				require.InDelta(t, uv[1], v, 1e-9)
				require.InDelta(t, 2.5, z, 1e-9)
			}
		})
	}
}

func TestCamera_Conventions(t *testing.T) {
	// Given the sim robot's camera: 1.2 m up, pitched 25° down, looking along +x
	conf := hwconfig.CameraConf{
		Width: 640, Height: 480, Fx: 525, Fy: 525, Cx: 320, Cy: 240,
		Mount: hwconfig.Vec3Conf{X: 0.1, Z: 1.2}, PitchDeg: 25, MaxRange: 6,
	}
	cam, err := NewCamera(&conf)
	require.NoError(t, err)

	// Then a point to the robot's left appears left of centre (u < cx)
	u, _, _, ok := cam.Project(robot.Vec3{X: 2, Y: 0.5, Z: 0})
	require.True(t, ok)
	require.Less(t, u, 320.0)
	// And a lower point appears lower in the image (larger v)
	_, vHigh, _, _ := cam.Project(robot.Vec3{X: 2, Z: 0.8})
	_, vLow, _, _ := cam.Project(robot.Vec3{X: 2, Z: 0.2})
	require.Greater(t, vLow, vHigh)
	// And the optical axis meets the floor 1.2/tan(25°) ahead of the camera, 0.1 m ahead of the base centre
	r := cam.Ray(320, 240)
	tFloor := -1.2 / r.Z
	require.InDelta(t, 0.1+1.2/math.Tan(robot.Radians(25)), 0.1+tFloor*r.X, 1e-9)
	// And points behind, beyond range or outside the image are not seen
	require.False(t, cam.Sees(robot.Vec3{X: -2}))
	require.False(t, cam.Sees(robot.Vec3{X: 7, Z: 0}))
	require.False(t, cam.Sees(robot.Vec3{X: 2, Y: 3}))
	require.True(t, cam.Sees(robot.Vec3{X: 2.5, Z: 0}))
	require.InDelta(t, 62.7, cam.HorizontalFOVDeg(), 0.1)
}

func TestNewCamera_RejectsUnusableValues(t *testing.T) {
	good := hwconfig.CameraConf{Width: 640, Height: 480, Fx: 525, Fy: 525, Cx: 320, Cy: 240}
	cases := []struct {
		name   string
		mutate func(*hwconfig.CameraConf)
		field  string
	}{
		{"zero fx", func(c *hwconfig.CameraConf) { c.Fx = 0 }, "camera.fx"},
		{"negative width", func(c *hwconfig.CameraConf) { c.Width = -1 }, "camera.width"},
		{"NaN cx", func(c *hwconfig.CameraConf) { c.Cx = math.NaN() }, "camera.cx"},
		{"pitch straight down", func(c *hwconfig.CameraConf) { c.PitchDeg = 90 }, "camera.pitch_deg"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.mutate(&c)
			_, err := NewCamera(&c)
			require.ErrorIs(t, err, ErrInvalidConfig)
			require.ErrorContains(t, err, tc.field)
		})
	}
	_, err := NewCamera(nil)
	require.ErrorIs(t, err, ErrInvalidConfig)
}

func TestFrames_RoundTrip(t *testing.T) {
	pose := robot.Pose2D{X: 1.5, Y: -0.5, Theta: 2.1}
	p := robot.Vec3{X: 0.3, Y: -1.2, Z: 0.8}
	got := ToRobot(pose, ToRoom(pose, p))
	require.InDelta(t, p.X, got.X, 1e-12)
	require.InDelta(t, p.Y, got.Y, 1e-12)
	require.InDelta(t, p.Z, got.Z, 1e-12)
	// A point 1 m ahead of a robot facing +y is 1 m further along +y.
	ahead := ToRoom(robot.Pose2D{Theta: math.Pi / 2}, robot.Vec3{X: 1})
	require.InDelta(t, 0, ahead.X, 1e-12)
	require.InDelta(t, 1, ahead.Y, 1e-12)
}
