package toolapi

import (
	"slices"
	"strings"
	"time"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// Envelope is the result of every tool call (docs/DESIGN.md §3.2). Data
// is set when ok, Error when not; the one failure that carries data too is
// get_robot_state's UNAVAILABLE while the bridge still holds a state: data
// is then the last known state, with its age (state_age_ms) and
// error.details.last_known true, and text says how old it is. Robot is
// always set and says in words what physical state the robot is in now.
type Envelope struct {
	OK   bool   `json:"ok"`
	Tool string `json:"tool"`
	Data any    `json:"data,omitempty"`
	// Text is one or two sentences for the model.
	Text string `json:"text,omitempty"`
	// Task is the action's task, when the call made or touched one.
	Task  *TaskRef   `json:"task,omitempty"`
	Robot string     `json:"robot"`
	Error *ErrorBody `json:"error,omitempty"`
	// OperatorMessage is an operator's answer to the session's request
	// for help, carried by the envelope of the session's next call once
	// (Text begins with it too).
	OperatorMessage *OperatorMessage `json:"operator_message,omitempty"`
	// Untrusted names the fields of this envelope that hold text from
	// outside the bridge — what the robot's camera called the objects it
	// sees — grouped by where it came from. Such text is data about the
	// world, never an instruction to the model (invariant 12). Absent when
	// no field holds any.
	Untrusted []Untrusted `json:"untrusted,omitempty"`
}

// Untrusted is one source of untrusted text in an envelope and the fields
// that hold it, e.g.
//
//	{"source": "perception", "fields": ["$.text", "$.data.text", "$.data.objects[*].label"]}
//
// A field may hold the bridge's words around the untrusted text, as
// describe_scene's text does ("An object labelled "cup" (cup-1) on table
// is …"): the scene's words in it are the quoted ones.
type Untrusted struct {
	// Source is where the text came from: SourcePerception.
	Source string `json:"source"`
	// Fields are RFC 9535 JSONPath queries into the envelope as encoded
	// in JSON ("$.text", "$.data.objects[*].label"), only of fields
	// present in it.
	Fields []string `json:"fields"`
}

// SourcePerception is the source of the labels the robot's camera (or
// any step of perception after it) gives the objects it sees.
const SourcePerception = "perception"

// UntrustedData is implemented by tool data that knows which of its own
// fields hold untrusted text (perception.Scene does). Its paths are
// RFC 9535 JSONPath queries into the data as encoded in JSON, "$" being
// the data itself; the envelope lists them under "$.data". Data that does
// not implement it, returned by describe_scene, is marked untrusted as a
// whole.
type UntrustedData interface {
	UntrustedFields() (source string, paths []string)
}

// addUntrusted adds fields of source to u, merged into its entry for
// source, and returns it.
func addUntrusted(u []Untrusted, source string, fields ...string) []Untrusted {
	for i := range u {
		if u[i].Source == source {
			for _, f := range fields {
				if !slices.Contains(u[i].Fields, f) {
					u[i].Fields = append(u[i].Fields, f)
				}
			}
			return u
		}
	}
	return append(u, Untrusted{Source: source, Fields: slices.Clone(fields)})
}

// sceneUntrusted is what of describe_scene's answer is untrusted: its
// text, and the fields its data names (all of the data if it names none).
func sceneUntrusted(data any) []Untrusted {
	u := addUntrusted(nil, SourcePerception, "$.text")
	switch d := data.(type) {
	case nil:
	case UntrustedData:
		source, paths := d.UntrustedFields()
		for _, p := range paths {
			if p == "$" || !strings.HasPrefix(p, "$") {
				u = addUntrusted(u, source, "$.data")
				continue
			}
			u = addUntrusted(u, source, "$.data"+p[1:])
		}
	default:
		u = addUntrusted(u, SourcePerception, "$.data")
	}
	return u
}

// graspUntrusted is what of an envelope about a grasp task is untrusted:
// the task's texts name the object by the label perception gave it (its
// preview, "grasp cup-1 (cup) at …", is the task's text until it runs,
// and the failure of a task that ended without an error of its own
// repeats it).
func graspUntrusted(d TaskData) []Untrusted {
	u := addUntrusted(nil, SourcePerception, "$.text", "$.task.text", "$.data.text", "$.error.message")
	if d.Error != nil {
		u = addUntrusted(u, SourcePerception, "$.data.error.message")
	}
	return u
}

// presentOnly keeps the fields of u that env holds, dropping a source left
// with none; nil when nothing is left.
func presentOnly(u []Untrusted, env *Envelope) []Untrusted {
	var out []Untrusted
	for _, e := range u {
		var fields []string
		for _, f := range e.Fields {
			present := true
			switch {
			case f == "$.text":
				present = env.Text != ""
			case f == "$.task.text":
				present = env.Task != nil && env.Task.Text != ""
			case f == "$.error.message":
				present = env.Error != nil
			case f == "$.data" || strings.HasPrefix(f, "$.data.") || strings.HasPrefix(f, "$.data["):
				present = env.Data != nil
			}
			if present {
				fields = append(fields, f)
			}
		}
		if len(fields) > 0 {
			out = append(out, Untrusted{Source: e.Source, Fields: fields})
		}
	}
	return out
}

// TaskRef is the short form of a task in an envelope.
type TaskRef struct {
	ID       string            `json:"id"`
	Status   fsm.State         `json:"status"`
	Progress *actions.Progress `json:"progress,omitempty"`
	Text     string            `json:"text,omitempty"`
}

// ErrorBody is an agent-facing error (docs/DESIGN.md §3.3).
type ErrorBody struct {
	Type         toolerr.Type   `json:"type"`
	Message      string         `json:"message"`
	Retryable    bool           `json:"retryable"`
	RetryAfterMS int64          `json:"retry_after_ms"`
	Suggestion   string         `json:"suggestion"`
	Details      map[string]any `json:"details,omitempty"`
}

// ErrorBodyOf turns any error into the body an agent sees. Its message is
// the error's as one or more full sentences (toolerr's MessageText): what
// a model repeats ends with a full stop, whoever produced it. Errors that are
// not a *toolerr.Error become INTERNAL with no cause text, so nothing
// internal (paths, stack traces, secrets) leaks to the model.
func ErrorBodyOf(err error) *ErrorBody {
	te := toolerr.As(err)
	if te == nil {
		return nil
	}
	typ := te.Type
	if !typ.Valid() {
		typ = toolerr.Internal
	}
	msg := te.MessageText()
	if msg == "" {
		msg = string(typ)
	}
	retryable := toolerr.InfoOf(typ).Retryable
	return &ErrorBody{
		Type: typ, Message: msg, Retryable: retryable,
		RetryAfterMS: retryAfterMS(typ, retryable, te.RetryAfter), Suggestion: te.SuggestionText(), Details: te.Details,
	}
}

// retryAfterMS is an error's retry_after_ms: 0 for an error that must not
// be retried; for a retryable one the producer's wait, or the type's
// default (toolerr.DefaultRetryAfter) when it set none, so an agent is
// never told "retry" with "after 0 ms" (a tight loop). A wait under a
// millisecond counts as one.
func retryAfterMS(typ toolerr.Type, retryable bool, d time.Duration) int64 {
	if !retryable {
		return 0
	}
	if d <= 0 {
		d = toolerr.DefaultRetryAfter(typ)
	}
	return max(1, d.Milliseconds())
}

// TaskData is get_task's data: the whole task as the agent sees it.
type TaskData struct {
	ID string `json:"id"`
	// RobotID is the robot the task is for, on a bridge that serves
	// several (absent with one robot).
	RobotID   string           `json:"robot_id,omitempty"`
	Tool      string           `json:"tool"`
	Arguments map[string]any   `json:"arguments"`
	Status    fsm.State        `json:"status"`
	Progress  actions.Progress `json:"progress"`
	Text      string           `json:"text"`
	Result    map[string]any   `json:"result,omitempty"`
	Error     *ErrorBody       `json:"error,omitempty"`
	// Grant is the operator's scoped grant that approved the task, when
	// one did.
	Grant *GrantData `json:"approved_by_grant,omitempty"`
}

// GrantData is the operator's grant that approved a task.
type GrantData struct {
	ID        string    `json:"id"`
	By        string    `json:"granted_by"`
	Scope     string    `json:"scope"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// ExpiresInMS is how long the grant still runs, in milliseconds.
	ExpiresInMS int64 `json:"expires_in_ms"`
}

func taskRef(v actions.TaskView) *TaskRef {
	p := v.Progress
	return &TaskRef{ID: v.ID, Status: v.Status, Progress: &p, Text: v.Text}
}

// taskError is the error a task that ended other than succeeded reports:
// its own, or one derived from its status when the runner left none.
func taskError(v actions.TaskView) *toolerr.Error {
	if v.Status == fsm.Succeeded || !v.Status.Terminal() {
		return nil
	}
	if v.Error != nil {
		return v.Error
	}
	if v.Status == fsm.Cancelled {
		// The runner leaves no error on a task cancelled before the robot
		// moved: a cancel is no failure, and its text says what happened.
		return nil
	}
	msg := "task " + v.ID + " ended " + string(v.Status)
	if v.Text != "" {
		msg += ": " + v.Text
	}
	te := &toolerr.Error{Type: toolerr.ActionFailed, Message: msg}
	switch v.Status {
	case fsm.Denied:
		te.Type = toolerr.ApprovalDenied
	case fsm.Expired:
		te.Type = toolerr.ApprovalExpired
	case fsm.EStopped:
		te.Type = toolerr.EStopActive
	case fsm.Cancelled:
		te.Suggestion = "the task was cancelled; check get_robot_state, then ask the user before trying again"
	case fsm.Interrupted:
		te.Suggestion = "the bridge restarted during the task and stopped the robot; check get_robot_state before trying again"
	}
	return te.With("task_id", v.ID).With("status", string(v.Status))
}

func taskData(v actions.TaskView) TaskData {
	d := TaskData{ID: v.ID, Tool: v.Tool, Arguments: v.Arguments, Status: v.Status, Progress: v.Progress, Text: v.Text, Result: v.Result}
	if d.Arguments == nil {
		d.Arguments = map[string]any{}
	}
	if te := taskError(v); te != nil {
		d.Error = ErrorBodyOf(te)
	}
	return d
}
