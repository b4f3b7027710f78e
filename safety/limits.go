package safety

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/robot-bridge/robot-bridge/geom"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// ErrLimitExceeded is the root of every limit refusal; a *LimitError
// unwraps to it.
var ErrLimitExceeded = errors.New("outside the configured limits")

// Limit names, as LimitError.Limit carries them.
const (
	LimitWorkspace     = "workspace"
	LimitKeepOut       = "keep_out"
	LimitPathKeepOut   = "path_keep_out"
	LimitLinearSpeed   = "max_linear_speed"
	LimitAngularSpeed  = "max_angular_speed"
	LimitJointPosition = "joint_position"
	LimitJointCount    = "joint_count"
	LimitVelocityScale = "velocity_scale"
	LimitGripperForce  = "gripper_force"
	LimitNotFinite     = "finite"
	LimitNoArm         = "no_arm"
	LimitNoGripper     = "no_gripper"
)

// LimitError says which configured limit a command violates and what is
// allowed. Min and Max are NaN when the limit is not a range.
type LimitError struct {
	// Limit is one of the Limit* names.
	Limit string
	// Field is the command field at fault: "x", "y", "theta",
	// "max_linear", "joints.elbow", "velocity_scale", "force".
	Field string
	// Value is the offending value (NaN when it is not a number).
	Value float64
	Min   float64
	Max   float64
	// Allowed says the allowed range in words: "x in [-4.5, 4.5], y in
	// [-4.5, 4.5]".
	Allowed string
	// Detail adds what the range alone does not say ("the straight path
	// from (0, 0) crosses keep-out region stairs").
	Detail string
}

// Error implements error with a sentence a model can act on.
func (e *LimitError) Error() string {
	var b strings.Builder
	if e.Detail != "" {
		b.WriteString(e.Detail)
	} else if !math.IsNaN(e.Value) {
		fmt.Fprintf(&b, "%s=%s is outside the %s limit", e.Field, fmtNum(e.Value), strings.ReplaceAll(e.Limit, "_", " "))
	} else {
		fmt.Fprintf(&b, "%s violates the %s limit", e.Field, strings.ReplaceAll(e.Limit, "_", " "))
	}
	if e.Allowed != "" {
		fmt.Fprintf(&b, " (allowed: %s)", e.Allowed)
	}
	return b.String()
}

// Unwrap lets errors.Is(err, ErrLimitExceeded) hold.
func (e *LimitError) Unwrap() error { return ErrLimitExceeded }

// ToolError wraps e as the SAFETY_VIOLATION an agent receives, with the
// limit, field and range in details.
func (e *LimitError) ToolError() *toolerr.Error {
	te := toolerr.New(toolerr.SafetyViolation, "%s", e.Error()).Wrap(e).
		With("limit", e.Limit).With("field", e.Field).With("allowed", e.Allowed)
	if !math.IsNaN(e.Value) {
		te.With("value", e.Value)
	}
	if !math.IsNaN(e.Min) {
		te.With("min", e.Min)
	}
	if !math.IsNaN(e.Max) {
		te.With("max", e.Max)
	}
	return te
}

func fmtNum(v float64) string { return fmt.Sprintf("%.4g", v) }

// Limits checks commands against one robot's configured limits. It is
// pure: the same config, command and start pose give the same answer,
// which is why it can run before an operator is asked and again at the
// gate.
type Limits struct {
	cfg       *hwconfig.Config
	workspace geom.Polygon
	keepOut   []namedPolygon
}

type namedPolygon struct {
	name string
	poly geom.Polygon
}

// NewLimits prepares the limit checks of cfg.
func NewLimits(cfg *hwconfig.Config) (*Limits, error) {
	if cfg == nil {
		return nil, errors.New("safety: limits need a config")
	}
	ws := polygonOf(cfg.Base.Workspace)
	if len(ws) < 3 {
		return nil, fmt.Errorf("safety: base.workspace needs at least 3 vertices, has %d", len(ws))
	}
	l := &Limits{cfg: cfg, workspace: ws}
	for _, r := range cfg.World.Regions {
		if r.KeepOut {
			l.keepOut = append(l.keepOut, namedPolygon{r.Name, polygonOf(r.Polygon)})
		}
	}
	return l, nil
}

func polygonOf(pts []hwconfig.Point2) geom.Polygon {
	p := make(geom.Polygon, len(pts))
	for i, v := range pts {
		p[i] = geom.Point{X: v[0], Y: v[1]}
	}
	return p
}

// Workspace returns the workspace polygon.
func (l *Limits) Workspace() geom.Polygon { return l.workspace }

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func notFinite(field string) *LimitError {
	return &LimitError{
		Limit: LimitNotFinite, Field: field, Value: math.NaN(), Min: math.NaN(), Max: math.NaN(),
		Allowed: "a finite number", Detail: field + " is not a finite number",
	}
}

// Check returns a *LimitError if cmd violates a limit. from is the base
// pose the motion starts at; when nil the straight-path check is skipped
// (the target checks still run).
func (l *Limits) Check(cmd robot.Command, from *robot.Pose2D) error {
	if err := cmd.Validate(); err != nil {
		return err
	}
	switch cmd.Kind {
	case robot.CmdMoveBase:
		return l.checkBase(*cmd.Base, from)
	case robot.CmdMoveArm:
		return l.checkArm(*cmd.Arm)
	case robot.CmdGripper:
		return l.checkGripper(*cmd.Gripper)
	}
	return nil
}

func (l *Limits) checkBase(g robot.BaseGoal, from *robot.Pose2D) error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"x", g.Target.X}, {"y", g.Target.Y}, {"theta", g.Target.Theta}, {"max_linear", g.MaxLinear}, {"max_angular", g.MaxAngular}} {
		if !finite(f.v) {
			return notFinite(f.name)
		}
	}
	bc := l.cfg.Base
	if g.MaxLinear <= 0 || g.MaxLinear > bc.MaxLinearSpeed {
		return &LimitError{
			Limit: LimitLinearSpeed, Field: "max_linear", Value: g.MaxLinear, Min: 0, Max: bc.MaxLinearSpeed,
			Allowed: fmt.Sprintf("0 < max_linear <= %g m/s", bc.MaxLinearSpeed),
		}
	}
	if g.MaxAngular <= 0 || g.MaxAngular > bc.MaxAngularSpeed {
		return &LimitError{
			Limit: LimitAngularSpeed, Field: "max_angular", Value: g.MaxAngular, Min: 0, Max: bc.MaxAngularSpeed,
			Allowed: fmt.Sprintf("0 < max_angular <= %g rad/s", bc.MaxAngularSpeed),
		}
	}
	if err := l.checkPosition(g.Target.X, g.Target.Y); err != nil {
		return err
	}
	if from != nil {
		a, b := geom.Point{X: from.X, Y: from.Y}, geom.Point{X: g.Target.X, Y: g.Target.Y}
		for _, k := range l.keepOut {
			if k.poly.CrossesSegment(a, b) || k.poly.Contains(a) {
				return &LimitError{
					Limit: LimitPathKeepOut, Field: "x", Value: g.Target.X, Min: math.NaN(), Max: math.NaN(),
					Allowed: "a straight path that stays outside keep-out region " + k.name + " (" + k.poly.Describe() + ")",
					Detail: fmt.Sprintf("the straight path from (%.2f, %.2f) to (%.2f, %.2f) crosses keep-out region %s",
						a.X, a.Y, b.X, b.Y, k.name),
				}
			}
		}
		if l.workspace.CrossesSegment(a, b) && !l.workspace.Contains(a) {
			return &LimitError{
				Limit: LimitWorkspace, Field: "x", Value: from.X, Min: math.NaN(), Max: math.NaN(),
				Allowed: l.workspace.Describe(),
				Detail:  fmt.Sprintf("the base starts at (%.2f, %.2f), outside the workspace", a.X, a.Y),
			}
		}
	}
	return nil
}

// checkPosition checks that a base centre position is inside the
// workspace and outside every keep-out region.
func (l *Limits) checkPosition(x, y float64) error {
	p := geom.Point{X: x, Y: y}
	if !l.workspace.Contains(p) {
		min, max := l.workspace.Bounds()
		field, v, lo, hi := "x", x, min.X, max.X
		if x >= min.X && x <= max.X {
			field, v, lo, hi = "y", y, min.Y, max.Y
		}
		return &LimitError{
			Limit: LimitWorkspace, Field: field, Value: v, Min: lo, Max: hi,
			Allowed: l.workspace.Describe(),
			Detail:  fmt.Sprintf("target (%s, %s) is outside the workspace", fmtNum(x), fmtNum(y)),
		}
	}
	for _, k := range l.keepOut {
		if k.poly.Contains(p) {
			return &LimitError{
				Limit: LimitKeepOut, Field: "x", Value: x, Min: math.NaN(), Max: math.NaN(),
				Allowed: "outside keep-out region " + k.name + " (" + k.poly.Describe() + ")",
				Detail:  fmt.Sprintf("target (%s, %s) is inside keep-out region %s", fmtNum(x), fmtNum(y), k.name),
			}
		}
	}
	return nil
}

func (l *Limits) checkArm(g robot.ArmGoal) error {
	if l.cfg.Arm == nil {
		return &LimitError{
			Limit: LimitNoArm, Field: "arm", Value: math.NaN(), Min: math.NaN(), Max: math.NaN(),
			Detail: "this robot has no arm",
		}
	}
	joints := l.cfg.Arm.Joints
	if len(g.Positions) != len(joints) {
		return &LimitError{
			Limit: LimitJointCount, Field: "positions", Value: float64(len(g.Positions)),
			Min: float64(len(joints)), Max: float64(len(joints)), Allowed: fmt.Sprintf("exactly %d joint positions", len(joints)),
		}
	}
	if !finite(g.VelocityScale) {
		return notFinite("velocity_scale")
	}
	if g.VelocityScale <= 0 || g.VelocityScale > 1 {
		return &LimitError{
			Limit: LimitVelocityScale, Field: "velocity_scale", Value: g.VelocityScale, Min: 0, Max: 1,
			Allowed: "0 < velocity_scale <= 1",
		}
	}
	for i, j := range joints {
		v := g.Positions[i]
		if !finite(v) {
			return notFinite("joints." + j.Name)
		}
		if v < j.Min || v > j.Max {
			return &LimitError{
				Limit: LimitJointPosition, Field: "joints." + j.Name, Value: v, Min: j.Min, Max: j.Max,
				Allowed: fmt.Sprintf("%s in [%g, %g] rad", j.Name, j.Min, j.Max),
			}
		}
	}
	return nil
}

func (l *Limits) checkGripper(g robot.GripperGoal) error {
	if l.cfg.Gripper == nil {
		return &LimitError{
			Limit: LimitNoGripper, Field: "gripper", Value: math.NaN(), Min: math.NaN(), Max: math.NaN(),
			Detail: "this robot has no gripper",
		}
	}
	if !finite(g.Force) {
		return notFinite("force")
	}
	max := l.cfg.Gripper.MaxForce
	if g.Force < 0 || g.Force > max || (g.Close && g.Force == 0) {
		return &LimitError{
			Limit: LimitGripperForce, Field: "force", Value: g.Force, Min: 0, Max: max,
			Allowed: fmt.Sprintf("0 < force <= %g N", max),
		}
	}
	return nil
}

// Breach checks a measured state against the limits a moving robot must
// stay inside (workspace, keep-out regions, joint limits), with tol metres
// and radians of slack for measurement noise and overshoot. It returns a
// description of the breach, or "" when the state is inside.
func (l *Limits) Breach(s robot.State, tol float64) string {
	p := geom.Point{X: s.Base.X, Y: s.Base.Y}
	if !l.workspace.Contains(p) && l.workspace.DistanceToEdge(p) > tol {
		return fmt.Sprintf("the base left the workspace at (%.2f, %.2f); allowed %s", p.X, p.Y, l.workspace.Describe())
	}
	for _, k := range l.keepOut {
		if k.poly.Contains(p) && k.poly.DistanceToEdge(p) > tol {
			return fmt.Sprintf("the base entered keep-out region %s at (%.2f, %.2f)", k.name, p.X, p.Y)
		}
	}
	if l.cfg.Arm != nil {
		for i, j := range l.cfg.Arm.Joints {
			if i >= len(s.Joints) {
				break
			}
			v := s.Joints[i].Position
			if v < j.Min-tol || v > j.Max+tol {
				return fmt.Sprintf("joint %s is at %.3f rad, outside [%g, %g]", j.Name, v, j.Min, j.Max)
			}
		}
	}
	return ""
}
