package sim

import (
	"fmt"
	"math"

	"github.com/robot-bridge/robot-bridge/geom"
	"github.com/robot-bridge/robot-bridge/robot"
)

// Base controller tuning. The controller turns in place toward the goal,
// drives straight with heading correction, then turns in place to the
// final heading; speeds follow a braking profile that uses only
// profileMargin of the acceleration limit, so the controller never needs
// more than the limit to stop on target.
//
// The bridge's supervisor checks a base move as the footprint swept along
// the straight segment from where the base is to the target
// (safety.Limits), so the controller drives that segment and nothing
// else: it never turns while it translates (a base that must turn first
// brakes straight to rest), and it drives only while its heading error is
// below turnEnter, steering at the target, which keeps it on the segment
// up to its tracking error. A disc turning in place sweeps nothing new.
const (
	profileMargin = 0.9
	// turnEnter/turnExit: heading error (rad) above which the base stops
	// and turns in place, and below which it drives again.
	turnEnter = 0.2
	turnExit  = 0.05
	// Linear gains that make the last centimetres and degrees converge
	// smoothly instead of chattering around zero.
	linGain = 2.0
	angGain = 4.0
	// restEps: speeds below these count as at rest (m/s, rad/s).
	restV = 0.005
	restW = 0.01
)

func (s *Sim) commandBase(id string, g *robot.BaseGoal, reject rejectFunc) error {
	t := g.Target
	if !finite(t.X, t.Y, t.Theta, g.MaxLinear, g.MaxAngular) {
		return reject("base", "target and speed caps must be finite numbers (got x=%v y=%v theta=%v max_linear=%v max_angular=%v)",
			t.X, t.Y, t.Theta, g.MaxLinear, g.MaxAngular)
	}
	if g.MaxLinear < 0 || g.MaxAngular < 0 {
		return reject("base.max_linear", "speed caps must be >= 0 (0 means the configured limit); got max_linear=%v max_angular=%v", g.MaxLinear, g.MaxAngular)
	}
	p := geom.Point{X: t.X, Y: t.Y}
	if !s.bounds.Contains(p) || s.bounds.DistanceToEdge(p) < s.radius {
		return reject("base.target", "(%.2f, %.2f) is outside the room or closer than the base radius %.2f m to a wall (room: %s)",
			t.X, t.Y, s.radius, s.bounds.Describe())
	}
	for _, sf := range s.surfaces {
		if sf.poly.Contains(p) || sf.poly.DistanceToEdge(p) < s.radius {
			return reject("base.target", "(%.2f, %.2f) is inside or within %.2f m of the %s (%s); the base would collide",
				t.X, t.Y, s.radius, sf.name, sf.poly.Describe())
		}
	}
	maxV, maxW := s.maxV, s.maxW
	if g.MaxLinear > 0 {
		maxV = math.Min(maxV, g.MaxLinear)
	}
	if g.MaxAngular > 0 {
		maxW = math.Min(maxW, g.MaxAngular)
	}
	s.goal = &baseGoal{id: id, target: robot.Pose2D{X: t.X, Y: t.Y, Theta: robot.NormalizeAngle(t.Theta)}, ignoreTheta: g.IgnoreTheta, maxV: maxV, maxW: maxW, phase: phaseTurn}
	s.bumped = false
	return nil
}

// brakeProfile returns the largest speed (toward a remaining distance or
// angle e, signed) from which the base can still stop in time with the
// margin, capped by limit and by a linear gain near zero.
func brakeProfile(e, limit, accel, gain float64) float64 {
	a := math.Abs(e)
	v := math.Min(limit, math.Min(math.Sqrt(2*profileMargin*accel*a), gain*a))
	return math.Copysign(v, e)
}

func approach(cur, want, maxDelta float64) float64 {
	d := want - cur
	if d > maxDelta {
		d = maxDelta
	} else if d < -maxDelta {
		d = -maxDelta
	}
	return cur + d
}

func (s *Sim) stepBase(dt float64) {
	vDes, wDes := 0.0, 0.0
	if g := s.goal; g != nil {
		dx, dy := g.target.X-s.pose.X, g.target.Y-s.pose.Y
		dist := math.Hypot(dx, dy)
		if g.phase != phaseFinal && dist <= s.goalTol {
			g.phase = phaseFinal
		}
		switch g.phase {
		case phaseTurn, phaseDrive:
			e := robot.NormalizeAngle(math.Atan2(dy, dx) - s.pose.Theta)
			if g.phase == phaseDrive && math.Abs(e) > turnEnter {
				g.phase = phaseTurn
			} else if g.phase == phaseTurn && math.Abs(e) < turnExit {
				g.phase = phaseDrive
			}
			switch {
			case g.phase == phaseDrive:
				wDes = brakeProfile(e, g.maxW, s.accW, angGain)
				vDes = brakeProfile(dist, g.maxV, s.accV, linGain) * math.Max(0, math.Cos(e))
			case math.Abs(s.v) < restV:
				wDes = brakeProfile(e, g.maxW, s.accW, angGain)
			default:
				// Still rolling: brake straight first, then turn.
			}
		case phaseFinal:
			e := 0.0
			if !g.ignoreTheta {
				e = robot.NormalizeAngle(g.target.Theta - s.pose.Theta)
				if math.Abs(s.v) < restV {
					wDes = brakeProfile(e, g.maxW, s.accW, angGain)
				}
			}
			if math.Abs(e) <= s.yawTol && math.Abs(s.v) < restV && math.Abs(s.w) < restW {
				s.event(EventGoalReached, fmt.Sprintf("base goal %s reached at (%.3f, %.3f, %.1f°)", g.id, s.pose.X, s.pose.Y, robot.Degrees(s.pose.Theta)))
				s.goal = nil
				wDes = 0
			}
		}
	}
	if s.estop || s.battery <= 0 {
		// The e-stop circuit cuts motor power: the base stops at once.
		s.v, s.w = 0, 0
		return
	}
	if s.stalled {
		// The wheels are blocked: commands draw current, nothing turns.
		s.v, s.w = 0, 0
		return
	}
	s.v = approach(s.v, vDes, s.accV*dt)
	s.w = approach(s.w, wDes, s.accW*dt)
	if s.goal == nil && math.Abs(s.v) < 1e-6 && math.Abs(s.w) < 1e-6 {
		s.v, s.w = 0, 0
		return
	}
	th := s.pose.Theta + s.w*dt/2
	nx, ny := s.pose.X+s.v*math.Cos(th)*dt, s.pose.Y+s.v*math.Sin(th)*dt
	if c := s.clearance(nx, ny); c < 0 && c < s.clearance(s.pose.X, s.pose.Y) {
		// A bumper hit: the motors cut out, the goal is aborted, and the
		// controller reports the contact until the next base goal.
		s.counters.Collisions++
		s.bumped = true
		if s.goal != nil {
			s.event(EventCollision, fmt.Sprintf("bumper contact at (%.2f, %.2f): base goal %s aborted", s.pose.X, s.pose.Y, s.goal.id))
		} else {
			s.event(EventCollision, fmt.Sprintf("bumper contact at (%.2f, %.2f)", s.pose.X, s.pose.Y))
		}
		s.goal = nil
		s.v = 0
		nx, ny = s.pose.X, s.pose.Y
	}
	s.odo.BaseDistance += math.Hypot(nx-s.pose.X, ny-s.pose.Y)
	s.odo.BaseRotation += math.Abs(s.w * dt)
	s.pose = robot.Pose2D{X: nx, Y: ny, Theta: robot.NormalizeAngle(s.pose.Theta + s.w*dt)}
}

// clearance returns how far a base centred at (x, y) is from touching a
// wall or a surface (table legs and tops reach the floor in this world);
// negative means contact. Moving is a collision only when it makes the
// clearance negative and smaller, so a base that starts in contact can
// still back out.
func (s *Sim) clearance(x, y float64) float64 {
	p := geom.Point{X: x, Y: y}
	var c float64
	if s.boundsRect {
		// Fast path for the usual rectangular room.
		c = math.Min(math.Min(x-s.boundsMin.X, s.boundsMax.X-x), math.Min(y-s.boundsMin.Y, s.boundsMax.Y-y))
	} else {
		c = s.bounds.DistanceToEdge(p)
		if !s.bounds.Contains(p) {
			c = -c
		}
	}
	for _, sf := range s.surfaces {
		// Obstacles whose bounding box is farther than the radius cannot
		// be touched; skip the exact distance for them.
		dx := math.Max(math.Max(sf.min.X-x, 0), x-sf.max.X)
		dy := math.Max(math.Max(sf.min.Y-y, 0), y-sf.max.Y)
		if dx > s.radius || dy > s.radius {
			continue
		}
		d := sf.poly.DistanceToEdge(p)
		if sf.poly.Contains(p) {
			d = -d
		}
		c = math.Min(c, d)
	}
	return c - s.radius
}
