package approval

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

func TestPendingError_NamesTaskAndExpiry(t *testing.T) {
	a := Approval{ID: "apr_1", Tool: ToolMoveBase, ExpiresAt: t0.Add(time.Minute)}

	e := PendingError("task-1", a, t0.Add(15*time.Second))

	require.Equal(t, toolerr.ApprovalPending, e.Type)
	require.True(t, e.Retryable())
	require.Equal(t, "move_base_to is waiting for an operator's approval (request apr_1); it expires in 45 s if nobody decides.", e.Message)
	require.Contains(t, e.SuggestionText(), `get_task with task_id "task-1"`)
	require.Equal(t, "task-1", e.Details["task_id"])
	require.Equal(t, "2026-03-01T12:01:00Z", e.Details["expires_at"])
}

func TestDecisionError(t *testing.T) {
	reason := "  not while people are at the table — ask again at 3pm\n"
	for _, tc := range []struct {
		name string
		d    actions.Decision
		typ  toolerr.Type
		msg  string
	}{
		{"approved", actions.Decision{Approved: true, By: "alice"}, "", ""},
		{"cancelled", actions.Decision{Cancelled: true}, "", ""},
		{"expired", actions.Decision{Expired: true, By: SystemActor}, toolerr.ApprovalExpired, "No operator approved move_base_to in time (request apr_1 expired); nothing moved."},
		{"denied", actions.Decision{Reason: reason, By: "alice"}, toolerr.ApprovalDenied, "Operator alice denied move_base_to; nothing moved. Their reason: \"" + reason + "\"."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := DecisionError(ToolMoveBase, "apr_1", tc.d)
			if tc.typ == "" {
				require.Nil(t, e)
				return
			}
			require.Equal(t, tc.typ, e.Type)
			require.Equal(t, tc.msg, e.Message)
			require.False(t, e.Retryable())
			if tc.typ == toolerr.ApprovalDenied {
				require.Equal(t, reason, e.Details["reason"], "the reason reaches the agent verbatim")
			}
		})
	}
}
