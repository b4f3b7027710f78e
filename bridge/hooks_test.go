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

// A grant revoked mid-motion stopping it, naming the operator and the
// reason, is scenarioRevokedGrantStopsItsMotion (replay_revoke_e2e_test.go),
// in-process and over ROS.

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
