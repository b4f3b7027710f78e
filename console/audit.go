package console

import (
	"context"
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
	// Text says it in words.
	Text string `json:"text"`
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
		a.Text = fmt.Sprintf("task %s (%s) is %s", d.ID, d.Tool, strings.ReplaceAll(string(d.Status), "_", " "))
		if d.Text != "" {
			a.Text += ": " + d.Text
		}
	case map[string]any:
		// Safety events arrive as maps (see the bridge's safetyEventData).
		if k, ok := d["kind"]; ok {
			a.Kind = fmt.Sprint(k)
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
