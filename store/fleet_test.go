package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/approval"
	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/safety"
)

// latchesOf reads one robot's latches or fails the test.
func latchesOf(t *testing.T, s *Store, robot string) RobotLatches {
	t.Helper()
	es, f, err := s.Latches(context.Background(), robot)
	require.NoError(t, err)
	return RobotLatches{EStop: es, Fault: f}
}

// legacyRows counts the latch rows without a robot.
func legacyRows(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	require.NoError(t, s.r.QueryRow(`SELECT COUNT(*) FROM latches WHERE robot_id = ''`).Scan(&n))
	return n
}

func TestLatches_AreKeptPerRobot(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		dir := t.TempDir()
		s, _ := e.open(t, dir)
		ctx := context.Background()
		// Given an e-stop pressed on robot a and a fault latched on robot b
		s.SafetyEvent(safety.Event{Kind: safety.EventEStopPressed, At: t0, RobotID: "a", By: "alice", Reason: "person near a"})
		s.SafetyEvent(safety.Event{Kind: safety.EventFaultLatched, At: t0, RobotID: "b", TaskID: "t-b", By: "supervisor", Reason: "b stuck"})
		require.NoError(t, s.SyncLatches(ctx))
		// Then each robot has only its own latch, and a third robot none
		a, b := latchesOf(t, s, "a"), latchesOf(t, s, "b")
		require.True(t, a.EStop.Active)
		require.Equal(t, "person near a", a.EStop.Reason)
		require.False(t, a.Fault.Latched)
		require.False(t, b.EStop.Active)
		require.True(t, b.Fault.Latched)
		require.Equal(t, "t-b", b.Fault.TaskID)
		require.Equal(t, RobotLatches{}, latchesOf(t, s, "c"))
		require.Equal(t, RobotLatches{}, latchesOf(t, s, ""), "no legacy latch was written")

		// When robot b's e-stop is pressed too and then robot a's is reset
		s.SafetyEvent(safety.Event{Kind: safety.EventEStopPressed, At: t0.Add(time.Second), RobotID: "b", By: "bob", Reason: "fleet stop"})
		s.SafetyEvent(safety.Event{Kind: safety.EventEStopReset, At: t0.Add(time.Minute), RobotID: "a", By: "alice"})
		require.NoError(t, s.SyncLatches(ctx))
		// Then a is released and b keeps both, also after a crash
		crash(s)
		s2, _ := e.open(t, dir)
		require.Equal(t, RobotLatches{}, latchesOf(t, s2, "a"))
		b = latchesOf(t, s2, "b")
		require.True(t, b.EStop.Active)
		require.Equal(t, "fleet stop", b.EStop.Reason)
		require.True(t, b.Fault.Latched)
		// And the safety audit records name their robot
		recs := auditAll(t, s2, AuditQuery{Type: "safety"})
		robots := make([]string, len(recs))
		for i, r := range recs {
			robots[i] = r.RobotID
		}
		require.Equal(t, []string{"a", "b", "b", "a"}, robots)
	})
}

func TestRecover_HandsLegacyLatchesToEveryRobot(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		dir := t.TempDir()
		s, clk := e.open(t, dir)
		ctx := context.Background()
		// Given a single-robot run that left an e-stop and a fault latched
		// without naming its robot, and robot b's own fault (a fleet run
		// in between that never recovered)
		s.SafetyEvent(safety.Event{Kind: safety.EventEStopPressed, At: t0, By: "alice", Reason: "legacy e-stop"})
		s.SafetyEvent(safety.Event{Kind: safety.EventFaultLatched, At: t0, TaskID: "t-1", By: "supervisor", Reason: "legacy fault"})
		s.SafetyEvent(safety.Event{Kind: safety.EventFaultLatched, At: t0.Add(time.Second), RobotID: "b", By: "supervisor", Reason: "b's own fault"})
		require.NoError(t, s.SyncLatches(ctx))
		require.NoError(t, s.Close())

		// When a fleet bridge of robots a and b opens the store
		clk.Advance(time.Minute)
		s2, _ := e.open(t, dir, func(c *Conf) { c.Clock = clk })
		// Then before recovery every robot already reads the legacy latches
		for _, r := range []string{"a", "b", "z"} {
			l := latchesOf(t, s2, r)
			require.True(t, l.EStop.Active, r)
			require.Equal(t, "legacy e-stop", l.EStop.Reason, r)
			require.True(t, l.Fault.Latched, r)
		}
		require.Equal(t, "b's own fault", latchesOf(t, s2, "b").Fault.Reason, "a robot's own latch comes first")

		// When it recovers
		rep, err := s2.Recover(ctx, RecoverInput{StopSent: true, Robots: []string{"a", "b"}})
		require.NoError(t, err)
		// Then both robots hold the legacy latches as their own; b keeps its
		// own first cause
		require.Equal(t, []string{"estop", "fault"}, rep.LegacyLatches)
		require.Len(t, rep.Robots, 2)
		require.True(t, rep.Robots["a"].EStop.Active)
		require.Equal(t, "legacy fault", rep.Robots["a"].Fault.Reason)
		require.Equal(t, "t-1", rep.Robots["a"].Fault.TaskID)
		require.True(t, rep.Robots["b"].EStop.Active)
		require.Equal(t, "b's own fault", rep.Robots["b"].Fault.Reason)
		// And the report's first latches are robot a's, the first robot
		require.Equal(t, rep.Robots["a"].EStop, rep.EStop)
		require.Equal(t, rep.Robots["a"].Fault, rep.Fault)
		// And the legacy rows are gone: the latches are the robots' own now
		require.Zero(t, legacyRows(t, s2))
		require.Equal(t, RobotLatches{}, latchesOf(t, s2, "z"), "a robot the bridge does not have inherits nothing any more")
		for _, r := range []string{"a", "b"} {
			require.Equal(t, rep.Robots[r], latchesOf(t, s2, r), r)
		}
		// And the restart's record says which robots hold what
		recs := auditAll(t, s2, AuditQuery{Type: AuditBridgeRestart})
		last := recs[len(recs)-1]
		require.Contains(t, last.Summary, "e-stop latch restored (a, b)")
		require.Contains(t, last.Summary, "fault latch restored (a, b)")
		var details struct {
			Report RecoveryReport `json:"report"`
		}
		require.NoError(t, json.Unmarshal(last.Details, &details))
		require.Equal(t, []string{"estop", "fault"}, details.Report.LegacyLatches)
		require.Len(t, details.Report.Robots, 2)

		// When an operator resets robot a's e-stop and clears its fault
		s2.SafetyEvent(safety.Event{Kind: safety.EventEStopReset, At: t0.Add(2 * time.Minute), RobotID: "a", By: "alice"})
		s2.SafetyEvent(safety.Event{Kind: safety.EventFaultCleared, At: t0.Add(2 * time.Minute), RobotID: "a", By: "alice"})
		require.NoError(t, s2.SyncLatches(ctx))
		// Then only robot a is released, also after a restart and a second
		// recovery
		require.NoError(t, s2.Close())
		s3, _ := e.open(t, dir, func(c *Conf) { c.Clock = clk })
		rep, err = s3.Recover(ctx, RecoverInput{StopSent: true, Robots: []string{"a", "b"}})
		require.NoError(t, err)
		require.Empty(t, rep.LegacyLatches)
		require.Equal(t, RobotLatches{}, rep.Robots["a"])
		require.Equal(t, RobotLatches{}, latchesOf(t, s3, "a"))
		b := latchesOf(t, s3, "b")
		require.True(t, b.EStop.Active)
		require.True(t, b.Fault.Latched)
		require.Equal(t, b.EStop, rep.EStop, "the first latched e-stop across the robots is b's")
	})
}

func TestRecover_ALegacyLatchOverridesARobotsOwnReleasedOne(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		dir := t.TempDir()
		s, _ := e.open(t, dir)
		ctx := context.Background()
		// Given robot a's e-stop reset and a legacy e-stop active
		s.SafetyEvent(safety.Event{Kind: safety.EventEStopPressed, At: t0, RobotID: "a", By: "alice", Reason: "a's own"})
		s.SafetyEvent(safety.Event{Kind: safety.EventEStopReset, At: t0.Add(time.Second), RobotID: "a", By: "alice"})
		s.SafetyEvent(safety.Event{Kind: safety.EventEStopPressed, At: t0.Add(2 * time.Second), By: "bob", Reason: "legacy"})
		require.NoError(t, s.SyncLatches(ctx))
		// Then robot a reads the legacy e-stop, which holds for every robot
		require.Equal(t, "legacy", latchesOf(t, s, "a").EStop.Reason)
		// When the bridge recovers, the latch a read stays a's: the store
		// and the supervisor agree, and the e-stop does not vanish
		rep, err := s.Recover(ctx, RecoverInput{Robots: []string{"a"}})
		require.NoError(t, err)
		require.Equal(t, "legacy", rep.Robots["a"].EStop.Reason)
		require.Equal(t, "legacy", latchesOf(t, s, "a").EStop.Reason)
		require.Zero(t, legacyRows(t, s))
		// And a summary of one robot reads as before
		start := auditAll(t, s, AuditQuery{Type: "bridge"})
		require.Len(t, start, 1)
		last := start[0]
		require.Contains(t, last.Summary, "; e-stop latch restored")
		require.NotContains(t, last.Summary, "restored (")
	})
}

func TestRecover_LatchesTheCrashFaultForEveryRobot(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		dir := t.TempDir()
		s, clk := e.open(t, dir)
		ctx := context.Background()
		// Given a fleet run with an e-stop on b and a fault on c that crashed
		s.SafetyEvent(safety.Event{Kind: safety.EventEStopPressed, At: t0, RobotID: "b", By: "alice", Reason: "b e-stop"})
		s.SafetyEvent(safety.Event{Kind: safety.EventFaultLatched, At: t0, RobotID: "c", By: "supervisor", Reason: "c stuck"})
		require.NoError(t, s.SyncLatches(ctx))
		crash(s)
		// When the next run recovers with the crash fault
		clk.Advance(time.Minute)
		s2, _ := e.open(t, dir, func(c *Conf) { c.Clock = clk })
		f := safety.FaultStatus{Latched: true, Reason: "the bridge restarted after an unclean shutdown", Since: clk.Now()}
		robots := []string{"a", "b", "c"}
		rep, err := s2.Recover(ctx, RecoverInput{StopSent: true, CrashFault: &f, Robots: robots})
		require.NoError(t, err)
		// Then every robot has a fault; c keeps its first cause
		require.True(t, rep.CrashFault)
		for _, r := range robots {
			require.True(t, rep.Robots[r].Fault.Latched, r)
			require.Equal(t, rep.Robots[r], latchesOf(t, s2, r), r)
		}
		require.Equal(t, f.Reason, rep.Robots["a"].Fault.Reason)
		require.Equal(t, f.Reason, rep.Robots["b"].Fault.Reason)
		require.Equal(t, "c stuck", rep.Robots["c"].Fault.Reason)
		require.True(t, rep.Robots["b"].EStop.Active)
		// And the report's first latched fault is c's (the only one found
		// before the crash fault), its e-stop b's
		require.Equal(t, "c stuck", rep.Fault.Reason)
		require.Equal(t, "b e-stop", rep.EStop.Reason)
		// And each robot's fault is audited with its robot, right before the
		// restart
		recs := auditAll(t, s2, AuditQuery{})
		faults := recs[len(recs)-4 : len(recs)-1]
		for i, r := range robots {
			require.Equal(t, "safety.fault_latched", faults[i].Type)
			require.Equal(t, r, faults[i].RobotID)
			require.Equal(t, "bridge", faults[i].Actor)
		}
		last := recs[len(recs)-1]
		require.Equal(t, AuditBridgeRestart, last.Type)
		require.Empty(t, last.RobotID, "the restart is the bridge's, not one robot's")
		require.Contains(t, last.Summary, "e-stop latch restored (b)")
		require.Contains(t, last.Summary, "fault latch restored (c)")
		// And clearing robot a's fault leaves b's and c's
		s2.SafetyEvent(safety.Event{Kind: safety.EventFaultCleared, At: clk.Now(), RobotID: "a", By: "alice"})
		require.NoError(t, s2.SyncLatches(ctx))
		require.False(t, latchesOf(t, s2, "a").Fault.Latched)
		require.True(t, latchesOf(t, s2, "b").Fault.Latched)
		require.True(t, latchesOf(t, s2, "c").Fault.Latched)
	})
}

func TestRecover_RefusesBadRobotListsAndChangesNothing(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		dir := t.TempDir()
		s, _ := e.open(t, dir)
		ctx := context.Background()
		s.SafetyEvent(safety.Event{Kind: safety.EventEStopPressed, At: t0, By: "alice", Reason: "legacy"})
		create(t, s, "t-1", "move_base_to", nil, "agent", t0)
		require.NoError(t, s.SyncLatches(ctx))
		before := auditAll(t, s, AuditQuery{})
		tests := []struct {
			name   string
			robots []string
			want   string
		}{
			{"an empty id", []string{"a", ""}, "Robots[1] is empty"},
			{"a repeated id", []string{"a", "b", "a"}, `robot "a" twice`},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				_, err := s.Recover(ctx, RecoverInput{Robots: tc.robots})
				require.ErrorContains(t, err, tc.want)
				require.Equal(t, before, auditAll(t, s, AuditQuery{}))
				require.Equal(t, 1, legacyRows(t, s))
				v, err := s.Task(ctx, "t-1")
				require.NoError(t, err)
				require.Equal(t, fsm.Requested, v.Status)
			})
		}
	})
}

func TestRobotID_RoundTripsOnTasksTransitionsAndSafetyEvents(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		dir := t.TempDir()
		s, clk := e.open(t, dir)
		ctx := context.Background()
		// Given a task of robot r7 recorded by the runner, a view of a task
		// whose transitions were never recorded, an approval and a grant
		// for r7, and a monitor trip on r7
		require.NoError(t, s.RecordTransition(ctx, actions.TransitionRecord{
			TaskID: "t-7", RobotID: "r7", Tool: "move_base_to", Arguments: map[string]any{"x": 1.0}, To: fsm.Requested, At: t0, By: "agent",
		}))
		require.NoError(t, s.RecordTransition(ctx, actions.TransitionRecord{
			TaskID: "t-7", RobotID: "r7", Tool: "move_base_to", From: fsm.Requested, To: fsm.Approved, Event: fsm.EvPreauthorized, At: t0, By: "config",
		}))
		s.TaskChanged(actions.TaskView{
			ID: "t-v", RobotID: "r8", Tool: "grasp", Status: fsm.Executing, Text: "grasping", CreatedAt: t0, UpdatedAt: t0,
		})
		a := testApproval("apr_7", "t-7", approval.StatusPending)
		a.RobotID = "r7"
		require.NoError(t, s.SaveApproval(ctx, a))
		require.NoError(t, s.SaveGrant(ctx, approval.Grant{
			ID: "grt_7", Kind: approval.GrantScoped, Tool: "move_base_to", RobotID: "r7", Status: approval.GrantActive,
			CreatedBy: "alice", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour),
		}))
		s.SafetyEvent(safety.Event{Kind: safety.EventMonitorTripped, At: t0, RobotID: "r7", TaskID: "t-7", Monitor: "stall", Reason: "no progress"})
		flush(t, s)

		// Then each carries its robot back
		v, err := s.Task(ctx, "t-7")
		require.NoError(t, err)
		require.Equal(t, "r7", v.RobotID)
		v, err = s.Task(ctx, "t-v")
		require.NoError(t, err)
		require.Equal(t, "r8", v.RobotID)
		trs, err := s.Transitions(ctx, "t-7")
		require.NoError(t, err)
		require.Len(t, trs, 2)
		for _, tr := range trs {
			require.Equal(t, "r7", tr.RobotID)
		}
		var robot string
		require.NoError(t, s.r.QueryRow(`SELECT robot_id FROM safety_events WHERE kind = 'monitor_tripped'`).Scan(&robot))
		require.Equal(t, "r7", robot)
		for _, r := range auditAll(t, s, AuditQuery{}) {
			require.Equal(t, "r7", r.RobotID, "%s", r.Type)
		}
		// And a later view without a robot does not erase it
		s.TaskChanged(actions.TaskView{ID: "t-7", Tool: "move_base_to", Status: fsm.Approved, Text: "moving", UpdatedAt: t0.Add(time.Second)})
		flush(t, s)
		v, err = s.Task(ctx, "t-7")
		require.NoError(t, err)
		require.Equal(t, "r7", v.RobotID)
		require.Equal(t, "moving", v.Text)

		// When the bridge crashes and recovers
		crash(s)
		clk.Advance(time.Minute)
		s2, _ := e.open(t, dir, func(c *Conf) { c.Clock = clk })
		rep, err := s2.Recover(ctx, RecoverInput{Robots: []string{"r7", "r8"}})
		require.NoError(t, err)
		// Then the interrupted tasks name their robots, and so do their
		// interruptions
		require.ElementsMatch(t, []InterruptedTask{
			{ID: "t-7", Tool: "move_base_to", From: fsm.Approved, RobotID: "r7"},
			{ID: "t-v", Tool: "grasp", From: fsm.Executing, RobotID: "r8"},
		}, rep.Interrupted)
		trs, err = s2.Transitions(ctx, "t-v")
		require.NoError(t, err)
		require.Equal(t, "r8", trs[len(trs)-1].RobotID)
		recs := auditAll(t, s2, AuditQuery{TaskID: "t-v"})
		require.Equal(t, "task.interrupted", recs[len(recs)-1].Type)
		require.Equal(t, "r8", recs[len(recs)-1].RobotID)
	})
}

func TestAudit_FiltersByRobot(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		s, _ := e.open(t, t.TempDir())
		ctx := context.Background()
		// Given records of robots a and b and of the bridge itself
		for i, r := range []string{"a", "b", "a", "b", "a"} {
			id := fmt.Sprintf("t-%d", i)
			require.NoError(t, s.RecordTransition(ctx, actions.TransitionRecord{
				TaskID: id, RobotID: r, Tool: "move_base_to", To: fsm.Requested, At: t0.Add(time.Duration(i) * time.Second), By: "agent",
			}))
		}
		s.SafetyEvent(safety.Event{Kind: safety.EventEStopPressed, At: t0.Add(time.Minute), RobotID: "b", By: "alice"})
		require.NoError(t, s.SyncLatches(ctx))
		_, err := s.AppendAudit(ctx, AuditRecord{Type: AuditBridgeStop, Actor: "bridge", Summary: "bridge shut down cleanly"}, nil)
		require.NoError(t, err)
		seqA, err := s.AppendAudit(ctx, AuditRecord{Type: "bridge.note", Actor: "bridge", RobotID: "a", Summary: "a note on a"}, nil)
		require.NoError(t, err)

		// Then a robot filter keeps that robot's records, in order, paged
		recsA := auditAll(t, s, AuditQuery{Robot: "a"})
		require.Len(t, recsA, 4)
		for _, r := range recsA {
			require.Equal(t, "a", r.RobotID)
		}
		require.Equal(t, seqA, recsA[3].Seq)
		page, next, err := s.Audit(ctx, AuditQuery{Robot: "a", Limit: 3})
		require.NoError(t, err)
		require.Equal(t, recsA[:3], page)
		page, next, err = s.Audit(ctx, AuditQuery{Robot: "a", Limit: 3, Cursor: next})
		require.NoError(t, err)
		require.Equal(t, recsA[3:], page)
		require.Empty(t, next)
		// And it combines with the other filters
		recsB := auditAll(t, s, AuditQuery{Robot: "b", Type: "safety"})
		require.Equal(t, []string{"safety.estop_pressed"}, types(recsB))
		require.Empty(t, auditAll(t, s, AuditQuery{Robot: "b", TaskID: "t-0"}))
		// And without it every record comes, the bridge's too
		require.Len(t, auditAll(t, s, AuditQuery{}), 8)
		require.Empty(t, auditAll(t, s, AuditQuery{Robot: "zz"}))
		// And a malformed robot is refused naming the parameter
		_, _, err = s.Audit(ctx, AuditQuery{Robot: "Robot A"})
		var qe *QueryError
		require.ErrorAs(t, err, &qe)
		require.Equal(t, "robot", qe.Param)
		require.ErrorIs(t, s.ExportAudit(ctx, AuditQuery{Robot: "a'--"}, func(AuditRecord) error { return nil }), ErrInvalidQuery)

		// And the HTTP handler takes ?robot=
		srv := httptest.NewServer(NewAuditHandler(s, AuditHandlerConf{Logger: quietLogger()}))
		defer srv.Close()
		get := func(path string) (int, []byte) {
			resp, err := http.Get(srv.URL + path)
			require.NoError(t, err)
			defer func() { _ = resp.Body.Close() }()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			return resp.StatusCode, body
		}
		code, body := get("/v1/audit?robot=b")
		require.Equal(t, http.StatusOK, code)
		var got struct {
			Records []AuditRecord `json:"records"`
		}
		require.NoError(t, json.Unmarshal(body, &got))
		require.Len(t, got.Records, 3)
		for _, r := range got.Records {
			require.Equal(t, "b", r.RobotID)
		}
		require.Contains(t, string(body), `"robot_id":"b"`)
		code, body = get("/v1/audit/export?robot=a")
		require.Equal(t, http.StatusOK, code)
		require.Len(t, strings.Split(strings.TrimSpace(string(body)), "\n"), 4)
		for _, bad := range []string{"Robot_A", "-a", "a%20b", strings.Repeat("a", 64)} {
			code, body = get("/v1/audit?robot=" + bad)
			require.Equal(t, http.StatusBadRequest, code, bad)
			var e struct {
				Error struct {
					Type    string         `json:"type"`
					Message string         `json:"message"`
					Details map[string]any `json:"details"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(body, &e))
			require.Equal(t, "INVALID_PARAMS", e.Error.Type)
			require.Equal(t, "robot", e.Error.Details["field"])
			require.Contains(t, e.Error.Message, "a robot id")
		}
		code, _ = get("/v1/audit/export?robot=a&robot=b")
		require.Equal(t, http.StatusBadRequest, code)
	})
}

// v3Database is a database at schema version 3 (the last before robots)
// with a single-robot run's data: a task executing with its transitions
// and audit, a latched e-stop, a released fault and a safety event.
func v3Database(t *testing.T, e *testEngine, dir string) {
	t.Helper()
	db := e.rawDB(t, dir)
	applied, v, err := migrateTo(context.Background(), e.dialect(), db, t0, 3)
	require.NoError(t, err)
	require.Equal(t, []int{1, 2, 3}, applied)
	require.Equal(t, 3, v)
	d := e.dialect()
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO meta(key, value) VALUES('store_id', 'v3store'), ('running', '0')`, nil},
		{`INSERT INTO tasks(id, tool, arguments, status, text, created_at, updated_at) VALUES('task-old', 'move_base_to', '{"x":1}', 'executing', 'moving', ?, ?)`, []any{ns(t0), ns(t0)}},
		{`INSERT INTO transitions(task_id, tool, from_state, to_state, event, at, by) VALUES('task-old', 'move_base_to', '', 'requested', 'create', ?, 'agent')`, []any{ns(t0)}},
		{`INSERT INTO transitions(task_id, tool, from_state, to_state, event, at, by) VALUES('task-old', 'move_base_to', 'requested', 'executing', 'preauthorized', ?, 'config')`, []any{ns(t0)}},
		{`INSERT INTO audit(at, type, actor, task_id, summary) VALUES(?, 'task.executing', 'config', 'task-old', 'task-old started')`, []any{ns(t0)}},
		{`INSERT INTO safety_events(kind, at, by, reason) VALUES('estop_pressed', ?, 'alice', 'old e-stop')`, []any{ns(t0)}},
		{`INSERT INTO latches(name, active, by, reason, since, updated_at) VALUES('estop', 1, 'alice', 'old e-stop', ?, ?)`, []any{ns(t0), ns(t0)}},
		{`INSERT INTO latches(name, active, by, reason, since, updated_at) VALUES('fault', 0, 'bob', 'cleared', 0, ?)`, []any{ns(t0)}},
	} {
		_, err := db.Exec(d.bind(q.sql), q.args...)
		require.NoError(t, err, q.sql)
	}
	require.NoError(t, db.Close())
}

func TestMigrate_V3DatabaseWithDataMigratesToRobots(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		// Given a version 3 database with a single robot's data
		dir := t.TempDir()
		v3Database(t, e, dir)
		ctx := context.Background()
		// When this build opens it
		s, _ := e.open(t, dir)
		// Then migrations 4 and 5 ran and every row is still there, without a robot
		require.Equal(t, []int{4, 5}, s.Info().Migrated)
		require.Equal(t, 5, s.Info().SchemaVersion)
		require.Equal(t, "v3store", s.Info().StoreID)
		v, err := s.Task(ctx, "task-old")
		require.NoError(t, err)
		require.Equal(t, fsm.Executing, v.Status)
		require.Equal(t, "moving", v.Text)
		require.Equal(t, map[string]any{"x": 1.0}, v.Arguments)
		require.Empty(t, v.RobotID)
		trs, err := s.Transitions(ctx, "task-old")
		require.NoError(t, err)
		require.Len(t, trs, 2)
		recs := auditAll(t, s, AuditQuery{})
		require.Len(t, recs, 1)
		require.Empty(t, recs[0].RobotID)
		var n int
		require.NoError(t, s.r.QueryRow(`SELECT COUNT(*) FROM safety_events WHERE robot_id = ''`).Scan(&n))
		require.Equal(t, 1, n)
		// And the latches are legacy rows: the single-robot store reads them
		// as before, and every robot of a fleet sees the e-stop
		require.Equal(t, 2, legacyRows(t, s))
		for _, r := range []string{"", "a", "b"} {
			l := latchesOf(t, s, r)
			require.True(t, l.EStop.Active, r)
			require.Equal(t, "old e-stop", l.EStop.Reason, r)
			require.Equal(t, t0, l.EStop.Since, r)
			require.False(t, l.Fault.Latched, r)
		}
		// And the new key holds: one latch of a name per robot
		_, err = s.w.Exec(s.d.bind(`INSERT INTO latches(robot_id, name, active, updated_at) VALUES('', 'estop', 0, 1)`))
		require.Error(t, err, "a second legacy e-stop row")
		_, err = s.w.Exec(s.d.bind(`INSERT INTO latches(robot_id, name, active, updated_at) VALUES('other', 'no-such', 0, 1)`))
		require.Error(t, err, "the name's check survived the migration")

		// When a fleet of a and b recovers, then resets a
		rep, err := s.Recover(ctx, RecoverInput{Robots: []string{"a", "b"}})
		require.NoError(t, err)
		require.Equal(t, []string{"estop"}, rep.LegacyLatches)
		require.Equal(t, []InterruptedTask{{ID: "task-old", Tool: "move_base_to", From: fsm.Executing}}, rep.Interrupted)
		s.SafetyEvent(safety.Event{Kind: safety.EventEStopReset, At: t0.Add(time.Hour), RobotID: "a", By: "alice"})
		require.NoError(t, s.SyncLatches(ctx))
		// Then b is still e-stopped and a is not
		require.False(t, latchesOf(t, s, "a").EStop.Active)
		require.True(t, latchesOf(t, s, "b").EStop.Active)
		require.Zero(t, legacyRows(t, s))
	})
}

func TestMigrate_AFailedMigration4LeavesVersion3AsItWas(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		// Given a version 3 database with data, whose recording of version 4
		// fails after the migration's statements ran (the latches already
		// moved to their new table)
		dir := t.TempDir()
		v3Database(t, e, dir)
		db := e.rawDB(t, dir)
		if e.driver == DriverPostgres {
			_, err := db.Exec(`CREATE FUNCTION refuse_v4() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN IF NEW.version = 4 THEN RAISE EXCEPTION 'disk full'; END IF; RETURN NEW; END $$;
				CREATE TRIGGER refuse_v4 BEFORE INSERT ON schema_migrations FOR EACH ROW EXECUTE FUNCTION refuse_v4()`)
			require.NoError(t, err)
		} else {
			_, err := db.Exec(`CREATE TRIGGER refuse_v4 BEFORE INSERT ON schema_migrations WHEN NEW.version = 4
				BEGIN SELECT RAISE(ABORT, 'disk full'); END`)
			require.NoError(t, err)
		}
		// When the migration runs
		_, v, err := migrate(context.Background(), e.dialect(), db, t0)
		// Then it fails and the database is version 3 with its data, the
		// latches keyed by name as before
		require.ErrorContains(t, err, "disk full")
		require.Equal(t, 3, v)
		cols := func(table string) []string {
			q := `SELECT name FROM pragma_table_info(?) ORDER BY name`
			if e.driver == DriverPostgres {
				q = `SELECT column_name FROM information_schema.columns WHERE table_schema=current_schema() AND table_name=$1 ORDER BY column_name`
			}
			rows, err := db.Query(q, table)
			require.NoError(t, err)
			defer closeRead(rows)
			var out []string
			for rows.Next() {
				var c string
				require.NoError(t, rows.Scan(&c))
				out = append(out, c)
			}
			require.NoError(t, rows.Err())
			return out
		}
		require.NotContains(t, cols("tasks"), "robot_id")
		require.NotContains(t, cols("latches"), "robot_id")
		require.False(t, e.tableExists(t, db, "latches_new"))
		var name, reason string
		require.NoError(t, db.QueryRow(`SELECT name, reason FROM latches WHERE active = 1`).Scan(&name, &reason))
		require.Equal(t, "estop", name)
		require.Equal(t, "old e-stop", reason)
		var max sql.NullInt64
		require.NoError(t, db.QueryRow(`SELECT MAX(version) FROM schema_migrations`).Scan(&max))
		require.Equal(t, int64(3), max.Int64)
	})
}
