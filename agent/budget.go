package agent

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/robot-bridge/robot-bridge/toolapi"
)

// The tool-result budget: a result longer than Limits.MaxResultBytes
// reaches the model as a summary of its envelope — still one valid JSON
// object, never a cut — keeping what the loop and the model act on (ok,
// the error, the task, the robot) and the text cut at a sentence
// boundary, with a note saying what was left out and how to get less.

// summary is the JSON that replaces a result over the budget.
type summary struct {
	OK        bool             `json:"ok"`
	Tool      string           `json:"tool,omitempty"`
	Truncated bool             `json:"truncated"`
	Text      string           `json:"text,omitempty"`
	Task      *localTask       `json:"task,omitempty"`
	Robot     string           `json:"robot,omitempty"`
	Error     *summaryError    `json:"error,omitempty"`
	NotSent   bool             `json:"not_sent,omitempty"`
	Note      string           `json:"note"`
	Tasks     []map[string]any `json:"tasks,omitempty"`
}

type summaryError struct {
	Type         string `json:"type"`
	Message      string `json:"message"`
	Retryable    bool   `json:"retryable"`
	RetryAfterMS int64  `json:"retry_after_ms"`
	Suggestion   string `json:"suggestion,omitempty"`
}

// fitResult returns content when it fits in max bytes, else a summary of
// it that does (and true). args are the tool's argument names, for the
// note on how to ask for less.
func fitResult(content string, maxBytes int, args []string) (string, bool) {
	if len(content) <= maxBytes {
		return content, false
	}
	var env struct {
		toolapi.Envelope
		NotSent bool              `json:"not_sent"`
		Type    string            `json:"type"`
		Tasks   []json.RawMessage `json:"tasks"`
	}
	s := summary{Truncated: true}
	if err := json.Unmarshal([]byte(content), &env); err != nil {
		s.Note = fmt.Sprintf("The result was %d bytes of text that is not JSON, over this agent's budget of %d bytes; it was left out.", len(content), maxBytes)
		s.Text = content
	} else {
		s.OK, s.Tool, s.Text, s.Robot, s.NotSent = env.OK, env.Tool, env.Text, env.Robot, env.NotSent
		if env.Task != nil {
			s.Task = &localTask{ID: env.Task.ID, Status: string(env.Task.Status)}
		}
		if env.Error != nil {
			s.Error = &summaryError{
				Type: string(env.Error.Type), Message: env.Error.Message, Retryable: env.Error.Retryable,
				RetryAfterMS: env.Error.RetryAfterMS, Suggestion: env.Error.Suggestion,
			}
		}
		s.Note = fmt.Sprintf("The full result was %d bytes, over this agent's budget of %d bytes for one result, so its data was left out and only this summary is shown.", len(content), maxBytes)
		if env.Type == "task_update" {
			s.OK = true
			s.Note += " Read each task with get_task {\"task_id\": …} for the rest."
			for _, raw := range env.Tasks {
				var tl map[string]any
				if json.Unmarshal(raw, &tl) == nil {
					s.Tasks = append(s.Tasks, map[string]any{"id": tl["id"], "status": tl["status"]})
				}
			}
		} else if len(args) > 0 {
			slices.Sort(args)
			s.Note += " To get the rest, call it again asking for less, with its arguments (" + strings.Join(args, ", ") + ")."
		}
	}
	// Shrink the text until the summary fits; the rest always fits in the
	// minimum budget (MinResultBytes), the error's message aside, which
	// shrinks last.
	text := s.Text
	for limit := len(text); ; {
		s.Text = cutText(text, limit)
		raw, _ := json.Marshal(s)
		if len(raw) <= maxBytes {
			return string(raw), true
		}
		switch {
		case limit > 0:
			over := len(raw) - maxBytes
			limit = max(0, min(limit-over, limit-1))
		case s.Error != nil && len(s.Error.Message) > 0:
			s.Error.Message = cutText(s.Error.Message, len(s.Error.Message)/2)
			s.Error.Suggestion = ""
		case len(s.Tasks) > 0:
			s.Tasks = s.Tasks[:len(s.Tasks)/2]
		default:
			s.Robot, s.Note = "", "The result was over this agent's budget and was left out."
			raw, _ := json.Marshal(s)
			return string(raw), true
		}
	}
}

// cutText returns at most limit bytes of s, cut after the last full
// sentence that fits, else at the last word, with "…" where it was cut;
// never inside a UTF-8 character.
func cutText(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	if limit <= len("…") {
		return ""
	}
	cut := limit - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	head := s[:cut]
	if i := strings.LastIndexAny(head, ".!?"); i > 0 && i+1 < len(s) && (s[i+1] == ' ' || s[i+1] == '\n') {
		return head[:i+1]
	}
	if s[len(head)] == ' ' {
		return head + "…"
	}
	if i := strings.LastIndexByte(head, ' '); i > 0 {
		return head[:i] + "…"
	}
	return head + "…"
}
