package kinematics

import (
	"errors"
	"fmt"
	"math"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
)

// Sentinel errors callers branch on. Every error IK returns wraps exactly
// one of them.
var (
	// ErrInvalidInput means the arm description or the target cannot be
	// used at all (nil arm, mismatched joint and link counts, NaN or
	// infinite coordinates).
	ErrInvalidInput = errors.New("invalid kinematics input")
	// ErrOutOfReach means the target is farther from the arm mount than
	// the arm can reach, whatever the joint limits.
	ErrOutOfReach = errors.New("target out of reach")
	// ErrJointLimits means the target is geometrically reachable but every
	// solution tried needs a joint outside its limits.
	ErrJointLimits = errors.New("no solution within joint limits")
)

// ReachError says how far the target is and how far the arm reaches. It
// wraps ErrOutOfReach.
type ReachError struct {
	// Distance is the straight-line distance from the arm mount to the
	// target in metres.
	Distance float64
	// Horizontal is the horizontal distance from the yaw axis in metres.
	Horizontal float64
	// Reach is the arm's reach in metres (see Reach).
	Reach float64
}

// Error implements error.
func (e *ReachError) Error() string {
	return fmt.Sprintf("target out of reach: it is %.3f m from the arm mount (%.3f m horizontally), beyond the arm's reach of %.3f m",
		e.Distance, e.Horizontal, e.Reach)
}

// Unwrap returns ErrOutOfReach.
func (e *ReachError) Unwrap() error { return ErrOutOfReach }

// LimitError says which joint the closest solution would have pushed past
// its limits. It wraps ErrJointLimits.
type LimitError struct {
	Joint string
	Value float64
	Min   float64
	Max   float64
	// Tried is how many candidate solutions (approach angle × elbow
	// configuration) were tried.
	Tried int
}

// Error implements error.
func (e *LimitError) Error() string {
	return fmt.Sprintf("target reachable but no solution within joint limits (%d tried): the closest needs %s=%.3f rad, allowed [%g, %g]",
		e.Tried, e.Joint, e.Value, e.Min, e.Max)
}

// Unwrap returns ErrJointLimits.
func (e *LimitError) Unwrap() error { return ErrJointLimits }

// Approaches are the wrist approach angles IK tries, in order of
// preference, measured like the pitch joints: the angle of the last link
// from horizontal, positive up. Pointing down first because that is how a
// gripper best takes an object off a table; horizontal last because it
// needs the longest horizontal reach.
var Approaches = []float64{-math.Pi / 2, -math.Pi / 3, -math.Pi / 4, -math.Pi / 6, 0, math.Pi / 6}

// Reach returns the arm's reach from its mount in metres: the configured
// reach when set, else the sum of the link lengths. It returns 0 for a nil
// arm.
func Reach(arm *hwconfig.ArmConf) float64 {
	if arm == nil {
		return 0
	}
	if arm.Reach > 0 {
		return math.Min(arm.Reach, linkSum(arm))
	}
	return linkSum(arm)
}

func linkSum(arm *hwconfig.ArmConf) float64 {
	s := 0.0
	for _, l := range arm.LinkLengths {
		s += l
	}
	return s
}

// FK returns the fingertip position in the base frame (x forward, y left,
// z up, origin at the base centre on the floor) for joint positions q in
// hw-config order. Missing trailing joints count as 0 and extra ones are
// ignored, so a caller holding a partial state still gets a defined answer;
// use Check first where a mismatch is an error. A nil arm returns the
// origin.
func FK(arm *hwconfig.ArmConf, q []float64) robot.Vec3 {
	if arm == nil {
		return robot.Vec3{}
	}
	at := func(i int) float64 {
		if i < len(q) {
			return q[i]
		}
		return 0
	}
	r, z, a := 0.0, 0.0, 0.0
	for i, l := range arm.LinkLengths {
		a += at(i + 1)
		r += l * math.Cos(a)
		z += l * math.Sin(a)
	}
	yaw := at(0)
	return robot.Vec3{
		X: arm.Mount.X + r*math.Cos(yaw),
		Y: arm.Mount.Y + r*math.Sin(yaw),
		Z: arm.Mount.Z + z,
	}
}

// FKRoom returns the fingertip position in the room frame for a base at
// pose base.
func FKRoom(arm *hwconfig.ArmConf, base robot.Pose2D, q []float64) robot.Vec3 {
	return BaseToRoom(base, FK(arm, q))
}

// BaseToRoom transforms a point from the base frame of a base at pose base
// to the room frame.
func BaseToRoom(base robot.Pose2D, p robot.Vec3) robot.Vec3 {
	c, s := math.Cos(base.Theta), math.Sin(base.Theta)
	return robot.Vec3{X: base.X + c*p.X - s*p.Y, Y: base.Y + s*p.X + c*p.Y, Z: p.Z}
}

// RoomToBase transforms a room-frame point into the base frame of a base at
// pose base; it is the inverse of BaseToRoom.
func RoomToBase(base robot.Pose2D, p robot.Vec3) robot.Vec3 {
	c, s := math.Cos(base.Theta), math.Sin(base.Theta)
	dx, dy := p.X-base.X, p.Y-base.Y
	return robot.Vec3{X: c*dx + s*dy, Y: -s*dx + c*dy, Z: p.Z}
}

// Check reports whether arm is a model IK can solve (a yaw joint followed
// by two or three pitch joints, one link length per pitch joint, finite
// positive lengths, ordered finite limits) and whether q, when non-nil, has
// one finite position per joint.
func Check(arm *hwconfig.ArmConf, q []float64) error {
	if arm == nil {
		return fmt.Errorf("%w: the robot has no arm", ErrInvalidInput)
	}
	n := len(arm.LinkLengths)
	if n < 2 || n > 3 {
		return fmt.Errorf("%w: arm.link_lengths has %d entries; the model needs 2 or 3 (upper arm, forearm[, wrist-to-fingertip])", ErrInvalidInput, n)
	}
	if len(arm.Joints) != n+1 {
		return fmt.Errorf("%w: arm has %d joints but %d link lengths; the model needs one yaw joint plus one pitch joint per link", ErrInvalidInput, len(arm.Joints), n)
	}
	for i, l := range arm.LinkLengths {
		if !finite(l) || l <= 0 {
			return fmt.Errorf("%w: arm.link_lengths[%d] = %v must be a finite length > 0", ErrInvalidInput, i, l)
		}
	}
	for _, j := range arm.Joints {
		if !finite(j.Min) || !finite(j.Max) || j.Min > j.Max {
			return fmt.Errorf("%w: joint %q has limits [%v, %v]; they must be finite with min <= max", ErrInvalidInput, j.Name, j.Min, j.Max)
		}
	}
	if !finite(arm.Mount.X) || !finite(arm.Mount.Y) || !finite(arm.Mount.Z) {
		return fmt.Errorf("%w: arm.mount must be finite", ErrInvalidInput)
	}
	if q == nil {
		return nil
	}
	if len(q) != len(arm.Joints) {
		return fmt.Errorf("%w: %d joint positions given, the arm has %d joints", ErrInvalidInput, len(q), len(arm.Joints))
	}
	for i, v := range q {
		if !finite(v) {
			return fmt.Errorf("%w: joint %q position %v is not a finite number", ErrInvalidInput, arm.Joints[i].Name, v)
		}
	}
	return nil
}

// WithinLimits returns a *LimitError (Tried 0) for the first joint of q
// outside its limits, nil when all are inside. q must pass Check.
func WithinLimits(arm *hwconfig.ArmConf, q []float64) error {
	for i, v := range q {
		j := arm.Joints[i]
		if v < j.Min-limitEps || v > j.Max+limitEps {
			return &LimitError{Joint: j.Name, Value: v, Min: j.Min, Max: j.Max}
		}
	}
	return nil
}

// limitEps absorbs rounding so a solution exactly on a limit is accepted.
const limitEps = 1e-9

// IK returns joint positions (hw-config order) that put the fingertip at
// target, given in the base frame. It tries each of Approaches with both
// elbow configurations and returns the first solution inside the joint
// limits. Errors wrap ErrInvalidInput, ErrOutOfReach (a *ReachError) or
// ErrJointLimits (a *LimitError naming the joint that failed the least).
func IK(arm *hwconfig.ArmConf, target robot.Vec3) ([]float64, error) {
	if err := Check(arm, nil); err != nil {
		return nil, err
	}
	if !finite(target.X) || !finite(target.Y) || !finite(target.Z) {
		return nil, fmt.Errorf("%w: target (%v, %v, %v) must have finite coordinates", ErrInvalidInput, target.X, target.Y, target.Z)
	}
	dx, dy, dz := target.X-arm.Mount.X, target.Y-arm.Mount.Y, target.Z-arm.Mount.Z
	r := math.Hypot(dx, dy)
	dist := math.Hypot(r, dz)
	total := linkSum(arm)
	reach := Reach(arm)
	if dist > total+1e-9 || r > reach+1e-9 {
		return nil, &ReachError{Distance: dist, Horizontal: r, Reach: reach}
	}
	yaw := 0.0
	if r > 1e-9 {
		yaw = math.Atan2(dy, dx)
	}
	l1, l2 := arm.LinkLengths[0], arm.LinkLengths[1]
	l3 := 0.0
	approaches := Approaches
	if len(arm.LinkLengths) == 3 {
		l3 = arm.LinkLengths[2]
	} else {
		approaches = []float64{0} // no wrist: the approach angle is free
	}
	var best *LimitError
	bestExcess := math.Inf(1)
	tried := 0
	geometric := false
	for _, phi := range approaches {
		wr, wz := r-l3*math.Cos(phi), dz-l3*math.Sin(phi)
		c2 := (wr*wr + wz*wz - l1*l1 - l2*l2) / (2 * l1 * l2)
		if c2 > 1+1e-12 || c2 < -1-1e-12 {
			continue
		}
		c2 = math.Max(-1, math.Min(1, c2))
		for _, elbowSign := range []float64{-1, 1} { // elbow up first
			q2 := elbowSign * math.Acos(c2)
			q1 := math.Atan2(wz, wr) - math.Atan2(l2*math.Sin(q2), l1+l2*math.Cos(q2))
			q := []float64{yaw, robot.NormalizeAngle(q1), q2}
			if len(arm.LinkLengths) == 3 {
				q = append(q, robot.NormalizeAngle(phi-q1-q2))
			}
			tried++
			geometric = true
			err := WithinLimits(arm, q)
			if err == nil {
				return q, nil
			}
			if le, ok := errors.AsType[*LimitError](err); ok {
				if ex := excess(le); ex < bestExcess {
					bestExcess, best = ex, le
				}
			}
		}
	}
	if !geometric {
		// Within the total length but no approach angle of the set reaches
		// it, typically because it is too close to the mount.
		return nil, fmt.Errorf("%w: the target is %.3f m from the arm mount, inside the arm's length of %.3f m, but none of the %d wrist approach angles (%.0f° to %.0f°) reaches it; it is too close to the arm",
			ErrOutOfReach, dist, total, len(approaches), robot.Degrees(approaches[0]), robot.Degrees(approaches[len(approaches)-1]))
	}
	best.Tried = tried
	return nil, best
}

func excess(le *LimitError) float64 {
	if le.Value < le.Min {
		return le.Min - le.Value
	}
	return le.Value - le.Max
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
