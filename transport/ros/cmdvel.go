package ros

import (
	"math"

	"github.com/bluenviron/goroslib/v2/pkg/msgs/geometry_msgs"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
)

// driveGoal is the cmd_vel controller's current goal.
type driveGoal struct {
	law *driveLaw
	gen uint64
}

// startDrive starts closing the loop on odometry towards g (cmd_vel
// mode). It returns at once: the transport has accepted the goal.
func (d *Driver) startDrive(g robot.BaseGoal, gen uint64) error {
	d.cmdMu.Lock()
	defer d.cmdMu.Unlock()
	if d.stopGen != gen {
		return &GoalError{Action: d.set.names.cmdVel, Err: errSuperseded}
	}
	dg := &driveGoal{law: newDriveLaw(d.set.cfg.Base, g), gen: gen}
	d.drive = dg
	d.refresh = d.clk.Now()
	go d.runDrive(dg)
	return nil
}

var errSuperseded = errorString("superseded by a stop issued while the goal was being prepared")

type errorString string

func (e errorString) Error() string { return string(e) }

// runDrive publishes velocity commands every control period until the
// goal is reached, replaced, stopped, or refreshes stop coming.
func (d *Driver) runDrive(dg *driveGoal) {
	t := d.clk.NewTicker(d.set.controlPeriod)
	defer t.Stop()
	for range t.Chan() {
		st, ok := d.hub.Latest()
		d.cmdMu.Lock()
		if d.drive != dg {
			d.cmdMu.Unlock()
			return
		}
		s := d.session()
		if !ok || s == nil {
			d.cmdMu.Unlock()
			continue
		}
		if d.clk.Since(d.refresh) > d.set.commandTimeout {
			// Like a base controller: no supervision, no motion.
			d.drive = nil
			s.cmdVel.Write(&geometry_msgs.Twist{})
			d.cmdMu.Unlock()
			d.log.Warn("cmd_vel controller stopped: no refresh", "timeout", d.set.commandTimeout)
			return
		}
		v, w, done := dg.law.step(st.Base, st.Velocity)
		tw := &geometry_msgs.Twist{Linear: geometry_msgs.Vector3{X: v}, Angular: geometry_msgs.Vector3{Z: w}}
		s.cmdVel.Write(tw)
		if done {
			d.drive = nil
		}
		d.cmdMu.Unlock()
		if done {
			return
		}
	}
}

// Controller gains: the braking profile keeps a margin on the
// acceleration limits, and the gains set the approach near zero error.
const (
	brakeMargin = 0.9
	linGain     = 2.0 // 1/s
	angGain     = 4.0 // 1/s
	// turnExit is the heading error (rad) below which a base turning in
	// place starts to drive; turnEnter the one above which a driving base
	// stops and turns in place again. The gap is hysteresis.
	turnExit  = 0.05
	turnEnter = 0.2
	// settleV is the measured linear speed (m/s) below which the base may
	// start turning in place: low enough that the arc it still sweeps is
	// a few millimetres, high enough that odometry noise on a real robot
	// at rest does not keep it from ever turning.
	settleV = 0.03
)

// profile is the largest speed, toward a remaining distance or angle e
// (signed), from which the base still stops in time with the margin,
// capped by limit and by a linear gain near zero.
func profile(e, limit, accel, gain float64) float64 {
	a := math.Abs(e)
	return math.Copysign(math.Min(limit, math.Min(math.Sqrt(2*brakeMargin*accel*a), gain*a)), e)
}

// drivePhase is where the cmd_vel controller is in a goal.
type drivePhase int

const (
	phaseTurn drivePhase = iota
	phaseDrive
	phaseFinal
)

// driveLaw is the cmd_vel controller for one goal: turn in place to face
// the target, drive straight to it, turn in place to the final heading.
//
// The supervisor checks a base move as the footprint swept along the
// straight segment from the start to the target (safety.Limits), so this
// law drives that segment and nothing else: it never turns while it
// translates (it first brakes straight to rest, then turns), it drives
// only while the heading error is below turnEnter, and while it drives it
// steers at the target, which keeps the base inside the triangle of its
// current position, the start and the target, i.e. on the segment up to
// its tracking error. A disc turning in place sweeps nothing new.
type driveLaw struct {
	goal       robot.BaseGoal
	bc         hwconfig.BaseConf
	maxV, maxW float64
	phase      drivePhase
}

func newDriveLaw(bc hwconfig.BaseConf, g robot.BaseGoal) *driveLaw {
	maxV, maxW := bc.MaxLinearSpeed, bc.MaxAngularSpeed
	if g.MaxLinear > 0 {
		maxV = math.Min(maxV, g.MaxLinear)
	}
	if g.MaxAngular > 0 {
		maxW = math.Min(maxW, g.MaxAngular)
	}
	return &driveLaw{goal: g, bc: bc, maxV: maxV, maxW: maxW}
}

// step returns the velocity command for the measured pose p and speeds
// vel, and whether the goal is reached. Speeds stay within the goal's
// caps and the configured limits, and follow the same braking profile the
// supervisor's deadline assumes.
func (l *driveLaw) step(p robot.Pose2D, vel robot.Twist2D) (v, w float64, done bool) {
	bc, g := l.bc, l.goal
	dx, dy := g.Target.X-p.X, g.Target.Y-p.Y
	dist := math.Hypot(dx, dy)
	if l.phase != phaseFinal && dist <= bc.GoalTolerance*0.5 {
		l.phase = phaseFinal
	}
	moving := math.Abs(vel.V) > settleV
	switch l.phase {
	case phaseTurn, phaseDrive:
		he := robot.NormalizeAngle(math.Atan2(dy, dx) - p.Theta)
		if l.phase == phaseDrive && math.Abs(he) > turnEnter {
			l.phase = phaseTurn
		} else if l.phase == phaseTurn && math.Abs(he) < turnExit {
			l.phase = phaseDrive
		}
		if l.phase == phaseTurn {
			if moving {
				return 0, 0, false // brake straight, then turn
			}
			return 0, profile(he, l.maxW, bc.MaxAngularAccel, angGain), false
		}
		return profile(dist, l.maxV, bc.MaxLinearAccel, linGain) * math.Cos(he), profile(he, l.maxW, bc.MaxAngularAccel, angGain), false
	}
	if moving {
		return 0, 0, false // come to rest on the target before turning
	}
	if !g.IgnoreTheta {
		e := robot.NormalizeAngle(g.Target.Theta - p.Theta)
		if math.Abs(e) > robot.Radians(bc.YawToleranceDeg)*0.5 {
			w := profile(e, l.maxW, bc.MaxAngularAccel, angGain)
			if math.Abs(w) < 0.05 {
				w = math.Copysign(0.05, e)
			}
			return 0, w, false
		}
	}
	return 0, 0, true
}
