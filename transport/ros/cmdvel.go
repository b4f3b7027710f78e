package ros

import (
	"math"

	"github.com/bluenviron/goroslib/v2/pkg/msgs/geometry_msgs"

	"github.com/robot-bridge/robot-bridge/robot"
)

// driveGoal is the cmd_vel controller's current goal.
type driveGoal struct {
	goal robot.BaseGoal
	gen  uint64
}

// startDrive starts closing the loop on odometry towards g (cmd_vel
// mode). It returns at once: the transport has accepted the goal.
func (d *Driver) startDrive(g robot.BaseGoal, gen uint64) error {
	d.cmdMu.Lock()
	defer d.cmdMu.Unlock()
	if d.stopGen != gen {
		return &GoalError{Action: d.set.names.cmdVel, Err: errSuperseded}
	}
	dg := &driveGoal{goal: g, gen: gen}
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
		v, w, done := d.control(dg.goal, st.Base)
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
	turnInPlace = 0.35
)

// profile is the largest speed, toward a remaining distance or angle e
// (signed), from which the base still stops in time with the margin,
// capped by limit and by a linear gain near zero.
func profile(e, limit, accel, gain float64) float64 {
	a := math.Abs(e)
	return math.Copysign(math.Min(limit, math.Min(math.Sqrt(2*brakeMargin*accel*a), gain*a)), e)
}

// control is a turn-then-drive unicycle law: face the target, drive with
// heading correction and a braking profile, then turn to the final
// heading. Speeds stay within the goal's caps and the configured limits,
// and follow the same profile the supervisor's deadline assumes.
func (d *Driver) control(g robot.BaseGoal, p robot.Pose2D) (v, w float64, done bool) {
	bc := d.set.cfg.Base
	maxV, maxW := bc.MaxLinearSpeed, bc.MaxAngularSpeed
	if g.MaxLinear > 0 {
		maxV = math.Min(maxV, g.MaxLinear)
	}
	if g.MaxAngular > 0 {
		maxW = math.Min(maxW, g.MaxAngular)
	}
	dx, dy := g.Target.X-p.X, g.Target.Y-p.Y
	dist := math.Hypot(dx, dy)
	if dist > bc.GoalTolerance*0.5 {
		he := robot.NormalizeAngle(math.Atan2(dy, dx) - p.Theta)
		w = profile(he, maxW, bc.MaxAngularAccel, angGain)
		if math.Abs(he) > turnInPlace {
			return 0, w, false
		}
		return profile(dist, maxV, bc.MaxLinearAccel, linGain) * math.Cos(he), w, false
	}
	if !g.IgnoreTheta {
		e := robot.NormalizeAngle(g.Target.Theta - p.Theta)
		if math.Abs(e) > robot.Radians(bc.YawToleranceDeg)*0.5 {
			w := profile(e, maxW, bc.MaxAngularAccel, angGain)
			if math.Abs(w) < 0.05 {
				w = math.Copysign(0.05, e)
			}
			return 0, w, false
		}
	}
	return 0, 0, true
}
