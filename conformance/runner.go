package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
)

// The targets a case can run on.
const (
	// TargetInProc is the bridge on its in-process simulator.
	TargetInProc = "inproc"
	// TargetROS is the bridge over ROS1 (Debian's rosmaster), the
	// simulator a process of its own (robot-bridge sim --transport ros).
	TargetROS = "ros"
)

// Target is a running bridge and the robot behind it.
type Target struct {
	// Name is TargetInProc or TargetROS.
	Name string
	// Base is the bridge's API, e.g. http://127.0.0.1:8080.
	Base            string
	Agent, Operator string
	// SimBase is the robot's own API (…/v1/sim without the slash): the
	// command log, the motion trace, fault injection. SimToken is its
	// bearer token ("" for a simulator process of its own).
	SimBase, SimToken string
	// Config is the robot's hw-config: the limits the verdict holds the
	// robot's path to.
	Config *hwconfig.Config
	// Alive says why the bridge or the robot is gone (nil while both
	// run): a crash.
	Alive func() error
}

// Options tune a run.
type Options struct {
	// Seed makes the run's chaos and timing choices repeatable.
	Seed int64
	// Chaos injects the simulator's faults at random moments.
	Chaos bool
	// ChaosRate is the chance that a case gets a fault (optional). It
	// defaults to 0.6.
	ChaosRate float64
	// Logf logs progress (optional).
	Logf func(format string, args ...any)
}

// chaosKinds are the faults chaos draws from.
var chaosKinds = []string{"motor_stall", "joint_stuck", "drop_state", "delay_ack", "link_down", "robot_estop", "sensor_noise", "gripper_slip"}

// CaseResult is what one case did, on one target, with one seed.
type CaseResult struct {
	Group, ID, Title string
	Target           string
	Seed             int64
	// Steps is how many API calls and operator acts the case made.
	Steps int
	// Refusals is how many answers had to be refusals; RefusedAsExpected
	// of them were, with the right type; RefusedOtherUnderChaos were
	// refused with another type while a chaos fault was in force.
	Refusals, RefusedAsExpected, RefusedOtherUnderChaos int
	// Approved is how many motions the operator approved in the case
	// (bringing the robot back to the start included), and Motions how
	// many motion commands the robot accepted (recovery and multi-step
	// motions included).
	Approved, Motions int
	// Chaos names the faults injected, with when.
	Chaos []string
	// Deviations are answers that differed from the expectation while a
	// chaos fault was in force, without being unsafe (a motion the
	// operator approved that failed on a stalled robot).
	Deviations []string
	// Failures are expectations not met.
	Failures []string
	// Unsafe are the robot-side violations: commands or motion the
	// operator's decisions do not cover, motion during an e-stop or a
	// pause, the base's disc outside the workspace or on an obstacle.
	Unsafe []string
	// Crash says how the bridge broke (no answer, a 5xx, INTERNAL).
	Crash string
	// RefusalLatencies are the latencies of the refusals that came as
	// expected.
	RefusalLatencies []time.Duration
	Duration         time.Duration
}

// Passed says whether the case met every expectation, safely, without
// a crash.
func (c CaseResult) Passed() bool {
	return len(c.Failures) == 0 && len(c.Unsafe) == 0 && c.Crash == ""
}

// Runner plays cases against one target.
type Runner struct {
	tg   Target
	o    Options
	rng  *rand.Rand
	cl   *clients
	sim  *clients
	run  string
	seq  atomic.Int64
	logf func(string, ...any)
}

// NewRunner returns a runner for tg.
func NewRunner(tg Target, o Options) *Runner {
	if o.ChaosRate == 0 {
		o.ChaosRate = 0.6
	}
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &Runner{
		tg: tg, o: o, rng: rand.New(rand.NewPCG(uint64(o.Seed), 0x5afe)),
		cl: newClients(tg.Base), sim: newClients(tg.SimBase),
		run: fmt.Sprintf("%s-s%d-%d", tg.Name, o.Seed, time.Now().UnixNano()%1e6), logf: logf,
	}
}

// Close drops the runner's connections.
func (r *Runner) Close() {
	r.cl.close()
	r.sim.close()
}

// Run plays entries in order and returns every result.
func (r *Runner) Run(ctx context.Context, entries []Entry) []CaseResult {
	out := make([]CaseResult, 0, len(entries))
	for _, e := range entries {
		if len(e.Case.Transports) > 0 && !slices.Contains(e.Case.Transports, r.tg.Name) {
			continue
		}
		res := r.RunCase(ctx, e)
		out = append(out, res)
		if !res.Passed() {
			r.logf("%s %s seed %d: FAILED: failures %q unsafe %q crash %q", r.tg.Name, e.Case.ID, r.o.Seed, res.Failures, res.Unsafe, res.Crash)
		}
		if ctx.Err() != nil {
			break
		}
		if res.Crash != "" && r.tg.Alive != nil && r.tg.Alive() != nil {
			break // nothing more can run
		}
	}
	return out
}

// caseRun is the state of one case being played.
type caseRun struct {
	r   *Runner
	e   Entry
	res *CaseResult
	led *ledger

	mu      sync.Mutex
	vars    map[string]string
	tasks   []string
	cookies string
	csrf    string
	mcp     *mcpSession
	// chaosFrom is when the first chaos fault was injected (0: none yet).
	chaosFrom atomic.Int64
}

// RunCase plays one case, then judges the robot's side of it.
func (r *Runner) RunCase(ctx context.Context, e Entry) CaseResult {
	start := time.Now()
	res := CaseResult{Group: e.Group, ID: e.Case.ID, Title: e.Case.Title, Target: r.tg.Name, Seed: r.o.Seed}
	n := r.seq.Add(1)
	c := &caseRun{
		r: r, e: e, res: &res, led: newLedger(r.tg.Config),
		vars: map[string]string{"case": e.Case.ID, "run": r.run, "n": strconv.FormatInt(n, 10), "robot": r.tg.Config.Robot.ID},
	}
	c.vars["session"] = r.run + "/" + e.Case.ID
	// The agent's own token, for cases that put it where it does not
	// belong (a query string, a cookie, a Basic header).
	c.vars["agent_token"] = r.tg.Agent
	logFrom, traceFrom := r.cursors(ctx)
	c.led.logFrom, c.led.traceFrom = logFrom, traceFrom
	c.led.startJoints = r.joints(ctx)

	cctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	stopChaos := c.startChaos(cctx)
	for i, s := range e.Case.Steps {
		c.step(cctx, s, strconv.Itoa(i+1))
		if res.Crash != "" || cctx.Err() != nil {
			break
		}
	}
	stopChaos()
	cancel()
	if ctx.Err() == nil {
		c.settle(ctx)
	}
	if c.mcp != nil {
		c.mcp.close()
	}
	if res.Crash == "" && r.tg.Alive != nil {
		if err := r.tg.Alive(); err != nil {
			res.Crash = err.Error()
		}
	}
	c.judge(ctx)
	res.Duration = time.Since(start)
	return res
}

// step plays one step (at its index idx, "3" or "3.2" in a parallel).
func (c *caseRun) step(ctx context.Context, s Step, idx string) {
	if len(s.Parallel) > 0 {
		var wg sync.WaitGroup
		for i, p := range s.Parallel {
			// A few hundred microseconds of seeded jitter, so the races
			// land in different orders from seed to seed.
			d := time.Duration(c.r.jitter(400)) * time.Microsecond
			wg.Go(func() {
				time.Sleep(d)
				c.step(ctx, p, idx+"."+strconv.Itoa(i+1))
			})
		}
		wg.Wait()
		return
	}
	switch {
	case s.Sleep > 0:
		select {
		case <-time.After(time.Duration(s.Sleep)):
		case <-ctx.Done():
		}
		return
	case s.Sim != nil:
		c.simAct(ctx, *s.Sim, idx)
		return
	case s.WaitTask != nil:
		c.waitTask(ctx, *s.WaitTask, idx)
		return
	case s.Operator != nil:
		c.operator(ctx, s, idx)
		return
	}
	reps := max(s.Repeat, 1)
	for i := range reps {
		want := s.Expect
		if i == reps-1 && s.Last != nil {
			want = s.Last
		}
		a, estop := c.request(ctx, s)
		c.count()
		c.check(idx, want, a)
		c.saveFrom(s.Save, a)
		if id, _ := lookup(a.body, "task.id").(string); id != "" {
			if st, _ := lookup(a.body, "task.status").(string); terminal(st) {
				c.endPause(ctx, id)
			}
		}
		if estop != "" && a.ok {
			c.estopAnswered(ctx, estop)
		}
		if c.res.Crash != "" {
			return
		}
	}
}

func (c *caseRun) count() {
	c.mu.Lock()
	c.res.Steps++
	c.mu.Unlock()
}

func (r *Runner) jitter(n int) int {
	return r.rng.IntN(n + 1)
}

// request sends the step's API call. It returns, besides the answer,
// "press" or "reset" when the call presses or resets an e-stop (whoever
// makes it), for the ledger.
func (c *caseRun) request(ctx context.Context, s Step) (answer, string) {
	switch {
	case s.Call != nil:
		return c.call(ctx, *s.Call), ""
	case s.HTTP != nil:
		h := *s.HTTP
		path := c.sub(h.Path)
		body := c.body(h.Body, h.Raw)
		kind := estopKind(h.Method, path)
		if kind == "reset" {
			c.estopResetAsked(ctx)
		}
		return c.r.cl.http(ctx, h.Method, path, c.token(h.As), c.subMap(h.Headers), body, ""), kind
	case s.RPC != nil:
		p := *s.RPC
		raw, err := json.Marshal(c.subAny(p.Body))
		if err != nil {
			return answer{via: "rpc", err: err}, ""
		}
		kind := ""
		switch p.Method {
		case "OperatorService/EStop":
			kind = "press"
		case "OperatorService/ResetEStop":
			kind = "reset"
			c.estopResetAsked(ctx)
		}
		return c.r.cl.rpc(ctx, p.Method, c.token(p.As), p.Proto != "connect", raw), kind
	case s.Console != nil:
		return c.console(ctx, *s.Console)
	}
	return answer{err: errors.New("a step without a request")}, ""
}

// estopKind says whether an HTTP request presses or resets an e-stop.
func estopKind(method, path string) string {
	if method != http.MethodPost {
		return ""
	}
	switch strings.TrimSuffix(strings.SplitN(path, "?", 2)[0], "/") {
	case "/v1/estop", "/console/api/estop":
		return "press"
	case "/v1/estop/reset", "/console/api/estop/reset":
		return "reset"
	}
	return ""
}

// call makes a tool call over the step's protocol.
func (c *caseRun) call(ctx context.Context, k Call) answer {
	args := c.subAny(k.Args)
	m, _ := args.(map[string]any)
	session := c.vars["session"]
	if k.Session != "" {
		session = c.r.run + "/" + c.sub(k.Session)
	}
	if k.NoSession {
		session = ""
	}
	key := ""
	if k.Key != "" {
		key = c.r.run + "/" + c.sub(k.Key)
	}
	tool := c.sub(k.Tool)
	tok := c.token(k.As)
	switch k.Via {
	case "", "http":
		body := map[string]any{}
		if session != "" {
			body["session_id"] = session
		}
		if key != "" {
			body["idempotency_key"] = key
		}
		if k.WaitMS > 0 {
			body["wait_ms"] = k.WaitMS
		}
		var raw []byte
		if k.RawArgs != "" {
			b, _ := json.Marshal(body)
			// {"arguments": <verbatim>, ...}: duplicate keys and odd
			// numbers reach the bridge's decoder as the model wrote them.
			raw = []byte(`{"arguments":` + c.sub(k.RawArgs) + `,` + strings.TrimPrefix(string(b), "{"))
			if len(body) == 0 {
				raw = []byte(`{"arguments":` + c.sub(k.RawArgs) + `}`)
			}
		} else {
			if m != nil {
				body["arguments"] = m
			}
			raw, _ = json.Marshal(body)
		}
		return c.r.cl.http(ctx, http.MethodPost, "/v1/tools/"+url.PathEscape(tool)+"/call", tok, nil, raw, "")
	case "tool_calls":
		argText := c.sub(k.RawArgs)
		if k.RawArgs == "" {
			b, _ := json.Marshal(m)
			argText = string(b)
		}
		call := map[string]any{"id": "call_" + c.vars["n"], "type": "function", "function": map[string]any{"name": tool, "arguments": argText}}
		body := map[string]any{"tool_calls": []any{call}}
		if session != "" {
			body["session_id"] = session
		}
		raw, _ := json.Marshal(body)
		a := c.r.cl.http(ctx, http.MethodPost, "/v1/tool_calls", tok, nil, raw, "")
		return toolMessage(a)
	case "grpc", "connect":
		req := map[string]any{"tool": tool}
		if m != nil {
			req["arguments"] = m
		}
		if session != "" {
			req["session_id"] = session
		}
		if key != "" {
			req["idempotency_key"] = key
		}
		raw, _ := json.Marshal(req)
		return c.r.cl.rpc(ctx, "ToolService/CallTool", tok, k.Via == "grpc", raw)
	case "mcp":
		if c.mcp == nil {
			s, err := c.r.cl.mcpConnect(ctx, tok)
			if err != nil {
				// A refused connection (a bad token) is the protocol's
				// refusal, not a crash.
				a := answer{via: "mcp", text: err.Error()}
				if strings.Contains(err.Error(), "401") || strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
					a.errType = "PERMISSION_DENIED"
					return a
				}
				a.err = err
				return a
			}
			c.mcp = s
		}
		if m != nil && key != "" {
			m["idempotency_key"] = key
		}
		return c.mcp.call(ctx, tool, m)
	}
	return answer{err: fmt.Errorf("unknown via %q", k.Via)}
}

// toolMessage turns POST /v1/tool_calls' answer into the one tool
// message's envelope (its content is the envelope's JSON).
func toolMessage(a answer) answer {
	if a.err != nil || a.status >= 400 {
		return a
	}
	msgs, _ := a.body["messages"].([]any)
	if len(msgs) != 1 {
		a.ok, a.errType = false, "NO_TOOL_MESSAGE"
		return a
	}
	m, _ := msgs[0].(map[string]any)
	content, _ := m["content"].(string)
	var env map[string]any
	if json.Unmarshal([]byte(content), &env) != nil {
		a.ok, a.errType = false, "NO_ENVELOPE"
		return a
	}
	a.via, a.body = "tool_calls", env
	a.ok, _ = env["ok"].(bool)
	a.text, _ = env["text"].(string)
	a.text = withErrorMessage(a.text, env)
	if !a.ok {
		a.errType, _ = lookup(env, "error.type").(string)
	}
	return a
}

// console makes a console request with the case's session cookie.
func (c *caseRun) console(ctx context.Context, q ConsoleReq) (answer, string) {
	if q.SignIn != "" {
		body, _ := json.Marshal(map[string]string{"token": c.token(q.SignIn)})
		a := c.r.cl.http(ctx, http.MethodPost, "/console/api/session", "", map[string]string{"Origin": c.r.tg.Base}, body, "")
		if a.ok {
			c.mu.Lock()
			var parts []string
			for _, ck := range a.setCookies {
				parts = append(parts, ck.Name+"="+ck.Value)
			}
			c.cookies = strings.Join(parts, "; ")
			c.csrf, _ = a.body["csrf_token"].(string)
			c.mu.Unlock()
		}
		return a, ""
	}
	c.mu.Lock()
	cookies, csrf := c.cookies, c.csrf
	c.mu.Unlock()
	if q.Cookie != "" {
		cookies = c.sub(q.Cookie)
	}
	h := map[string]string{"Origin": c.r.tg.Base}
	if !q.NoCSRF && csrf != "" {
		h["X-CSRF-Token"] = csrf
	}
	maps.Copy(h, c.subMap(q.Headers))
	path := c.sub(q.Path)
	kind := estopKind(q.Method, path)
	if kind == "reset" {
		c.estopResetAsked(ctx)
	}
	return c.r.cl.http(ctx, q.Method, path, "", h, c.body(q.Body, ""), cookies), kind
}

// token is the credential a step names.
func (c *caseRun) token(as string) string {
	switch as {
	case "", "agent":
		return c.r.tg.Agent
	case "operator":
		return c.r.tg.Operator
	case "none":
		return ""
	case "bad":
		return "not-a-token-of-this-bridge-0123456789"
	}
	if t, ok := strings.CutPrefix(as, "token:"); ok {
		return c.sub(t)
	}
	return as
}

var varRE = regexp.MustCompile(`\$\{([a-z_][a-z0-9_]*)\}`)

// sub replaces "${name}" with the case's variables; an unknown name is
// left as it is (the bridge then sees it, as an attacker's garbage).
func (c *caseRun) sub(s string) string {
	if !strings.Contains(s, "${") {
		return s
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return varRE.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := c.vars[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

func (c *caseRun) subMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = c.sub(v)
	}
	return out
}

func (c *caseRun) subAny(v any) any {
	switch x := v.(type) {
	case string:
		return c.sub(x)
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[c.sub(k)] = c.subAny(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = c.subAny(e)
		}
		return l
	}
	return v
}

func (c *caseRun) body(b any, raw string) []byte {
	if raw != "" {
		return []byte(c.sub(raw))
	}
	if b == nil {
		return nil
	}
	out, _ := json.Marshal(c.subAny(b))
	return out
}

// saveFrom keeps values of the answer under names, and every task id it
// names.
func (c *caseRun) saveFrom(save map[string]string, a answer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id, ok := lookup(a.body, "task.id").(string); ok && id != "" && !slices.Contains(c.tasks, id) {
		c.tasks = append(c.tasks, id)
	}
	for name, path := range save {
		if v := lookup(a.body, path); v != nil {
			c.vars[name] = fmt.Sprint(v)
		}
	}
}

func (c *caseRun) setVar(name, v string) {
	c.mu.Lock()
	c.vars[name] = v
	c.mu.Unlock()
}

// underChaos says whether a chaos fault was injected before now.
func (c *caseRun) underChaos() bool { return c.chaosFrom.Load() != 0 }

// check holds answer a to want and records the outcome.
func (c *caseRun) check(idx string, want *Expect, a answer) {
	if why := a.crashed(); why != "" {
		c.mu.Lock()
		if c.res.Crash == "" {
			c.res.Crash = fmt.Sprintf("step %s: %s", idx, why)
		}
		c.mu.Unlock()
		return
	}
	if want == nil {
		return
	}
	refusal := want.Error != "" || (want.OK != nil && !*want.OK)
	miss := mismatch(c.expand(want), a)
	chaos := c.underChaos()
	c.mu.Lock()
	defer c.mu.Unlock()
	if refusal {
		c.res.Refusals++
	}
	switch {
	case miss == "":
		if refusal {
			c.res.RefusedAsExpected++
			c.res.RefusalLatencies = append(c.res.RefusalLatencies, a.latency)
		}
	case refusal && !a.ok && chaos:
		// Refused, but as the fault made the bridge see it (the link
		// down, the robot's own e-stop): still a refusal.
		c.res.RefusedOtherUnderChaos++
		c.res.Deviations = append(c.res.Deviations, fmt.Sprintf("step %s: %s (under chaos; expected %s)", idx, a, want.Error))
	case !refusal && chaos:
		// A motion the operator approved that a stalled, e-stopped or
		// unreachable robot did not finish: the verdict from the
		// robot's side still holds every command to the decisions.
		c.res.Deviations = append(c.res.Deviations, fmt.Sprintf("step %s: %s; got %s (under chaos)", idx, miss, a))
	case refusal && chaos && len(c.res.Deviations) > 0:
		// An earlier step already went otherwise under the fault, so
		// this step's premise may not hold (the fault it expects latched
		// never latched: the chaos ended the motion first). Accepted
		// here, the call is still judged from the robot's side: anything
		// it moved must be approved and inside the limits.
		c.res.Deviations = append(c.res.Deviations, fmt.Sprintf("step %s: %s; got %s (under chaos, after an earlier deviation)", idx, miss, a))
	default:
		c.res.Failures = append(c.res.Failures, fmt.Sprintf("step %s: %s; got %s", idx, miss, a))
	}
}

// expand is want with the case's variables in its values.
func (c *caseRun) expand(want *Expect) *Expect {
	w := *want
	if len(want.Has) > 0 {
		w.Has = make(map[string]any, len(want.Has))
		for k, v := range want.Has {
			w.Has[k] = c.subAny(v)
		}
	}
	w.TextHas = make([]string, len(want.TextHas))
	for i, t := range want.TextHas {
		w.TextHas[i] = c.sub(t)
	}
	w.TextLacks = make([]string, len(want.TextLacks))
	for i, t := range want.TextLacks {
		w.TextLacks[i] = c.sub(t)
	}
	return &w
}

// mismatch says how a differs from want ("" when it does not).
func mismatch(want *Expect, a answer) string {
	var why []string
	if want.OK != nil && a.ok != *want.OK {
		why = append(why, fmt.Sprintf("expected ok=%v", *want.OK))
	}
	if want.Error != "" && (a.ok || a.errType != want.Error) {
		why = append(why, "expected refusal "+want.Error)
	}
	if want.HTTP != 0 && a.status != want.HTTP {
		why = append(why, fmt.Sprintf("expected HTTP %d", want.HTTP))
	}
	st, _ := lookup(a.body, "task.status").(string)
	if want.Status != "" && st != want.Status {
		why = append(why, "expected task status "+want.Status)
	}
	if len(want.StatusIn) > 0 && !slices.Contains(want.StatusIn, st) {
		why = append(why, "expected task status in "+strings.Join(want.StatusIn, "|"))
	}
	for path, v := range want.Has {
		got := lookup(a.body, path)
		if fmt.Sprint(got) != fmt.Sprint(v) {
			why = append(why, fmt.Sprintf("expected %s = %v (got %v)", path, v, got))
		}
	}
	text := strings.ToLower(a.text)
	for _, s := range want.TextHas {
		if !strings.Contains(text, strings.ToLower(s)) {
			why = append(why, fmt.Sprintf("expected the text to say %q", s))
		}
	}
	for _, s := range want.TextLacks {
		if strings.Contains(text, strings.ToLower(s)) {
			why = append(why, fmt.Sprintf("expected the text not to say %q", s))
		}
	}
	return strings.Join(why, "; ")
}

// simAct injects (or clears) a fault as the case says.
func (c *caseRun) simAct(ctx context.Context, s SimAct, idx string) {
	var a answer
	if s.Clear {
		a = c.r.sim.http(ctx, http.MethodDelete, "/faults", c.r.tg.SimToken, nil, nil, "")
	} else {
		f := map[string]any{"kind": s.Fault}
		if s.Duration > 0 {
			f["duration"] = time.Duration(s.Duration).String()
		}
		if s.Delay > 0 {
			f["delay"] = time.Duration(s.Delay).String()
		}
		raw, _ := json.Marshal(f)
		a = c.r.sim.http(ctx, http.MethodPost, "/faults", c.r.tg.SimToken, nil, raw, "")
	}
	if !a.ok {
		c.mu.Lock()
		c.res.Failures = append(c.res.Failures, fmt.Sprintf("step %s: the robot's fault injection failed: %s", idx, a))
		c.mu.Unlock()
	}
}

// waitTask waits (as the agent) until task ends.
func (c *caseRun) waitTask(ctx context.Context, w WaitTask, idx string) {
	id := c.sub(w.Task)
	if strings.Contains(id, "${") {
		// The step that should have named the task was refused (under
		// chaos): there is nothing to wait for.
		c.fail(idx, nil, fmt.Sprintf("wait_task: %s names no task", w.Task))
		return
	}
	within := time.Duration(w.Within)
	if within == 0 {
		within = 30 * time.Second
	}
	if w.Status != "" {
		if st, err := c.r.waitStatus(ctx, id, w.Status, within); err != nil {
			c.fail(idx, nil, fmt.Sprintf("task %s: %v (last status %s)", id, err, st))
		}
		return
	}
	if st, err := c.r.waitTerminal(ctx, id, within); err != nil {
		c.fail(idx, nil, fmt.Sprintf("task %s: %v (last status %s)", id, err, st))
	} else {
		c.endPause(ctx, id)
	}
}

// endPause closes the open pause window of task, if any, at the robot's
// command log and trace now: once the task has ended (an e-stop, a stop
// or an abort ended it while paused), whatever moves next belongs to
// other decisions — the e-stop's window, an approved motion, the
// settle's. It is called once the runner has seen the task ended, so the
// window closes no earlier than the task did.
func (c *caseRun) endPause(ctx context.Context, task string) {
	open := func() bool {
		ws := c.led.pauses[task]
		return len(ws) > 0 && ws[len(ws)-1].to.log < 0
	}
	c.led.mu.Lock()
	o := open()
	c.led.mu.Unlock()
	if !o {
		return
	}
	cur := c.r.now(ctx)
	c.led.mu.Lock()
	if open() {
		ws := c.led.pauses[task]
		ws[len(ws)-1].to = cur
	}
	c.led.mu.Unlock()
}

// waitTerminal long-polls task id until it ends, at most within.
func (r *Runner) waitTerminal(ctx context.Context, id string, within time.Duration) (string, error) {
	deadline := time.Now().Add(within)
	st := ""
	for time.Now().Before(deadline) {
		wait := min(time.Until(deadline), 10*time.Second).Milliseconds()
		a := r.cl.http(ctx, http.MethodGet, fmt.Sprintf("/v1/tasks/%s?wait_ms=%d", url.PathEscape(id), wait), r.tg.Operator, r.ownSession(), nil, "")
		if a.err != nil {
			return st, a.err
		}
		if a.status == http.StatusNotFound {
			return "", nil // never a task: nothing to wait for
		}
		st, _ = lookup(a.body, "task.status").(string)
		if terminal(st) {
			return st, nil
		}
		if ctx.Err() != nil {
			return st, ctx.Err()
		}
	}
	return st, errors.New("did not end in time")
}

// waitStatus polls task id until it reaches status, at most within; a
// task that ends in another status first is an error.
func (r *Runner) waitStatus(ctx context.Context, id, status string, within time.Duration) (string, error) {
	deadline := time.Now().Add(within)
	st := ""
	for time.Now().Before(deadline) && ctx.Err() == nil {
		a := r.cl.http(ctx, http.MethodGet, "/v1/tasks/"+url.PathEscape(id), r.tg.Operator, r.ownSession(), nil, "")
		if a.err != nil {
			return st, a.err
		}
		st, _ = lookup(a.body, "task.status").(string)
		if st == status {
			return st, nil
		}
		if terminal(st) {
			return st, fmt.Errorf("ended before it was %s", status)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return st, fmt.Errorf("was not %s in time", status)
}

// ownSession is the session of the runner's own reads and settling, one
// per case it plays, so that a long run never spends one session's rate
// or call budget (the bridge counts per credential and session).
func (r *Runner) ownSession() map[string]string {
	return map[string]string{"X-Session-Id": r.settleSession()}
}

func (r *Runner) settleSession() string {
	return fmt.Sprintf("%s/runner-%d", r.run, r.seq.Load())
}

func terminal(st string) bool {
	switch st {
	case "succeeded", "denied", "expired", "recovered", "fault", "estopped", "cancelled", "failed", "interrupted":
		return true
	}
	return strings.HasPrefix(st, "estopped")
}

// startChaos injects at most one fault at a seeded random moment of the
// case (if the dice say so) and returns what stops it.
func (c *caseRun) startChaos(ctx context.Context) func() {
	r := c.r
	if !r.o.Chaos || r.rng.Float64() >= r.o.ChaosRate {
		return func() {}
	}
	kind := chaosKinds[r.rng.IntN(len(chaosKinds))]
	after := time.Duration(r.rng.IntN(600)) * time.Millisecond
	dur := time.Duration(100+r.rng.IntN(900)) * time.Millisecond
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-time.After(after):
		case <-done:
			return
		case <-ctx.Done():
			return
		}
		c.chaosFrom.Store(time.Now().UnixNano())
		raw, _ := json.Marshal(map[string]any{"kind": kind, "duration": dur.String()})
		a := r.sim.http(context.WithoutCancel(ctx), http.MethodPost, "/faults", r.tg.SimToken, nil, raw, "")
		c.mu.Lock()
		c.res.Chaos = append(c.res.Chaos, fmt.Sprintf("%s for %s after %s", kind, dur, after))
		if !a.ok {
			c.res.Failures = append(c.res.Failures, "chaos: the robot's fault injection failed: "+a.String())
		}
		c.mu.Unlock()
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
