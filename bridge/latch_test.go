package bridge

import (
	"database/sql"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/store"
)

// Latch tests (issue 11, item 7): an operator's e-stop, reset or clear is
// answered only once its record is on the disk, a latch the store cannot
// write is never answered "ok", and a bridge that was not shut down
// cleanly comes up with a latched fault only an operator clears. The kill
// -9 variant, with the real binary, is cmd/robot-bridge's crash test.

// openStoreDB opens the bridge's database behind its back, as another
// process would.
func openStoreDB(t *testing.T, dir string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(dir, store.DefaultFile)+"?_pragma=busy_timeout(10000)")
	require.NoError(t, err)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// refuseLatchWrites makes every write of the latches table fail, as a disk
// refusing the latch's page would, and returns the repair.
func refuseLatchWrites(t *testing.T, db *sql.DB) (repair func()) {
	t.Helper()
	for _, op := range []string{"insert", "update"} {
		_, err := db.Exec(`CREATE TRIGGER refuse_latch_` + op + ` BEFORE ` + strings.ToUpper(op) + ` ON latches
			BEGIN SELECT RAISE(ABORT, 'disk refuses the latch'); END`)
		require.NoError(t, err)
	}
	return func() {
		for _, op := range []string{"insert", "update"} {
			_, err := db.Exec(`DROP TRIGGER refuse_latch_` + op)
			require.NoError(t, err)
		}
	}
}

// latchOnDisk reads one latch as the database holds it.
func latchOnDisk(t *testing.T, db *sql.DB, name string) (active bool, reason string) {
	t.Helper()
	err := db.QueryRow(`SELECT active, reason FROM latches WHERE name=?`, name).Scan(&active, &reason)
	if err == sql.ErrNoRows {
		return false, ""
	}
	require.NoError(t, err)
	return active, reason
}

// markKilled leaves the store of a stopped bridge as a kill -9 leaves it:
// marked running, never closed.
func markKilled(t *testing.T, dir string) {
	t.Helper()
	db := openStoreDB(t, dir)
	res, err := db.Exec(`UPDATE meta SET value='1' WHERE key='running'`)
	require.NoError(t, err)
	n, err := res.RowsAffected()
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.NoError(t, db.Close())
}

func TestEStop_AnsweredOnlyOnceItsLatchIsOnTheDisk(t *testing.T) {
	tests := []struct {
		name  string
		token func(h *harness) string
	}{
		{"pressed by the agent", func(h *harness) string { return h.agent }},
		{"pressed by an operator", func(h *harness) string { return h.operator }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given a running bridge
			dir := t.TempDir()
			h, _ := bootAt(t, dir, nil, nil)
			db := openStoreDB(t, dir)
			// When the e-stop is pressed and answered
			code, body := h.do("POST", "/v1/estop", tc.token(h), map[string]any{"reason": "person in the aisle"})
			require.Equal(t, http.StatusOK, code, "%v", body)
			// Then the latch is already on the disk, with its reason
			active, reason := latchOnDisk(t, db, "estop")
			require.True(t, active, "the e-stop was answered before its latch was recorded")
			require.Equal(t, "person in the aisle", reason)
			// When an operator resets it and clears a fault, the same holds
			code, body = h.do("POST", "/v1/estop/reset", h.operator, nil)
			require.Equal(t, http.StatusOK, code, "%v", body)
			active, _ = latchOnDisk(t, db, "estop")
			require.False(t, active, "the reset was answered before it was recorded")
		})
	}
}

// Regression (found by the conformance suite): an e-stop's reason reached
// the console, the audit and /v1/safety with the caller's bidi override
// and control characters in it. It is pressed whatever the reason holds,
// and the operator reads the reason cleaned.
func TestEStop_AReasonWithBidiAndControlCharactersIsReadClean(t *testing.T) {
	h := startHarness(t, nil)
	code, body := h.do("POST", "/v1/estop", h.agent, map[string]any{"reason": "smoke\u202e\u0007 in\n the\u200b aisle " + strings.Repeat("x", 300)})
	require.Equal(t, http.StatusOK, code, "%v", body)
	_, body = h.do("GET", "/v1/safety", h.operator, nil)
	reason := fmt.Sprint(body["status"].(map[string]any)["estop"].(map[string]any)["reason"])
	require.True(t, strings.HasPrefix(reason, "smoke in the aisle xxx"), "%q", reason)
	require.NotContains(t, reason, "\u202e")
	require.NotContains(t, reason, "\u0007")
	require.LessOrEqual(t, utf8.RuneCountInString(reason), maxReasonLen)
	require.True(t, strings.HasSuffix(reason, "…"))
}

func TestEStop_ALatchTheStoreCannotWriteIsNeverAnsweredOK(t *testing.T) {
	// Given a running bridge whose store can no longer write its latches
	dir := t.TempDir()
	h, stop := bootAt(t, dir, nil, nil)
	db := openStoreDB(t, dir)
	repair := refuseLatchWrites(t, db)
	stopsBefore := stopCommands(h)

	// When the agent presses the e-stop
	code, body := h.do("POST", "/v1/estop", h.agent, map[string]any{"reason": "smoke"})

	// Then the robot was stopped and the e-stop holds
	require.Greater(t, stopCommands(h), stopsBefore, "the stop went out although the disk failed")
	require.Equal(t, true, body["estop"].(map[string]any)["active"], "%v", body)
	requireError(t, h.call("move_base_to", args(map[string]any{"x": 0.5, "y": 0})), "ESTOP_ACTIVE", false)
	// But the answer is no "ok": it says the latch is in force and not recorded
	require.Equal(t, http.StatusServiceUnavailable, code, "%v", body)
	e := body["error"].(map[string]any)
	require.Contains(t, e["message"], "the e-stop is latched and in force, but it is not recorded")
	require.Contains(t, e["message"], "disk refuses the latch")
	require.NotEmpty(t, e["suggestion"])
	// And the bridge is not ready, saying why
	code, body = h.do("GET", "/readyz", "", nil)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body["reason"], "latch change is in force but not recorded")

	// When the disk takes writes again
	repair()

	// Then the store's own retry records the latch and the bridge is ready
	h.waitReady()
	active, reason := latchOnDisk(t, db, "estop")
	require.True(t, active)
	require.Equal(t, "smoke", reason)
	// And pressing again confirms it with an ordinary answer
	code, body = h.do("POST", "/v1/estop", h.agent, map[string]any{"reason": "again"})
	require.Equal(t, http.StatusOK, code, "%v", body)

	// And an operator's reset and clear are not answered "ok" either
	// while the store refuses them
	repair = refuseLatchWrites(t, db)
	code, body = h.do("POST", "/v1/estop/reset", h.operator, nil)
	require.Equal(t, http.StatusServiceUnavailable, code, "%v", body)
	require.Contains(t, body["error"].(map[string]any)["message"], "the e-stop is reset in the supervisor, but it is not recorded")
	repair()
	h.waitReady()
	// And after a restart the e-stop is released, as last recorded
	stop()
	h2, _ := bootAt(t, dir, nil, nil)
	require.Equal(t, false, safetyStatus(h2)["estop"].(map[string]any)["active"])
}

// stopCommands counts the stops the simulated robot received.
func stopCommands(h *harness) int {
	n := 0
	for _, e := range h.sim.CommandLog() {
		if e.Op == "stop" {
			n++
		}
	}
	return n
}

func TestRestart_AfterAnUncleanShutdownComesUpWithALatchedFault(t *testing.T) {
	tests := []struct {
		name      string
		policy    hwconfig.AfterCrash
		wantFault bool
	}{
		{name: "default policy", policy: "", wantFault: true},
		{name: "latch_fault", policy: hwconfig.AfterCrashLatchFault, wantFault: true},
		{name: "resume opts out", policy: hwconfig.AfterCrashResume, wantFault: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			edit := func(c *hwconfig.Config) { c.Safety.AfterCrash = tc.policy }
			// Given a bridge that was killed (its store left running)
			_, stop1 := bootAt(t, dir, edit, nil)
			stop1()
			markKilled(t, dir)

			// When it starts again
			h2, stop2 := bootAt(t, dir, edit, nil)

			// Then, unless the config opts out, a fault is latched with the
			// reason, and nothing moves until an operator clears it
			fault := safetyStatus(h2)["fault"].(map[string]any)
			require.False(t, h2.b.Recovery().CleanShutdown)
			if !tc.wantFault {
				require.Equal(t, false, fault["latched"], "%v", fault)
				require.Equal(t, "succeeded", taskData(h2.waitTask(taskID(t, approveMove(h2)), 20*time.Second))["status"])
				return
			}
			require.Equal(t, true, fault["latched"], "%v", fault)
			require.Equal(t, CrashFaultReason, fault["reason"])
			require.True(t, h2.b.Recovery().CrashFault)
			requireError(t, h2.call("move_base_to", args(map[string]any{"x": 0.5, "y": 0})), "SAFETY_VIOLATION", false)

			// When it is killed again before anyone clears the fault
			stop2()
			markKilled(t, dir)
			h3, stop3 := bootAt(t, dir, edit, nil)
			// Then it is still latched
			require.Equal(t, true, safetyStatus(h3)["fault"].(map[string]any)["latched"])
			// When an operator clears it
			code, body := h3.do("POST", "/v1/faults/clear", h3.operator, nil)
			require.Equal(t, http.StatusOK, code, "%v", body)
			// Then the robot moves again
			require.Equal(t, "succeeded", taskData(h3.waitTask(taskID(t, approveMove(h3)), 20*time.Second))["status"])
			// And a clean shutdown and start brings no new fault
			stop3()
			h4, _ := bootAt(t, dir, edit, nil)
			require.Equal(t, false, safetyStatus(h4)["fault"].(map[string]any)["latched"])
			require.True(t, h4.b.Recovery().CleanShutdown)
			// And the audit has both crash faults, by the bridge, and the
			// operator's clear
			var trail []string
			for _, r := range auditRecords(t, h4, "type=safety") {
				if strings.HasPrefix(r.Type, "safety.fault_") {
					trail = append(trail, r.Type+" by "+r.Actor+": "+r.Reason)
				}
			}
			require.Equal(t, []string{
				"safety.fault_latched by bridge: " + CrashFaultReason,
				"safety.fault_latched by bridge: " + CrashFaultReason,
				"safety.fault_cleared by operator: " + CrashFaultReason,
			}, trail)
		})
	}
}

// approveMove asks for a short drive and approves it; it returns the call's
// envelope.
func approveMove(h *harness) map[string]any {
	h.t.Helper()
	env := h.call("move_base_to", args(map[string]any{"x": 0.3, "y": 0}))
	h.approve(taskID(h.t, env))
	return env
}
