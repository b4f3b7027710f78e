package robot

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Pose2D is a planar pose in the room frame: metres and radians, theta
// measured counter-clockwise from +x.
type Pose2D struct {
	X     float64 `json:"x"`
	Y     float64 `json:"y"`
	Theta float64 `json:"theta"`
}

// Twist2D is a planar velocity in the robot frame: V in m/s along +x of the
// robot, W in rad/s counter-clockwise.
type Twist2D struct {
	V float64 `json:"v"`
	W float64 `json:"w"`
}

// Vec3 is a point or vector in metres.
type Vec3 struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
	Z float64 `json:"z"`
}

// Joint is one arm joint's measured state, radians and rad/s.
type Joint struct {
	Name     string  `json:"name"`
	Position float64 `json:"position"`
	Velocity float64 `json:"velocity"`
}

// Gripper is the gripper's measured state.
type Gripper struct {
	// Opening is the finger gap in metres; 0 is fully closed.
	Opening float64 `json:"opening"`
	// Closed is true when the gripper has been commanded closed and has
	// stopped moving.
	Closed bool `json:"closed"`
	// Holding is the id of the object between the fingers, empty if none.
	Holding string `json:"holding,omitempty"`
	// Force is the grip force in newtons currently applied.
	Force float64 `json:"force"`
}

// Battery is the battery's measured state.
type Battery struct {
	// Percent is the state of charge, 0..100.
	Percent  float64 `json:"percent"`
	Voltage  float64 `json:"voltage"`
	Charging bool    `json:"charging"`
}

// Detection is one 2D detection from the robot's camera, in pixels.
type Detection struct {
	Label string `json:"label"`
	// BBox is [xmin, ymin, xmax, ymax] in pixels.
	BBox       [4]float64 `json:"bbox"`
	Confidence float64    `json:"confidence"`
	// Depth is the distance in metres along the optical axis to the
	// object's centre, 0 when unknown.
	Depth float64 `json:"depth,omitempty"`
	// Stamp is when the image was taken (robot clock).
	Stamp time.Time `json:"stamp"`
}

// State is a snapshot of the robot as reported by its transport.
type State struct {
	// Stamp is when the robot produced the snapshot (robot clock).
	Stamp    time.Time `json:"stamp"`
	Base     Pose2D    `json:"base"`
	Velocity Twist2D   `json:"velocity"`
	// Joints are the arm joints in hw-config order; empty for a robot
	// without an arm.
	Joints  []Joint  `json:"joints,omitempty"`
	Gripper *Gripper `json:"gripper,omitempty"`
	Battery Battery  `json:"battery"`
	// EStop is true while the robot's own e-stop circuit is engaged.
	EStop bool `json:"estop"`
	// Faults are robot-side fault codes (motor stall, joint stuck, ...).
	Faults []string `json:"faults,omitempty"`
	// Detections are the camera's most recent detections.
	Detections []Detection `json:"-"`
}

// Moving reports whether the base or any joint moves faster than the
// given thresholds (m/s and rad/s for the base, rad/s for joints).
func (s State) Moving(linEps, angEps float64) bool {
	if math.Abs(s.Velocity.V) > linEps || math.Abs(s.Velocity.W) > angEps {
		return true
	}
	for _, j := range s.Joints {
		if math.Abs(j.Velocity) > angEps {
			return true
		}
	}
	return false
}

// JointPositions returns the joint positions in order.
func (s State) JointPositions() []float64 {
	out := make([]float64, len(s.Joints))
	for i, j := range s.Joints {
		out[i] = j.Position
	}
	return out
}

// Clone returns a deep copy of s.
func (s State) Clone() State {
	c := s
	c.Joints = append([]Joint(nil), s.Joints...)
	c.Faults = append([]string(nil), s.Faults...)
	c.Detections = append([]Detection(nil), s.Detections...)
	if s.Gripper != nil {
		g := *s.Gripper
		c.Gripper = &g
	}
	return c
}

// Summary describes the physical state in one short sentence fragment, for
// the "robot" field of a result envelope, e.g. "stopped at (1.20, 0.40)
// facing 90°, battery 87%".
func (s State) Summary() string {
	var b strings.Builder
	if s.Moving(0.01, 0.02) {
		fmt.Fprintf(&b, "moving at (%.2f, %.2f) facing %.0f°", s.Base.X, s.Base.Y, Degrees(s.Base.Theta))
	} else {
		fmt.Fprintf(&b, "stopped at (%.2f, %.2f) facing %.0f°", s.Base.X, s.Base.Y, Degrees(s.Base.Theta))
	}
	if s.Gripper != nil {
		switch {
		case s.Gripper.Holding != "":
			fmt.Fprintf(&b, ", holding %s", s.Gripper.Holding)
		case s.Gripper.Closed:
			b.WriteString(", gripper closed and empty")
		default:
			b.WriteString(", gripper open")
		}
	}
	fmt.Fprintf(&b, ", battery %.0f%%", s.Battery.Percent)
	if s.EStop {
		b.WriteString(", robot e-stop engaged")
	}
	if len(s.Faults) > 0 {
		fmt.Fprintf(&b, ", robot faults: %s", strings.Join(s.Faults, ", "))
	}
	return b.String()
}

// Degrees converts radians to degrees normalised to (-180, 180].
func Degrees(rad float64) float64 {
	d := math.Mod(rad*180/math.Pi, 360)
	if d > 180 {
		d -= 360
	} else if d <= -180 {
		d += 360
	}
	return d
}

// Radians converts degrees to radians.
func Radians(deg float64) float64 { return deg * math.Pi / 180 }

// NormalizeAngle wraps an angle in radians to (-pi, pi].
func NormalizeAngle(a float64) float64 {
	a = math.Mod(a, 2*math.Pi)
	if a > math.Pi {
		a -= 2 * math.Pi
	} else if a <= -math.Pi {
		a += 2 * math.Pi
	}
	return a
}
