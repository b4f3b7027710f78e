package approval

import (
	"fmt"
	"time"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// The agent's side of an approval (issue 5, item 5). The tool API waits up
// to wait_ms on the task; when no decision has come by then it answers
// PendingError, and when the decision is a refusal the task ends with
// DecisionError. Both are built here so the operator's words and the
// request's ids reach the model the same way from every front end.

// PendingError is APPROVAL_PENDING for a task still waiting for an
// operator: it names the task to poll and when the request expires.
func PendingError(taskID string, a Approval, now time.Time) *toolerr.Error {
	e := toolerr.New(toolerr.ApprovalPending,
		"%s is waiting for an operator's approval (request %s); it expires in %s if nobody decides.",
		a.Tool, a.ID, waitWords(a.ExpiresAt.Sub(now)))
	e.Suggestion = fmt.Sprintf("poll get_task with task_id %q and wait_ms (for example 10000) until the status changes; do not call %s again.",
		taskID, a.Tool)
	e.RetryAfter = time.Second
	return e.With("task_id", taskID).With("approval_id", a.ID).With("expires_at", a.ExpiresAt.UTC().Format(time.RFC3339))
}

// DecisionError turns a refusal into the agent's error: APPROVAL_DENIED
// carrying the operator's reason verbatim (in the message and in
// details.reason), or APPROVAL_EXPIRED. An approval or a withdrawal (the
// task was cancelled, and the cancel reports that) gives nil.
func DecisionError(tool, approvalID string, d actions.Decision) *toolerr.Error {
	switch {
	case d.Approved, d.Cancelled:
		return nil
	case d.Expired:
		return toolerr.New(toolerr.ApprovalExpired,
			"No operator approved %s in time (request %s expired); nothing moved.", tool, approvalID).
			With("approval_id", approvalID)
	default:
		return toolerr.New(toolerr.ApprovalDenied,
			"%s denied %s; nothing moved. Their reason: %s", capFirst(operatorName(d.By)), tool, toolerr.Sentence(quoteReason(d.Reason))).
			With("approval_id", approvalID).With("reason", d.Reason).With("denied_by", d.By)
	}
}
