package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"sync"

	"github.com/robot-bridge/robot-bridge/agent"
)

// terminal shows what the agent does, in plain lines that read the same
// in a terminal, a pipe or a log: each tool call and its outcome, the
// approvals it waits for, and a task's progress as a bar, printed once per
// tenth of the way.
type terminal struct {
	out io.Writer
	mu  sync.Mutex
	// shown is the last status/tenth printed per task; guarded by mu.
	shown map[string]string
}

var _ agent.Observer = (*terminal)(nil)

func (t *terminal) line(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, _ = fmt.Fprintln(t.out, s)
}

func (t *terminal) prompt() {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, _ = io.WriteString(t.out, "> ")
}

func (t *terminal) answer(res agent.Result) {
	t.line(strings.TrimSpace(res.Answer))
}

// ModelAsked implements agent.Observer.
func (t *terminal) ModelAsked(int) {}

// ToolCall implements agent.Observer.
func (t *terminal) ToolCall(c agent.ToolCall, sent bool) {
	args := short(c.Arguments)
	s := "-> " + c.Name + " " + args
	if !sent {
		s += "   (not sent: a repeat the agent answers itself)"
	}
	t.line(s)
}

// ToolResult implements agent.Observer.
func (t *terminal) ToolResult(c agent.ToolCall, r agent.CallResult) {
	var s string
	switch {
	case r.OK && r.TaskStatus == "awaiting_approval":
		s = fmt.Sprintf("   %s: task %s is waiting for operator approval", c.Name, r.TaskID)
	case r.OK:
		s = "   ok " + c.Name + ": " + short(r.Text)
	default:
		s = "   failed " + c.Name + ": " + short(r.Message)
	}
	if r.Summarized {
		s += " (result over the size budget: summarized)"
	}
	t.line(s)
}

// TaskUpdate implements agent.Observer.
func (t *terminal) TaskUpdate(ts agent.TaskStatus) {
	key := ts.Status
	var s string
	switch ts.Status {
	case "awaiting_approval":
		s = fmt.Sprintf("   task %s: waiting for operator approval", ts.ID)
	case "executing":
		tenth := int(math.Floor(ts.Fraction * 10))
		key = fmt.Sprintf("executing %d", tenth)
		s = fmt.Sprintf("   task %s [%s%s] %3.0f%% %s", ts.ID, strings.Repeat("#", tenth), strings.Repeat(".", 10-tenth), math.Floor(ts.Fraction*100), short(ts.Text))
	default:
		s = fmt.Sprintf("   task %s: %s", ts.ID, strings.ReplaceAll(ts.Status, "_", " "))
		if ts.ErrorMessage != "" {
			s += ": " + short(ts.ErrorMessage)
		}
	}
	t.mu.Lock()
	if t.shown == nil {
		t.shown = map[string]string{}
	}
	if t.shown[ts.ID] == key {
		t.mu.Unlock()
		return
	}
	t.shown[ts.ID] = key
	t.mu.Unlock()
	t.line(s)
}

// short bounds a bridge text for one line, cut at a word (never inside a
// character).
func short(s string) string {
	r := []rune(strings.TrimSpace(s))
	if len(r) <= 160 {
		return string(r)
	}
	head := string(r[:157])
	if cut := strings.LastIndexByte(head, ' '); cut >= 80 {
		head = head[:cut]
	}
	return head + "..."
}
