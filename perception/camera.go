package perception

import (
	"fmt"
	"math"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
)

// DefaultMaxRange is the camera range used when the hw-config leaves
// camera.max_range at zero, matching the hw-config's documented default.
const DefaultMaxRange = 6.0

// Camera is a pinhole camera mounted on the robot base. It converts between
// pixels and rays in the robot frame. It is immutable after NewCamera and
// safe for concurrent use.
type Camera struct {
	width, height  float64
	fx, fy, cx, cy float64
	// origin is the optical centre in the robot frame.
	origin robot.Vec3
	// fwd, left and up are the camera's axes in the robot frame: the
	// optical axis, the image's leftward and upward directions.
	fwd, left, up robot.Vec3
	maxRange      float64
	rateHz        float64
}

// NewCamera builds the camera model of c and checks the values the model
// divides by, naming the offending field.
func NewCamera(c *hwconfig.CameraConf) (*Camera, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: camera: no camera configured", ErrInvalidConfig)
	}
	check := func(name string, v float64) error {
		if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
			return fmt.Errorf("%w: camera.%s must be a positive number, got %v", ErrInvalidConfig, name, v)
		}
		return nil
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"width", float64(c.Width)}, {"height", float64(c.Height)}, {"fx", c.Fx}, {"fy", c.Fy}} {
		if err := check(f.name, f.v); err != nil {
			return nil, err
		}
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"cx", c.Cx}, {"cy", c.Cy}, {"mount.x", c.Mount.X}, {"mount.y", c.Mount.Y}, {"mount.z", c.Mount.Z}, {"yaw_deg", c.YawDeg}, {"pitch_deg", c.PitchDeg}, {"max_range", c.MaxRange}, {"rate_hz", c.RateHz}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return nil, fmt.Errorf("%w: camera.%s must be finite, got %v", ErrInvalidConfig, f.name, f.v)
		}
	}
	if c.PitchDeg <= -90 || c.PitchDeg >= 90 {
		return nil, fmt.Errorf("%w: camera.pitch_deg must be in (-90, 90), got %v", ErrInvalidConfig, c.PitchDeg)
	}
	yaw, pitch := robot.Radians(c.YawDeg), robot.Radians(c.PitchDeg)
	cam := &Camera{
		width: float64(c.Width), height: float64(c.Height),
		fx: c.Fx, fy: c.Fy, cx: c.Cx, cy: c.Cy,
		origin:   robot.Vec3{X: c.Mount.X, Y: c.Mount.Y, Z: c.Mount.Z},
		fwd:      robot.Vec3{X: math.Cos(pitch) * math.Cos(yaw), Y: math.Cos(pitch) * math.Sin(yaw), Z: -math.Sin(pitch)},
		left:     robot.Vec3{X: -math.Sin(yaw), Y: math.Cos(yaw)},
		up:       robot.Vec3{X: math.Sin(pitch) * math.Cos(yaw), Y: math.Sin(pitch) * math.Sin(yaw), Z: math.Cos(pitch)},
		maxRange: c.MaxRange,
		rateHz:   c.RateHz,
	}
	if cam.maxRange <= 0 {
		cam.maxRange = DefaultMaxRange
	}
	if cam.rateHz <= 0 {
		cam.rateHz = 5
	}
	return cam, nil
}

// Size returns the image size in pixels.
func (c *Camera) Size() (width, height int) { return int(c.width), int(c.height) }

// MaxRange returns the range in metres beyond which nothing is detected.
func (c *Camera) MaxRange() float64 { return c.maxRange }

// Origin returns the optical centre in the robot frame.
func (c *Camera) Origin() robot.Vec3 { return c.origin }

// HorizontalFOVDeg returns the full horizontal field of view in degrees.
func (c *Camera) HorizontalFOVDeg() float64 {
	return robot.Degrees(math.Atan(c.cx/c.fx) + math.Atan((c.width-c.cx)/c.fx))
}

// Ray returns the direction, in the robot frame, of the ray through pixel
// (u, v), scaled so that its component along the optical axis is 1: the
// point at optical depth z is Origin() + z·Ray(u, v).
func (c *Camera) Ray(u, v float64) robot.Vec3 {
	a := -(u - c.cx) / c.fx // along left
	b := -(v - c.cy) / c.fy // along up
	return robot.Vec3{
		X: c.fwd.X + a*c.left.X + b*c.up.X,
		Y: c.fwd.Y + a*c.left.Y + b*c.up.Y,
		Z: c.fwd.Z + a*c.left.Z + b*c.up.Z,
	}
}

// Project returns the pixel of a point in the robot frame and its depth
// along the optical axis; ok is false for points behind the camera.
func (c *Camera) Project(p robot.Vec3) (u, v, depth float64, ok bool) {
	r := sub(p, c.origin)
	depth = dot(r, c.fwd)
	if depth <= 1e-6 {
		return 0, 0, depth, false
	}
	u = c.cx - c.fx*dot(r, c.left)/depth
	v = c.cy - c.fy*dot(r, c.up)/depth
	return u, v, depth, true
}

// Sees reports whether a point in the robot frame projects inside the
// image, in front of the camera, within the camera's range. This is the
// one definition of "in the field of view" the package uses.
func (c *Camera) Sees(p robot.Vec3) bool {
	u, v, _, ok := c.Project(p)
	if !ok || u < 0 || u > c.width || v < 0 || v > c.height {
		return false
	}
	return norm(sub(p, c.origin)) <= c.maxRange
}

func sub(a, b robot.Vec3) robot.Vec3 { return robot.Vec3{X: a.X - b.X, Y: a.Y - b.Y, Z: a.Z - b.Z} }
func add(a, b robot.Vec3) robot.Vec3 { return robot.Vec3{X: a.X + b.X, Y: a.Y + b.Y, Z: a.Z + b.Z} }
func scale(a robot.Vec3, k float64) robot.Vec3 {
	return robot.Vec3{X: a.X * k, Y: a.Y * k, Z: a.Z * k}
}
func dot(a, b robot.Vec3) float64 { return a.X*b.X + a.Y*b.Y + a.Z*b.Z }
func norm(a robot.Vec3) float64   { return math.Sqrt(dot(a, a)) }

// ToRoom converts a point from the robot frame at pose to the room frame.
func ToRoom(pose robot.Pose2D, p robot.Vec3) robot.Vec3 {
	s, c := math.Sincos(pose.Theta)
	return robot.Vec3{X: pose.X + c*p.X - s*p.Y, Y: pose.Y + s*p.X + c*p.Y, Z: p.Z}
}

// ToRobot converts a point from the room frame to the robot frame at pose.
func ToRobot(pose robot.Pose2D, p robot.Vec3) robot.Vec3 {
	s, c := math.Sincos(pose.Theta)
	dx, dy := p.X-pose.X, p.Y-pose.Y
	return robot.Vec3{X: c*dx + s*dy, Y: -s*dx + c*dy, Z: p.Z}
}
