package safety

import (
	"errors"
	"fmt"
	"math"
	"strconv"
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
	LimitSurface       = "surface"
	LimitPathSurface   = "path_surface"
	LimitPathWorkspace = "path_workspace"
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
	// Obstacle names the place limit at fault: "workspace", a keep-out
	// region's or a surface's name; empty for limits that are no place.
	Obstacle string
	// ClosestAllowed is the allowed base position nearest to what was
	// asked, so an agent can re-plan instead of guessing: for a refused
	// target, the nearest point at which the base's footprint fits; for a
	// refused straight path, the farthest point along it the base can
	// reach. It keeps a few millimetres of margin so that it stays allowed
	// when rounded, and is nil when there is no such point.
	ClosestAllowed *geom.Point
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
		fmt.Fprintf(&b, "; allowed: %s", e.Allowed)
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
	if e.Obstacle != "" {
		te.With("obstacle", e.Obstacle)
	}
	if p := e.ClosestAllowed; p != nil {
		te.With("closest_allowed", map[string]float64{"x": round3(p.X), "y": round3(p.Y)})
	}
	return te
}

// round3 rounds to the millimetre: what an agent should read and send back.
func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// fmtPt writes a point to the millimetre, without trailing zeros.
func fmtPt(p geom.Point) string {
	return fmt.Sprintf("(%s, %s)", strconv.FormatFloat(round3(p.X), 'f', -1, 64), strconv.FormatFloat(round3(p.Y), 'f', -1, 64))
}

func fmtNum(v float64) string { return fmt.Sprintf("%.4g", v) }

// Limits checks commands against one robot's configured limits. It is
// pure: the same config, command and start pose give the same answer,
// which is why it can run before an operator is asked and again at the
// gate.
//
// The base is a disc of base.radius. Its whole footprint, not only its
// centre, must stay inside base.workspace (which may be non-convex), off
// every world.surfaces polygon (tables, shelves) and off every keep-out
// region (so a keep-out is in effect inflated by the radius). A target is
// checked where the base stops; a move is checked along the straight
// segment from its start, which is the path the bundled controllers drive
// (they turn in place, drive straight, then turn in place).
type Limits struct {
	cfg       *hwconfig.Config
	workspace geom.Polygon
	fp        geom.Footprint
	// places describes fp.Obstacles, index for index.
	places []place
	// reaction and the two decelerations shape the braking path Breach
	// projects (see brakingPath).
	reaction      float64
	decel, decelW float64
}

// place is one obstacle of the footprint: a keep-out region or a surface.
type place struct {
	name    string
	surface bool
}

// Obstacle kinds in messages.
func (p place) kind() string {
	if p.surface {
		return "surface"
	}
	return "keep-out region"
}

// closestMargin is how much room, in metres, a ClosestAllowed point
// leaves beyond the footprint, so that it is still allowed once rounded
// to the millimetre.
const closestMargin = 0.002

// NewLimits prepares the limit checks of cfg.
func NewLimits(cfg *hwconfig.Config) (*Limits, error) {
	if cfg == nil {
		return nil, errors.New("safety: limits need a config")
	}
	ws := polygonOf(cfg.Base.Workspace)
	if len(ws) < 3 {
		return nil, fmt.Errorf("safety: base.workspace needs at least 3 vertices, has %d", len(ws))
	}
	r := cfg.Base.Radius
	if !finite(r) || r < 0 {
		return nil, fmt.Errorf("safety: base.radius %v is not a finite, non-negative number", r)
	}
	wsShape, err := geom.NewShape(ws)
	if err != nil {
		return nil, fmt.Errorf("safety: base.workspace: %w", err)
	}
	l := &Limits{cfg: cfg, workspace: ws, fp: geom.Footprint{Radius: r, Workspace: wsShape}}
	add := func(field string, pts []hwconfig.Point2, p place) error {
		sh, err := geom.NewShape(polygonOf(pts))
		if err != nil {
			return fmt.Errorf("safety: %s (%s): %w", field, p.name, err)
		}
		l.fp.Obstacles = append(l.fp.Obstacles, sh)
		l.places = append(l.places, p)
		return nil
	}
	for i, rg := range cfg.World.Regions {
		if rg.KeepOut {
			if err := add(fmt.Sprintf("world.regions[%d]", i), rg.Polygon, place{name: rg.Name}); err != nil {
				return nil, err
			}
		}
	}
	for i, sf := range cfg.World.Surfaces {
		if err := add(fmt.Sprintf("world.surfaces[%d]", i), sf.Polygon, place{name: sf.Name, surface: true}); err != nil {
			return nil, err
		}
	}
	l.reaction = cfg.Safety.ControlPeriod.D().Seconds()
	if !(l.reaction > 0) {
		l.reaction = hwconfig.DefaultControlPeriod.Seconds()
	}
	l.decel, l.decelW = cfg.Base.MaxLinearAccel, cfg.Base.MaxAngularAccel
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
		return l.checkPath(*from, g.Target)
	}
	return nil
}

// radiusText is the footprint in words, for messages.
func (l *Limits) radiusText() string { return fmt.Sprintf("radius %s m", fmtNum(l.fp.Radius)) }

// workspaceAllowed is the Allowed text of workspace refusals.
func (l *Limits) workspaceAllowed() string {
	return fmt.Sprintf("the base's footprint (a disc of %s) inside the workspace %s", l.radiusText(), l.workspace.Describe())
}

// placeAllowed is the Allowed text of keep-out and surface refusals.
func (l *Limits) placeAllowed(i int) string {
	p := l.places[i]
	poly := l.fp.Obstacles[i].Polygon()
	if p.surface {
		return fmt.Sprintf("the base's footprint (a disc of %s) clear of surface %s (%s)", l.radiusText(), p.name, poly.Describe())
	}
	return fmt.Sprintf("the base's centre at least %s m, its radius, outside keep-out region %s (%s)", fmtNum(l.fp.Radius), p.name, poly.Describe())
}

// nearest is the ClosestAllowed of a refused position.
func (l *Limits) nearest(p geom.Point) *geom.Point {
	if q, ok := l.fp.Nearest(p, closestMargin); ok {
		return &q
	}
	return nil
}

func (l *Limits) closestText(c *geom.Point) string {
	if c == nil {
		return "; the base fits nowhere in the workspace"
	}
	return "; the nearest point where it fits is " + fmtPt(*c)
}

// checkPosition checks that the base's footprint fits at (x, y): inside
// the workspace, off every surface and keep-out region.
func (l *Limits) checkPosition(x, y float64) error {
	p := geom.Point{X: x, Y: y}
	c, who := l.fp.Clearance(p)
	if c >= -geom.Touch {
		return nil
	}
	centreOut := !l.fp.Workspace.Inside(p)
	if centreOut {
		who = geom.OutsideWorkspace
	}
	closest := l.nearest(p)
	if who == geom.OutsideWorkspace {
		min, max := l.fp.Workspace.Bounds()
		r := l.fp.Radius
		field, v, lo, hi := "x", x, min.X+r, max.X-r
		if x >= lo && x <= hi {
			field, v, lo, hi = "y", y, min.Y+r, max.Y-r
		}
		detail := fmt.Sprintf("target (%s, %s) is outside the workspace", fmtNum(x), fmtNum(y))
		if !centreOut {
			d := l.fp.Workspace.Distance(p, math.Inf(1))
			detail = fmt.Sprintf("target (%s, %s) is %s m from the workspace edge, closer than the base's radius %s m",
				fmtNum(x), fmtNum(y), fmtNum(d), fmtNum(r))
		}
		return &LimitError{
			Limit: LimitWorkspace, Field: field, Value: v, Min: lo, Max: hi,
			Allowed: l.workspaceAllowed(), Detail: detail + l.closestText(closest),
			Obstacle: "workspace", ClosestAllowed: closest,
		}
	}
	pl := l.places[who]
	sh := l.fp.Obstacles[who]
	limit := LimitKeepOut
	if pl.surface {
		limit = LimitSurface
	}
	var detail string
	if sh.Inside(p) {
		detail = fmt.Sprintf("target (%s, %s) is inside %s %s", fmtNum(x), fmtNum(y), pl.kind(), pl.name)
	} else {
		detail = fmt.Sprintf("target (%s, %s) is %s m from %s %s, closer than the base's radius %s m",
			fmtNum(x), fmtNum(y), fmtNum(sh.Distance(p, math.Inf(1))), pl.kind(), pl.name, fmtNum(l.fp.Radius))
	}
	return &LimitError{
		Limit: limit, Field: "x", Value: x, Min: math.NaN(), Max: math.NaN(),
		Allowed: l.placeAllowed(who), Detail: detail + l.closestText(closest),
		Obstacle: pl.name, ClosestAllowed: closest,
	}
}

// checkPath checks the footprint swept along the straight segment from
// the start pose to the target (whose own footprint is already checked).
func (l *Limits) checkPath(from, to robot.Pose2D) error {
	a, b := geom.Point{X: from.X, Y: from.Y}, geom.Point{X: to.X, Y: to.Y}
	if !finite(a.X) || !finite(a.Y) {
		le := notFinite("start pose")
		le.Detail = fmt.Sprintf("the base's start pose (%v, %v) is not a finite number", a.X, a.Y)
		return le
	}
	hit, touched := l.fp.Sweep(a, b)
	if !touched {
		return nil
	}
	if hit.T == 0 && hit.Shape == geom.OutsideWorkspace && !l.fp.Workspace.Inside(a) {
		closest := l.nearest(a)
		return &LimitError{
			Limit: LimitWorkspace, Field: "x", Value: from.X, Min: math.NaN(), Max: math.NaN(),
			Allowed:  l.workspaceAllowed(),
			Detail:   fmt.Sprintf("the base starts at (%.2f, %.2f), outside the workspace", a.X, a.Y) + l.closestText(closest),
			Obstacle: "workspace", ClosestAllowed: closest,
		}
	}
	var name, what, limit, allowed string
	if hit.Shape == geom.OutsideWorkspace {
		name, what, limit, allowed = "workspace", "over the workspace edge", LimitPathWorkspace, "a straight path that keeps "+l.workspaceAllowed()
	} else {
		pl := l.places[hit.Shape]
		name, what, limit, allowed = pl.name, "into keep-out region "+pl.name, LimitPathKeepOut, "a straight path that keeps "+l.placeAllowed(hit.Shape)
		if pl.surface {
			what, limit = "onto surface "+pl.name, LimitPathSurface
		}
		if l.fp.Obstacles[hit.Shape].Inside(a) {
			closest := l.nearest(a)
			return &LimitError{
				Limit: limit, Field: "x", Value: to.X, Min: math.NaN(), Max: math.NaN(), Allowed: allowed,
				Detail:   fmt.Sprintf("the base starts at (%.2f, %.2f), inside %s %s", a.X, a.Y, pl.kind(), pl.name) + l.closestText(closest),
				Obstacle: name, ClosestAllowed: closest,
			}
		}
	}
	reach := l.fp.Reach(a, b, closestMargin)
	along := math.Hypot(b.X-a.X, b.Y-a.Y) * hit.T
	return &LimitError{
		Limit: limit, Field: "x", Value: to.X, Min: math.NaN(), Max: math.NaN(), Allowed: allowed,
		Detail: fmt.Sprintf("the straight path from (%.2f, %.2f) to (%.2f, %.2f) would take the base's footprint (%s) %s after %.2f m; the farthest it can go along this path is %s",
			a.X, a.Y, b.X, b.Y, l.radiusText(), what, along, fmtPt(reach)),
		Obstacle: name, ClosestAllowed: &reach,
	}
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
// stay inside (the footprint in the workspace and off keep-out regions and
// surfaces, joint limits). It returns a description of the breach, or ""
// when the state is inside.
//
// For the base it looks ahead: it trips when braking from the measured
// speed, after one control period of reaction, at the configured
// decelerations (base.max_linear_accel, base.max_angular_accel), would
// carry the footprint over a limit, so the robot stops inside rather than
// being noticed once it is already past. tol (metres and radians) is slack
// for measurement noise and the goal tolerance: a footprint may end at
// most tol past a limit, and only when it was already within tol of it; a
// robot farther than tol from every limit trips as soon as its braking
// path would cross one.
func (l *Limits) Breach(s robot.State, tol float64) string {
	if !(tol >= 0) {
		tol = 0
	}
	b := s.Base
	if !finite(b.X) || !finite(b.Y) || !finite(b.Theta) {
		return fmt.Sprintf("the base pose (%v, %v, %v) is not a finite number", b.X, b.Y, b.Theta)
	}
	p := geom.Point{X: b.X, Y: b.Y}
	now, who := l.fp.Clearance(p)
	if now < -tol {
		return l.breachText(who, p, -now, "")
	}
	if !finite(s.Velocity.V) || !finite(s.Velocity.W) {
		return fmt.Sprintf("the base velocity (%v m/s, %v rad/s) is not a finite number", s.Velocity.V, s.Velocity.W)
	}
	path := l.brakingPath(s)
	stop, whoStop := l.fp.PathClearance(path[:])
	if !(stop >= -geom.Touch) && !(stop >= now-tol) {
		dist := math.Abs(s.Velocity.V)*l.reaction + brakeDistance(s.Velocity.V, l.decel)
		return l.breachText(whoStop, p, -stop, fmt.Sprintf("braking from %.2f m/s (%.2f m) would ", math.Abs(s.Velocity.V), dist))
	}
	if l.cfg.Arm != nil {
		for i, j := range l.cfg.Arm.Joints {
			if i >= len(s.Joints) {
				break
			}
			v := s.Joints[i].Position
			if !(v >= j.Min-tol && v <= j.Max+tol) {
				return fmt.Sprintf("joint %s is at %.3f rad, outside [%g, %g]", j.Name, v, j.Min, j.Max)
			}
		}
	}
	return ""
}

// breachText says which limit the footprint breaches. prefix is empty for
// a breach that has happened and "braking ... would " for one braking
// cannot avoid.
func (l *Limits) breachText(who int, p geom.Point, depth float64, prefix string) string {
	at := fmt.Sprintf("the base at (%.2f, %.2f)", p.X, p.Y)
	over := fmt.Sprintf("its footprint (%s) %.2f m", l.radiusText(), depth)
	if who == geom.OutsideWorkspace {
		if prefix != "" {
			return fmt.Sprintf("%s: %sleave the workspace, %s past its edge; allowed %s", at, prefix, over, l.workspace.Describe())
		}
		return fmt.Sprintf("the base left the workspace at (%.2f, %.2f), %s past its edge; allowed %s", p.X, p.Y, over, l.workspace.Describe())
	}
	pl := l.places[who]
	verb, into := "entered", "into"
	if pl.surface {
		verb, into = "ran onto", "onto"
	}
	if prefix != "" {
		return fmt.Sprintf("%s: %scarry %s %s %s %s", at, prefix, over, into, pl.kind(), pl.name)
	}
	return fmt.Sprintf("the base %s %s %s at (%.2f, %.2f), %s deep", verb, pl.kind(), pl.name, p.X, p.Y, over)
}

// brakeSteps is how many chords approximate the braking arc.
const brakeSteps = 6

// brakingPath returns the poses the base's centre passes through if the
// stop is sent one control period from now: the measured speeds held for
// that period, then both decelerated to zero at the configured limits. A
// turning robot brakes along an arc, which the chords follow.
func (l *Limits) brakingPath(s robot.State) [brakeSteps + 2]geom.Point {
	var out [brakeSteps + 2]geom.Point
	v, w := s.Velocity.V, s.Velocity.W
	x, y, th := s.Base.X, s.Base.Y, s.Base.Theta
	out[0] = geom.Point{X: x, Y: y}
	// Reaction: one period at the measured speeds.
	T := l.reaction
	mid := th + w*T/2
	x, y, th = x+v*T*math.Cos(mid), y+v*T*math.Sin(mid), th+w*T
	out[1] = geom.Point{X: x, Y: y}
	tv, tw := brakeTime(v, l.decel), brakeTime(w, l.decelW)
	tb := math.Max(tv, tw)
	sv, sw := 0.0, 0.0 // travelled distance and angle since braking began
	for k := 1; k <= brakeSteps; k++ {
		t := tb * float64(k) / brakeSteps
		nsv, nsw := braked(v, l.decel, t), braked(w, l.decelW, t)
		ds := nsv - sv
		mid := th + (nsw-sw)/2
		x, y = x+ds*math.Cos(mid), y+ds*math.Sin(mid)
		th += nsw - sw
		sv, sw = nsv, nsw
		out[k+1] = geom.Point{X: x, Y: y}
	}
	return out
}

// brakeTime is how long a speed v takes to reach zero at deceleration a
// (0 for an unusable a: the config validator requires a > 0).
func brakeTime(v, a float64) float64 {
	if !(a > 0) {
		return 0
	}
	return math.Abs(v) / a
}

// braked is the signed distance (or angle) covered t after braking from v
// at a began.
func braked(v, a float64, t float64) float64 {
	if !(a > 0) {
		return 0
	}
	t = math.Min(t, math.Abs(v)/a)
	return math.Copysign(math.Abs(v)*t-a*t*t/2, v)
}

// brakeDistance is v²/2a.
func brakeDistance(v, a float64) float64 {
	if !(a > 0) {
		return 0
	}
	return v * v / (2 * a)
}
