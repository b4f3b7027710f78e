package bridge

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/approval"
)

// TestE2E_GrantCoveredCallAnswersApprovedByTheGrant: a call an operator's
// scoped grant covers answers with the status the task really has and
// names the grant, never "waiting for an operator to approve" while the
// arm is already on its way (issue 12 item 4).
func TestE2E_GrantCoveredCallAnswersApprovedByTheGrant(t *testing.T) {
	// Given an operator's scoped grant for move_arm_to to ready or stowed
	h := startHarness(t, nil)
	g, err := h.b.Approvals().CreateGrant(context.Background(), "ann",
		approval.Scope{Tool: "move_arm_to", Poses: []string{"ready", "stowed"}}, 10*time.Minute)
	require.NoError(t, err)

	// When the agent moves the arm to ready
	env := h.call("move_arm_to", args(map[string]any{"pose": "ready"}, "session_id", "grant-e2e"))

	// Then the answer is ok, with a status past the approval, and says
	// which grant approved it, what it allows and until when
	require.Equal(t, true, env["ok"], "%v", env)
	task := env["task"].(map[string]any)
	require.Contains(t, []any{"approved", "executing", "succeeded"}, task["status"], "%v", env)
	text := env["text"].(string)
	grantWords := fmt.Sprintf("Approved by ann's grant %s (%s), valid until %s UTC", g.ID, g.Description, g.ExpiresAt.UTC().Format("15:04"))
	require.Equal(t, 1, strings.Count(text, grantWords), "the grant is named once: %s", text)
	require.Equal(t, 1, strings.Count(text, g.ID), "the grant is named once: %s", text)
	require.NotContains(t, text, "waiting for an operator")
	grant := taskData(env)["approved_by_grant"].(map[string]any)
	require.Equal(t, g.ID, grant["id"])
	require.Equal(t, "ann", grant["granted_by"])
	require.Positive(t, grant["expires_in_ms"])

	// And the motion runs on the grant to its end
	done := h.waitTask(taskID(t, env), 30*time.Second)
	require.Equal(t, "succeeded", taskData(done)["status"], "%v", done)

	// And the audit keeps who authorized it: the approval's record, which
	// went to the disk in the commit before the first command
	v, err := h.b.Runner().Get(taskID(t, env))
	require.NoError(t, err)
	a, err := h.b.Store().Approval(context.Background(), v.ApprovalID)
	require.NoError(t, err)
	require.Equal(t, approval.StatusApproved, a.Status)
	require.Equal(t, g.ID, a.GrantID)
	require.Equal(t, "ann", a.DecidedBy)
	require.Equal(t, v.ID, a.TaskID)
}
