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

// control is a turn-then-drive unicycle law: face the target, drive with
// heading correction and a braking profile, then turn to the final
// heading. Speeds stay within the goal's caps and the configured limits.
func (d *Driver) control(g robot.BaseGoal, p robot.Pose2D) (v, w float64, done bool) {
	bc := d.set.cfg.Base
	maxV, maxW := bc.MaxLinearSpeed, bc.MaxAngularSpeed
	if g.MaxLinear > 0 {
		maxV = math.Min(maxV, g.MaxLinear)
	}
	if g.MaxAngular > 0 {
		maxW = math.Min(maxW, g.MaxAngular)
	}
	clampW := func(x float64) float64 { return math.Max(-maxW, math.Min(maxW, x)) }
	dx, dy := g.Target.X-p.X, g.Target.Y-p.Y
	dist := math.Hypot(dx, dy)
	if dist > bc.GoalTolerance*0.5 {
		he := robot.NormalizeAngle(math.Atan2(dy, dx) - p.Theta)
		if math.Abs(he) > 0.5 {
			return 0, clampW(2 * he), false
		}
		v = math.Min(maxV, math.Min(1.5*dist, math.Sqrt(2*bc.MaxLinearAccel*dist)))
		return v, clampW(2 * he), false
	}
	if !g.IgnoreTheta {
		e := robot.NormalizeAngle(g.Target.Theta - p.Theta)
		if math.Abs(e) > robot.Radians(bc.YawToleranceDeg)*0.5 {
			w := clampW(2 * e)
			if math.Abs(w) < 0.05 {
				w = math.Copysign(0.05, e)
			}
			return 0, w, false
		}
	}
	return 0, 0, true
}
