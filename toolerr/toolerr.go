// Package toolerr is the closed set of error types an agent can receive
// (ARCHITECTURE.md), each with whether retrying can help and a default
// suggestion the model can follow, and the Error value that carries one
// through the bridge. Every package that produces an agent-facing failure
// returns a *Error (or wraps one); the tool API turns it into the result
// envelope. Keeping the set in a leaf package lets the supervisor, the
// action runner and the front ends agree on it without importing each other.
package toolerr

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Type is one of the closed set of error types.
type Type string

// The error types. Adding one is an API change: update ARCHITECTURE.md, the
// golden tests and the model-facing docs together.
const (
	InvalidParams    Type = "INVALID_PARAMS"
	UnknownTool      Type = "UNKNOWN_TOOL"
	NotFound         Type = "NOT_FOUND"
	PermissionDenied Type = "PERMISSION_DENIED"
	ApprovalPending  Type = "APPROVAL_PENDING"
	ApprovalDenied   Type = "APPROVAL_DENIED"
	ApprovalExpired  Type = "APPROVAL_EXPIRED"
	SafetyViolation  Type = "SAFETY_VIOLATION"
	EStopActive      Type = "ESTOP_ACTIVE"
	RobotBusy        Type = "ROBOT_BUSY"
	Timeout          Type = "TIMEOUT"
	ActionFailed     Type = "ACTION_FAILED"
	Unavailable      Type = "UNAVAILABLE"
	RateLimited      Type = "RATE_LIMITED"
	Conflict         Type = "CONFLICT"
	LoopDetected     Type = "LOOP_DETECTED"
	Internal         Type = "INTERNAL"
)

// Info is the fixed metadata of a type.
type Info struct {
	// Retryable says whether the same call may succeed if repeated later
	// unchanged.
	Retryable bool
	// Suggestion is the default next step for the model, as a clause
	// (lower case, no full stop) that a longer text can embed; an
	// envelope shows it as a sentence through Error.SuggestionText.
	Suggestion string
}

var infos = map[Type]Info{
	InvalidParams:    {false, "fix the argument named in the message using the allowed values, then call again; do not repeat the same arguments"},
	UnknownTool:      {false, "call one of the tools named in details.closest, or list tools first"},
	NotFound:         {false, "check the id or name; list what exists (get_robot_state, describe_scene, list_named_poses) and use one of those"},
	PermissionDenied: {false, "this credential may not do that; ask the user or an operator"},
	ApprovalPending:  {true, "an operator has not decided yet; poll get_task with the task id and wait_ms, do not call the action again"},
	ApprovalDenied:   {false, "the operator refused; read the reason, tell the user, and do not retry the same request"},
	ApprovalExpired:  {false, "no operator decided in time and nothing moved; ask the user whether to request it again"},
	SafetyViolation:  {false, "choose a target inside the allowed range named in the message, or ask the user"},
	EStopActive:      {false, "the e-stop is latched and only an operator can reset it; tell the user and wait, do not retry"},
	RobotBusy:        {true, "another task is running; wait for it with get_task, or cancel it with cancel_task, then call again"},
	Timeout:          {false, "the action did not finish in time and was stopped; check get_robot_state, then decide whether to try again or ask the user"},
	ActionFailed:     {false, "the action failed and the robot was stopped; check get_robot_state and describe_scene before trying anything else"},
	Unavailable:      {true, "the robot or a dependency is unreachable; wait retry_after_ms, then check get_robot_state"},
	RateLimited:      {true, "too many calls; wait retry_after_ms before calling again"},
	Conflict:         {false, "this idempotency key was used with different arguments; use a new key for a new request"},
	LoopDetected:     {false, "the same call keeps failing the same way; stop calling it and tell the user what is wrong"},
	Internal:         {true, "the bridge hit an internal error; check get_robot_state, then try again once or tell the user"},
}

// Types lists every type in a stable order.
func Types() []Type {
	return []Type{
		InvalidParams, UnknownTool, NotFound, PermissionDenied, ApprovalPending,
		ApprovalDenied, ApprovalExpired, SafetyViolation, EStopActive, RobotBusy, Timeout,
		ActionFailed, Unavailable, RateLimited, Conflict, LoopDetected, Internal,
	}
}

// InfoOf returns the metadata of t; unknown types are Internal's.
func InfoOf(t Type) Info {
	if i, ok := infos[t]; ok {
		return i
	}
	return infos[Internal]
}

// defaultRetryAfter is the back-off of each retryable type, for an Error
// that does not carry its own. Each is long enough that a model which
// retries at once does not hammer the bridge or the operator, and short
// enough that a transient condition (a link blip, a busy robot finishing a
// short motion, a rate window) has usually passed.
var defaultRetryAfter = map[Type]time.Duration{
	// An operator decides in seconds at best; get_task with wait_ms is the
	// better way to wait, so a plain retry should not come sooner.
	ApprovalPending: 2 * time.Second,
	// Most motions of the bundled robots take a few seconds.
	RobotBusy: time.Second,
	// The same hint the action runner gives while the robot link is down.
	Unavailable: 2 * time.Second,
	// One token of a typical per-session bucket refills within a second.
	RateLimited: time.Second,
	// An internal error is retried at most once; a second is enough for a
	// busy store to settle.
	Internal: time.Second,
}

// DefaultRetryAfter returns the back-off a model should wait before
// repeating a call that failed with t when the error does not carry its own
// (Error.RetryAfter): non-zero for every retryable type, zero for every
// type whose Info.Retryable is false (retrying unchanged cannot help). An
// unknown type is Internal's, as in InfoOf. The envelope's retry_after_ms
// uses it through Error.RetryAfterHint.
func DefaultRetryAfter(t Type) time.Duration {
	if !t.Valid() {
		t = Internal
	}
	if !InfoOf(t).Retryable {
		return 0
	}
	return defaultRetryAfter[t]
}

// Valid reports whether t is one of the closed set.
func (t Type) Valid() bool { _, ok := infos[t]; return ok }

// Error is an agent-facing failure.
type Error struct {
	Type    Type
	Message string
	// Suggestion overrides the type's default when set.
	Suggestion string
	// RetryAfter is how long to wait before retrying, where it applies.
	RetryAfter time.Duration
	// Details carries structured specifics (field, allowed range, task id).
	Details map[string]any
	// Err is the underlying cause, for errors.Is/As; never shown to the agent.
	Err error
}

// New returns an Error of type t with a formatted message.
func New(t Type, format string, args ...any) *Error {
	return &Error{Type: t, Message: fmt.Sprintf(format, args...)}
}

// Error implements error.
func (e *Error) Error() string { return string(e.Type) + ": " + e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Retryable reports the type's retry rule.
func (e *Error) Retryable() bool { return InfoOf(e.Type).Retryable }

// RetryAfterHint returns how long to wait before retrying: e.RetryAfter
// when set, else DefaultRetryAfter(e.Type). It is zero exactly when the
// type is not retryable, so an envelope never tells a model to wait and
// retry a call that cannot succeed unchanged, and never gives a retryable
// error without a wait.
func (e *Error) RetryAfterHint() time.Duration {
	if !e.Retryable() {
		return 0
	}
	if e.RetryAfter > 0 {
		return e.RetryAfter
	}
	return DefaultRetryAfter(e.Type)
}

// SuggestionText returns the suggestion, falling back to the type's
// default, as a sentence (see Sentence): what an envelope shows.
func (e *Error) SuggestionText() string {
	if e.Suggestion != "" {
		return Sentence(e.Suggestion)
	}
	return Sentence(InfoOf(e.Type).Suggestion)
}

// MessageText returns the message as a sentence (see Sentence): what an
// envelope shows. Message itself may be a clause another message embeds.
func (e *Error) MessageText() string { return Sentence(e.Message) }

// Sentence makes s read as one or more full sentences for a model: it
// trims surrounding space and ends s with a full stop unless it already
// ends with one (or a question or exclamation mark, also inside a closing
// quote or bracket). It leaves the first letter as it is: a text may
// start with a tool name. An empty s stays empty.
func Sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	end := strings.TrimRight(s, `)"']`)
	if end != "" && strings.ContainsRune(".?!", rune(end[len(end)-1])) {
		return s
	}
	for strings.HasSuffix(s, ";") || strings.HasSuffix(s, ",") || strings.HasSuffix(s, ":") {
		s = strings.TrimSpace(s[:len(s)-1])
	}
	return s + "."
}

// Clause is the inverse of Sentence for embedding: s without surrounding
// space and without a final full stop, so that "…: " + Clause(msg) + "; …"
// reads as one sentence.
func Clause(s string) string {
	s = strings.TrimSpace(s)
	if strings.HasSuffix(s, ".") && !strings.HasSuffix(s, "...") {
		s = s[:len(s)-1]
	}
	return s
}

// With sets a detail and returns e for chaining.
func (e *Error) With(key string, v any) *Error {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	e.Details[key] = v
	return e
}

// Wrap sets the cause and returns e.
func (e *Error) Wrap(err error) *Error { e.Err = err; return e }

// As extracts the *Error in err's chain. A non-nil err without one becomes
// an Internal error whose message does not leak the cause's text.
func As(err error) *Error {
	if err == nil {
		return nil
	}
	if te, ok := errors.AsType[*Error](err); ok {
		return te
	}
	return &Error{Type: Internal, Message: "internal error", Err: err}
}

// TypeOf returns the type of err, Internal if it carries none, "" for nil.
func TypeOf(err error) Type {
	if err == nil {
		return ""
	}
	return As(err).Type
}
