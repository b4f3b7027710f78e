package approval

import (
	"errors"
	"fmt"
	"time"

	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// Sentinels callers branch on. The typed errors below wrap them.
var (
	// ErrNotFound: no approval request or grant has that id.
	ErrNotFound = errors.New("not found")
	// ErrNotPending: the request was already decided (or expired or was
	// withdrawn), or the grant was already revoked; deciding twice never
	// changes the first decision.
	ErrNotPending = errors.New("no longer pending")
	// ErrInvalid: an argument (scope, TTL, reason, operator name) is
	// malformed; the *InvalidError says which and what is allowed.
	ErrInvalid = errors.New("invalid argument")
	// ErrClosed: the service was closed.
	ErrClosed = errors.New("approval service closed")
	// ErrLatched: an e-stop or a fault is latched (Conf.Latched said so),
	// so the request could not be approved; the *LatchedError says which.
	ErrLatched = errors.New("a safety latch is set")
)

// LatchedError is Approve's refusal while an e-stop or a fault is latched.
// The request it names was withdrawn: the motion was planned for a robot
// that has since been stopped, so it must be asked for again once an
// operator has reset the latch. It matches ErrLatched and whatever
// Conf.Latched returned (safety.ErrEStopActive, safety.ErrFaultLatched).
type LatchedError struct {
	ApprovalID string
	// Err is Conf.Latched's refusal, which says what is latched.
	Err error
}

func (e *LatchedError) Error() string {
	why := "a safety latch is set"
	if e.Err != nil {
		why = toolerr.Clause(toolerr.As(e.Err).Message)
	}
	return fmt.Sprintf("approval %s was not approved: %s; the request was withdrawn and nothing will move on it — the agent must call again after the reset",
		e.ApprovalID, why)
}

// Unwrap returns ErrLatched and the latch's own error.
func (e *LatchedError) Unwrap() []error { return []error{ErrLatched, e.Err} }

// NotFoundError says what kind of thing was not found.
type NotFoundError struct {
	// Kind is "approval" or "grant".
	Kind string
	ID   string
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("no %s with id %q", e.Kind, e.ID)
}

// Unwrap returns ErrNotFound.
func (e *NotFoundError) Unwrap() error { return ErrNotFound }

// NotPendingError is returned when deciding a request that is already
// decided, or revoking a grant that is already revoked or expired. It says
// what happened to it, and who did it when.
type NotPendingError struct {
	// Kind is "approval" or "grant".
	Kind   string
	ID     string
	Status string
	By     string
	At     time.Time
	// Reason is why it was decided, withdrawn or revoked ("" if none
	// was given), so a refusal says what happened ("e-stop pressed by
	// agent"), not only that something did.
	Reason string
}

func (e *NotPendingError) Error() string {
	s := fmt.Sprintf("%s %s is already %s", e.Kind, e.ID, e.Status)
	if e.By != "" {
		s += " by " + e.By
	}
	if !e.At.IsZero() {
		s += " at " + clockTime(e.At)
	}
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	return s
}

// Unwrap returns ErrNotPending.
func (e *NotPendingError) Unwrap() error { return ErrNotPending }

// InvalidError names the field at fault and what is wrong with it. Field is
// the JSON path the operator API uses ("grant.scope.poses[1]", "ttl",
// "reason").
type InvalidError struct {
	Field   string
	Problem string
}

func (e *InvalidError) Error() string {
	if e.Field == "" {
		return e.Problem
	}
	return e.Field + ": " + e.Problem
}

// Unwrap returns ErrInvalid.
func (e *InvalidError) Unwrap() error { return ErrInvalid }

func invalid(field, format string, args ...any) *InvalidError {
	return &InvalidError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// RefusalCause classifies why Authorize refused a motion.
type RefusalCause string

// Refusal causes.
const (
	CauseNoGrant       RefusalCause = "no_grant"
	CauseUnknownGrant  RefusalCause = "unknown_grant"
	CauseOtherRobot    RefusalCause = "other_robot"
	CauseOtherTool     RefusalCause = "other_tool"
	CauseOtherArgs     RefusalCause = "other_arguments"
	CauseRevoked       RefusalCause = "revoked"
	CauseExpired       RefusalCause = "expired"
	CauseOtherTask     RefusalCause = "other_task"
	CauseNoTask        RefusalCause = "no_task"
	CauseOutsideBounds RefusalCause = "outside_bounds"
)

// RefusalError is Authorize's refusal. It wraps safety.ErrNotAuthorized,
// and its message says why in words fit for a log line and the agent's
// envelope. A refusal because the grant itself has ended also matches the
// sentinel the supervisor branches on: CauseRevoked (a revoked or deleted
// grant) is safety.ErrGrantRevoked, CauseExpired safety.ErrGrantExpired.
type RefusalError struct {
	GrantID string
	Cause   RefusalCause
	// Bound names the bound a call fell outside of ("pose", "joints",
	// "region", "location", "object"), for CauseOutsideBounds.
	Bound string
	// By and Reason say who revoked the grant and why (Reason only when the
	// operator gave one), for CauseRevoked.
	By     string
	Reason string
	Detail string
}

func (e *RefusalError) Error() string {
	if e.GrantID == "" {
		return safety.ErrNotAuthorized.Error() + ": " + e.Detail
	}
	return fmt.Sprintf("%s: grant %s: %s", safety.ErrNotAuthorized.Error(), e.GrantID, e.Detail)
}

// Revocation implements safety.Revocation: who revoked the grant and
// their reason; ok is false for every other cause.
func (e *RefusalError) Revocation() (by, reason string, ok bool) {
	return e.By, e.Reason, e.Cause == CauseRevoked
}

var _ safety.Revocation = (*RefusalError)(nil)

// Unwrap returns safety.ErrNotAuthorized.
func (e *RefusalError) Unwrap() error { return safety.ErrNotAuthorized }

// Is reports whether the refusal is for the grant having ended the way
// target says: safety.ErrGrantRevoked for CauseRevoked, safety.ErrGrantExpired
// for CauseExpired. (Unwrap covers safety.ErrNotAuthorized.)
func (e *RefusalError) Is(target error) bool {
	switch target {
	case safety.ErrGrantRevoked:
		return e.Cause == CauseRevoked
	case safety.ErrGrantExpired:
		return e.Cause == CauseExpired
	}
	return false
}
