package sim

import (
	"fmt"
	"math"

	"github.com/robot-bridge/robot-bridge/kinematics"
	"github.com/robot-bridge/robot-bridge/robot"
)

func (s *Sim) commandArm(id string, g *robot.ArmGoal, reject rejectFunc) error {
	arm := s.cfg.Arm
	if arm == nil {
		return reject("arm", "this robot has no arm")
	}
	if len(g.Positions) != len(arm.Joints) {
		return reject("arm.positions", "%d positions given, the arm has %d joints (%v)", len(g.Positions), len(arm.Joints), s.jointNames)
	}
	scale := g.VelocityScale
	if !finite(scale) || scale < 0 || scale > 1 {
		return reject("arm.velocity_scale", "%v must be in (0, 1] (0 means 1)", scale)
	}
	if scale == 0 {
		scale = 1
	}
	for i, v := range g.Positions {
		j := arm.Joints[i]
		if !finite(v) {
			return reject(fmt.Sprintf("arm.positions[%d]", i), "joint %s position %v is not a finite number", j.Name, v)
		}
		if v < j.Min || v > j.Max {
			return reject(fmt.Sprintf("arm.positions[%d]", i), "joint %s target %.3f rad is outside its limits [%g, %g]", j.Name, v, j.Min, j.Max)
		}
	}
	copy(s.qTarget, g.Positions)
	s.armScale = scale
	s.armActive = true
	s.armCmdID = id
	return nil
}

func (s *Sim) stepArm(dt float64) {
	if !s.armActive || s.estop || s.battery <= 0 {
		clear(s.qd)
		return
	}
	done := true
	for i, j := range s.cfg.Arm.Joints {
		diff := s.qTarget[i] - s.q[i]
		if s.stuck[i] {
			s.qd[i] = 0
			if diff != 0 {
				done = false
			}
			continue
		}
		move := approach(0, diff, j.MaxVelocity*s.armScale*dt)
		s.q[i] += move
		if math.Abs(s.qTarget[i]-s.q[i]) < 1e-12 {
			s.q[i] = s.qTarget[i]
		} else {
			done = false
		}
		s.qd[i] = move / dt
		s.odo.JointTravel += math.Abs(move)
	}
	if done {
		s.armActive = false
		s.event(EventArmReached, "arm goal "+s.armCmdID+" reached")
	}
}

func (s *Sim) commandGripper(g *robot.GripperGoal, reject rejectFunc) error {
	gc := s.cfg.Gripper
	if gc == nil {
		return reject("gripper", "this robot has no gripper")
	}
	if !g.Close {
		if g.Force != 0 {
			return reject("gripper.force", "force is only meaningful when closing; got %v with close=false", g.Force)
		}
		s.grip.closing, s.grip.moving, s.grip.force = false, true, 0
		if s.grip.holding != "" {
			s.release("gripper opened")
		}
		return nil
	}
	force := g.Force
	if !finite(force) || force < 0 || force > gc.MaxForce {
		return reject("gripper.force", "%v N must be in [0, %g] N (0 means the default %g N)", force, gc.MaxForce, s.defaultForce)
	}
	if force == 0 {
		force = s.defaultForce
	}
	s.grip.closing, s.grip.moving, s.grip.cmdForce = true, true, force
	if s.grip.holding != "" {
		// Already holding: re-squeeze with the new force.
		s.grip.moving, s.grip.force = false, force
	}
	return nil
}

// gripWidth is the finger gap at which an object is held.
func (s *Sim) gripWidth(o *object) float64 {
	return math.Min(o.conf.Size*0.7, s.cfg.Gripper.MaxOpening*0.9)
}

func (s *Sim) stepGripper(dt float64) {
	gc := s.cfg.Gripper
	if gc == nil || !s.grip.moving || s.estop || s.battery <= 0 {
		return
	}
	step := GripperSpeed * dt
	if !s.grip.closing {
		next := math.Min(gc.MaxOpening, s.grip.opening+step)
		s.odo.GripperTravel += next - s.grip.opening
		s.grip.opening = next
		if next == gc.MaxOpening {
			s.grip.moving = false
		}
		return
	}
	next := math.Max(0, s.grip.opening-step)
	if o := s.graspCandidate(); o != nil && next <= s.gripWidth(o) {
		next = math.Min(s.grip.opening, s.gripWidth(o))
		s.odo.GripperTravel += s.grip.opening - next
		s.grip.opening, s.grip.moving, s.grip.force, s.grip.holding = next, false, s.grip.cmdForce, o.conf.ID
		o.heldBy, o.surface = "gripper", ""
		s.event(EventGrasp, "grasped "+o.conf.ID)
		return
	}
	s.odo.GripperTravel += s.grip.opening - next
	s.grip.opening = next
	if next == 0 {
		// Closed on nothing.
		s.grip.moving, s.grip.force = false, 0
	}
}

// graspCandidate returns the nearest graspable object whose centre is within
// the grasp tolerance of the fingertip and that still fits between the
// fingers, nil if none.
func (s *Sim) graspCandidate() *object {
	if s.cfg.Arm == nil {
		return nil
	}
	tip := kinematics.FKRoom(s.cfg.Arm, s.pose, s.q)
	var best *object
	bestD := math.Inf(1)
	for _, o := range s.objects {
		if !o.conf.Graspable || o.heldBy != "" || s.gripWidth(o) > s.grip.opening {
			continue
		}
		d := dist3(tip, o.pos)
		if d <= s.graspTol && d < bestD {
			best, bestD = o, d
		}
	}
	return best
}

func dist3(a, b robot.Vec3) float64 {
	return math.Sqrt((a.X-b.X)*(a.X-b.X) + (a.Y-b.Y)*(a.Y-b.Y) + (a.Z-b.Z)*(a.Z-b.Z))
}

// release lets go of the held object, which falls onto the surface below
// it (or the floor).
func (s *Sim) release(why string) {
	for _, o := range s.objects {
		if o.conf.ID != s.grip.holding {
			continue
		}
		name, h := s.surfaceBelow(o.pos.X, o.pos.Y)
		o.heldBy, o.surface = "", name
		o.pos.Z = h + o.conf.Size/2
		where := "the floor"
		if name != "" {
			where = "the " + name
		}
		s.event(EventRelease, fmt.Sprintf("%s: %s dropped onto %s at (%.2f, %.2f)", why, o.conf.ID, where, o.pos.X, o.pos.Y))
	}
	s.grip.holding = ""
	s.grip.force = 0
}

// moveHeld keeps a held object at the fingertip.
func (s *Sim) moveHeld() {
	if s.grip.holding == "" || s.cfg.Arm == nil {
		return
	}
	tip := kinematics.FKRoom(s.cfg.Arm, s.pose, s.q)
	for _, o := range s.objects {
		if o.conf.ID == s.grip.holding {
			o.pos = tip
		}
	}
}
