package fsm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	lfsm "github.com/looplab/fsm"
)

// State is a task's lifecycle state. Its string is the "status" an agent sees.
type State string

// States.
const (
	Requested        State = "requested"
	AwaitingApproval State = "awaiting_approval"
	Approved         State = "approved"
	Executing        State = "executing"
	// Paused: an operator paused the motion (a protective stop). The
	// robot is held at rest; the task is live and keeps the robot until
	// it is resumed, aborted, cancelled or e-stopped.
	Paused      State = "paused"
	Succeeded   State = "succeeded"
	Denied      State = "denied"
	Expired     State = "expired"
	Cancelled   State = "cancelled"
	Failed      State = "failed"
	Stopping    State = "stopping"
	Recovering  State = "recovering"
	Recovered   State = "recovered"
	Fault       State = "fault"
	EStopped    State = "estopped"
	Interrupted State = "interrupted"
)

// String implements fmt.Stringer.
func (s State) String() string { return string(s) }

// Terminal reports whether no event leaves s.
func (s State) Terminal() bool {
	switch s {
	case Succeeded, Denied, Expired, Cancelled, Failed, Recovered, Fault, EStopped, Interrupted:
		return true
	}
	return false
}

// Motion reports whether a task in s has begun moving the robot and has
// not finished: the robot may be moving on its behalf, or (Paused) is held
// at rest in the middle of its motion. A bridge that finds such a task on
// restart has the robot stopped before it accepts calls again.
func (s State) Motion() bool {
	return s == Executing || s == Paused || s == Stopping || s == Recovering
}

// Held reports whether the robot is held at rest on behalf of a task in s
// (Paused): live, not terminal, and nothing may move for it.
func (s State) Held() bool { return s == Paused }

// AllStates lists every state in lifecycle order.
func AllStates() []State {
	return []State{
		Requested, AwaitingApproval, Approved, Executing, Paused, Succeeded, Denied, Expired,
		Cancelled, Failed, Stopping, Recovering, Recovered, Fault, EStopped, Interrupted,
	}
}

// ParseState returns the state named s.
func ParseState(s string) (State, error) {
	for _, st := range AllStates() {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("unknown task state %q", s)
}

// Event moves a task between states.
type Event string

// Events.
const (
	// EvNeedApproval: the call needs an operator's decision.
	EvNeedApproval Event = "need_approval"
	// EvPreauthorized: the config authorizes the call (approval: never).
	EvPreauthorized Event = "preauthorized"
	EvApprove       Event = "approve"
	EvDeny          Event = "deny"
	EvExpire        Event = "expire"
	// EvCancel before motion ends the task with no motion sent; during
	// motion, and while paused, it starts stopping the robot (a paused
	// robot is already at rest, but the cancel still sends a stop and
	// waits for a state that confirms rest, so "cancelled" is said of a
	// robot seen at rest after the cancel).
	EvCancel Event = "cancel"
	// EvStart: the first motion command is about to be sent.
	EvStart Event = "start"
	// EvReject: the task could not start and nothing was sent (link down,
	// robot rejected the goal).
	EvReject  Event = "reject"
	EvSucceed Event = "succeed"
	// EvAbort: timeout, failure, limit breach or lost link during motion;
	// from paused also an operator's abort, the pause limit, or a monitor
	// that tripped while the robot was held. It leads to the same stop
	// and recovery path either way.
	EvAbort Event = "abort"
	// EvPause: an operator paused the motion and the robot was confirmed
	// at rest (a protective stop).
	EvPause Event = "pause"
	// EvResume: an operator resumed a paused task; the gate admitted its
	// next command from the current pose and it is about to be sent.
	EvResume Event = "resume"
	// EvStopConfirmed: after a requested stop (cancel, the stop tool, the
	// console, a grant that ended) the robot is confirmed stopped; from
	// recovering it means the stop ended the recovery motion too.
	EvStopConfirmed Event = "stop_confirmed"
	// EvRecover: stopped after an abort; returning to the safe pose.
	EvRecover Event = "recover"
	// EvRecovered: the safe pose was reached.
	EvRecovered Event = "recovered"
	// EvLatchFault: stopping or recovery failed, or recovery is not
	// pre-authorized; a fault latches.
	EvLatchFault Event = "latch_fault"
	// EvEStop: the e-stop was pressed while the task was live.
	EvEStop Event = "estop"
	// EvInterrupt: the bridge restarted and found the task live.
	EvInterrupt Event = "interrupt"
)

// String implements fmt.Stringer.
func (e Event) String() string { return string(e) }

// Transition is one row of the table: Event takes a task from any of Src
// to Dst.
type Transition struct {
	Event Event
	Src   []State
	Dst   State
}

var live = []State{Requested, AwaitingApproval, Approved, Executing, Paused, Stopping, Recovering}

// table is the whole lifecycle. Every allowed transition is here and
// nowhere else.
var table = []Transition{
	{EvNeedApproval, []State{Requested}, AwaitingApproval},
	{EvPreauthorized, []State{Requested}, Approved},
	{EvApprove, []State{AwaitingApproval}, Approved},
	{EvDeny, []State{AwaitingApproval}, Denied},
	{EvExpire, []State{AwaitingApproval}, Expired},
	{EvCancel, []State{Requested, AwaitingApproval, Approved}, Cancelled},
	{EvCancel, []State{Executing, Paused}, Stopping},
	{EvStart, []State{Approved}, Executing},
	{EvReject, []State{Requested, Approved}, Failed},
	{EvSucceed, []State{Executing}, Succeeded},
	{EvAbort, []State{Executing, Paused}, Stopping},
	{EvPause, []State{Executing}, Paused},
	{EvResume, []State{Paused}, Executing},
	{EvStopConfirmed, []State{Stopping, Recovering}, Cancelled},
	{EvRecover, []State{Stopping}, Recovering},
	{EvRecovered, []State{Recovering}, Recovered},
	{EvLatchFault, []State{Stopping, Recovering}, Fault},
	{EvEStop, live, EStopped},
	{EvInterrupt, live, Interrupted},
}

// Table returns a copy of the transition table.
func Table() []Transition {
	out := make([]Transition, len(table))
	for i, t := range table {
		out[i] = Transition{t.Event, append([]State(nil), t.Src...), t.Dst}
	}
	return out
}

// Next returns the state event e leads to from s, false if e is not allowed
// in s.
func Next(s State, e Event) (State, bool) {
	for _, t := range table {
		if t.Event != e {
			continue
		}
		if slices.Contains(t.Src, s) {
			return t.Dst, true
		}
	}
	return "", false
}

// ErrForbidden is returned when an event is not allowed in the current state.
var ErrForbidden = errors.New("transition not allowed")

// TransitionError says which event was refused in which state.
type TransitionError struct {
	From  State
	Event Event
}

// Error implements error.
func (e *TransitionError) Error() string {
	return fmt.Sprintf("task in state %s cannot take event %s", e.From, e.Event)
}

// Unwrap lets errors.Is(err, ErrForbidden) hold.
func (e *TransitionError) Unwrap() error { return ErrForbidden }

func newLooplab(initial State) *lfsm.FSM {
	// looplab/fsm keys transitions by (event, src): events with several
	// rows of distinct sources merge into one EventDesc per row.
	evs := make([]lfsm.EventDesc, 0, len(table))
	for _, t := range table {
		src := make([]string, len(t.Src))
		for i, s := range t.Src {
			src[i] = string(s)
		}
		evs = append(evs, lfsm.EventDesc{Name: string(t.Event), Src: src, Dst: string(t.Dst)})
	}
	return lfsm.NewFSM(string(initial), evs, nil)
}

// Machine is one task's lifecycle. It is safe for concurrent use.
type Machine struct {
	mu sync.Mutex
	f  *lfsm.FSM // guarded by mu
}

// New returns a machine in state initial (Requested for a new task; a
// stored state when reloading).
func New(initial State) *Machine {
	return &Machine{f: newLooplab(initial)}
}

// State returns the current state.
func (m *Machine) State() State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return State(m.f.Current())
}

// Can reports whether e is allowed now.
func (m *Machine) Can(e Event) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.f.Can(string(e))
}

// Fire applies e and returns the states before and after. A forbidden
// event leaves the state unchanged and returns a *TransitionError.
func (m *Machine) Fire(e Event) (from, to State, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	from = State(m.f.Current())
	if err := m.f.Event(context.Background(), string(e)); err != nil {
		if _, ok := errors.AsType[lfsm.NoTransitionError](err); ok {
			return from, from, nil
		}
		return from, from, &TransitionError{From: from, Event: e}
	}
	return from, State(m.f.Current()), nil
}

// Mermaid returns the lifecycle as a Mermaid state diagram, generated from
// the transition table by looplab/fsm's visualizer.
func Mermaid() string {
	out, err := lfsm.VisualizeWithType(newLooplab(Requested), lfsm.MERMAID)
	if err != nil {
		// The visualizer only fails for an unknown type; MERMAID is known.
		panic(err)
	}
	// The visualizer highlights the machine's current state; the diagram
	// documents the table, so drop that line.
	var b strings.Builder
	for line := range strings.SplitSeq(out, "\n") {
		if strings.Contains(line, "classDef") || strings.Contains(line, ":::") {
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}

// Events lists every event in table order, deduplicated.
func Events() []Event {
	seen := map[Event]bool{}
	var out []Event
	for _, t := range table {
		if !seen[t.Event] {
			seen[t.Event] = true
			out = append(out, t.Event)
		}
	}
	return out
}

// Diagram markers delimit the generated lifecycle diagram in a Markdown
// document (ARCHITECTURE.md).
const (
	DiagramBegin = "<!-- lifecycle diagram: generated by `make diagram` from fsm/fsm.go; do not edit -->"
	DiagramEnd   = "<!-- end of lifecycle diagram -->"
)

// ReplaceDiagram returns doc with the text between the diagram markers
// replaced by the current Mermaid diagram in a fenced block. It fails when
// the markers are missing or out of order.
func ReplaceDiagram(doc string) (string, error) {
	i := strings.Index(doc, DiagramBegin)
	j := strings.Index(doc, DiagramEnd)
	if i < 0 || j < 0 || j < i {
		return "", fmt.Errorf("document lacks the lifecycle diagram markers %q … %q", DiagramBegin, DiagramEnd)
	}
	block := DiagramBegin + "\n```mermaid\n" + Mermaid() + "```\n"
	return doc[:i] + block + doc[j:], nil
}
