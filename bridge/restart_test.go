package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/store"
)

// Restart tests (issue 6) with the bridge in-process: each boots a bridge
// on a data dir, stops it, and boots another one on the same dir. The
// kill -9 variant, with the real binary, is cmd/robot-bridge's crash test.

const (
	testAgentToken    = "agent-token-for-tests-0123456789"
	testOperatorToken = "operator-token-for-tests-0123456789"
)

func testEnv(k string) string {
	switch k {
	case "ROBOT_BRIDGE_AGENT_TOKEN":
		return testAgentToken
	case "ROBOT_BRIDGE_OPERATOR_TOKEN":
		return testOperatorToken
	}
	return ""
}

// bootAt starts a bridge on dir and returns it with a stop function
// (idempotent; also run when the test ends).
func bootAt(t *testing.T, dir string, edit func(*hwconfig.Config), logger *slog.Logger) (*harness, func()) {
	t.Helper()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	b, err := New(Conf{Config: testConfig(t, edit), Listen: "127.0.0.1:0", DataDir: dir, Env: testEnv, Logger: logger})
	require.NoError(t, err)
	require.NoError(t, b.Start(context.Background()))
	var once sync.Once
	stop := func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, b.Stop(ctx))
		})
	}
	t.Cleanup(stop)
	h := &harness{
		t: t, b: b, sim: b.Sim(), base: "http://" + b.Addr(), agent: testAgentToken, operator: testOperatorToken,
		client: &http.Client{Timeout: 30 * time.Second},
	}
	h.waitReady()
	return h, stop
}

func safetyStatus(h *harness) map[string]any {
	h.t.Helper()
	code, body := h.do("GET", "/v1/safety", h.operator, nil)
	require.Equal(h.t, http.StatusOK, code, "%v", body)
	return body["status"].(map[string]any)
}

func TestRestart_EStopStaysLatchedUntilAnOperatorResetsIt(t *testing.T) {
	dir := t.TempDir()
	// Given an e-stop pressed by the agent in one run
	h1, stop1 := bootAt(t, dir, nil, nil)
	code, body := h1.do("POST", "/v1/estop", h1.agent, map[string]any{"reason": "person in the aisle"})
	require.Equal(t, http.StatusOK, code, "%v", body)
	stop1()

	// When the bridge starts again on the same data dir
	h2, stop2 := bootAt(t, dir, nil, nil)
	// Then the e-stop is still latched, with who pressed it and why
	est := safetyStatus(h2)["estop"].(map[string]any)
	require.Equal(t, true, est["active"])
	require.Equal(t, "agent", est["by"])
	require.Equal(t, "person in the aisle", est["reason"])
	// And motion is refused before any operator is asked
	env := h2.call("move_base_to", args(map[string]any{"x": 0.5, "y": 0}))
	requireError(t, env, "ESTOP_ACTIVE", false)
	require.True(t, h2.b.Recovery().EStop.Active)
	// When an operator resets it and the bridge restarts once more
	code, body = h2.do("POST", "/v1/estop/reset", h2.operator, nil)
	require.Equal(t, http.StatusOK, code, "%v", body)
	stop2()
	h3, _ := bootAt(t, dir, nil, nil)
	// Then it stays released
	require.Equal(t, false, safetyStatus(h3)["estop"].(map[string]any)["active"])
	// And the audit trail has the press and the reset, with who did them
	recs := auditRecords(t, h3, "type=safety")
	var kinds []string
	for _, r := range recs {
		if r.Type == "safety.estop_pressed" || r.Type == "safety.estop_reset" {
			kinds = append(kinds, r.Type+" by "+r.Actor)
		}
	}
	require.Equal(t, []string{"safety.estop_pressed by agent", "safety.estop_reset by operator"}, kinds)
}

func TestRestart_FaultStaysLatchedUntilAnOperatorClearsIt(t *testing.T) {
	dir := t.TempDir()
	// Given a robot whose recovery is not pre-authorized, so a failure
	// during motion latches a fault
	edit := func(c *hwconfig.Config) {
		c.SafePose.Preauthorized = false
		c.Safety.StateTimeout = hwconfig.Duration(300 * time.Millisecond)
	}
	h1, stop1 := bootAt(t, dir, edit, nil)
	env := h1.call("move_base_to", args(map[string]any{"x": 2.0, "y": 0}))
	id := taskID(t, env)
	h1.approve(id)
	waitStatus(t, h1, id, "executing")
	// When the robot link drops mid-motion
	code, body := h1.do("POST", "/v1/sim/faults", h1.operator, map[string]any{"kind": "link_down", "duration": "800ms"})
	require.Equal(t, http.StatusCreated, code, "%v", body)
	done := h1.waitTask(id, 20*time.Second)
	require.Equal(t, "fault", taskData(done)["status"], "%v", done)
	fault := safetyStatus(h1)["fault"].(map[string]any)
	require.Equal(t, true, fault["latched"])
	reason := fault["reason"]
	stop1()

	// And the bridge restarts
	h2, stop2 := bootAt(t, dir, edit, nil)
	// Then the fault is still latched with its cause and nothing moves
	fault = safetyStatus(h2)["fault"].(map[string]any)
	require.Equal(t, true, fault["latched"])
	require.Equal(t, reason, fault["reason"])
	requireError(t, h2.call("move_base_to", args(map[string]any{"x": 0.5, "y": 0})), "SAFETY_VIOLATION", false)
	// And the task from before the restart still answers, as it ended
	got := h2.call("get_task", args(map[string]any{"task_id": id}))
	require.Equal(t, true, got["ok"], "%v", got)
	require.Equal(t, "fault", taskData(got)["status"])
	// When an operator clears it, it stays cleared across a restart
	code, body = h2.do("POST", "/v1/faults/clear", h2.operator, nil)
	require.Equal(t, http.StatusOK, code, "%v", body)
	stop2()
	h3, _ := bootAt(t, dir, edit, nil)
	require.Equal(t, false, safetyStatus(h3)["fault"].(map[string]any)["latched"])
}

func waitStatus(t *testing.T, h *harness, id, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		env := h.call("get_task", args(map[string]any{"task_id": id}))
		if taskData(env)["status"] == want {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("task %s never became %s", id, want)
}

func TestRestart_TasksAndIdempotencyKeysOutliveTheProcess(t *testing.T) {
	dir := t.TempDir()
	// Given a keyed move that was approved and finished, and a second one
	// left waiting for an operator when the bridge shut down
	h1, stop1 := bootAt(t, dir, nil, nil)
	done := args(map[string]any{"x": 0.4, "y": 0}, "idempotency_key", "k-done")
	id1 := taskID(t, h1.call("move_base_to", done))
	h1.approve(id1)
	require.Equal(t, "succeeded", taskData(h1.waitTask(id1, 20*time.Second))["status"])
	waiting := args(map[string]any{"x": 0.8, "y": 0}, "idempotency_key", "k-wait")
	id2 := taskID(t, h1.call("move_base_to", waiting))
	apr := h1.pendingApproval(id2)
	stop1()

	// When the bridge starts again
	h2, _ := bootAt(t, dir, nil, nil)
	before := motionCommands(h2.sim)
	// Then both tasks still answer get_task, as they ended
	require.Equal(t, "succeeded", taskData(h2.call("get_task", args(map[string]any{"task_id": id1})))["status"])
	require.Equal(t, "cancelled", taskData(h2.call("get_task", args(map[string]any{"task_id": id2, "wait_ms": 2000})))["status"])
	code, body := h2.do("GET", "/v1/tasks/"+id1, h2.agent, nil)
	require.Equal(t, http.StatusOK, code, "%v", body)
	// And the same keys return the same tasks, never a second motion
	require.Equal(t, id1, taskID(t, h2.call("move_base_to", done)))
	again := h2.call("move_base_to", waiting)
	require.Equal(t, id2, taskID(t, again), "%v", again)
	require.Equal(t, before, motionCommands(h2.sim))
	code, body = h2.do("GET", "/v1/approvals?status=pending", h2.operator, nil)
	require.Equal(t, http.StatusOK, code)
	require.Empty(t, body["approvals"], "no new approval request was filed")
	// And the audit trail kept the approval decision of the first run
	recs := auditRecords(t, h2, "type=approval")
	var who []string
	for _, r := range recs {
		who = append(who, r.Type+" "+r.Subject+" by "+r.Actor)
	}
	require.Contains(t, who, "approval.cancelled "+apr+" by system")
	require.Contains(t, strings.Join(who, "\n"), "approval.approved")
	// And a task nobody ever made is still NOT_FOUND
	requireError(t, h2.call("get_task", args(map[string]any{"task_id": "task-nope"})), "NOT_FOUND", false)
}

func TestRestart_AuditRecordsStartsStopsAndRestarts(t *testing.T) {
	dir := t.TempDir()
	_, stop1 := bootAt(t, dir, nil, nil)
	stop1()
	h2, _ := bootAt(t, dir, nil, nil)
	recs := auditRecords(t, h2, "type=bridge")
	require.Len(t, recs, 3)
	require.Equal(t, []string{"bridge.start", "bridge.stop", "bridge.restart"}, []string{recs[0].Type, recs[1].Type, recs[2].Type})
	require.Contains(t, recs[2].Summary, "clean shutdown")
	require.True(t, h2.b.Recovery().CleanShutdown)
	// And the audit API pages with an opaque cursor and refuses bad queries
	code, body := h2.do("GET", "/v1/audit?limit=1&type=bridge", h2.operator, nil)
	require.Equal(t, http.StatusOK, code)
	next, _ := body["next_cursor"].(string)
	require.NotEmpty(t, next)
	code, body = h2.do("GET", "/v1/audit?limit=5&type=bridge&cursor="+next, h2.operator, nil)
	require.Equal(t, http.StatusOK, code)
	require.Len(t, body["records"], 2)
	code, body = h2.do("GET", "/v1/audit?since=yesterday", h2.operator, nil)
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, fmt.Sprint(body["error"]), "since")
	code, _ = h2.do("GET", "/v1/audit", h2.agent, nil)
	require.Equal(t, http.StatusForbidden, code, "the agent may not read the audit trail")
	// And the console can read the same trail, newest first
	entries, err := h2.b.ConsoleAudit(context.Background(), 2)
	require.NoError(t, err)
	require.Len(t, entries, 2)
	require.Greater(t, entries[0].Seq, entries[1].Seq)
}

func TestRestart_RefusesACorruptOrMissingStore(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   error
	}{
		{"database deleted", func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, store.DefaultFile)))
		}, store.ErrMissing},
		{"database overwritten", func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, store.DefaultFile), []byte("garbage, not a database"), 0o600))
		}, store.ErrCorrupt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given a data dir whose store holds a latched e-stop
			dir := t.TempDir()
			h, stop := bootAt(t, dir, nil, nil)
			code, _ := h.do("POST", "/v1/estop", h.operator, map[string]any{"reason": "test"})
			require.Equal(t, http.StatusOK, code)
			stop()
			// When the store is damaged and the bridge is built again
			tc.damage(t, dir)
			_, err := New(Conf{Config: testConfig(t, nil), Listen: "127.0.0.1:0", DataDir: dir, Env: testEnv})
			// Then it refuses with an error that says what and what to do,
			// rather than start empty and forget the e-stop
			require.ErrorIs(t, err, tc.want)
			require.Contains(t, err.Error(), filepath.Join(dir, store.DefaultFile))
			require.Regexp(t, "restore|backup", err.Error())
		})
	}
}

func TestRestart_SecondBridgeOnTheSameDataDirIsRefused(t *testing.T) {
	// Given a running bridge
	dir := t.TempDir()
	bootAt(t, dir, nil, nil)
	// When a second one is built on its data dir
	_, err := New(Conf{Config: testConfig(t, nil), Listen: "127.0.0.1:0", DataDir: dir, Env: testEnv})
	// Then it is refused: two bridges would interleave one store
	require.ErrorIs(t, err, store.ErrLocked)
}

// auditRecords reads the whole audit trail (matching query) through the
// export endpoint.
func auditRecords(t *testing.T, h *harness, query string) []store.AuditRecord {
	t.Helper()
	req, err := http.NewRequest("GET", h.base+"/v1/audit/export?"+query, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+h.operator)
	resp, err := h.client.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out []store.AuditRecord
	for line := range strings.SplitSeq(strings.TrimSpace(string(raw)), "\n") {
		if line == "" {
			continue
		}
		var r store.AuditRecord
		require.NoError(t, json.Unmarshal([]byte(line), &r), line)
		out = append(out, r)
	}
	return out
}
