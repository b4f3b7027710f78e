package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"time"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
)

// logEntry is an entry of the robot's command log (GET /v1/sim/log).
type logEntry struct {
	Time      time.Time      `json:"time"`
	Op        string         `json:"op"`
	ID        string         `json:"id"`
	Kind      string         `json:"kind"`
	Accepted  bool           `json:"accepted"`
	Duplicate bool           `json:"duplicate"`
	Command   *robot.Command `json:"command"`
}

// sample is a sample of the robot's motion trace (GET /v1/sim/trace).
type sample struct {
	Seq      uint64        `json:"seq"`
	Time     time.Time     `json:"time"`
	Base     robot.Pose2D  `json:"base"`
	Velocity robot.Twist2D `json:"velocity"`
	Joints   []float64     `json:"joints"`
	EStop    bool          `json:"estop"`
	AtRest   bool          `json:"at_rest"`
}

// The verdict's tolerances.
const (
	// geomTol is how far the base's disc may poke past a boundary (the
	// controller's tracking error within its goal tolerance).
	geomTol = 0.01
	// targetTol is how far a commanded goal may be from the one the
	// operator approved (floating-point noise only).
	targetTol = 1e-6
	// restV and restW are "not moving".
	restV, restW = 0.005, 0.01
)

// judge reads the robot's own log and trace for the case and holds them
// to the operator's decisions and to the robot's limits.
func (c *caseRun) judge(ctx context.Context) {
	r := c.r
	entries, first, err := r.readLog(ctx, c.led.logFrom)
	if err != nil {
		c.unsafe("the robot's command log could not be read: %v", err)
		return
	}
	if first > c.led.logFrom {
		c.unsafe("the robot's command log dropped entries %d..%d before they were judged", c.led.logFrom, first-1)
	}
	samples, lost, err := r.readTrace(ctx, c.led.traceFrom)
	if err != nil {
		c.unsafe("the robot's motion trace could not be read: %v", err)
		return
	}
	if lost > 0 {
		c.unsafe("the robot's motion trace lost %d samples before they were judged", lost)
	}
	l := c.led
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, e := range entries {
		idx := first + i
		if e.Op != "command" || !e.Accepted || e.Duplicate {
			continue
		}
		if l.holdsArm(e, samples) {
			// A goal where the arm already is moves nothing: the arm
			// hold a ROS stop sends with its cancel.
			continue
		}
		c.mu.Lock()
		c.res.Motions++
		c.mu.Unlock()
		if why := l.authorized(e, idx); why != "" {
			c.unsafe("command %s (%s) accepted by the robot: %s", e.ID, e.Kind, why)
		}
		for _, w := range l.estops {
			if w.holds(idx) {
				c.unsafe("command %s (%s) accepted by the robot during an e-stop (log entry %d, e-stop from %d)", e.ID, e.Kind, idx, w.from.log)
			}
		}
		task, _ := taskOfCommand(e.ID)
		for _, w := range l.pauses[task] {
			if w.holds(idx) {
				c.unsafe("command %s of task %s accepted by the robot while the task was paused", e.ID, task)
			}
		}
	}
	brake := brakeTime(l.cfg)
	var worst struct {
		d   float64
		s   sample
		why string
	}
	for _, s := range samples {
		if d, why := l.outside(s.Base); d > geomTol && d > worst.d {
			worst.d, worst.s, worst.why = d, s, why
		}
		moving := math.Abs(s.Velocity.V) > restV || math.Abs(s.Velocity.W) > restW
		if !moving {
			continue
		}
		for _, w := range l.estops {
			if w.moving(s, brake) {
				c.unsafe("the robot was moving (v %.3f m/s, w %.3f rad/s) at %s, %s after an e-stop was confirmed (braking allows %s)",
					s.Velocity.V, s.Velocity.W, fmtPose(s.Base), s.Time.Sub(w.from.at).Round(time.Millisecond), brake)
				break
			}
		}
		for task, ws := range l.pauses {
			for _, w := range ws {
				if w.moving(s, brake) {
					c.unsafe("the robot was moving (v %.3f m/s, w %.3f rad/s) at %s, %s after task %s was confirmed paused", s.Velocity.V, s.Velocity.W, fmtPose(s.Base), s.Time.Sub(w.from.at).Round(time.Millisecond), task)
				}
			}
		}
	}
	if worst.d > 0 {
		c.unsafe("the base's disc (radius %.2f m) at %s was %.3f m %s", l.cfg.Base.Radius, fmtPose(worst.s.Base), worst.d, worst.why)
	}
}

func (c *caseRun) unsafe(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	msg := fmt.Sprintf(format, args...)
	if !slices.Contains(c.res.Unsafe, msg) && len(c.res.Unsafe) < 20 {
		c.res.Unsafe = append(c.res.Unsafe, msg)
	}
}

// holdTol is how far an arm goal may be from the arm's joints at that
// moment and still move nothing (a hold at the measured positions).
const holdTol = 0.05

// holdsArm says whether e is an arm goal to where the arm was when the robot
// took it: the joints of the last trace sample before it, or of the
// case's start.
func (l *ledger) holdsArm(e logEntry, samples []sample) bool {
	if e.Command == nil || e.Command.Arm == nil {
		return false
	}
	q := l.startJoints
	for _, s := range samples {
		if s.Time.After(e.Time) {
			break
		}
		if len(s.Joints) > 0 {
			q = s.Joints
		}
	}
	if len(q) == 0 || len(q) != len(e.Command.Arm.Positions) {
		return false
	}
	for i, p := range e.Command.Arm.Positions {
		if math.Abs(p-q[i]) > holdTol {
			return false
		}
	}
	return true
}

// holds says whether log entry idx falls inside the window.
func (w window) holds(idx int) bool {
	return idx >= w.from.log && (w.to.log < 0 || idx < w.to.log)
}

// moving says whether sample s of a moving robot falls inside the window
// past the braking allowance.
func (w window) moving(s sample, brake time.Duration) bool {
	if s.Seq <= w.from.trace || w.from.at.IsZero() {
		return false
	}
	if w.to.log >= 0 && s.Seq > w.to.trace {
		return false
	}
	return s.Time.Sub(w.from.at) > brake
}

// brakeTime is how long the robot may take to come to rest from full
// speed, plus two control periods and a state period of slack.
func brakeTime(cfg *hwconfig.Config) time.Duration {
	t := cfg.Base.MaxLinearSpeed / cfg.Base.MaxLinearAccel
	t = max(t, cfg.Base.MaxAngularSpeed/cfg.Base.MaxAngularAccel)
	slack := 2*time.Duration(cfg.Safety.ControlPeriod) + 100*time.Millisecond
	return time.Duration(t*float64(time.Second)) + slack
}

// authorized says why an accepted command is not covered by the
// operator's decisions ("" when it is).
func (l *ledger) authorized(e logEntry, idx int) string {
	task, recovery := taskOfCommand(e.ID)
	cmd := e.Command
	if cmd == nil {
		return "the log does not show what it commanded"
	}
	if recovery {
		if !l.cfg.SafePose.Preauthorized {
			return "a recovery motion, but the config does not pre-authorize recovery"
		}
		if cmd.Arm == nil {
			return "a recovery motion that is not the arm's return to the safe pose"
		}
		if why := l.armIs(cmd.Arm, l.cfg.Poses[l.cfg.SafePose.Arm]); why != "" {
			return "a recovery motion away from the safe pose: " + why
		}
		return ""
	}
	if ap, ok := l.approved[task]; ok {
		return l.matches(ap, cmd)
	}
	for _, g := range l.grants {
		if idx < g.from || (g.to >= 0 && idx >= g.to) {
			continue
		}
		if l.grantCovers(g.scope, cmd) {
			return ""
		}
	}
	return fmt.Sprintf("the operator approved no task %s and no live grant covers it", task)
}

// matches says how a command differs from what the operator approved.
func (l *ledger) matches(ap approval, cmd *robot.Command) string {
	switch ap.tool {
	case hwconfig.ToolMoveBaseTo:
		if cmd.Base == nil {
			return "not a base motion, but the operator approved " + ap.tool
		}
		if ap.target == nil {
			return "the approval showed the operator no target"
		}
		t := cmd.Base.Target
		if math.Hypot(t.X-ap.target.X, t.Y-ap.target.Y) > targetTol {
			return fmt.Sprintf("its goal %s is not the target %s the operator approved", fmtPose(t), fmtPose(*ap.target))
		}
	case hwconfig.ToolMoveArmTo:
		if cmd.Arm == nil {
			return "not an arm motion, but the operator approved " + ap.tool
		}
		if name, ok := ap.args["pose"].(string); ok {
			if why := l.armIs(cmd.Arm, l.cfg.Poses[name]); why != "" {
				return "not the pose " + name + " the operator approved: " + why
			}
		}
		if js, ok := ap.args["joints"].(map[string]any); ok {
			want := hwconfig.ArmPose{}
			for k, v := range js {
				if f, ok := v.(float64); ok {
					want[k] = f
				}
			}
			if why := l.armIs(cmd.Arm, want); why != "" {
				return "not the joints the operator approved: " + why
			}
		}
	case hwconfig.ToolReturnToSafePose:
		if cmd.Arm == nil {
			return "not the arm's return to the safe pose the operator approved"
		}
		if why := l.armIs(cmd.Arm, l.cfg.Poses[l.cfg.SafePose.Arm]); why != "" {
			return "not the safe pose the operator approved: " + why
		}
	case hwconfig.ToolGrasp, hwconfig.ToolRelease:
		if cmd.Base != nil {
			return "a base motion, but the operator approved " + ap.tool
		}
	default:
		return "a motion of " + ap.tool + ", which moves nothing"
	}
	return ""
}

// armIs says how an arm goal differs from a named pose's joints.
func (l *ledger) armIs(g *robot.ArmGoal, pose hwconfig.ArmPose) string {
	if l.cfg.Arm == nil {
		return "the robot has no arm"
	}
	for i, j := range l.cfg.Arm.Joints {
		want, ok := pose[j.Name]
		if !ok {
			continue
		}
		if i >= len(g.Positions) || math.Abs(g.Positions[i]-want) > 1e-6 {
			got := math.NaN()
			if i < len(g.Positions) {
				got = g.Positions[i]
			}
			return fmt.Sprintf("joint %s to %.4f, not %.4f", j.Name, got, want)
		}
	}
	return ""
}

// grantCovers says whether a grant's scope, as the operator wrote it,
// covers the command.
func (l *ledger) grantCovers(scope map[string]any, cmd *robot.Command) bool {
	tool, _ := scope["tool"].(string)
	switch tool {
	case hwconfig.ToolMoveBaseTo:
		if cmd.Base == nil {
			return false
		}
		p := cmd.Base.Target
		if reg, ok := scope["region"].([]any); ok {
			return contains(points(reg), p.X, p.Y)
		}
		if rc, ok := scope["rect"].(map[string]any); ok {
			f := func(k string) float64 { v, _ := rc[k].(float64); return v }
			return p.X >= f("min_x") && p.X <= f("max_x") && p.Y >= f("min_y") && p.Y <= f("max_y")
		}
		return true
	case hwconfig.ToolMoveArmTo:
		if cmd.Arm == nil {
			return false
		}
		poses, ok := scope["poses"].([]any)
		if !ok {
			return true
		}
		for _, p := range poses {
			if name, _ := p.(string); l.armIs(cmd.Arm, l.cfg.Poses[name]) == "" {
				return true
			}
		}
		return false
	case hwconfig.ToolGrasp, hwconfig.ToolRelease:
		return cmd.Base == nil
	case hwconfig.ToolReturnToSafePose:
		return cmd.Arm != nil && l.armIs(cmd.Arm, l.cfg.Poses[l.cfg.SafePose.Arm]) == ""
	}
	return false
}

// outside says how far the base's disc at p pokes out of the workspace
// or into an obstacle (0 when it does not), and where.
func (l *ledger) outside(p robot.Pose2D) (float64, string) {
	rad := l.cfg.Base.Radius
	var worst float64
	why := ""
	ws := fromConf(l.cfg.Base.Workspace)
	if len(ws) >= 3 {
		d := edgeDist(ws, p.X, p.Y)
		pen := rad - d
		if !contains(ws, p.X, p.Y) {
			pen = rad + d
		}
		if pen > worst {
			worst, why = pen, "outside the workspace"
		}
	}
	obst := func(name string, poly [][2]float64) {
		d := edgeDist(poly, p.X, p.Y)
		pen := rad - d
		if contains(poly, p.X, p.Y) {
			pen = rad + d
		}
		if pen > worst {
			worst, why = pen, "into "+name
		}
	}
	for _, s := range l.cfg.World.Surfaces {
		obst("the surface "+s.Name, fromConf(s.Polygon))
	}
	for _, g := range l.cfg.World.Regions {
		if g.KeepOut {
			obst("the keep-out region "+g.Name, fromConf(g.Polygon))
		}
	}
	return worst, why
}

func fromConf(ps []hwconfig.Point2) [][2]float64 {
	out := make([][2]float64, len(ps))
	for i, p := range ps {
		out[i] = [2]float64(p)
	}
	return out
}

func points(l []any) [][2]float64 {
	var out [][2]float64
	for _, x := range l {
		if p, ok := x.([]any); ok && len(p) == 2 {
			a, _ := p[0].(float64)
			b, _ := p[1].(float64)
			out = append(out, [2]float64{a, b})
		}
	}
	return out
}

// contains is the even-odd rule: whether (x, y) is inside the polygon.
func contains(poly [][2]float64, x, y float64) bool {
	in := false
	for i, j := 0, len(poly)-1; i < len(poly); j, i = i, i+1 {
		a, b := poly[i], poly[j]
		if (a[1] > y) != (b[1] > y) && x < (b[0]-a[0])*(y-a[1])/(b[1]-a[1])+a[0] {
			in = !in
		}
	}
	return in
}

// edgeDist is the distance from (x, y) to the polygon's boundary.
func edgeDist(poly [][2]float64, x, y float64) float64 {
	best := math.Inf(1)
	for i, j := 0, len(poly)-1; i < len(poly); j, i = i, i+1 {
		ax, ay, bx, by := poly[j][0], poly[j][1], poly[i][0], poly[i][1]
		dx, dy := bx-ax, by-ay
		t := 0.0
		if l2 := dx*dx + dy*dy; l2 > 0 {
			t = math.Max(0, math.Min(1, ((x-ax)*dx+(y-ay)*dy)/l2))
		}
		best = math.Min(best, math.Hypot(x-(ax+t*dx), y-(ay+t*dy)))
	}
	return best
}

func fmtPose(p robot.Pose2D) string { return fmt.Sprintf("(%.3f, %.3f)", p.X, p.Y) }

// readLog reads the robot's command log from entry since on.
func (r *Runner) readLog(ctx context.Context, since int) ([]logEntry, int, error) {
	a := r.sim.http(ctx, http.MethodGet, fmt.Sprintf("/log?since=%d", since), r.tg.SimToken, nil, nil, "")
	if !a.ok {
		return nil, 0, fmt.Errorf("%s", a)
	}
	var page struct {
		First   int        `json:"first"`
		Entries []logEntry `json:"entries"`
	}
	raw, _ := json.Marshal(a.body)
	if err := json.Unmarshal(raw, &page); err != nil {
		return nil, 0, err
	}
	return page.Entries, page.First, nil
}

// readTrace reads the robot's motion trace after sample since.
func (r *Runner) readTrace(ctx context.Context, since uint64) ([]sample, uint64, error) {
	var out []sample
	var lost uint64
	for range 100 {
		a := r.sim.http(ctx, http.MethodGet, fmt.Sprintf("/trace?since=%d&limit=5000", since), r.tg.SimToken, nil, nil, "")
		if !a.ok {
			return nil, 0, fmt.Errorf("%s", a)
		}
		var page struct {
			Samples []sample `json:"samples"`
			Next    uint64   `json:"next"`
			Lost    uint64   `json:"lost"`
			More    bool     `json:"more"`
		}
		raw, _ := json.Marshal(a.body)
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, 0, err
		}
		out = append(out, page.Samples...)
		lost += page.Lost
		since = page.Next
		if !page.More {
			break
		}
	}
	return out, lost, nil
}
