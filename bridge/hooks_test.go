package bridge

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/safety"
)

// Wiring tests (issue 11): the approval service tells the supervisor the
// moment a grant ends, and asks it whether a latch is set before an
// operator's approval takes effect.

func TestGrantRevoked_StopsItsMotionAtOnceNamingTheOperator(t *testing.T) {
	// Given an operator's scoped grant for base motions in the room, and
	// a long drive running on it
	h := startHarness(t, nil)
	code, body := h.do("POST", "/v1/grants", h.operator, map[string]any{
		"scope": map[string]any{"tool": "move_base_to", "rect": map[string]any{"min_x": -4, "min_y": -4, "max_x": 4, "max_y": 4}},
		"ttl":   "10m",
	})
	require.Equal(t, http.StatusCreated, code, "%v", body)
	grantID := body["grant"].(map[string]any)["id"].(string)
	id := taskID(t, h.call("move_base_to", args(map[string]any{"x": 3.5, "y": 0})))
	waitStatus(t, h, id, "executing")

	// When the operator revokes the grant, saying why
	code, body = h.do("DELETE", "/v1/grants/"+grantID, h.operator, map[string]any{"reason": "person near the table"})
	require.Equal(t, http.StatusOK, code, "%v", body)

	// Then the motion was stopped by the revocation itself — the stop names
	// the operator and their reason, which only the approval service's
	// call to the supervisor carries (the supervisor's own re-check of the
	// grant knows neither)
	done := taskData(h.waitTask(id, 20*time.Second))
	require.NotEqual(t, "succeeded", done["status"], "%v", done)
	msg := fmt.Sprint(done["error"].(map[string]any)["message"])
	require.Contains(t, msg, "operator revoked the grant (person near the table)", "%v", done)
}

func TestApprove_RefusedWhileAFaultIsLatched(t *testing.T) {
	// Given a motion waiting for an operator's approval
	h := startHarness(t, nil)
	id := taskID(t, h.call("move_base_to", args(map[string]any{"x": 0.5, "y": 0})))
	apr := h.pendingApproval(id)
	before := motionCommands(h.sim)
	// And a fault latched meanwhile, without anything withdrawing the
	// request (as a fault restored at start would be)
	h.b.Supervisor().RestoreLatches(safety.EStopStatus{}, safety.FaultStatus{Latched: true, Reason: "test fault", Since: time.Now()})

	// When the operator approves it
	code, body := h.do("POST", "/v1/approvals/"+apr+"/approve", h.operator, map[string]any{})

	// Then the approval is refused, naming the latch, and the request is
	// withdrawn: nothing moves, now or after the fault is cleared
	require.Equal(t, http.StatusConflict, code, "%v", body)
	require.Contains(t, fmt.Sprint(body), "test fault")
	done := taskData(h.waitTask(id, 20*time.Second))
	require.Equal(t, "cancelled", done["status"], "%v", done)
	code, body = h.do("POST", "/v1/faults/clear", h.operator, nil)
	require.Equal(t, http.StatusOK, code, "%v", body)
	require.Equal(t, before, motionCommands(h.sim))
}
