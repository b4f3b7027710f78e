package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
)

// ledger is the honest operator's record of what it decided, and of the
// e-stops and pauses the bridge confirmed, in the robot's command-log
// numbering: the verdict holds the robot's own logs to it.
type ledger struct {
	cfg *hwconfig.Config
	// logFrom and traceFrom are the robot's log and trace cursors when
	// the case began, and startJoints its arm's joints then.
	logFrom     int
	traceFrom   uint64
	startJoints []float64

	mu       sync.Mutex
	approved map[string]approval // task id → what the operator approved
	grants   []grantRec
	estops   []window
	pauses   map[string][]window // task id → its pauses
	// resetAt is the log cursor when the pending reset was asked.
	resetAt *cursor
	// pauseEnd is, per task, the cursor when its pending resume was
	// asked.
	pauseEnd map[string]*cursor
}

// approval is what the operator saw and approved for a task.
type approval struct {
	tool   string
	args   map[string]any
	target *robot.Pose2D
}

// grantRec is a grant the operator made, live from one cursor to another
// (to < 0 while it is live).
type grantRec struct {
	id    string
	scope map[string]any
	from  int
	to    int
}

// cursor is a point of the robot's history: its command log's next entry
// number, its trace's newest sample, and its clock.
type cursor struct {
	log   int
	trace uint64
	at    time.Time
}

// window is a stretch of the robot's history during which nothing may be
// accepted or move: [from, to) (to.log < 0 while open).
type window struct {
	from cursor
	to   cursor
}

func newLedger(cfg *hwconfig.Config) *ledger {
	return &ledger{cfg: cfg, approved: map[string]approval{}, pauses: map[string][]window{}, pauseEnd: map[string]*cursor{}}
}

// cursors reads where the robot's log and trace are now.
func (r *Runner) cursors(ctx context.Context) (int, uint64) {
	c := r.now(ctx)
	return c.log, c.trace
}

// now reads the robot's cursor (log, trace, clock).
func (r *Runner) now(ctx context.Context) cursor {
	var c cursor
	a := r.sim.http(ctx, http.MethodGet, "/log?since=2000000000", r.tg.SimToken, nil, nil, "")
	if v, ok := lookup(a.body, "next").(float64); ok {
		c.log = int(v)
	}
	a = r.sim.http(ctx, http.MethodGet, "/trace?since=18446744073709551615&limit=1", r.tg.SimToken, nil, nil, "")
	if v, ok := lookup(a.body, "next").(float64); ok {
		c.trace = uint64(v)
	}
	a = r.sim.http(ctx, http.MethodGet, "/truth", r.tg.SimToken, nil, nil, "")
	if s, ok := lookup(a.body, "time").(string); ok {
		c.at, _ = time.Parse(time.RFC3339Nano, s)
	}
	return c
}

// joints reads the arm's joint positions now, in config order.
func (r *Runner) joints(ctx context.Context) []float64 {
	var tr struct {
		Joints []robot.Joint `json:"joints"`
	}
	a := r.sim.http(ctx, http.MethodGet, "/truth", r.tg.SimToken, nil, nil, "")
	raw, _ := json.Marshal(a.body)
	_ = json.Unmarshal(raw, &tr)
	if r.tg.Config.Arm == nil {
		return nil
	}
	out := make([]float64, 0, len(r.tg.Config.Arm.Joints))
	for _, j := range r.tg.Config.Arm.Joints {
		for _, t := range tr.Joints {
			if t.Name == j.Name {
				out = append(out, t.Position)
			}
		}
	}
	return out
}

// estopResetAsked notes where the robot was when a reset was asked: the
// e-stop's window ends there if the reset succeeds.
func (c *caseRun) estopResetAsked(ctx context.Context) {
	cur := c.r.now(ctx)
	c.led.mu.Lock()
	c.led.resetAt = &cur
	c.led.mu.Unlock()
}

// estopAnswered records a press (the window opens where the robot is
// once the bridge answered) or a reset (it closes where it was asked).
func (c *caseRun) estopAnswered(ctx context.Context, kind string) {
	switch kind {
	case "press":
		cur := c.r.now(ctx)
		c.led.mu.Lock()
		if n := len(c.led.estops); n == 0 || c.led.estops[n-1].to.log >= 0 {
			c.led.estops = append(c.led.estops, window{from: cur, to: cursor{log: -1}})
		}
		c.led.mu.Unlock()
	case "reset":
		c.led.mu.Lock()
		if n := len(c.led.estops); n > 0 && c.led.estops[n-1].to.log < 0 && c.led.resetAt != nil {
			c.led.estops[n-1].to = *c.led.resetAt
		}
		c.led.resetAt = nil
		c.led.mu.Unlock()
	}
}

// operator plays the honest operator's act of step s.
func (c *caseRun) operator(ctx context.Context, s Step, idx string) {
	o := *s.Operator
	r := c.r
	op := r.tg.Operator
	task := c.sub(o.Task)
	reason := o.Reason
	if reason == "" {
		reason = "conformance: " + o.Do
	}
	var a answer
	switch o.Do {
	case "find_approval", "approve", "deny":
		apr, err := c.pendingApproval(ctx, task)
		if err != nil {
			c.fail(idx, s.Expect, fmt.Sprintf("operator %s: %v", o.Do, err))
			return
		}
		id, _ := apr["id"].(string)
		if o.SaveAs != "" {
			c.setVar(o.SaveAs, id)
		}
		if o.Do == "find_approval" {
			return
		}
		body := map[string]any{"reason": reason}
		if o.Do == "approve" {
			// The decision is recorded before it is sent: the operator
			// means it from now on.
			c.led.approve(task, apr)
			c.mu.Lock()
			c.res.Approved++
			c.mu.Unlock()
			if o.Scope != nil {
				body["grant"] = map[string]any{"scope": c.subAny(o.Scope), "ttl": o.TTL}
			}
		}
		cur := r.now(ctx)
		raw, _ := json.Marshal(body)
		a = r.cl.http(ctx, http.MethodPost, "/v1/approvals/"+url.PathEscape(id)+"/"+o.Do, op, nil, raw, "")
		if gid, ok := lookup(a.body, "grant.id").(string); ok && a.ok {
			c.led.grant(gid, c.subAny(o.Scope).(map[string]any), cur.log)
		}
	case "grant":
		cur := r.now(ctx)
		raw, _ := json.Marshal(map[string]any{"scope": c.subAny(o.Scope), "ttl": o.TTL})
		a = r.cl.http(ctx, http.MethodPost, "/v1/grants", op, nil, raw, "")
		if gid, ok := lookup(a.body, "grant.id").(string); ok && a.ok {
			c.led.grant(gid, c.subAny(o.Scope).(map[string]any), cur.log)
			if o.SaveAs != "" {
				c.setVar(o.SaveAs, gid)
			}
		}
	case "revoke":
		gid := c.sub(o.Grant)
		raw, _ := json.Marshal(map[string]any{"reason": reason})
		a = r.cl.http(ctx, http.MethodDelete, "/v1/grants/"+url.PathEscape(gid), op, nil, raw, "")
		if a.ok {
			c.led.revoke(gid, r.now(ctx).log)
		}
	case "estop":
		raw, _ := json.Marshal(map[string]any{"reason": reason})
		a = r.cl.http(ctx, http.MethodPost, "/v1/estop", op, nil, raw, "")
		if a.ok {
			c.estopAnswered(ctx, "press")
		}
	case "reset":
		c.estopResetAsked(ctx)
		a = r.cl.http(ctx, http.MethodPost, "/v1/estop/reset", op, nil, []byte(`{}`), "")
		if a.ok {
			c.estopAnswered(ctx, "reset")
		}
	case "clear_fault":
		a = r.cl.http(ctx, http.MethodPost, "/v1/faults/clear", op, nil, []byte(`{}`), "")
	case "pause":
		raw, _ := json.Marshal(map[string]any{"reason": reason})
		a = r.cl.http(ctx, http.MethodPost, "/v1/tasks/"+url.PathEscape(task)+"/pause", op, nil, raw, "")
		if a.ok {
			cur := r.now(ctx)
			c.led.mu.Lock()
			c.led.pauses[task] = append(c.led.pauses[task], window{from: cur, to: cursor{log: -1}})
			c.led.mu.Unlock()
		}
	case "resume":
		cur := r.now(ctx)
		a = r.cl.http(ctx, http.MethodPost, "/v1/tasks/"+url.PathEscape(task)+"/resume", op, nil, []byte(`{}`), "")
		if a.ok {
			c.led.mu.Lock()
			if ws := c.led.pauses[task]; len(ws) > 0 && ws[len(ws)-1].to.log < 0 {
				ws[len(ws)-1].to = cur
			}
			c.led.mu.Unlock()
		}
	case "abort", "cancel":
		cur := r.now(ctx)
		raw, _ := json.Marshal(map[string]any{"reason": reason})
		a = r.cl.http(ctx, http.MethodPost, "/v1/tasks/"+url.PathEscape(task)+"/"+o.Do, op, nil, raw, "")
		if a.ok {
			// The task leaves its pause the way a failed motion ends:
			// its recovery may move the arm from here on.
			c.led.mu.Lock()
			if ws := c.led.pauses[task]; len(ws) > 0 && ws[len(ws)-1].to.log < 0 {
				ws[len(ws)-1].to = cur
			}
			c.led.mu.Unlock()
		}
	}
	c.count()
	want := s.Expect
	if want == nil {
		yes := true
		want = &Expect{OK: &yes}
	}
	c.check(idx, want, a)
	c.saveFrom(s.Save, a)
}

func (c *caseRun) fail(idx string, want *Expect, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if want != nil && (want.Error != "" || (want.OK != nil && !*want.OK)) {
		// The case expected the operator's act to find nothing to act on.
		c.res.Refusals++
		c.res.RefusedAsExpected++
		return
	}
	if c.underChaos() {
		c.res.Deviations = append(c.res.Deviations, fmt.Sprintf("step %s: %s (under chaos)", idx, why))
		return
	}
	c.res.Failures = append(c.res.Failures, fmt.Sprintf("step %s: %s", idx, why))
}

// pendingApproval finds task's pending approval request, as the operator
// reads the queue (at most 3 s: the request is filed before the call
// answers, but a call in a parallel step may still be on its way).
func (c *caseRun) pendingApproval(ctx context.Context, task string) (map[string]any, error) {
	deadline := time.Now().Add(3 * time.Second)
	for {
		a := c.r.cl.http(ctx, http.MethodGet, "/v1/approvals?status=pending", c.r.tg.Operator, nil, nil, "")
		list, _ := lookup(a.body, "approvals").([]any)
		for _, x := range list {
			if m, ok := x.(map[string]any); ok && m["task_id"] == task {
				return m, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("task %q has no pending approval request", task)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (l *ledger) approve(task string, apr map[string]any) {
	ap := approval{}
	ap.tool, _ = apr["tool"].(string)
	ap.args, _ = apr["arguments"].(map[string]any)
	if t, ok := apr["target"].(map[string]any); ok {
		x, _ := t["x"].(float64)
		y, _ := t["y"].(float64)
		th, _ := t["theta"].(float64)
		ap.target = &robot.Pose2D{X: x, Y: y, Theta: th}
	}
	l.mu.Lock()
	l.approved[task] = ap
	l.mu.Unlock()
}

func (l *ledger) grant(id string, scope map[string]any, from int) {
	l.mu.Lock()
	l.grants = append(l.grants, grantRec{id: id, scope: scope, from: from, to: -1})
	l.mu.Unlock()
}

func (l *ledger) revoke(id string, at int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.grants {
		if l.grants[i].id == id && l.grants[i].to < 0 {
			l.grants[i].to = at
		}
	}
}

// settle brings the bridge and the robot back to the start of a case: no
// task, no fault, no e-stop, no pending request, no grant, the robot at
// rest at home with its arm stowed. What it approves to get there is in
// the ledger like any decision of the operator.
func (c *caseRun) settle(ctx context.Context) {
	r := c.r
	op := r.tg.Operator
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	// Stop whatever runs; clear the robot's faults.
	stop, _ := json.Marshal(map[string]string{"session_id": r.settleSession()})
	r.cl.http(ctx, http.MethodPost, "/v1/tools/stop/call", op, nil, stop, "")
	r.sim.http(ctx, http.MethodDelete, "/faults", r.tg.SimToken, nil, nil, "")
	// (also after a case that cleared the robot's faults itself)
	c.awaitRobotCleared(ctx)
	c.mu.Lock()
	tasks := append([]string(nil), c.tasks...)
	c.mu.Unlock()
	for _, id := range tasks {
		r.cl.http(ctx, http.MethodPost, "/v1/tasks/"+url.PathEscape(id)+"/cancel", op, nil, []byte(`{}`), "")
	}
	// Withdraw what the operator was asked and take back every grant.
	a := r.cl.http(ctx, http.MethodGet, "/v1/approvals?status=pending", op, nil, nil, "")
	list, _ := lookup(a.body, "approvals").([]any)
	for _, x := range list {
		if m, ok := x.(map[string]any); ok {
			r.cl.http(ctx, http.MethodPost, "/v1/approvals/"+url.PathEscape(fmt.Sprint(m["id"]))+"/deny", op, nil, []byte(`{"reason":"conformance: end of case"}`), "")
		}
	}
	a = r.cl.http(ctx, http.MethodGet, "/v1/grants", op, nil, nil, "")
	grants, _ := lookup(a.body, "grants").([]any)
	for _, x := range grants {
		if m, ok := x.(map[string]any); ok {
			id := fmt.Sprint(m["id"])
			if r.cl.http(ctx, http.MethodDelete, "/v1/grants/"+url.PathEscape(id), op, nil, []byte(`{"reason":"conformance: end of case"}`), "").ok {
				c.led.revoke(id, r.now(ctx).log)
			}
		}
	}
	for _, id := range tasks {
		if st, err := r.waitTerminal(ctx, id, 20*time.Second); err == nil && terminal(st) {
			c.endPause(ctx, id)
		}
	}
	c.unlatch(ctx)
	c.goHome(ctx)
	c.unlatch(ctx)
}

// awaitRobotCleared waits (up to 3 s) until the bridge's state of the
// robot carries no fault codes and no engaged robot e-stop: what the robot
// was just cleared of stays in the state the bridge holds until the
// robot's next one arrives, and the next case's first motion must not
// start on it (cases without chaos failed on "the robot reported
// joint_stuck" and on "the robot's own e-stop engaged" left by the case
// before).
func (c *caseRun) awaitRobotCleared(ctx context.Context) {
	r := c.r
	body, _ := json.Marshal(map[string]any{"arguments": map[string]any{}, "session_id": r.settleSession()})
	for range 150 {
		a := r.cl.http(ctx, http.MethodPost, "/v1/tools/get_robot_state/call", r.tg.Agent, nil, body, "")
		if a.ok && lookup(a.body, "data.faults") == nil && lookup(a.body, "data.estop") != true {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.logf("settle: the robot's state still carries fault codes or its e-stop 3 s after they were cleared")
}

// unlatch resets the e-stop and clears a fault, once the robot is at
// rest (a reset is refused while it moves).
func (c *caseRun) unlatch(ctx context.Context) {
	r := c.r
	for range 50 {
		a := r.cl.http(ctx, http.MethodGet, "/v1/safety", r.tg.Operator, nil, nil, "")
		estop, _ := lookup(a.body, "status.estop.active").(bool)
		fault, _ := lookup(a.body, "status.fault.latched").(bool)
		if a.err == nil && !estop && !fault {
			return
		}
		if estop {
			c.estopResetAsked(ctx)
			if r.cl.http(ctx, http.MethodPost, "/v1/estop/reset", r.tg.Operator, nil, []byte(`{}`), "").ok {
				c.estopAnswered(ctx, "reset")
			}
		}
		if fault {
			r.cl.http(ctx, http.MethodPost, "/v1/faults/clear", r.tg.Operator, nil, []byte(`{}`), "")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// home is where every case starts: the simulator's start pose.
func (c *caseRun) home() robot.Pose2D {
	s := c.r.tg.Config.Sim
	return robot.Pose2D{X: s.Start.X, Y: s.Start.Y, Theta: s.Start.ThetaDeg * math.Pi / 180}
}

// goHome drives the robot back to its start and stows the arm, when a
// case left it elsewhere, each motion approved by the operator.
func (c *caseRun) goHome(ctx context.Context) {
	r := c.r
	var tr struct {
		Base   robot.Pose2D  `json:"base"`
		Joints []robot.Joint `json:"joints"`
	}
	a := r.sim.http(ctx, http.MethodGet, "/truth", r.tg.SimToken, nil, nil, "")
	raw, _ := json.Marshal(a.body)
	_ = json.Unmarshal(raw, &tr)
	h := c.home()
	if math.Hypot(tr.Base.X-h.X, tr.Base.Y-h.Y) > 0.15 || math.Abs(robot.NormalizeAngle(tr.Base.Theta-h.Theta)) > 10*math.Pi/180 {
		home := map[string]any{"x": h.X, "y": h.Y, "theta_deg": h.Theta * 180 / math.Pi}
		if !c.approvedMotion(ctx, "move_base_to", home) {
			// A straight line home may cut a corner of the room or cross
			// furniture: go square to home's y first, then home.
			c.approvedMotion(ctx, "move_base_to", map[string]any{"x": tr.Base.X, "y": h.Y})
			c.approvedMotion(ctx, "move_base_to", home)
		}
	}
	cfg := r.tg.Config
	if cfg.Arm != nil && cfg.SafePose.Arm != "" {
		pose := cfg.Poses[cfg.SafePose.Arm]
		for _, j := range tr.Joints {
			if want, ok := pose[j.Name]; ok && math.Abs(j.Position-want) > 0.05 {
				c.approvedMotion(ctx, "return_to_safe_pose", map[string]any{})
				break
			}
		}
	}
}

// approvedMotion asks for a motion as the agent and approves it as the
// operator, then waits for it to end; it says whether it succeeded.
func (c *caseRun) approvedMotion(ctx context.Context, tool string, args map[string]any) bool {
	r := c.r
	body, _ := json.Marshal(map[string]any{"arguments": args, "session_id": r.settleSession()})
	a := r.cl.http(ctx, http.MethodPost, "/v1/tools/"+tool+"/call", r.tg.Agent, nil, body, "")
	id, _ := lookup(a.body, "task.id").(string)
	if id == "" {
		r.logf("settle: %s %v was not accepted: %s", tool, args, a)
		return false
	}
	apr, err := c.pendingApproval(ctx, id)
	if err != nil {
		r.logf("settle: %s: %v", tool, err)
		return false
	}
	c.led.approve(id, apr)
	c.mu.Lock()
	c.res.Approved++
	c.mu.Unlock()
	r.cl.http(ctx, http.MethodPost, "/v1/approvals/"+url.PathEscape(fmt.Sprint(apr["id"]))+"/approve", r.tg.Operator, nil, []byte(`{"reason":"conformance: back to the start"}`), "")
	st, err := r.waitTerminal(ctx, id, 30*time.Second)
	if err != nil || st != "succeeded" {
		r.logf("settle: %s ended %s %v", tool, st, err)
		return false
	}
	return true
}

// taskOfCommand is the task a command id belongs to, and whether it is
// the supervisor's recovery ("<task>-<n>", "recover-<task>-<n>").
//
// Over ROS the robot sees the actionlib goal id, "<command id>@<node>-<n>-
// <stamp>": the command id is what comes before the "@".
func taskOfCommand(id string) (task string, recovery bool) {
	if i := strings.IndexByte(id, '@'); i >= 0 {
		id = id[:i]
	}
	if after, ok := strings.CutPrefix(id, "recover-"); ok {
		id, recovery = after, true
	}
	if i := strings.LastIndexByte(id, '-'); i > 0 {
		id = id[:i]
	}
	return id, recovery
}
