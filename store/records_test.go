package store

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/approval"
	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/toolapi"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

func TestRecordTransition_WritesTransitionTaskAndAudit(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		s, _ := e.open(t, t.TempDir(), func(c *Conf) {
			c.Redact = func(_ string, args map[string]any) map[string]any {
				out := map[string]any{}
				maps.Copy(out, args)
				out["secret"] = "[redacted]"
				return out
			}
		})
		ctx := context.Background()
		// Given a task created and carried to executing
		args := map[string]any{"x": 1.5, "y": 0.5, "secret": "s3cret"}
		create(t, s, "task-1", "move_base_to", args, "agent", t0)
		st := move(t, s, "task-1", "move_base_to", fsm.Requested, fsm.EvNeedApproval, t0.Add(time.Second), "agent")
		st = move(t, s, "task-1", "move_base_to", st, fsm.EvApprove, t0.Add(2*time.Second), "alice")
		st = move(t, s, "task-1", "move_base_to", st, fsm.EvStart, t0.Add(3*time.Second), "supervisor")

		// Then the task reads back with its status, arguments intact
		v, err := s.Task(ctx, "task-1")
		require.NoError(t, err)
		require.Equal(t, fsm.Executing, v.Status)
		require.Equal(t, st, v.Status)
		require.Equal(t, "s3cret", v.Arguments["secret"])
		require.Equal(t, t0, v.CreatedAt)
		// And every transition is there, in order
		trs, err := s.Transitions(ctx, "task-1")
		require.NoError(t, err)
		require.Len(t, trs, 4)
		require.Equal(t, []fsm.State{fsm.Requested, fsm.AwaitingApproval, fsm.Approved, fsm.Executing},
			[]fsm.State{trs[0].To, trs[1].To, trs[2].To, trs[3].To})
		require.Equal(t, "alice", trs[2].By)
		// And the audit says who did what, with sensitive arguments redacted
		recs := auditAll(t, s, AuditQuery{TaskID: "task-1"})
		require.Equal(t, []string{"task.requested", "task.awaiting_approval", "task.approved", "task.executing"}, types(recs))
		require.Equal(t, "alice", recs[2].Actor)
		require.Contains(t, string(recs[0].Details), `"secret":"[redacted]"`)
		require.NotContains(t, string(recs[0].Details), "s3cret")
		// And an unknown task is ErrNotFound
		_, err = s.Task(ctx, "nope")
		require.ErrorIs(t, err, ErrNotFound)
	})
}

func TestTaskChanged_KeepsTextAndErrorButNeverStatus(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		s, _ := e.open(t, t.TempDir())
		ctx := context.Background()
		// Given a task recorded as failed
		create(t, s, "task-2", "grasp", map[string]any{"object_id": "cup"}, "agent", t0)
		move(t, s, "task-2", "grasp", fsm.Requested, fsm.EvReject, t0.Add(time.Second), "supervisor")
		// When the runner's view arrives with its error (and a stale status)
		te := toolerr.New(toolerr.ActionFailed, "gripper closed on nothing").With("monitor", "verify_failed")
		te.Suggestion = "look again"
		s.TaskChanged(actions.TaskView{
			ID: "task-2", Tool: "grasp", Status: fsm.Requested, Text: "failed: nothing held",
			Error: te, SessionID: "sess-1", Principal: "agent", Progress: actions.Progress{Fraction: 0.5, Text: "closing"},
			UpdatedAt: t0.Add(time.Second),
		})
		flush(t, s)
		// Then the stored task has the view's words and the recorded status
		v, err := s.Task(ctx, "task-2")
		require.NoError(t, err)
		require.Equal(t, fsm.Failed, v.Status)
		require.Equal(t, "failed: nothing held", v.Text)
		require.Equal(t, "sess-1", v.SessionID)
		require.InDelta(t, 0.5, v.Progress.Fraction, 1e-12)
		require.NotNil(t, v.Error)
		require.Equal(t, toolerr.ActionFailed, v.Error.Type)
		require.Equal(t, "look again", v.Error.Suggestion)
		require.Equal(t, "verify_failed", v.Error.Details["monitor"])
	})
}

func testApproval(id, task string, st approval.Status) approval.Approval {
	return approval.Approval{
		ID: id, TaskID: task, Tool: "move_base_to", Arguments: map[string]any{"x": 1.0, "y": 2.0},
		ArgsHash: "h", RobotID: "sim-1", Preview: "move the base 2.2 m", Status: st, RequestedBy: "agent",
		CreatedAt: t0, ExpiresAt: t0.Add(time.Minute),
	}
}

func TestSaveApprovalAndGrant_AreAudited(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		s, _ := e.open(t, t.TempDir())
		ctx := context.Background()
		// Given a request filed, then approved with a grant
		a := testApproval("apr_1", "task-3", approval.StatusPending)
		require.NoError(t, s.SaveApproval(ctx, a))
		dec := t0.Add(5 * time.Second)
		g := approval.Grant{
			ID: "grt_1", Kind: approval.GrantOnce, Tool: "move_base_to", RobotID: "sim-1", ApprovalID: "apr_1",
			TaskID: "task-3", Status: approval.GrantActive, CreatedBy: "alice", CreatedAt: dec, ExpiresAt: dec.Add(time.Minute),
		}
		require.NoError(t, s.SaveGrant(ctx, g))
		a.Status, a.DecidedAt, a.DecidedBy, a.Reason, a.GrantID = approval.StatusApproved, &dec, "alice", "looks clear", "grt_1"
		require.NoError(t, s.SaveApproval(ctx, a))
		// Then the stored request is the approved one
		got, err := s.Approval(ctx, "apr_1")
		require.NoError(t, err)
		require.Equal(t, approval.StatusApproved, got.Status)
		require.Equal(t, "alice", got.DecidedBy)
		// And the audit has who approved, when and why
		recs := auditAll(t, s, AuditQuery{})
		require.Equal(t, []string{"approval.created", "grant.created", "approval.approved"}, types(recs))
		require.Equal(t, "alice", recs[2].Actor)
		require.Equal(t, "looks clear", recs[2].Reason)
		require.Equal(t, dec, recs[2].At)
		require.Equal(t, "apr_1", recs[2].Subject)
		require.Equal(t, "task-3", recs[2].TaskID)
	})
}

func TestIdempotency_SurvivesReopenAndFindsTaskAfterCrash(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		dir := t.TempDir()
		s, clk := e.open(t, dir)
		ctx := context.Background()
		key := "agent\x00k-1"
		hash := safety.ArgsHash("move_base_to", map[string]any{"x": 1.0})
		// Given a key reserved and its task created, but the process dies
		// before the tool API completes the key
		rec, reserved, err := s.Reserve(ctx, key, "move_base_to", hash)
		require.NoError(t, err)
		require.True(t, reserved)
		require.Equal(t, toolapi.IdemPending, rec.State)
		create(t, s, "task-9", "move_base_to", map[string]any{"x": 1.0}, "agent", clk.Now())
		crash(s)

		// When the store is opened again
		s2, _ := e.open(t, dir, func(c *Conf) { c.Clock = clk })
		// Then a retry with the same key finds the task, and reserves nothing
		rec, reserved, err = s2.Reserve(ctx, key, "move_base_to", hash)
		require.NoError(t, err)
		require.False(t, reserved)
		require.Equal(t, toolapi.IdemDone, rec.State)
		require.Equal(t, "task-9", rec.TaskID)
		got, ok, err := s2.Lookup(ctx, key)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "task-9", got.TaskID)
	})
}

func TestIdempotency_Lifecycle(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		s, clk := e.open(t, t.TempDir())
		ctx := context.Background()
		// Given a reserved key completed with an error
		_, reserved, err := s.Reserve(ctx, "a\x00k", "grasp", "h1")
		require.NoError(t, err)
		require.True(t, reserved)
		eb := &toolapi.ErrorBody{Type: toolerr.NotFound, Message: "no cup", Suggestion: "describe_scene"}
		require.NoError(t, s.Complete(ctx, "a\x00k", "", eb))
		// Then a retry replays the error
		rec, reserved, err := s.Reserve(ctx, "a\x00k", "grasp", "h1")
		require.NoError(t, err)
		require.False(t, reserved)
		require.Equal(t, toolapi.IdemDone, rec.State)
		require.Equal(t, "no cup", rec.Error.Message)
		// And a released key may be reserved again
		_, reserved, err = s.Reserve(ctx, "a\x00other", "grasp", "h2")
		require.NoError(t, err)
		require.True(t, reserved)
		require.NoError(t, s.Release(ctx, "a\x00other"))
		_, ok, err := s.Lookup(ctx, "a\x00other")
		require.NoError(t, err)
		require.False(t, ok)
		_, reserved, err = s.Reserve(ctx, "a\x00other", "grasp", "h2")
		require.NoError(t, err)
		require.True(t, reserved)
		// And after the TTL a key is forgotten
		clk.Advance(DefaultIdempotencyTTL + time.Second)
		_, ok, err = s.Lookup(ctx, "a\x00k")
		require.NoError(t, err)
		require.False(t, ok)
		_, reserved, err = s.Reserve(ctx, "a\x00k", "grasp", "h3")
		require.NoError(t, err)
		require.True(t, reserved)
	})
}

func TestIdempotency_ConcurrentReservesReserveOnce(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		s, _ := e.open(t, t.TempDir())
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for range 8 {
			wg.Go(func() {
				_, reserved, err := s.Reserve(context.Background(), "p\x00same", "stop", "h")
				if err != nil {
					t.Errorf("Reserve: %v", err)
					return
				}
				if reserved {
					mu.Lock()
					wins++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		require.Equal(t, 1, wins)
	})
}

func TestIdempotency_AmbiguousReservationsAreNotLinked(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		s, _ := e.open(t, t.TempDir())
		ctx := context.Background()
		hash := safety.ArgsHash("release", map[string]any{})
		// Given two keys of one principal reserved for the same call at once
		_, _, err := s.Reserve(ctx, "agent\x00k1", "release", hash)
		require.NoError(t, err)
		_, _, err = s.Reserve(ctx, "agent\x00k2", "release", hash)
		require.NoError(t, err)
		// When one task is created
		create(t, s, "task-r", "release", map[string]any{}, "agent", t0)
		// Then neither key is guessed to own it
		for _, k := range []string{"agent\x00k1", "agent\x00k2"} {
			r, ok, err := s.Lookup(ctx, k)
			require.NoError(t, err)
			require.True(t, ok)
			require.Empty(t, r.TaskID)
			require.Equal(t, toolapi.IdemPending, r.State)
		}
	})
}

func TestSafetyEvents_LatchesPersistUntilCleared(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		dir := t.TempDir()
		s, _ := e.open(t, dir)
		ctx := context.Background()
		// Given an e-stop pressed and a fault latched (the stops already sent)
		s.SafetyEvent(safety.Event{Kind: safety.EventEStopPressed, At: t0, By: "alice", Reason: "person in the way"})
		s.SafetyEvent(safety.Event{Kind: safety.EventStopSent, At: t0, By: "alice", Latency: 300 * time.Microsecond})
		s.SafetyEvent(safety.Event{Kind: safety.EventFaultLatched, At: t0.Add(time.Second), TaskID: "task-f", By: "supervisor", Reason: "recovery failed"})
		// A second latch keeps the first cause, as the supervisor does
		s.SafetyEvent(safety.Event{Kind: safety.EventFaultLatched, At: t0.Add(2 * time.Second), TaskID: "task-g", Reason: "later"})
		// When the bridge crashes and the store is reopened
		flush(t, s)
		crash(s)
		s2, _ := e.open(t, dir)
		es, f, err := s2.Latches(ctx, "")
		require.NoError(t, err)
		// Then both latches are still set, with their first causes
		require.True(t, es.Active)
		require.Equal(t, "alice", es.By)
		require.Equal(t, "person in the way", es.Reason)
		require.Equal(t, t0, es.Since)
		require.True(t, f.Latched)
		require.Equal(t, "recovery failed", f.Reason)
		require.Equal(t, "task-f", f.TaskID)
		// When an operator resets the e-stop and clears the fault
		s2.SafetyEvent(safety.Event{Kind: safety.EventEStopReset, At: t0.Add(time.Minute), By: "bob"})
		s2.SafetyEvent(safety.Event{Kind: safety.EventFaultCleared, At: t0.Add(time.Minute), By: "bob"})
		require.NoError(t, s2.Close())
		s3, _ := e.open(t, dir)
		es, f, err = s3.Latches(ctx, "")
		require.NoError(t, err)
		// Then they stay released after another restart
		require.False(t, es.Active)
		require.False(t, f.Latched)
		// And the audit has every event
		recs := auditAll(t, s3, AuditQuery{Type: "safety"})
		require.Equal(t, []string{
			"safety.estop_pressed", "safety.stop_sent", "safety.fault_latched", "safety.fault_latched",
			"safety.estop_reset", "safety.fault_cleared",
		}, types(recs))
		require.Equal(t, "bob", recs[4].Actor)
	})
}

func TestSafetyEvents_FullQueueDropsOtherEventsButNeverALatch(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		// Given a store whose writer is stuck on a slow disk and whose queue
		// holds two records
		release := make(chan struct{})
		entered := make(chan struct{})
		var once sync.Once
		var drops []string
		var mu sync.Mutex
		s, _ := e.open(t, t.TempDir(), func(c *Conf) {
			c.QueueSize = 2
			c.beforeBatch = func() { once.Do(func() { close(entered); <-release }) }
			c.OnDrop = func(kind string) { mu.Lock(); drops = append(drops, kind); mu.Unlock() }
		})
		var releaseOnce sync.Once
		unblock := func() { releaseOnce.Do(func() { close(release) }) }
		t.Cleanup(unblock) // runs before the store's Close
		s.SafetyEvent(safety.Event{Kind: safety.EventStopSent, At: t0})
		<-entered // the writer holds that one and waits on the disk
		// When five more events arrive, and then every kind of latch change,
		// many times over, far more than the queue holds
		for range 5 {
			s.SafetyEvent(safety.Event{Kind: safety.EventStopSent, At: t0})
		}
		latchKinds := []safety.EventKind{safety.EventEStopPressed, safety.EventEStopReset, safety.EventFaultLatched, safety.EventFaultCleared}
		const rounds = 10
		for i := range rounds {
			for _, k := range latchKinds {
				s.SafetyEvent(safety.Event{Kind: k, At: t0.Add(time.Duration(i) * time.Second), By: "op", Reason: "round"})
			}
		}
		// Then only the ordinary events beyond the queue's room are dropped and
		// counted, and every call returned while the disk was stuck
		mu.Lock()
		got := append([]string(nil), drops...)
		mu.Unlock()
		require.Equal(t, []string{"safety_event", "safety_event", "safety_event"}, got)
		require.Equal(t, int64(3), s.Dropped())
		// And once the disk is back, every latch change is written, in order,
		// with what was queued
		unblock()
		require.NoError(t, s.SyncLatches(context.Background()))
		flush(t, s)
		recs := auditAll(t, s, AuditQuery{Type: "safety"})
		var latchTypes []string
		for _, r := range recs {
			if r.Type != "safety.stop_sent" {
				latchTypes = append(latchTypes, r.Type)
			}
		}
		var want []string
		for range rounds {
			for _, k := range latchKinds {
				want = append(want, "safety."+string(k))
			}
		}
		require.Equal(t, want, latchTypes)
		require.Len(t, recs, 3+rounds*len(latchKinds))
		// And the last change of each latch is the one in force on the disk
		es, f, err := s.Latches(context.Background(), "")
		require.NoError(t, err)
		require.False(t, es.Active)
		require.False(t, f.Latched)
	})
}

// failLatchWrites makes every write of the latches table fail, as a disk
// that refuses the latch's page would, and returns the repair.
func failLatchWrites(t *testing.T, e *testEngine, s *Store) (repair func()) {
	t.Helper()
	if e.driver == DriverPostgres {
		_, err := s.w.Exec(`CREATE FUNCTION fail_latch() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN RAISE EXCEPTION 'disk refuses the latch'; END $$;
			CREATE TRIGGER fail_latch BEFORE INSERT OR UPDATE ON latches FOR EACH ROW EXECUTE FUNCTION fail_latch()`)
		require.NoError(t, err)
		return func() {
			_, err := s.w.Exec(`DROP TRIGGER fail_latch ON latches; DROP FUNCTION fail_latch()`)
			require.NoError(t, err)
		}
	}
	for _, op := range []string{"INSERT", "UPDATE"} {
		_, err := s.w.Exec(`CREATE TRIGGER fail_latch_` + strings.ToLower(op) + ` BEFORE ` + op + ` ON latches
			BEGIN SELECT RAISE(ABORT, 'disk refuses the latch'); END`)
		require.NoError(t, err)
	}
	return func() {
		for _, op := range []string{"insert", "update"} {
			_, err := s.w.Exec(`DROP TRIGGER fail_latch_` + op)
			require.NoError(t, err)
		}
	}
}

func TestSafetyEvents_ALatchThatCannotBeWrittenIsReportedAndRetried(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		// Given a store that cannot write its latches
		dir := t.TempDir()
		s, _ := e.open(t, dir, func(c *Conf) { c.LatchRetry = time.Millisecond })
		ctx := context.Background()
		require.NoError(t, s.Healthy(ctx))
		repair := failLatchWrites(t, e, s)

		// When an e-stop is pressed, with an ordinary event beside it
		s.SafetyEvent(safety.Event{Kind: safety.EventEStopPressed, At: t0, By: "alice", Reason: "person in the way"})
		s.SafetyEvent(safety.Event{Kind: safety.EventStopSent, At: t0, By: "alice"})

		// Then waiting for it says the latch is not recorded, and why
		err := s.SyncLatches(ctx)
		require.ErrorIs(t, err, ErrLatchNotRecorded)
		require.ErrorContains(t, err, "disk refuses the latch")
		// And the store is not healthy while it waits
		require.ErrorIs(t, s.Healthy(ctx), ErrLatchNotRecorded)
		// And the ordinary event did not wait for it
		flushErr := s.Sync(ctx)
		require.ErrorIs(t, flushErr, ErrLatchNotRecorded, "Sync reports the latch that is still missing")
		require.Equal(t, []string{"safety.stop_sent"}, types(auditAll(t, s, AuditQuery{Type: "safety"})))

		// When the disk takes writes again
		repair()

		// Then the store's own retry writes the latch, and all is well
		require.Eventually(t, func() bool { return s.SyncLatches(ctx) == nil }, 10*time.Second, time.Millisecond)
		require.NoError(t, s.Healthy(ctx))
		es, _, err := s.Latches(ctx, "")
		require.NoError(t, err)
		require.True(t, es.Active)
		require.Equal(t, "person in the way", es.Reason)
		require.ElementsMatch(t, []string{"safety.stop_sent", "safety.estop_pressed"}, types(auditAll(t, s, AuditQuery{Type: "safety"})))
	})
}

func TestClose_ALatchNeverWrittenIsReportedAndTheShutdownIsNotClean(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		// Given a store that cannot write its latches, holding an e-stop
		dir := t.TempDir()
		s, _ := e.open(t, dir, func(c *Conf) { c.LatchRetry = time.Millisecond })
		failLatchWrites(t, e, s)
		s.SafetyEvent(safety.Event{Kind: safety.EventEStopPressed, At: t0, By: "alice"})
		require.ErrorIs(t, s.SyncLatches(context.Background()), ErrLatchNotRecorded)

		// When it is closed
		err := s.Close()

		// Then Close says the latch was not recorded
		require.ErrorIs(t, err, ErrLatchNotRecorded)
		// And the next run does not take the shutdown for a clean one
		s2, _ := e.open(t, dir)
		require.False(t, s2.Info().CleanShutdown)
	})
}

func TestRecover_SettlesWhatThePreviousRunLeft(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		dir := t.TempDir()
		s, clk := e.open(t, dir)
		ctx := context.Background()
		// Given a run that crashed with one task executing, one awaiting
		// approval, one finished, a pending and an approved request, an active
		// grant, two idempotency reservations and a latched fault
		create(t, s, "t-exec", "move_base_to", map[string]any{"x": 1.0}, "agent", t0)
		st := move(t, s, "t-exec", "move_base_to", fsm.Requested, fsm.EvPreauthorized, t0, "config")
		move(t, s, "t-exec", "move_base_to", st, fsm.EvStart, t0, "supervisor")
		create(t, s, "t-wait", "move_arm_to", map[string]any{"pose": "ready"}, "agent", t0)
		move(t, s, "t-wait", "move_arm_to", fsm.Requested, fsm.EvNeedApproval, t0, "agent")
		create(t, s, "t-done", "release", map[string]any{}, "agent", t0)
		st = move(t, s, "t-done", "release", fsm.Requested, fsm.EvPreauthorized, t0, "config")
		st = move(t, s, "t-done", "release", st, fsm.EvStart, t0, "supervisor")
		move(t, s, "t-done", "release", st, fsm.EvSucceed, t0, "supervisor")
		require.NoError(t, s.SaveApproval(ctx, testApproval("apr_p", "t-wait", approval.StatusPending)))
		g := approval.Grant{
			ID: "grt_s", Kind: approval.GrantScoped, Tool: "move_arm_to", Status: approval.GrantActive,
			CreatedBy: "alice", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour),
		}
		require.NoError(t, s.SaveGrant(ctx, g))
		_, _, err := s.Reserve(ctx, "agent\x00linked", "move_base_to", safety.ArgsHash("move_base_to", map[string]any{"y": 2.0}))
		require.NoError(t, err)
		create(t, s, "t-linked", "move_base_to", map[string]any{"y": 2.0}, "agent", t0)
		st = move(t, s, "t-linked", "move_base_to", fsm.Requested, fsm.EvNeedApproval, t0, "agent")
		move(t, s, "t-linked", "move_base_to", st, fsm.EvCancel, t0, "agent")
		_, _, err = s.Reserve(ctx, "agent\x00orphan", "grasp", "zzz")
		require.NoError(t, err)
		s.SafetyEvent(safety.Event{Kind: safety.EventFaultLatched, At: t0, TaskID: "t-old", Reason: "arm stuck"})
		flush(t, s)
		before := auditAll(t, s, AuditQuery{})
		crash(s)

		// When the bridge restarts and recovers
		clk.Advance(time.Minute)
		s2, _ := e.open(t, dir, func(c *Conf) { c.Clock = clk })
		rep, err := s2.Recover(ctx, RecoverInput{StopSent: true})
		require.NoError(t, err)

		// Then the live tasks are interrupted and the finished one is not
		require.False(t, rep.CleanShutdown)
		require.ElementsMatch(t, []InterruptedTask{{ID: "t-exec", Tool: "move_base_to", From: fsm.Executing}, {ID: "t-wait", Tool: "move_arm_to", From: fsm.AwaitingApproval}}, rep.Interrupted)
		v, err := s2.Task(ctx, "t-exec")
		require.NoError(t, err)
		require.Equal(t, fsm.Interrupted, v.Status)
		require.Contains(t, v.Text, "commanded to stop")
		require.NotNil(t, v.Error)
		v, err = s2.Task(ctx, "t-wait")
		require.NoError(t, err)
		require.Equal(t, fsm.Interrupted, v.Status)
		require.Contains(t, v.Text, "nothing had moved")
		v, err = s2.Task(ctx, "t-done")
		require.NoError(t, err)
		require.Equal(t, fsm.Succeeded, v.Status)
		// And the pending request expired, the grant ended
		require.Equal(t, []string{"apr_p"}, rep.ExpiredApprovals)
		a, err := s2.Approval(ctx, "apr_p")
		require.NoError(t, err)
		require.Equal(t, approval.StatusExpired, a.Status)
		require.Equal(t, []string{"grt_s"}, rep.EndedGrants)
		// And the reservation with a task is settled, the other released
		require.Equal(t, 1, rep.SettledKeys)
		require.Equal(t, 1, rep.ReleasedKeys)
		r, ok, err := s2.Lookup(ctx, "agent\x00linked")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "t-linked", r.TaskID)
		_, ok, err = s2.Lookup(ctx, "agent\x00orphan")
		require.NoError(t, err)
		require.False(t, ok)
		// And the fault latch is reported
		require.True(t, rep.Fault.Latched)
		require.Equal(t, "arm stuck", rep.Fault.Reason)
		// And nothing from before was lost; the restart is audited last
		after := auditAll(t, s2, AuditQuery{})
		require.Equal(t, before, after[:len(before)])
		last := after[len(after)-1]
		require.Equal(t, AuditBridgeRestart, last.Type)
		require.Equal(t, rep.AuditSeq, last.Seq)
		require.Contains(t, last.Summary, "after a crash")
		require.Contains(t, types(after[len(before):]), "task.interrupted")
		require.Contains(t, types(after[len(before):]), "approval.expired")
		require.Contains(t, types(after[len(before):]), "grant.revoked")
		// And recovering again changes nothing more
		rep2, err := s2.Recover(ctx, RecoverInput{})
		require.NoError(t, err)
		require.Empty(t, rep2.Interrupted)
		require.Empty(t, rep2.ExpiredApprovals)
	})
}

func TestRecover_FreshStoreRecordsAStart(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		s, _ := e.open(t, t.TempDir())
		rep, err := s.Recover(context.Background(), RecoverInput{StopErr: errors.New("link down")})
		require.NoError(t, err)
		require.True(t, rep.Fresh)
		recs := auditAll(t, s, AuditQuery{Type: "bridge"})
		require.Len(t, recs, 1)
		require.Equal(t, AuditBridgeStart, recs[0].Type)
		require.Contains(t, string(recs[0].Details), "link down")
	})
}

func TestIdempotency_AReservationWhoseAnswerWasLostIsNotStuck(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		// Given a store whose next reservation commits but whose answer is
		// lost on the way back (the connection broke after the commit)
		var lose atomic.Bool
		lose.Store(true)
		s, clk := e.open(t, t.TempDir(), func(c *Conf) {
			c.ackLost = func(op string) bool { return op == "idempotency" && lose.CompareAndSwap(true, false) }
		})
		ctx := context.Background()
		_, reserved, err := s.Reserve(ctx, "agent\x00k-lost", "move_base_to", "h")
		require.ErrorIs(t, err, ErrUnavailable)
		require.False(t, reserved)
		// When the caller, told nothing was reserved, tries the same key again
		clk.Advance(time.Second)
		rec, reserved, err := s.Reserve(ctx, "agent\x00k-lost", "move_base_to", "h")
		// Then it reserves it — the record it left behind is its own — instead
		// of finding a pending key that no request will ever complete
		require.NoError(t, err)
		require.True(t, reserved)
		require.Equal(t, toolapi.IdemPending, rec.State)
		// And a third request with the key, while that one runs, does not
		_, reserved, err = s.Reserve(ctx, "agent\x00k-lost", "move_base_to", "h")
		require.NoError(t, err)
		require.False(t, reserved)
	})
}
