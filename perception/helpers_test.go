package perception

import (
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
)

// epoch is the fixed start of every fake clock, so goldens are stable.
var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// testConfig is the default sim robot's hw-config, loaded from the shared
// fixture so the tests exercise the camera, arm and table the product ships.
func testConfig(t testing.TB) *hwconfig.Config {
	t.Helper()
	c, err := hwconfig.Load("../hw-configs/sim-mobile-manipulator.yaml")
	require.NoError(t, err)
	return c
}

func newTestSummarizer(t testing.TB, mutate ...func(*Conf)) (*Summarizer, *clockwork.FakeClock) {
	t.Helper()
	clk := clockwork.NewFakeClockAt(epoch)
	conf := Conf{Config: testConfig(t), Clock: clk, Logger: slog.New(slog.DiscardHandler)}
	for _, m := range mutate {
		m(&conf)
	}
	s, err := New(conf)
	require.NoError(t, err)
	return s, clk
}

// pinhole is the tests' own camera model, written independently of
// camera.go: a rotation matrix R = Rz(yaw)·Ry(pitch) whose columns are the
// camera body's forward, left and up axes in the robot frame. Agreement
// between the two is what the ground-truth tests rely on.
type pinhole struct {
	c hwconfig.CameraConf
	r [3][3]float64
}

func newPinhole(c hwconfig.CameraConf) pinhole {
	y, p := c.YawDeg*math.Pi/180, c.PitchDeg*math.Pi/180
	rz := [3][3]float64{{math.Cos(y), -math.Sin(y), 0}, {math.Sin(y), math.Cos(y), 0}, {0, 0, 1}}
	// Positive rotation about +y (the robot's left) tips +x downwards.
	ry := [3][3]float64{{math.Cos(p), 0, math.Sin(p)}, {0, 1, 0}, {-math.Sin(p), 0, math.Cos(p)}}
	var r [3][3]float64
	for i := range 3 {
		for j := range 3 {
			for k := range 3 {
				r[i][j] += rz[i][k] * ry[k][j]
			}
		}
	}
	return pinhole{c: c, r: r}
}

// project returns the pixel and optical depth of a room-frame point seen
// from a robot at pose.
func (p pinhole) project(pose robot.Pose2D, room robot.Vec3) (u, v, depth float64, ok bool) {
	dx, dy := room.X-pose.X, room.Y-pose.Y
	c, s := math.Cos(pose.Theta), math.Sin(pose.Theta)
	rel := [3]float64{c*dx + s*dy - p.c.Mount.X, -s*dx + c*dy - p.c.Mount.Y, room.Z - p.c.Mount.Z}
	var body [3]float64 // Rᵀ·rel: forward, left, up
	for j := range 3 {
		for i := range 3 {
			body[j] += p.r[i][j] * rel[i]
		}
	}
	if body[0] <= 1e-6 {
		return 0, 0, 0, false
	}
	return p.c.Cx - p.c.Fx*body[1]/body[0], p.c.Cy - p.c.Fy*body[2]/body[0], body[0], true
}

func sq(v float64) float64 { return v * v }

// detect renders a sphere-like object of the given size at a room point as
// a detection: the box is the projected size around the projected centre,
// clipped to the image. ok is false when the object is behind the camera
// or wholly outside the image.
func (p pinhole) detect(pose robot.Pose2D, room robot.Vec3, size float64, label string, conf float64, withDepth bool) (robot.Detection, bool) {
	u, v, z, ok := p.project(pose, room)
	if !ok {
		return robot.Detection{}, false
	}
	hw, hh := p.c.Fx*size/2/z, p.c.Fy*size/2/z
	w, h := float64(p.c.Width), float64(p.c.Height)
	b := [4]float64{math.Max(u-hw, 0), math.Max(v-hh, 0), math.Min(u+hw, w), math.Min(v+hh, h)}
	if b[0] >= b[2] || b[1] >= b[3] {
		return robot.Detection{}, false
	}
	d := robot.Detection{Label: label, BBox: b, Confidence: conf}
	if withDepth {
		d.Depth = z
	}
	return d, true
}

func dist3(a, b robot.Vec3) float64 {
	return math.Sqrt(sq(a.X-b.X) + sq(a.Y-b.Y) + sq(a.Z-b.Z))
}

// findObject returns the scene object with the id, failing the test if
// there is none.
func findObject(t testing.TB, sc Scene, id string) Object {
	t.Helper()
	for _, o := range sc.Objects {
		if o.ID == id {
			return o
		}
	}
	require.Failf(t, "object not in scene", "id %s; scene: %s", id, sc.Text)
	return Object{}
}
