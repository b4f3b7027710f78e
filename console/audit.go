package console

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/approval"
	"github.com/robot-bridge/robot-bridge/events"
)

// AuditEntry is one line of the audit trail: who did what, when and why.
type AuditEntry struct {
	// Seq is the bus sequence number of the event the entry comes from.
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	// Type is the event type (approval, safety, task, system).
	Type events.Type `json:"type"`
	// Kind says what happened ("approval.denied", "estop", "task.succeeded").
	Kind string `json:"kind"`
	// By names who caused it, when known.
	By string `json:"by,omitempty"`
	// TaskID is the task the entry is about, when there is one.
	TaskID string `json:"task_id,omitempty"`
	// Robot is the robot the entry is about.
	Robot string `json:"robot,omitempty"`
	// Text says it in words, one line of a log book.
	Text string `json:"text"`
	// Raw is the record as stored, shown on demand.
	Raw json.RawMessage `json:"raw,omitempty"`
}

// AuditFunc returns the newest audit entries, newest first, at most limit.
// The console calls it for GET /console/api/audit; the durable store
// replaces the in-memory Ring by providing its own.
type AuditFunc func(ctx context.Context, limit int) ([]AuditEntry, error)

// DefaultRingSize is how many entries a Ring keeps by default.
const DefaultRingSize = 512

// maxTrackedTasks bounds the task-status memory a Ring keeps to tell
// status changes from progress updates.
const maxTrackedTasks = 1024

// Ring keeps the most recent audit-worthy bus events in memory: every
// approval, grant, safety and system event, and each task's status changes
// (not its progress updates, nor robot state). It is the audit trail until
// the durable store takes over, and it forgets everything on restart.
type Ring struct {
	mu         sync.Mutex
	buf        []events.Event    // guarded by mu; ring storage
	next       int               // guarded by mu
	n          int               // guarded by mu
	taskStatus map[string]string // guarded by mu
}

// NewRing returns a ring of size entries (DefaultRingSize when size <= 0).
func NewRing(size int) *Ring {
	if size <= 0 {
		size = DefaultRingSize
	}
	return &Ring{buf: make([]events.Event, size), taskStatus: map[string]string{}}
}

// Attach records every event bus publishes until the returned function is
// called. It records from the subscription's filter, which the bus runs as
// it publishes: no goroutine, no buffer to overflow, so the ring never
// misses an event. The filter only copies the event and never delivers it.
func (r *Ring) Attach(bus *events.Bus) (detach func()) {
	_, cancel := bus.Subscribe(func(e events.Event) bool {
		r.Record(e)
		return false
	})
	return cancel
}

// Record adds e if it belongs in the audit trail.
func (r *Ring) Record(e events.Event) {
	switch e.Type {
	case events.TypeState:
		return
	case events.TypeTask:
		v, ok := e.Data.(actions.TaskView)
		if !ok {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.taskStatus[v.ID] == string(v.Status) {
			return
		}
		if len(r.taskStatus) >= maxTrackedTasks {
			clear(r.taskStatus)
		}
		r.taskStatus[v.ID] = string(v.Status)
		r.addLocked(e)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addLocked(e)
}

func (r *Ring) addLocked(e events.Event) {
	r.buf[r.next] = e
	r.next = (r.next + 1) % len(r.buf)
	if r.n < len(r.buf) {
		r.n++
	}
}

// Recent returns up to limit entries, newest first. It implements
// AuditFunc.
func (r *Ring) Recent(_ context.Context, limit int) ([]AuditEntry, error) {
	r.mu.Lock()
	if limit <= 0 || limit > r.n {
		limit = r.n
	}
	evs := make([]events.Event, 0, limit)
	for i := 1; i <= limit; i++ {
		evs = append(evs, r.buf[(r.next-i+len(r.buf))%len(r.buf)])
	}
	r.mu.Unlock()
	out := make([]AuditEntry, 0, len(evs))
	for _, e := range evs {
		out = append(out, Describe(e))
	}
	return out, nil
}

var _ AuditFunc = (*Ring)(nil).Recent

// Describe turns a bus event into an audit entry, in words an operator
// reads at a glance.
func Describe(e events.Event) AuditEntry {
	a := AuditEntry{Seq: e.Seq, Time: e.Time, Type: e.Type, Kind: string(e.Type)}
	switch d := e.Data.(type) {
	case approval.Event:
		describeApproval(&a, d)
	case *approval.Event:
		if d != nil {
			describeApproval(&a, *d)
		}
	case actions.TaskView:
		a.Kind = "task." + string(d.Status)
		a.By = d.Principal
		a.TaskID = d.ID
		a.Text = fmt.Sprintf("task %s (%s) %s", d.ID, d.Tool, taskWords(string(d.Status)))
		if d.Text != "" {
			a.Text += ": " + d.Text
		}
	case map[string]any:
		// Safety events arrive as maps (see the bridge's safetyEventData).
		if k, ok := d["kind"]; ok {
			a.Kind = fmt.Sprint(k)
		}
		if id, ok := d["task_id"].(string); ok {
			a.TaskID = id
		}
		if by, ok := d["by"].(string); ok {
			a.By = by
		}
		if t, ok := d["text"].(string); ok && t != "" {
			a.Text = t
		} else {
			a.Text = fmt.Sprint(d)
		}
		if r, ok := d["reason"].(string); ok && r != "" && !strings.Contains(a.Text, r) {
			a.Text += " (" + r + ")"
		}
	case fmt.Stringer:
		a.Text = d.String()
	case string:
		a.Text = d
	default:
		a.Text = fmt.Sprintf("%v", d)
	}
	return a
}

func describeApproval(a *AuditEntry, d approval.Event) {
	a.Kind = string(d.Type)
	switch {
	case d.Approval != nil:
		ap := d.Approval
		a.TaskID = ap.TaskID
		switch d.Type {
		case approval.EventApprovalCreated:
			a.By = ap.RequestedBy
			a.Text = fmt.Sprintf("%s asks to %s (request %s, task %s)", orUnknown(ap.RequestedBy), ap.Preview, ap.ID, ap.TaskID)
		default:
			a.By = ap.DecidedBy
			a.Text = fmt.Sprintf("request %s (%s) %s by %s", ap.ID, ap.Preview, ap.Status, orUnknown(ap.DecidedBy))
			if ap.Reason != "" {
				a.Text += ": " + ap.Reason
			}
		}
	case d.Grant != nil:
		g := d.Grant
		switch d.Type {
		case approval.EventGrantRevoked:
			a.By = g.RevokedBy
			a.Text = fmt.Sprintf("grant %s revoked by %s: %s", g.ID, orUnknown(g.RevokedBy), g.Description)
		case approval.EventGrantExpired:
			a.Text = fmt.Sprintf("grant %s expired: %s", g.ID, g.Description)
		default:
			a.By = g.CreatedBy
			a.Text = fmt.Sprintf("%s grant %s made by %s until %s: %s", g.Kind, g.ID, orUnknown(g.CreatedBy), g.ExpiresAt.Format(time.TimeOnly), g.Description)
		}
	default:
		a.Text = string(d.Type)
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "someone"
	}
	return s
}

// Record is one durable audit record (store.AuditRecord's fields), the
// input of LogLine.
type Record struct {
	Seq     int64
	At      time.Time
	Type    string
	Actor   string
	TaskID  string
	Subject string
	Summary string
	Reason  string
	Details json.RawMessage
	// Raw is the whole record as JSON, kept for the page's "raw record".
	Raw json.RawMessage
}

// LogLine turns a durable audit record into a log-book line for robot:
// who did what to which task, in words ("operator approved move_base_to →
// move the base 1.1 m to (1.00, 0.50) for task t-…"), with the reason
// verbatim. Records it has no words for keep their summary.
func LogLine(r Record, robotID string) AuditEntry {
	a := AuditEntry{
		Seq: uint64(max(r.Seq, 0)), Time: r.At, Type: auditType(r.Type), Kind: r.Type,
		By: r.Actor, TaskID: r.TaskID, Robot: robotID, Raw: r.Raw,
	}
	var det map[string]any
	_ = json.Unmarshal(r.Details, &det) // absent or not an object: no details
	str := func(k string) string { s, _ := det[k].(string); return s }
	who := orUnknown(r.Actor)
	forTask := ""
	if r.TaskID != "" {
		forTask = " for task " + r.TaskID
	}
	family, ev, _ := strings.Cut(r.Type, ".")
	switch family {
	case "approval":
		tool, preview := str("tool"), str("preview")
		what := tool
		switch {
		case what == "":
			what = "a tool call"
			if preview != "" {
				what = preview
			}
		case preview != "":
			what += " → " + preview
		}
		switch ev {
		case "created":
			a.Text = fmt.Sprintf("%s asked for %s%s", who, what, forTask)
		case "approved":
			a.Text = fmt.Sprintf("%s approved %s%s", who, what, forTask)
			if g := str("grant_id"); g != "" && strings.Contains(r.Summary, "grant") {
				a.Text += " (grant " + g + ")"
			}
		case "denied":
			a.Text = fmt.Sprintf("%s denied %s%s", who, what, forTask)
		case "expired":
			a.Text = fmt.Sprintf("nobody decided on %s in time; the request expired%s", what, forTask)
		case "cancelled":
			a.Text = fmt.Sprintf("the request for %s was withdrawn%s", what, forTask)
		}
	case "grant":
		desc, kind := str("description"), str("kind")
		if kind == "once" {
			kind = "approve-once"
		}
		switch ev {
		case "created":
			a.Text = fmt.Sprintf("%s made %s %s grant: %s (grant %s)", who, article(kind), kind, desc, r.Subject)
		case "revoked":
			a.Text = fmt.Sprintf("%s revoked the %s grant: %s (grant %s)", who, kind, desc, r.Subject)
		case "expired":
			a.Text = fmt.Sprintf("the %s grant ran out: %s (grant %s)", kind, desc, r.Subject)
		case "used":
			a.Text = fmt.Sprintf("the approve-once grant %s was used%s", r.Subject, forTask)
		}
	case "task":
		tool := str("tool")
		if tool != "" {
			tool = " (" + tool + ")"
		}
		a.Text = fmt.Sprintf("task %s%s %s", r.TaskID, tool, taskWords(ev))
		if r.Actor != "" && r.Actor != "supervisor" && r.Actor != "system" && r.Actor != "bridge" {
			a.Text += " — by " + r.Actor
		}
	case "safety":
		a.Text = safetyWords(ev, who, r.TaskID, str("monitor"))
	}
	if a.Text == "" {
		a.Text = r.Summary
	}
	if r.Reason != "" && !strings.Contains(a.Text, r.Reason) {
		a.Text += ": “" + r.Reason + "”"
	}
	return a
}

// auditType maps a record type onto the bus's event types.
func auditType(t string) events.Type {
	family, _, _ := strings.Cut(t, ".")
	switch family {
	case "task":
		return events.TypeTask
	case "approval", "grant":
		return events.TypeApproval
	case "safety":
		return events.TypeSafety
	}
	return events.TypeSystem
}

// taskWords says a task status as the end of a sentence about the task.
func taskWords(status string) string {
	switch status {
	case "requested":
		return "was requested"
	case "awaiting_approval":
		return "waits for an operator"
	case "approved":
		return "was approved"
	case "executing":
		return "started moving"
	case "paused":
		return "was paused (robot holding still)"
	case "stopping":
		return "is stopping"
	case "recovering":
		return "is returning to the safe pose"
	case "succeeded":
		return "succeeded"
	case "denied":
		return "was denied"
	case "expired":
		return "expired without a decision"
	case "cancelled":
		return "was cancelled"
	case "failed":
		return "failed"
	case "recovered":
		return "failed and the robot was brought back to the safe pose"
	case "fault":
		return "ended in a fault (latched)"
	case "estopped":
		return "was ended by the e-stop"
	case "interrupted":
		return "was interrupted by a bridge restart"
	}
	return "is " + strings.ReplaceAll(status, "_", " ")
}

// safetyWords says a safety record in words.
func safetyWords(kind, who, task, monitor string) string {
	forTask := ""
	if task != "" {
		forTask = " during task " + task
	}
	switch kind {
	case "estop_pressed":
		return who + " pressed the e-stop" + forTask
	case "estop_reset":
		return who + " reset the e-stop"
	case "fault_latched":
		return "a fault latched" + forTask + "; nothing moves until an operator clears it"
	case "fault_cleared":
		return who + " cleared the latched fault"
	case "monitor_tripped":
		m := strings.ReplaceAll(monitor, "_", " ")
		if m == "" {
			m = "a safety monitor"
		}
		return "the " + m + " monitor stopped the robot" + forTask
	case "stop_sent":
		return "a stop was sent to the robot" + forTask
	case "command_refused":
		return "the safety gate refused a command" + forTask
	case "command_sent":
		return "a command was sent to the robot" + forTask
	case "recovery_started":
		return "recovery to the safe pose started" + forTask
	case "recovery_finished":
		return "recovery to the safe pose finished" + forTask
	}
	return ""
}

// article is "a" or "an" for the word w.
func article(w string) string {
	if w != "" && strings.ContainsRune("aeiou", rune(w[0])) {
		return "an"
	}
	return "a"
}
