package toolapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/console"
	"github.com/robot-bridge/robot-bridge/escalation"
	"github.com/robot-bridge/robot-bridge/events"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// The agent event stream, GET /v1/agent/events: Server-Sent Events an
// agent loop can wait on instead of polling (docs/DESIGN.md §3.1). It
// carries two kinds of bus events and nothing else:
//
//   - "state": the robot changed — moved, stopped, went stale or lost its
//     link, its gripper, battery percentage, e-stop or faults changed. The
//     bus carries states at the feed's rate; an event that only repeats
//     the last one (or only ages it) is not sent.
//   - "task": a transition, a progress step or the result of a task the
//     calling credential requested; other credentials' tasks never appear.
//   - "escalation": a request for an operator's help of the calling
//     credential's sessions was opened (by the agent, or by the bridge on
//     a fault or LOOP_DETECTED), or an operator answered it.
//
// Approvals, grants, safety events and everything else on the bus are
// operator data and never reach this stream. Every stream begins with a
// "hello" event holding the robot now and the caller's running task, so a
// client that (re)connects starts from the truth. The stream keeps no
// history: a client that reconnects with Last-Event-ID, or one the bus
// dropped for falling a whole buffer behind, gets a "missed" event saying
// that events may have been lost, followed by a fresh hello.
//
// On a fleet the stream carries every robot's state changes, each event
// naming its robot (robot_id), and the hello lists the robots as
// list_robots does (agentFleetHello). GET /v1/agent/events?robot_id=r2
// follows one robot: its states, the caller's tasks on it, and a hello
// like a one-robot bridge's that names the robot. A state event that does
// not say which robot it is of is observed afresh for a stream of one
// robot (or of a fleet of at most maxNamedRobots), and otherwise not sent:
// a thousand robots cannot all be read for every state of each.

// Agent event stream timing; variables so that a test on a fake clock
// can read them.
var (
	// agentHeartbeat is how often an idle stream sends a comment line,
	// so proxies keep it open and a client can tell a live stream from
	// a dead one.
	agentHeartbeat = 15 * time.Second
	// agentWriteTimeout drops a client whose socket stays full that long.
	agentWriteTimeout = 10 * time.Second
)

// agentRetryMS is the reconnection delay the stream suggests to
// EventSource clients.
const agentRetryMS = 1000

// RobotEvent is the data of an agent stream's "state" event and of its
// hello's robot: get_robot_state's view of the robot, in words and data.
type RobotEvent struct {
	// RobotID names the robot on a fleet (absent with one robot).
	RobotID string `json:"robot_id,omitempty"`
	// Text is one sentence for the model, exactly as true as the bridge
	// knows: "The robot is stopped at …" only of a current state.
	Text string `json:"text"`
	// Summary is the robot in a sentence fragment (the envelope's robot
	// field without the task).
	Summary string `json:"summary"`
	// Condition is moving or stopped for a current state, else stale,
	// link_down, stop_unconfirmed or unknown.
	Condition robot.Condition `json:"condition"`
	LinkUp    bool            `json:"link_up"`
	// Stale is true when State is not the robot's now.
	Stale bool `json:"stale"`
	// StateAgeMS is how long before the event the state was received.
	StateAgeMS int64 `json:"state_age_ms"`
	// ThetaDeg is the base heading in degrees, absent without a state.
	ThetaDeg *float64 `json:"theta_deg,omitempty"`
	// State is the newest state, absent before the first.
	State *robot.State `json:"state,omitempty"`
}

// robotEventOf is the agent's view of a state event's data.
func robotEventOf(v console.RobotView) RobotEvent {
	ev := RobotEvent{
		Summary: v.Summary, Condition: v.Condition, LinkUp: v.LinkUp, Stale: v.Stale,
		StateAgeMS: v.StateAgeMS, State: v.State,
	}
	switch {
	case v.State == nil:
		ev.Text = eventSentence(v.Summary)
	case v.Condition.Current():
		ev.Text = "The robot is " + v.Summary + "."
	default:
		ev.Text = eventUpperFirst(v.Summary) + "; it may have moved since."
	}
	if v.State != nil {
		deg := math.Round(robot.Degrees(v.State.Base.Theta)*10) / 10
		if deg == 0 {
			deg = 0 // never "-0"
		}
		ev.ThetaDeg = &deg
	}
	return ev
}

// fleetRobotEventOf is robotEventOf of robot id on a fleet: the event
// names the robot, and so does its text ("Robot r2 is stopped at …").
func fleetRobotEventOf(id string, v console.RobotView) RobotEvent {
	ev := robotEventOf(v)
	ev.RobotID = id
	switch {
	case v.State == nil:
		ev.Text = "Robot " + id + ": " + eventSentence(v.Summary)
	case v.Condition.Current():
		ev.Text = "Robot " + id + " is " + v.Summary + "."
	default:
		ev.Text = "Robot " + id + ": " + eventUpperFirst(v.Summary) + "; it may have moved since."
	}
	return ev
}

// robotViewOf returns the robot view a state event carries; false when
// its data is not one (then the robot is observed afresh).
func robotViewOf(e events.Event) (console.RobotView, bool) {
	switch v := e.Data.(type) {
	case console.RobotView:
		return v, true
	case *console.RobotView:
		if v != nil {
			return *v, true
		}
	}
	return console.RobotView{}, false
}

// stateKey is what makes one robot state differ from another for an
// agent: the condition, the link, and the state as the bridge describes
// it (position to the centimetre, heading to the degree, gripper, battery
// percentage, e-stop, faults) with the arm's joints to the hundredth of
// a radian. A state's age is not part of it: a state that only grows
// older is not news (its condition turning stale is).
func stateKey(v console.RobotView) string {
	var b strings.Builder
	b.WriteString(string(v.Condition))
	if v.LinkUp {
		b.WriteString("|up|")
	} else {
		b.WriteString("|down|")
	}
	if v.State != nil {
		b.WriteString(v.State.Summary())
		for _, j := range v.State.Joints {
			fmt.Fprintf(&b, "|%.2f", j.Position)
		}
	}
	return b.String()
}

// sceneKey is what robot://scene's description depends on that a state
// event shows: where the robot is and looks (to the centimetre and the
// degree) and which labels its camera detects.
func sceneKey(v console.RobotView) string {
	if v.State == nil {
		return ""
	}
	st := v.State
	labels := make([]string, 0, len(st.Detections))
	for _, d := range st.Detections {
		labels = append(labels, d.Label)
	}
	slices.Sort(labels)
	return fmt.Sprintf("%.2f %.2f %.0f %s", st.Base.X, st.Base.Y, robot.Degrees(st.Base.Theta), strings.Join(labels, ","))
}

// TaskEvent is the data of an agent stream's "task" event: the whole task
// as get_task shows it, and one sentence for the model.
type TaskEvent struct {
	Text string   `json:"text"`
	Task TaskData `json:"task"`
}

func taskEventOf(v actions.TaskView) TaskEvent {
	return TaskEvent{Text: taskEventText(v), Task: taskData(v)}
}

// taskEventText says where a task is now. It does not tell the model to
// follow the task with get_task: an agent reading this stream already
// follows it.
func taskEventText(v actions.TaskView) string {
	if te := taskError(v); te != nil {
		return fmt.Sprintf("Task %s (%s) ended %s with %s: %s", v.ID, v.Tool, v.Status, te.Type, eventSentence(te.Message))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Task %s (%s) ", v.ID, v.Tool)
	if v.Status.Terminal() {
		b.WriteString(string(v.Status))
	} else {
		b.WriteString("is " + string(v.Status))
		if v.Progress.Text != "" && v.Progress.Fraction > 0 {
			fmt.Fprintf(&b, ", %.0f%% done: %s", math.Floor(v.Progress.Fraction*100), v.Progress.Text)
		}
	}
	b.WriteString(".")
	if v.Text != "" && !(v.Progress.Fraction > 0 && strings.HasPrefix(v.Progress.Text, v.Text)) {
		// (The running text is most often where the progress text
		// starts: "driving to (0.50, 0.00)", then ", 0.49 m to go".)
		b.WriteString(" " + eventSentence(v.Text))
	}
	return b.String()
}

// eventSentence makes s a sentence: a capital first letter and a full stop.
func eventSentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return s
	}
	s = eventUpperFirst(s)
	if !strings.HasSuffix(s, ".") && !strings.HasSuffix(s, "!") && !strings.HasSuffix(s, "?") {
		s += "."
	}
	return s
}

// eventUpperFirst capitalizes s's first letter, unless its first word is
// an identifier (move_base_to), which keeps its spelling.
func eventUpperFirst(s string) string {
	first, _, _ := strings.Cut(s, " ")
	if s == "" || strings.ContainsAny(first, "_0123456789") {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// agentFleetHello is the first event of a fleet's agent stream that
// follows every robot: the robots as list_robots lists them, and the
// caller's tasks that hold one.
type agentFleetHello struct {
	Text string `json:"text"`
	// Count is how many robots the bridge serves.
	Count  int        `json:"count"`
	Robots []RobotRow `json:"robots"`
	Tasks  []TaskData `json:"tasks,omitempty"`
}

// agentHello is the first event of every agent stream.
type agentHello struct {
	Text  string     `json:"text"`
	Robot RobotEvent `json:"robot"`
	// Task is the task holding the robot when it is the caller's.
	Task *TaskData `json:"task,omitempty"`
}

// agentMissed is the "missed" event: the stream cannot tell what
// happened while the client was away or behind.
type agentMissed struct {
	// Reason is "reconnected" (the client came back with Last-Event-ID)
	// or "fell_behind" (the bus dropped this stream's subscription).
	Reason string `json:"reason"`
	// SinceID is the Last-Event-ID the client sent, when it sent one.
	SinceID uint64 `json:"since_id,omitempty"`
	Text    string `json:"text"`
}

// parseLastEventID reads an EventSource Last-Event-ID header: empty (a
// first connection), or the decimal event id of an earlier event of
// this stream.
func parseLastEventID(h string) (uint64, *toolerr.Error) {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0, nil
	}
	id, err := strconv.ParseUint(h, 10, 64)
	if err != nil || id == 0 {
		shown := h
		if len(shown) > 32 {
			shown = shown[:32] + "…"
		}
		return 0, fieldError("Last-Event-ID", shown, "the id of an event of this stream (a positive integer), or no header")
	}
	return id, nil
}

// agentFilter accepts what the agent stream of p carries: robot states
// and p's own tasks (only robot's, when robot is not ""). It runs under
// the bus's lock, so it only looks.
func agentFilter(p Principal, robot string) func(events.Event) bool {
	return func(e events.Event) bool {
		switch e.Type {
		case events.TypeState:
			return true
		case events.TypeTask:
			v, ok := e.Data.(actions.TaskView)
			return ok && v.Principal == p.Name && (robot == "" || v.RobotID == robot)
		case events.TypeEscalation:
			v, ok := e.Data.(escalation.Escalation)
			return ok && v.Agent == p.Name
		}
		return false
	}
}

func (s *Server) handleAgentEvents(w http.ResponseWriter, r *http.Request) {
	p := principalOf(r)
	bus := s.conf.Events
	if bus == nil {
		te := toolerr.New(toolerr.Unavailable, "this bridge publishes no events")
		te.Suggestion = "poll get_robot_state and get_task with wait_ms instead"
		te.RetryAfter = time.Minute
		writeHTTPError(w, http.StatusServiceUnavailable, te)
		return
	}
	lastID, te := parseLastEventID(r.Header.Get("Last-Event-ID"))
	if te != nil {
		writeHTTPError(w, http.StatusBadRequest, te)
		return
	}
	// only is the one robot the stream follows: the robot of a one-robot
	// bridge, the robot_id asked for on a fleet, nil for every robot.
	only := s.defaultRobot()
	if q := r.URL.Query(); q.Has(RobotIDArg) {
		u, ok := s.robotByID(q.Get(RobotIDArg))
		if !ok || q.Get(RobotIDArg) == "" {
			writeHTTPError(w, http.StatusBadRequest, s.robotIDError("the agent event stream", q.Get(RobotIDArg)))
			return
		}
		only = u
	}
	filterRobot := ""
	if only != nil && s.multi() {
		filterRobot = only.id
	}
	ch, unsubscribe := bus.Subscribe(agentFilter(p, filterRobot))
	defer func() { unsubscribe() }()
	shutdown := shutdownSignal(r)

	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	st := agentStream{s: s, ctx: r.Context(), w: w, rc: http.NewResponseController(w), p: p, only: only, lastKeys: map[string]string{}}
	st.buf.WriteString("retry: " + strconv.Itoa(agentRetryMS) + "\n\n")
	if lastID > 0 {
		st.event("missed", 0, agentMissed{
			Reason: "reconnected", SinceID: lastID,
			Text: fmt.Sprintf("This stream keeps no history: events after id %d may have been missed. "+
				"The hello event that follows is the robot now; re-read your tasks with get_task.", lastID),
		})
	}
	st.hello()
	if !st.flush() {
		return
	}
	hb := s.conf.Clock.NewTicker(agentHeartbeat)
	defer hb.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-shutdown:
			return
		case <-hb.Chan():
			st.buf.WriteString(": heartbeat\n\n")
		case e, ok := <-ch:
			if !ok {
				// The bus dropped this stream for falling behind.
				// Subscribe again first, so nothing after the new hello
				// is lost, then say what happened.
				s.log.Info("agent event stream fell behind; resubscribed", "principal", p.Name)
				ch, unsubscribe = bus.Subscribe(agentFilter(p, filterRobot))
				st.event("missed", 0, agentMissed{
					Reason: "fell_behind",
					Text: "This stream fell behind and events were lost. " +
						"The hello event that follows is the robot now; re-read your tasks with get_task.",
				})
				st.hello()
				break
			}
			st.busEvent(e)
		}
		if st.buf.Len() > 0 && !st.flush() {
			return
		}
	}
}

// agentStream is one open agent event stream.
type agentStream struct {
	s   *Server
	ctx context.Context
	w   http.ResponseWriter
	rc  *http.ResponseController
	p   Principal
	buf bytes.Buffer
	// only is the one robot the stream follows, nil for every robot of
	// a fleet.
	only *unit
	// lastKeys are the state keys last sent, by robot id.
	lastKeys map[string]string
}

// fleet reports whether the stream's events name their robot: it is a
// fleet's.
func (st *agentStream) fleet() bool { return st.s.multi() }

func (st *agentStream) hello() {
	if st.only == nil {
		st.fleetHello()
		return
	}
	u := st.only
	obs, _ := st.s.observe(st.ctx, u)
	view := console.ViewRobot(obs)
	st.lastKeys[u.id] = stateKey(view)
	hello := agentHello{Robot: robotEventOf(view)}
	if st.fleet() {
		hello.Robot = fleetRobotEventOf(u.id, view)
	}
	hello.Text = hello.Robot.Text
	if v, ok := u.tasks.Active(); ok && v.Principal == st.p.Name {
		d := st.s.taskData(v)
		hello.Task = &d
		hello.Text += " " + taskEventText(v)
	} else {
		hello.Text += " None of your tasks holds the robot."
	}
	st.event("hello", 0, hello)
}

// fleetHello is the hello of a stream that follows every robot of a
// fleet.
func (st *agentStream) fleetHello() {
	ctx, cancel := context.WithTimeout(st.ctx, st.s.conf.StateTimeout)
	defer cancel()
	us := st.s.units()
	rows := st.s.rows(ctx, us, time.Time{})
	hello := agentFleetHello{Count: len(rows), Robots: rows}
	var b strings.Builder
	fmt.Fprintf(&b, "This bridge serves %s.", fleetWords(rows))
	var mine []string
	for i, r := range rows {
		// The keys of the robots now: what follows is what changes.
		obs, _ := st.s.observe(ctx, us[i])
		st.lastKeys[r.RobotID] = stateKey(console.ViewRobot(obs))
		if r.BusyTaskID != "" && r.busy.Principal == st.p.Name {
			hello.Tasks = append(hello.Tasks, st.s.taskData(r.busy))
			mine = append(mine, fmt.Sprintf("task %s (%s) on %s %s", r.busy.ID, r.busy.Tool, r.RobotID, StatusPhrase(r.busy.Status)))
		}
	}
	if len(mine) == 0 {
		b.WriteString(" None of your tasks holds a robot.")
	} else {
		b.WriteString(" Your tasks: " + idsText(mine) + ".")
	}
	b.WriteString(" data.robots lists every robot; state events name their robot (robot_id).")
	hello.Text = b.String()
	st.event("hello", 0, hello)
}

// stateEvent sends the robot states a state event brings, each once it
// differs from the last sent of its robot.
func (st *agentStream) stateEvent(e events.Event) {
	view, haveView := robotViewOf(e)
	var us []*unit
	switch {
	case !st.fleet():
		us = []*unit{st.only}
	default:
		if rid := robotIDOf(e.Data); rid != "" {
			if st.only != nil && rid != st.only.id {
				return
			}
			u, ok := st.s.robotByID(rid)
			if !ok {
				return
			}
			us = []*unit{u}
		} else {
			haveView = false
			switch {
			case st.only != nil:
				us = []*unit{st.only}
			case len(st.s.ids) <= maxNamedRobots:
				us = st.s.units()
			default:
				return
			}
		}
	}
	for _, u := range us {
		v := view
		if !haveView {
			obs, _ := st.s.observe(st.ctx, u)
			v = console.ViewRobot(obs)
		}
		key := stateKey(v)
		if key == st.lastKeys[u.id] {
			continue
		}
		st.lastKeys[u.id] = key
		if st.fleet() {
			st.event("state", e.Seq, fleetRobotEventOf(u.id, v))
		} else {
			st.event("state", e.Seq, robotEventOf(v))
		}
	}
}

func (st *agentStream) busEvent(e events.Event) {
	switch e.Type {
	case events.TypeState:
		st.stateEvent(e)
	case events.TypeTask:
		if v, ok := e.Data.(actions.TaskView); ok {
			ev := taskEventOf(v)
			if st.fleet() {
				ev.Task = st.s.taskData(v)
				ev.Text = "Robot " + v.RobotID + ": " + ev.Text
			}
			st.event("task", e.Seq, ev)
		}
	case events.TypeEscalation:
		if v, ok := e.Data.(escalation.Escalation); ok {
			st.event("escalation", e.Seq, escalationEventOf(v))
		}
	}
}

// agentWire is the JSON of one bus event on the stream.
type agentWire struct {
	Seq  uint64      `json:"seq"`
	Type events.Type `json:"type"`
	Time time.Time   `json:"time"`
	Data any         `json:"data"`
}

// event appends one SSE event; bus events carry their sequence number as
// the SSE id and in the JSON, hello and missed have neither.
func (st *agentStream) event(name string, seq uint64, data any) {
	v := data
	if seq > 0 {
		v = agentWire{Seq: seq, Type: events.Type(name), Time: st.s.conf.Clock.Now(), Data: data}
	}
	b, err := json.Marshal(v)
	if err != nil {
		st.s.log.Error("agent event stream: encode", "event", name, "err", err)
		return
	}
	st.buf.WriteString("event: ")
	st.buf.WriteString(name)
	st.buf.WriteString("\ndata: ")
	st.buf.Write(b)
	if seq > 0 {
		st.buf.WriteString("\nid: ")
		st.buf.WriteString(strconv.FormatUint(seq, 10))
	}
	st.buf.WriteString("\n\n")
}

// flush writes what is buffered; false when the client is gone.
func (st *agentStream) flush() bool {
	_ = st.rc.SetWriteDeadline(time.Now().Add(agentWriteTimeout))
	_, err := st.w.Write(st.buf.Bytes())
	st.buf.Reset()
	if err == nil {
		err = st.rc.Flush()
	}
	if err != nil && !errors.Is(err, http.ErrNotSupported) {
		st.s.log.Debug("agent event stream write failed", "err", err)
		return false
	}
	return err == nil
}

// shutdowns maps each *http.Server that has served a stream to a channel
// closed when it begins shutting down. http.Server.Shutdown waits for
// active requests and does not cancel their contexts, so without it an
// open stream would hold every shutdown up until its deadline. One entry
// per server, never removed: a request that still arrives on a server
// shutting down ends at once.
var shutdowns sync.Map // *http.Server → chan struct{}

// shutdownSignal returns a channel closed when the server serving r shuts
// down (nil, never closed, outside an *http.Server).
func shutdownSignal(r *http.Request) <-chan struct{} {
	srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server)
	if !ok || srv == nil {
		return nil
	}
	ch := make(chan struct{})
	got, loaded := shutdowns.LoadOrStore(srv, ch)
	if !loaded {
		srv.RegisterOnShutdown(func() { close(ch) })
	}
	return got.(chan struct{})
}
