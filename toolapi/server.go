package toolapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/escalation"
	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// Server is the tool API: the registry and the one call path every front
// end (HTTP, /v1/tool_calls, MCP) goes through.
type Server struct {
	conf  Conf
	reg   *Registry
	log   *slog.Logger
	guard *guard
	m     *metrics
	mux   *http.ServeMux
	h     http.Handler

	// fleet is Conf.Fleet; nil: one robot, one.
	fleet Fleet
	one   *unit
	// ids are the robots' ids in config order, index the same as a set;
	// both are fixed in New, since the tools' schemas name the robots.
	ids   []string
	index map[string]int
	// readers holds each robot's read breakers (*unitReaders by id).
	readers sync.Map

	hist *history

	flightMu sync.Mutex
	flights  map[string]*flight // guarded by flightMu
}

// flight is a first request with an idempotency key that is still being
// processed; concurrent duplicates wait for it and share its outcome.
type flight struct {
	hash string
	tool string
	done chan struct{}
	view actions.TaskView // set before done is closed
	err  error            // set before done is closed
}

type metrics struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// ok holds each tool's series of an ok call, resolved on its first
	// ok call (no series exists before), so that the common case looks
	// no labels up. The map is fixed in New.
	ok map[string]*okSeries
}

// okSeries are one tool's metric series of an ok call.
type okSeries struct {
	once     sync.Once
	calls    prometheus.Counter
	duration prometheus.Observer
}

// observe counts one call of tool (label) of kind with outcome and error
// type, which took d.
func (m *metrics) observe(label, kind, outcome, errType string, d time.Duration) {
	if o := m.ok[label]; o != nil && outcome == "ok" && errType == "none" {
		o.once.Do(func() {
			o.calls = m.calls.WithLabelValues(label, kind, outcome, errType)
			o.duration = m.duration.WithLabelValues(label)
		})
		o.calls.Inc()
		o.duration.Observe(d.Seconds())
		return
	}
	m.calls.WithLabelValues(label, kind, outcome, errType).Inc()
	m.duration.WithLabelValues(label).Observe(d.Seconds())
}

// newMetrics registers the tool API's metrics on reg (nil: kept, not
// exported). Label values are bounded: tool names come from the registry
// (an unknown name is "unknown"), kind is state, action or unknown,
// outcome is ok or error, error_type is a toolerr type or "none". deps
// gives each dependency's breaker state (on a fleet the worst of its
// robots', so that the series stay one per dependency).
func newMetrics(reg prometheus.Registerer, deps map[string]func() float64) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		calls: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: "robot_bridge", Name: "tool_calls_total",
			Help: "Tool calls by tool, kind (state or action), outcome (ok or error) and error type (none or the toolerr type).",
		}, []string{"tool", "kind", "outcome", "error_type"}),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "robot_bridge", Name: "tool_call_duration_seconds",
			Help:    "Duration of tool calls by tool, from the call's decoding to its envelope.",
			Buckets: []float64{.0001, .0003, .001, .003, .01, .03, .1, .3, 1, 3, 10, 30, 60},
		}, []string{"tool"}),
	}
	for name, state := range deps {
		f.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "robot_bridge", Name: "breaker_state",
			Help:        "Circuit breaker state of a dependency the tool API reads: 0 closed, 1 half-open, 2 open.",
			ConstLabels: prometheus.Labels{"dependency": name},
		}, state)
	}
	return m
}

// breakerState is a breaker's state as the breaker_state gauge counts it.
func breakerState(r *reader) float64 {
	switch {
	case r.cb.IsOpen():
		return 2
	case r.cb.IsHalfOpen():
		return 1
	}
	return 0
}

// worstBreaker is the worst state of one dependency's breakers over
// every robot read so far.
func (s *Server) worstBreaker(pick func(*unitReaders) *reader) func() float64 {
	return func() float64 {
		worst := 0.0
		s.readers.Range(func(_, v any) bool {
			worst = max(worst, breakerState(pick(v.(*unitReaders))))
			return worst < 2
		})
		return worst
	}
}

// New returns a Server; it fails if conf is incomplete or the registry
// cannot be built from the hw-config. Errors wrap ErrConf and name the field.
func New(conf Conf) (*Server, error) {
	c, err := conf.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{conf: c, log: c.Logger, guard: newGuard(c), fleet: c.Fleet, flights: map[string]*flight{}, hist: newHistory()}
	if c.Fleet == nil {
		id := c.HWConfig.Robot.ID
		rs := &unitReaders{rd: newReader("the robot state", c), sc: newReader("perception", c)}
		s.readers.Store(id, rs)
		s.one = &unit{
			id: id, name: c.HWConfig.Robot.Name, tasks: c.Tasks, robot: c.Robot, scene: c.Scene, safety: c.Safety,
			rd: rs.rd, sc: rs.sc, states: &rs.states,
		}
		s.one.fill(s)
		s.ids = []string{id}
	} else {
		for _, fr := range c.Fleet.Robots() {
			s.ids = append(s.ids, fr.ID)
		}
	}
	s.index = make(map[string]int, len(s.ids))
	for i, id := range s.ids {
		s.index[id] = i
	}
	reg, err := NewFleetRegistry(c.HWConfig, s.ids)
	if err != nil {
		return nil, err
	}
	s.reg = reg
	if c.Fleet != nil && c.Ready == nil {
		// A bridge serves while any of its robots can be reached: one
		// robot's link down must not take the others' API away.
		s.conf.Ready = func(context.Context) error {
			for _, u := range s.units() {
				if u.robot.LinkUp() {
					return nil
				}
			}
			return errors.New("every robot's link is down")
		}
	}
	s.m = newMetrics(c.Registerer, map[string]func() float64{
		"robot_state": s.worstBreaker(func(r *unitReaders) *reader { return r.rd }),
		"perception":  s.worstBreaker(func(r *unitReaders) *reader { return r.sc }),
	})
	s.m.ok = make(map[string]*okSeries, len(reg.tools))
	for _, t := range reg.tools {
		s.m.ok[t.Name] = &okSeries{}
	}
	s.routes()
	return s, nil
}

// Registry returns the server's tool registry.
func (s *Server) Registry() *Registry { return s.reg }

// CallRequest is one tool call, whatever front end it came through.
type CallRequest struct {
	Tool      string
	Arguments map[string]any
	// SessionID scopes the loop guard and rate limit (optional).
	SessionID string
	// IdempotencyKey makes an action call safe to repeat (optional).
	IdempotencyKey string
	// Wait is how long an action call waits for its task (0: return at
	// once); capped at Conf.MaxWait.
	Wait time.Duration
	// TraceID ties the call's logs together (optional).
	TraceID string

	// toolCallID and keyPrefix are set when IdempotencyKey was derived
	// from a tool call's id by POST /v1/tool_calls, so that a replay or a
	// CONFLICT names the tool call rather than a key the client never saw.
	toolCallID, keyPrefix string
	// viaMCP is set for calls over MCP, whose replays say that nothing
	// was sent again; mcpRequestID when IdempotencyKey was derived from
	// the call's JSON-RPC id on its MCP session.
	viaMCP       bool
	mcpRequestID string
}

// keyOrigin says in words where the call's idempotency key came from, for
// messages to the model.
func (req CallRequest) keyOrigin() string {
	switch {
	case req.mcpRequestID != "":
		return fmt.Sprintf("MCP request id %s of this MCP session", req.mcpRequestID)
	case req.toolCallID == "":
		return fmt.Sprintf("idempotency key %q", req.IdempotencyKey)
	case req.keyPrefix != "":
		return fmt.Sprintf("tool call id %q under idempotency_key_prefix %q", req.toolCallID, req.keyPrefix)
	case req.SessionID == "":
		return fmt.Sprintf("tool call id %q without a session_id", req.toolCallID)
	}
	return fmt.Sprintf("tool call id %q in session %q", req.toolCallID, req.SessionID)
}

// newCallHint says how to make a new call rather than repeat this one.
func (req CallRequest) newCallHint() string {
	switch {
	case req.toolCallID != "":
		return "a new request needs a new tool call id"
	case req.mcpRequestID != "":
		return "a new request is a new tools/call, with a new id"
	}
	return "a new action needs a new idempotency_key"
}

// outcome is what a tool produced before it is wrapped in an Envelope.
type outcome struct {
	data any
	text string
	task *TaskRef
	err  *toolerr.Error
	// obs is the robot observation the tool already made, when observed.
	obs      robot.Observation
	observed bool
	// state is get_robot_state's ok answer, cached (statecache.go): data
	// is then left out, to be built from obs only when a front end needs
	// it (reply.envelope).
	state *stateAnswer
	// stopSentAt is set by the stop tool: the envelope says "stopped"
	// only from a state received after it.
	stopSentAt time.Time
	// dataWithError keeps data in a failed envelope: the last known
	// state of an UNAVAILABLE get_robot_state.
	dataWithError bool
	// robotWords, when set, is the envelope's robot field, already
	// observed: the fleet's words of a call for every robot.
	robotWords string
	// attempts is how often the tool's read was tried (its log line's
	// attempt).
	attempts int32
	// untrusted names the fields that hold text from outside the bridge
	// (describe_scene's); envelope adds a grasp task's and keeps those
	// the envelope holds.
	untrusted []Untrusted
}

func fail(err error) outcome { return outcome{err: toolerr.As(err)} }

// envelope is the Envelope of an outcome of tool, all but its Robot field
// (robotText). Every front end that turns an outcome into an envelope
// goes through it, so a failure carries data exactly when the outcome
// says so (dataWithError), and every envelope marks the fields that hold
// scene text as untrusted (describe_scene's, and a grasp task's, whose
// texts name the object by its label).
func (out outcome) envelope(tool string) Envelope {
	env := out.envelopeLazy(tool)
	if out.state != nil {
		env.Data = newStateData(out.obs)
	}
	return env
}

// envelopeLazy is envelope, but for get_robot_state's cached answer's
// data, left out (nil) for reply.envelope to build when it is needed.
// Nothing else in the envelope depends on it: the answer marks no field
// untrusted.
func (out outcome) envelopeLazy(tool string) Envelope {
	env := Envelope{OK: out.err == nil, Tool: tool, Data: out.data, Text: out.text, Task: out.task}
	untrusted := out.untrusted
	if d, ok := out.data.(TaskData); ok && d.Tool == ToolGrasp {
		for _, u := range graspUntrusted(d) {
			untrusted = addUntrusted(untrusted, u.Source, u.Fields...)
		}
	}
	if out.err != nil {
		env.Error = ErrorBodyOf(out.err)
		if !out.dataWithError {
			env.Data = nil
		}
	}
	env.Untrusted = presentOnly(untrusted, &env)
	return env
}

// Call runs one tool call through the whole path — rate limit, lookup,
// validation, idempotency, execution, loop guard — and always returns an
// Envelope, never an error: a failure is an envelope with ok false.
func (s *Server) Call(ctx context.Context, p Principal, req CallRequest) Envelope {
	return s.call(ctx, p, req, nil).envelope()
}

// reply is a call's envelope as the call path leaves it. get_robot_state's
// ok answer leaves its data to be built from obs (lazy) only when a front
// end needs it: the HTTP front end writes the cached encoding instead,
// when the envelope is that answer word for word (state).
type reply struct {
	env Envelope
	// state is the cached answer env is exactly, but for data, which is
	// the answer's with state_age_ms of obs; nil when env is anything
	// else (an operator's answer added to it, say).
	state *stateAnswer
	obs   robot.Observation
	lazy  bool
}

// envelope is the whole envelope, data built.
func (r reply) envelope() Envelope {
	if r.lazy {
		r.env.Data = newStateData(r.obs)
	}
	return r.env
}

// callWithArgError answers a call whose arguments could not even be read
// (argErr) through the same path, so rate limit and loop guard apply.
func (s *Server) callWithArgError(ctx context.Context, p Principal, req CallRequest, argErr *toolerr.Error) Envelope {
	req.Arguments = map[string]any{"unreadable_arguments": argErr.Details["received"]}
	return s.call(ctx, p, req, argErr).envelope()
}

func (s *Server) call(ctx context.Context, p Principal, req CallRequest, argErr *toolerr.Error) reply {
	start := s.conf.Clock.Now()
	if req.TraceID == "" {
		req.TraceID = TraceIDFromContext(ctx)
	}
	// The rate limit and budget are per credential and session_id; the
	// loop guard, without a session_id, per connection (see conn.go).
	sessKey := sessionKey{principal: p.Name, id: req.SessionID}
	loopBucket := loopKey(ctx, p.Name, req.SessionID)
	args := req.Arguments
	if args == nil {
		args = map[string]any{}
	}
	// The canonical hash is only needed for idempotency, the loop guard
	// and logs of failures; compute it once, on demand.
	argsHash := &argsHasher{tool: req.Tool, args: args}
	tool, known := s.reg.Lookup(req.Tool)
	// u is the robot the call is for: the only one until the arguments
	// name another; nil on a fleet when they name none.
	u := s.defaultRobot()
	if known && argErr == nil {
		// A null for an optional argument means it is absent (OpenAI's
		// strict mode sends every argument), for validation, the
		// idempotency hash and the runner alike.
		args = tool.WithoutOptionalNulls(args)
		argsHash.args = args
	}

	var out outcome
	var looped *toolerr.Error
	var stopNote string
	kind := "unknown"
	if known {
		kind = string(tool.Kind)
	}
	if !known || tool.Name != ToolStop {
		// stop is never rate limited: it must always get through.
		if te := s.guard.admit(sessKey, start); te != nil {
			out = outcome{err: te}
		}
	}
	if out.err == nil {
		switch {
		case idCharsError(req) != nil:
			out = outcome{err: idCharsError(req)}
		case !known:
			out = outcome{err: s.unknownTool(req.Tool)}
		case argErr != nil:
			kind = string(tool.Kind)
			out = outcome{err: argErr}
		default:
			kind = string(tool.Kind)
			// The robot is resolved before the schema is checked: a model
			// that left robot_id out learns which robots there are.
			ru, te := s.robotFor(tool, args)
			if te == nil {
				u = ru
				te = tool.Validate(args)
			}
			if tool.Name == ToolStop {
				// A stop always stops: what is wrong with its free text
				// (a reason too long, of the wrong type, a field it does
				// not take) is dropped and said, never a reason to keep
				// the robot moving. The reason reaches the operator
				// cleaned of control and bidi characters.
				args, stopNote = stopArgs(tool, args, te)
				argsHash.args = args
				if stopNote != "" {
					te = nil
				}
			}
			switch {
			case te != nil:
				out = outcome{err: te}
			case tool.Name == ToolRequestOperatorHelp:
				out = s.requestHelp(ctx, p, u, req, args)
			case tool.Name == ToolListRobots:
				out = s.listRobots(ctx, u, args)
			case tool.Kind == KindState:
				out = s.runState(ctx, u, tool, args)
			default:
				out = s.runAction(ctx, p, u, tool, args, argsHash, req)
			}
		}
		// The loop guard sees every executed call's outcome; a
		// RATE_LIMITED call was not executed and does not count.
		if !known || tool.Name != ToolStop {
			if le := s.guard.outcome(loopBucket, req.Tool, argsHash, out.err, s.conf.Clock.Now()); le != nil {
				out.err, looped = le, le
			}
		}
	}
	env := out.envelopeLazy(req.Tool)
	if stopNote != "" && env.OK {
		env.Text = strings.TrimSpace(env.Text + " " + stopNote)
	}
	env.Robot = s.robotText(ctx, u, out)
	s.hist.add(sessKey, s.callRecord(start, req.Tool, args, env))
	if looped != nil {
		s.loopEscalation(ctx, p, req, looped)
	}
	s.deliverAnswer(ctx, p, req.SessionID, &env)
	rep := reply{env: env}
	if a := out.state; a != nil {
		rep.obs, rep.lazy = out.obs, true
		if env.OK && env.Tool == ToolGetRobotState && env.OperatorMessage == nil && env.Text == a.text && env.Robot == a.robot && a.head != nil {
			rep.state = a
		}
	}

	outcomeLabel, errType := "ok", "none"
	if env.Error != nil {
		outcomeLabel, errType = "error", string(env.Error.Type)
	}
	label := req.Tool
	if !known {
		label = "unknown"
	}
	d := s.conf.Clock.Since(start)
	s.m.observe(label, kind, outcomeLabel, errType, d)
	lvl := slog.LevelInfo
	if env.OK && kind == string(KindState) {
		lvl = slog.LevelDebug
	}
	if s.log.Enabled(ctx, lvl) {
		// Arguments are logged only at debug level and only redacted:
		// schema-marked sensitive values never reach a log line, nor do
		// tokens, which never reach this function.
		attrs := []any{
			"tool", label, "kind", kind, "principal", p.Name, "session_id", req.SessionID, "args_hash", argsHash.hash()[:16],
			"ok", env.OK, "duration", d, "attempt", max(1, out.attempts),
		}
		if req.TraceID != "" {
			attrs = append(attrs, "trace_id", req.TraceID)
		}
		if env.Error != nil {
			attrs = append(attrs, "error_type", env.Error.Type)
		}
		if env.Task != nil {
			attrs = append(attrs, "task_id", env.Task.ID, "status", env.Task.Status)
		}
		if req.IdempotencyKey != "" {
			attrs = append(attrs, "idempotent", true)
		}
		if s.multi() && u != nil {
			attrs = append(attrs, "robot_id", u.id)
		}
		if s.log.Enabled(ctx, slog.LevelDebug) {
			attrs = append(attrs, "args", s.reg.Redact(req.Tool, args))
		}
		s.log.Log(ctx, lvl, "tool call", attrs...)
	}
	return rep
}

// argsHasher is a call's canonical arguments hash (safety.ArgsHash),
// computed on first use; args follows the call's arguments as they
// change (nulls dropped, a stop's cleaned).
type argsHasher struct {
	tool string
	args map[string]any
	h    string
}

func (a *argsHasher) hash() string {
	if a.h == "" {
		a.h = safety.ArgsHash(a.tool, a.args)
	}
	return a.h
}

func (s *Server) unknownTool(name string) *toolerr.Error {
	closest := s.reg.Closest(name, 3)
	shown := name
	if len(shown) > 64 {
		shown = shown[:64] + "…"
	}
	all := make([]string, 0, len(s.reg.tools))
	for _, t := range s.reg.tools {
		all = append(all, t.Name)
	}
	if len(closest) == 0 {
		te := toolerr.New(toolerr.UnknownTool, "there is no tool named %q, and no tool has a similar name; the tools are %s",
			shown, strings.Join(all, ", "))
		te.Suggestion = "pick the tool in details.available that does what you need (read its description first); if none does, tell the user this robot cannot do it"
		return te.With("closest", []string{}).With("available", all).With("received", shown)
	}
	te := toolerr.New(toolerr.UnknownTool, "there is no tool named %q; did you mean %s?", shown, strings.Join(closest, ", "))
	te.Suggestion = fmt.Sprintf("call %s instead if it does what you meant (the closest names are in details.closest; every tool is in details.available)", closest[0])
	return te.With("closest", closest).With("available", all).With("received", shown)
}

// observe reads robot u's newest state with what decides whether it
// describes the robot now: when it was received, the link, the clock. An
// error means there is no state at all.
func (s *Server) observe(ctx context.Context, u *unit) (robot.Observation, error) {
	st, at, err := u.robot.Latest(ctx)
	// The link and the clock are read after the state, so the age and
	// the link are never older than the state they qualify.
	obs := robot.Observation{LinkUp: u.robot.LinkUp(), Now: s.conf.Clock.Now(), StaleAfter: s.conf.StaleAfter}
	if err != nil {
		return obs, err
	}
	obs.State, obs.Have, obs.ReceivedAt = st, true, at
	return obs, nil
}

// robotText is the envelope's robot field: the physical state in words,
// exactly as true as what the bridge knows at this moment (see
// robot.Observation.Summary: "stopped" only from a current state, and
// after a stop only from a state received since), and what task holds
// the robot. On a fleet, a call that named no robot gets the fleet's
// words (fleetWords).
func (s *Server) robotText(ctx context.Context, u *unit, out outcome) string {
	if out.robotWords != "" {
		return out.robotWords
	}
	if u == nil {
		ctx, cancel := context.WithTimeout(ctx, s.conf.StateTimeout)
		defer cancel()
		return fleetWords(s.rows(ctx, s.units(), out.stopSentAt))
	}
	var b strings.Builder
	if out.observed {
		b.WriteString(observedWords(out.obs, out.stopSentAt))
	} else if o, err := s.observe(ctx, u); err != nil {
		b.WriteString("robot state unknown (no state from the robot: ")
		b.WriteString(toolerr.As(err).Message)
		b.WriteString(")")
		if !o.LinkUp {
			b.WriteString(", robot link down")
		}
	} else {
		b.WriteString(observedWords(o, out.stopSentAt))
	}
	v, busy := u.tasks.Active()
	b.WriteString(taskWords(v, busy))
	return b.String()
}

// observedWords says what o shows of the robot; after a stop sent at
// stopSentAt (when set) "stopped" only from a state received since.
func observedWords(o robot.Observation, stopSentAt time.Time) string {
	if !stopSentAt.IsZero() {
		o.StopSentAt = stopSentAt
	}
	return o.Summary()
}

// taskWords is the robot field's end: the task holding the robot (v,
// when busy), or that none runs.
func taskWords(v actions.TaskView, busy bool) string {
	if busy {
		return fmt.Sprintf(", task %s (%s) %s", v.ID, v.Tool, StatusPhrase(v.Status))
	}
	return ", no task running"
}

// clampWait bounds a requested wait by Conf.MaxWait.
func (s *Server) clampWait(d time.Duration) time.Duration {
	if d < 0 {
		return 0
	}
	return min(d, s.conf.MaxWait)
}

func (s *Server) runState(ctx context.Context, u *unit, t *Tool, args map[string]any) outcome {
	if t.Name == ToolGetTask {
		// A long poll is bounded by wait_ms, not by the state timeout.
		id, _ := args["task_id"].(string)
		wait := time.Duration(0)
		if ms, ok := args["wait_ms"].(float64); ok {
			wait = s.clampWait(time.Duration(ms) * time.Millisecond)
		}
		return s.getTask(ctx, u, id, wait)
	}
	sc := newStateCtx(ctx, max(s.conf.StateTimeout, t.Timeout))
	defer sc.release()
	out := s.runStateTool(sc, u, t, args)
	out.attempts = sc.attempts.Load()
	return out
}

// runStateTool runs state tool t (but get_task) within its context.
func (s *Server) runStateTool(ctx context.Context, u *unit, t *Tool, args map[string]any) outcome {
	switch t.Name {
	case ToolGetRobotState:
		obs, err := s.readState(ctx, u)
		if err != nil {
			te := toolerr.As(err)
			if te.Type == toolerr.Unavailable {
				// The link (or the breaker) says no, but the bridge still
				// holds the last state it received: give it, with its age,
				// never as the robot's now.
				if obs, oerr := s.observe(ctx, u); oerr == nil {
					return lastKnown(te, obs)
				}
			}
			return fail(te)
		}
		// The task is read after the state, as the robot field always
		// read it; the answer is the cached one only when made from the
		// same state, link, condition, age words and task.
		v, busy := u.tasks.Active()
		a := u.states.answer(obs, v, busy)
		return outcome{text: a.text, robotWords: a.robot, obs: obs, observed: true, state: a}
	case ToolDescribeScene:
		q := SceneQuery{}
		q.Label, _ = args["label"].(string)
		if n, ok := args["max_objects"].(float64); ok {
			q.MaxObjects = int(n)
		}
		if c, ok := args["min_confidence"].(float64); ok {
			q.MinConfidence = c
		}
		type scene struct {
			text string
			data any
		}
		v, err := u.sc.do(ctx, func(ctx context.Context) (any, error) {
			text, data, err := u.scene.Describe(ctx, q)
			return scene{text, data}, err
		})
		if err != nil {
			return fail(err)
		}
		sc := v.(scene)
		return outcome{data: sc.data, text: sc.text, untrusted: sceneUntrusted(sc.data)}
	case ToolListNamedPoses:
		return s.listNamedPoses()
	case ToolGetSafetyStatus:
		st := u.safety.SafetyStatus()
		text := "Safety status read."
		switch v := st.(type) {
		case interface{ Text() string }:
			text = v.Text()
		case fmt.Stringer:
			text = v.String()
		case map[string]any:
			if t, ok := v["text"].(string); ok {
				text = t
			}
		}
		return outcome{data: st, text: text}
	}
	return fail(toolerr.New(toolerr.Internal, "state tool %s has no implementation", t.Name))
}

// stateText is get_robot_state's text for a state it answers with: what
// the robot is doing for a current state, else what it was doing.
func stateText(obs robot.Observation) string {
	if !obs.Condition().Current() {
		return "The robot was " + obs.Summary() + "; it may have moved since."
	}
	return "The robot is " + obs.Summary() + "."
}

// readState is get_robot_state's read of robot u through its breaker, as
// reader.do reads, without allocating when the first try succeeds: the
// newest state, observed, or an error (UNAVAILABLE while the link is
// down).
func (s *Server) readState(ctx context.Context, u *unit) (robot.Observation, error) {
	if u.rd.cb.IsClosed() {
		countAttempt(ctx)
		obs, err := s.observeUp(ctx, u)
		if err == nil {
			u.rd.cb.RecordSuccess()
			return obs, nil
		}
		if err := u.rd.afterFirst(ctx, err); err != nil {
			return robot.Observation{}, err
		}
	}
	return s.readStateRetry(ctx, u)
}

// readStateRetry is readState past its first try: the reader's retries
// behind its breaker.
func (s *Server) readStateRetry(ctx context.Context, u *unit) (robot.Observation, error) {
	v, err := u.rd.retry(ctx, func(ctx context.Context) (any, error) {
		countAttempt(ctx)
		obs, err := s.observeUp(ctx, u)
		if err != nil {
			return nil, err
		}
		return obs, nil
	})
	if err != nil {
		return robot.Observation{}, err
	}
	return v.(robot.Observation), nil
}

// observeUp is observe, failing UNAVAILABLE while the link is down.
func (s *Server) observeUp(ctx context.Context, u *unit) (robot.Observation, error) {
	obs, err := s.observe(ctx, u)
	if err != nil {
		return obs, err
	}
	if !obs.LinkUp {
		return obs, toolerr.New(toolerr.Unavailable, "the robot link is down; the robot was %s", obs.LastSeen()).
			With("link", "down").With("state_age_ms", obs.Age().Milliseconds())
	}
	return obs, nil
}

type stateData struct {
	robot.State
	// Stamp is the robot's own clock at the state, absent when the robot
	// sends none (it shadows robot.State's, which has no omitzero).
	Stamp    time.Time `json:"stamp,omitzero"`
	ThetaDeg float64   `json:"theta_deg"`
	LinkUp   bool      `json:"link_up"`
	// Condition is what the state says about the robot now: moving or
	// stopped for a current state, stale when none arrived within the
	// state timeout, link_down while the link is down.
	Condition robot.Condition `json:"condition"`
	// Stale is true when the state is not the robot's now.
	Stale bool `json:"stale"`
	// StateAgeMS is how long ago the bridge received the state, in
	// milliseconds.
	StateAgeMS int64 `json:"state_age_ms"`
}

// stopData is the stop tool's data: actions.StopReport with the state's
// stamp absent when the robot sent none.
type stopData struct {
	Text      string    `json:"text"`
	Cancelled []string  `json:"cancelled,omitempty"`
	State     stampless `json:"state"`
	Robot     string    `json:"robot"`
}

// stampless is a robot.State whose stamp is left out when zero, never
// encoded as 0001-01-01T00:00:00Z.
type stampless struct {
	robot.State
	Stamp time.Time `json:"stamp,omitzero"`
}

func newStateData(obs robot.Observation) stateData {
	st, cond := obs.State, obs.Condition()
	return stateData{
		State: st, Stamp: st.Stamp, ThetaDeg: math.Round(robot.Degrees(st.Base.Theta)*10) / 10, LinkUp: obs.LinkUp,
		Condition: cond, Stale: !cond.Current(), StateAgeMS: obs.Age().Milliseconds(),
	}
}

// lastKnown is get_robot_state's UNAVAILABLE while the bridge still holds
// a state: the error, with the last known state and its age in data and
// in words ("last known 12.4 s ago: stopped at (1.33, 0.99) facing 90°,
// …"), said as what the robot was, never what it is.
func lastKnown(te *toolerr.Error, obs robot.Observation) outcome {
	then := obs
	then.Now, then.LinkUp, then.StopSentAt = obs.ReceivedAt, true, time.Time{}
	age := robot.FormatAge(obs.Age())
	why := "the robot link is down"
	if obs.LinkUp {
		why = "the robot state cannot be read right now (" + te.Message + ")"
	}
	was := fmt.Sprintf("last known %s ago: %s", age, then.Summary())
	te.Message = why + "; " + was + "; it may have moved since"
	if te.RetryAfter <= 0 {
		te.RetryAfter = toolerr.DefaultRetryAfter(toolerr.Unavailable)
	}
	te.With("link_up", obs.LinkUp).With("last_known", true).With("state_age_ms", obs.Age().Milliseconds())
	text := fmt.Sprintf("The robot cannot be reached now: %s; %s. It may have moved since; wait %s before reading it again, "+
		"and send no motion until it answers.", why, was, robot.FormatAge(te.RetryAfter))
	return outcome{err: te, data: newStateData(obs), text: text, obs: obs, observed: true, dataWithError: true}
}

func (s *Server) getTask(ctx context.Context, u *unit, id string, wait time.Duration) outcome {
	var (
		v   actions.TaskView
		err error
	)
	if wait > 0 {
		v, err = u.tasks.Wait(ctx, id, wait)
	} else {
		v, err = u.tasks.Get(id)
	}
	if err != nil {
		te := toolerr.As(err)
		if te.Type == toolerr.NotFound {
			te.With("task_id", id)
		}
		return fail(te)
	}
	// Reading a task succeeded even when the task itself failed: the
	// envelope is ok, data.error carries the task's failure and the text
	// says it first. Counting it as a failed call would make an agent that
	// polls a failed task look like one stuck in a loop.
	text := taskText(v)
	if te := taskError(v); te != nil {
		text = fmt.Sprintf("Task %s (%s) %s with %s: %s Suggestion: %s", v.ID, v.Tool, StatusPhrase(v.Status), te.Type, te.MessageText(), te.SuggestionText())
	}
	return outcome{data: s.taskData(v), task: taskRef(v), text: text}
}

// taskText says in words where a task is, for the model: its status as a
// phrase (never a status name like awaiting_approval), its progress while
// it runs, and the runner's words when they add something.
func taskText(v actions.TaskView) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Task %s (%s) %s", v.ID, v.Tool, StatusPhrase(v.Status))
	progress := ""
	if !v.Status.Terminal() && v.Progress.Text != "" {
		progress = v.Progress.Text
		fmt.Fprintf(&b, ", %.0f%% done: %s", v.Progress.Fraction*100, toolerr.Clause(progress))
	}
	b.WriteString(".")
	if said := toolerr.Clause(v.Text); said != "" && !strings.HasPrefix(strings.ToLower(progress), strings.ToLower(said)) {
		b.WriteString(" " + toolerr.Sentence(v.Text))
	}
	if !v.Status.Terminal() {
		fmt.Fprintf(&b, ` Follow it with get_task {"task_id": %q, "wait_ms": 10000}.`, v.ID)
	}
	return b.String()
}

// StatusPhrase is a task status as the predicate of a sentence about the
// task ("Task t-1 (grasp) needs an operator's approval"), as every text
// and the envelope's robot field say it: never the status name itself.
func StatusPhrase(st fsm.State) string {
	switch st {
	case fsm.Requested:
		return "has been requested"
	case fsm.AwaitingApproval:
		return "needs an operator's approval"
	case fsm.Approved:
		return "has an operator's approval and is starting"
	case fsm.Executing:
		return "is executing"
	case fsm.Paused:
		return "is held by an operator"
	case fsm.Stopping:
		return "is stopping"
	case fsm.Recovering:
		return "is returning to its safe pose after a stop"
	case fsm.Succeeded:
		return "succeeded"
	case fsm.Failed:
		return "failed"
	case fsm.Cancelled:
		return "has been cancelled"
	case fsm.Denied:
		return "has been denied by an operator"
	case fsm.Expired:
		return "expired with no operator's decision"
	case fsm.Recovered:
		return "stopped and returned to its safe pose"
	case fsm.Fault:
		return "ended with a latched fault"
	case fsm.EStopped:
		return "ended by the e-stop"
	case fsm.Interrupted:
		return "has been interrupted by a restart of the bridge"
	}
	return "is " + strings.ReplaceAll(string(st), "_", " ")
}

func (s *Server) listNamedPoses() outcome {
	cfg := s.conf.HWConfig
	type loc struct {
		X           float64 `json:"x"`
		Y           float64 `json:"y"`
		ThetaDeg    float64 `json:"theta_deg"`
		Description string  `json:"description,omitempty"`
	}
	locs := map[string]loc{}
	for name, l := range cfg.Locations {
		locs[name] = loc{l.X, l.Y, l.ThetaDeg, l.Description}
	}
	data := map[string]any{"locations": locs, "workspace": cfg.Base.Workspace, "world_bounds": cfg.World.Bounds}
	text := "Locations: " + strings.Join(sortedKeys(cfg.Locations), ", ") + "."
	if cfg.Arm != nil {
		poses := map[string]map[string]float64{}
		for name, p := range cfg.Poses {
			poses[name] = p
		}
		data["arm_poses"] = poses
		data["safe_pose"] = map[string]any{"arm": cfg.SafePose.Arm, "base": cfg.SafePose.Base, "gripper": cfg.SafePose.Gripper}
		text += " Arm poses: " + strings.Join(sortedKeys(cfg.Poses), ", ") + "; safe pose: " + cfg.SafePose.Arm + "."
	}
	return outcome{data: data, text: text}
}

func (s *Server) runAction(ctx context.Context, p Principal, u *unit, t *Tool, args map[string]any, argsHash *argsHasher, req CallRequest) outcome {
	switch t.Name {
	case ToolStop:
		reason, _ := args["reason"].(string)
		if reason == "" {
			reason = "agent called stop"
		}
		if u == nil {
			return s.stopAll(ctx, p, reason)
		}
		rep, err := u.tasks.Stop(ctx, p.Name, reason)
		if err != nil {
			// Whether the stop left is what the error says; the robot
			// field then only describes the newest state.
			return fail(err)
		}
		text := rep.Text
		if text == "" {
			text = "Stop sent."
		}
		// The stop has left once Stop returns: only a state received
		// after this instant can show the robot stopped.
		data := stopData{Text: rep.Text, Cancelled: rep.Cancelled, State: stampless{rep.State, rep.State.Stamp}, Robot: rep.Robot}
		return outcome{data: data, text: text, stopSentAt: s.conf.Clock.Now()}
	case ToolCancelTask:
		id, _ := args["task_id"].(string)
		v, err := u.tasks.Cancel(ctx, id, p.Name)
		if err != nil {
			te := toolerr.As(err)
			if te.Type == toolerr.NotFound {
				te.With("task_id", id)
			}
			return fail(te)
		}
		return outcome{data: s.taskData(v), task: taskRef(v), text: "Cancel requested. " + taskText(v)}
	}
	r := actions.Request{Tool: t.Name, Arguments: withoutRobotID(args), SessionID: req.SessionID, Principal: p.Name, TraceID: req.TraceID}
	var (
		v        actions.TaskView
		replayed bool
		err      error
	)
	if req.IdempotencyKey != "" {
		v, replayed, err = s.submitOnce(ctx, p, u, r, argsHash.hash(), req)
	} else {
		v, err = u.tasks.Submit(ctx, r)
	}
	if err != nil {
		return fail(err)
	}
	out := s.follow(ctx, u, v, s.clampWait(req.Wait))
	if replayed {
		// Whatever the protocol, a replayed call says so: a host that
		// re-posts a message must be able to tell that nothing moved
		// again, and a host that reuses keys or ids must learn why its
		// new call did not run.
		out.text = fmt.Sprintf("The %s was already sent: this is its task, and nothing was sent to the robot again"+
			" (%s). ", req.keyOrigin(), req.newCallHint()) + out.text
	}
	return out
}

// follow waits up to wait for the task and reports it: ok with the task
// while it runs or after it succeeded, the task's error once it failed,
// APPROVAL_PENDING if it still awaits an operator after a wait.
func (s *Server) follow(ctx context.Context, u *unit, v actions.TaskView, wait time.Duration) outcome {
	if wait > 0 && !v.Terminal() {
		if w, err := u.tasks.Wait(ctx, v.ID, wait); err == nil {
			v = w
		} else if errors.Is(err, context.Canceled) {
			return fail(err)
		}
	}
	cover, covered := s.grantCover(v)
	if covered && v.Status == fsm.AwaitingApproval {
		// The grant's approval is already on its way to the runner: answer
		// with the status the task has once the runner took it in.
		v = s.pastApproval(ctx, u, v)
	}
	out := outcome{data: s.taskData(v), task: taskRef(v), text: taskText(v)}
	if te := taskError(v); te != nil {
		out.err = te
		return out
	}
	if covered {
		now := s.conf.Clock.Now()
		d := out.data.(TaskData)
		d.Grant = &GrantData{
			ID: cover.GrantID, By: cover.By, Scope: cover.Scope, ExpiresAt: cover.ExpiresAt,
			ExpiresInMS: max(0, cover.ExpiresAt.Sub(now).Milliseconds()),
		}
		out.data = d
		if !strings.Contains(out.text, cover.GrantID) {
			// The runner's own words may already name the grant.
			out.text = grantText(cover, now) + " " + out.text
		}
	}
	if wait > 0 && v.Status == fsm.AwaitingApproval {
		te := toolerr.New(toolerr.ApprovalPending,
			"task %s (%s) still awaits an operator's approval after %d ms; nothing has moved", v.ID, v.Tool, wait.Milliseconds())
		te.Suggestion = fmt.Sprintf(`poll get_task {"task_id": %q, "wait_ms": 30000} until the operator decides; do not call %s again`, v.ID, v.Tool)
		te.RetryAfter = min(wait, 5*time.Second)
		out.err = te.With("task_id", v.ID)
	}
	return out
}

// grantCover returns the operator's scoped grant that approved v's
// approval request, if one did.
func (s *Server) grantCover(v actions.TaskView) (GrantCover, bool) {
	if s.conf.GrantCover == nil || v.ApprovalID == "" {
		return GrantCover{}, false
	}
	switch v.Status {
	case fsm.AwaitingApproval, fsm.Approved, fsm.Executing, fsm.Succeeded:
		return s.conf.GrantCover(v.ApprovalID)
	}
	return GrantCover{}, false
}

// grantText says which grant approved a call: "Approved by ann's grant
// grt_1 (move_arm_to the named poses ready, stowed), valid until 14:05 UTC
// (9 min from now), with no operator asked.".
func grantText(g GrantCover, now time.Time) string {
	by := "an operator's"
	switch g.By {
	case "":
	case string(RoleOperator):
		by = "the operator's"
	default:
		by = g.By + "'s"
	}
	until := ""
	if !g.ExpiresAt.IsZero() {
		until = fmt.Sprintf(", valid until %s UTC (%s from now)", g.ExpiresAt.UTC().Format("15:04"), robot.FormatAge(g.ExpiresAt.Sub(now)))
	}
	scope := ""
	if g.Scope != "" {
		scope = " (" + g.Scope + ")"
	}
	return fmt.Sprintf("Approved by %s grant %s%s%s, with no operator asked.", by, g.GrantID, scope, until)
}

// pastApprovalWait bounds how long a call covered by a grant waits for
// the runner to take in the grant's approval (it is already in the
// runner's hands; this only guards against a runner that never does).
const pastApprovalWait = 2 * time.Second

// pastApproval returns v once the runner has moved it past
// awaiting_approval, or as it is after pastApprovalWait or when ctx ends.
// It waits on the runner's goroutine, not on time the bridge simulates, so
// it polls the real clock.
func (s *Server) pastApproval(ctx context.Context, u *unit, v actions.TaskView) actions.TaskView {
	deadline := time.Now().Add(pastApprovalWait)
	pause := 50 * time.Microsecond
	for time.Now().Before(deadline) {
		w, err := u.tasks.Get(v.ID)
		if err != nil {
			return v
		}
		if w.Status != fsm.AwaitingApproval {
			return w
		}
		if !sleepCtx(ctx, pause) {
			return w
		}
		pause = min(2*pause, 5*time.Millisecond)
	}
	return v
}

// submitOnce submits r at most once per (principal, key): Stripe
// semantics. The same key with the same arguments returns the same task
// (replayed true); with other arguments, CONFLICT; concurrent duplicates
// wait for the first request and share its task. The scoped key starts
// with the principal's name and a NUL byte: the store relies on that to
// tie a task to its key after a crash (store.linkIdempotency).
func (s *Server) submitOnce(ctx context.Context, p Principal, u *unit, r actions.Request, hash string, req CallRequest) (actions.TaskView, bool, error) {
	scoped := p.Name + "\x00" + req.IdempotencyKey
	s.flightMu.Lock()
	for {
		f, ok := s.flights[scoped]
		if !ok {
			break
		}
		s.flightMu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return actions.TaskView{}, false, &toolerr.Error{
				Type: toolerr.Unavailable, RetryAfter: time.Second, Err: ctx.Err(),
				Message: fmt.Sprintf("the first request with the %s is still being processed", req.keyOrigin()),
			}
		}
		if f.hash == hash {
			// A duplicate of the request in flight shares its answer.
			if f.err == nil {
				v, err := u.tasks.Get(f.view.ID)
				return v, true, err
			}
			return f.view, true, f.err
		}
		// A request with other arguments was in flight: it decides
		// nothing for this one (it may itself be a conflicting replay).
		// Once it is done, the key's stored record answers: a replay of
		// the key's own arguments, or a CONFLICT naming what it is bound
		// to.
		s.flightMu.Lock()
	}
	f := &flight{hash: hash, tool: r.Tool, done: make(chan struct{})}
	s.flights[scoped] = f
	s.flightMu.Unlock()
	defer func() {
		s.flightMu.Lock()
		delete(s.flights, scoped)
		s.flightMu.Unlock()
		close(f.done)
	}()

	rec, reserved, err := s.conf.Idempotency.Reserve(ctx, scoped, r.Tool, hash)
	if err != nil {
		f.err = &toolerr.Error{
			Type: toolerr.Unavailable, RetryAfter: time.Second, Err: err,
			Message: "the idempotency store is not available, so the action was not submitted",
		}
		return actions.TaskView{}, false, f.err
	}
	if !reserved {
		f.view, f.err = s.replay(u, rec, hash, req, r.Tool)
		return f.view, true, f.err
	}
	f.view, f.err = u.tasks.Submit(ctx, r)
	// Completing the record must not depend on the caller still waiting.
	bg := context.WithoutCancel(ctx)
	switch {
	case f.err == nil:
		err = s.conf.Idempotency.Complete(bg, scoped, f.view.ID, nil)
	case toolerr.As(f.err).Retryable():
		// Nothing was created and retrying may help (ROBOT_BUSY,
		// UNAVAILABLE): let the same key try again.
		err = s.conf.Idempotency.Release(bg, scoped)
	default:
		err = s.conf.Idempotency.Complete(bg, scoped, "", ErrorBodyOf(f.err))
	}
	if err != nil {
		s.log.Error("idempotency store write failed", "err", err, "tool", r.Tool)
	}
	return f.view, false, f.err
}

// conflict is the CONFLICT of a key reused with other arguments or
// another tool; orig is what the key is bound to (TaskID "" when not
// known yet). For a tool call it names the original call.
func conflict(req CallRequest, tool string, orig IdemRecord) *toolerr.Error {
	if req.toolCallID == "" {
		te := toolerr.New(toolerr.Conflict,
			"the %s was already used with different arguments (or another tool); it is bound to its first request, so this call was not run", req.keyOrigin()).
			With("tool", tool)
		if req.mcpRequestID != "" {
			te.With("mcp_request_id", req.mcpRequestID)
		} else {
			te.With("idempotency_key", req.IdempotencyKey)
		}
		if orig.Tool != "" {
			te.With("original_tool", orig.Tool)
		}
		if orig.TaskID != "" {
			te.With("original_task_id", orig.TaskID)
		}
		return te
	}
	first := "a " + orig.Tool + " call"
	if orig.Tool == tool {
		first = "a " + tool + " call with other arguments"
	}
	if orig.TaskID != "" {
		first += " (task " + orig.TaskID + ")"
	}
	te := toolerr.New(toolerr.Conflict,
		"the %s was already used by %s; an id is bound to its first call, so this %s call was not run", req.keyOrigin(), first, tool)
	te.Suggestion = "give every new tool call a new id (and every conversation its own session_id); nothing was sent to the robot"
	if orig.TaskID != "" {
		te.Suggestion += fmt.Sprintf(`; to follow the original call, use get_task {"task_id": %q}`, orig.TaskID)
	}
	te.With("tool_call_id", req.toolCallID).With("session_id", req.SessionID).With("tool", tool).With("original_tool", orig.Tool)
	if req.keyPrefix != "" {
		te.With("idempotency_key", req.IdempotencyKey)
	}
	if orig.TaskID != "" {
		te.With("original_task_id", orig.TaskID)
	}
	return te
}

func (s *Server) replay(u *unit, rec IdemRecord, hash string, req CallRequest, tool string) (actions.TaskView, error) {
	if rec.ArgsHash != hash {
		return actions.TaskView{}, conflict(req, tool, rec)
	}
	if rec.State == IdemPending {
		te := toolerr.New(toolerr.Conflict,
			"the first request with the %s never finished (the bridge may have restarted); it is not sent again", req.keyOrigin())
		te.Suggestion = "check get_robot_state; if the action is still wanted, call it with a new idempotency key"
		if req.toolCallID != "" {
			te.Suggestion = "check get_robot_state; if the action is still wanted, send it as a new tool call with a new id"
			return actions.TaskView{}, te.With("tool_call_id", req.toolCallID).With("session_id", req.SessionID)
		}
		return actions.TaskView{}, te.With("idempotency_key", req.IdempotencyKey)
	}
	if rec.Error != nil {
		return actions.TaskView{}, &toolerr.Error{
			Type: rec.Error.Type, Message: rec.Error.Message,
			Suggestion: rec.Error.Suggestion, Details: rec.Error.Details,
			RetryAfter: time.Duration(rec.Error.RetryAfterMS) * time.Millisecond,
		}
	}
	if rec.TaskID == "" {
		// The first request ended at once without a task: a call the
		// runner carried out as a stop (return_to_safe_pose on a robot
		// without an arm). There is no task to report; it is not sent
		// again either.
		return actions.TaskView{
			Tool: rec.Tool, Status: fsm.Succeeded, Progress: actions.Progress{Fraction: 1, Text: "done"},
			Text: "the first call completed at once, without a task", CreatedAt: rec.CreatedAt, UpdatedAt: rec.CreatedAt,
		}, nil
	}
	// The same hash is the same robot_id: the task is u's.
	return u.tasks.Get(rec.TaskID)
}

// stopArgs is a stop's arguments as the stop takes them: when they fail
// validation (te) for anything but robot_id, everything but robot_id is
// dropped and the note says what was ignored; a reason is cleaned for the
// operator's eyes.
func stopArgs(tool *Tool, args map[string]any, te *toolerr.Error) (map[string]any, string) {
	note := ""
	if te != nil {
		kept := map[string]any{}
		if id, ok := args["robot_id"]; ok {
			kept["robot_id"] = id
		}
		if tool.Validate(kept) != nil {
			return args, "" // the robot is the problem: refuse, naming the robots
		}
		args = kept
		note = "The stop's arguments other than robot_id were ignored: " + toolerr.Clause(te.Message) + "."
	}
	if r, ok := args["reason"].(string); ok {
		args = maps.Clone(args)
		args["reason"] = escalation.CleanText(r, maxStopReason)
	}
	return args, note
}

// maxStopReason is the stop reason's length limit (its schema's).
const maxStopReason = 200

// idCharsError refuses a session id or idempotency key holding control
// or format characters (a line break, a bidi override, a zero-width
// space): an identifier has no use for them, and the session id is shown
// to the operator with the approval request. nil when both are clean.
func idCharsError(req CallRequest) *toolerr.Error {
	for _, f := range []struct{ name, v string }{{"session_id", req.SessionID}, {"idempotency_key", req.IdempotencyKey}} {
		bad := func(r rune) bool { return r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }
		if i := strings.IndexFunc(f.v, bad); i >= 0 {
			// Say which character, and where: the value is shown cut
			// and escaped, so the offending character itself may not be
			// in it.
			r, _ := utf8.DecodeRuneInString(f.v[i:])
			what := fmt.Sprintf("%U", r)
			if r == utf8.RuneError {
				what = "a byte that is not UTF-8"
			}
			v := f.v
			if len(v) > 32 {
				v = strings.ToValidUTF8(v[:32], "") + "…"
			}
			return fieldError(f.name, fmt.Sprintf("%s (%s at byte %d)", strconv.QuoteToASCII(v), what, i), "printable characters only (no line break, control or bidi character), at most 256")
		}
	}
	return nil
}
