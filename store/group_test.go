package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/approval"
	"github.com/robot-bridge/robot-bridge/fsm"
)

// TestRecordTransitions_OneCommitTheSameTrail is issue 19 item 2: the
// three records a call authorized when it is made writes before its first
// command (created, approved, executing) are one commit, and what lands
// is exactly what three RecordTransition calls write: the same transition
// rows, the same task row, the same audit records.
func TestRecordTransitions_OneCommitTheSameTrail(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		s, _ := e.open(t, t.TempDir())
		ctx := context.Background()
		// When the records go as one batch for one task and one by one for
		// another
		c0 := s.group.commits.Load()
		require.NoError(t, s.RecordTransitions(ctx, preauthorized("task-batch", t0)))
		// Then the batch is one commit
		require.Equal(t, int64(1), s.group.commits.Load()-c0)
		c0 = s.group.commits.Load()
		for _, r := range preauthorized("task-single", t0) {
			require.NoError(t, s.RecordTransition(ctx, r))
		}
		require.Equal(t, int64(3), s.group.commits.Load()-c0)
		// And both wrote the same trail
		batch, err := s.Transitions(ctx, "task-batch")
		require.NoError(t, err)
		single, err := s.Transitions(ctx, "task-single")
		require.NoError(t, err)
		require.Len(t, batch, 3)
		require.Len(t, single, 3)
		for i := range batch {
			b, s := batch[i], single[i]
			b.Seq, s.Seq, b.TaskID, s.TaskID = 0, 0, "", ""
			require.Equal(t, s, b, "transition %d", i)
		}
		require.Equal(t, []fsm.State{fsm.Requested, fsm.Approved, fsm.Executing}, []fsm.State{batch[0].To, batch[1].To, batch[2].To})
		bt, err := s.Task(ctx, "task-batch")
		require.NoError(t, err)
		st, err := s.Task(ctx, "task-single")
		require.NoError(t, err)
		require.Equal(t, fsm.Executing, bt.Status)
		bt.ID, st.ID = "", ""
		require.Equal(t, st, bt)
		ba := auditAll(t, s, AuditQuery{TaskID: "task-batch"})
		sa := auditAll(t, s, AuditQuery{TaskID: "task-single"})
		require.Equal(t, []string{"task.requested", "task.approved", "task.executing"}, types(ba))
		require.Len(t, sa, len(ba))
		for i := range ba {
			b, s := ba[i], sa[i]
			require.Equal(t, strings.ReplaceAll(s.Summary, "task-single", "task-batch"), b.Summary)
			require.JSONEq(t, string(s.Details), string(b.Details))
			b.Seq, s.Seq, b.TaskID, s.TaskID, b.Summary, s.Summary, b.Details, s.Details = 0, 0, "", "", "", "", nil, nil
			require.Equal(t, s, b, "audit record %d", i)
		}
	})
}

// grantCovered are the four records of a call a scoped grant covered when
// it was filed, as the runner hands them over before its first command:
// the approval service's record of the request rides on the approved one.
func grantCovered(id string, at time.Time) ([]actions.TransitionRecord, approval.Approval) {
	args := map[string]any{"x": 1.0, "y": 2.0}
	a := approval.Approval{
		ID: "apr-" + id, TaskID: id, Tool: "move_base_to", Arguments: args, RobotID: "r1", Preview: "move the base 2.2 m",
		Status: approval.StatusApproved, RequestedBy: "agent", CreatedAt: at, ExpiresAt: at.Add(time.Minute),
		DecidedAt: &at, DecidedBy: "alice", GrantID: "grt-1", Reason: "covered by scoped grant grt-1 (the aisle)",
	}
	rec := func(from, to fsm.State, ev fsm.Event, by string) actions.TransitionRecord {
		return actions.TransitionRecord{TaskID: id, RobotID: "r1", Tool: "move_base_to", Arguments: args, From: from, To: to, Event: ev, At: at, By: by, ApprovalID: a.ID}
	}
	rs := []actions.TransitionRecord{
		rec("", fsm.Requested, "", "agent"),
		rec(fsm.Requested, fsm.AwaitingApproval, fsm.EvNeedApproval, "agent"),
		rec(fsm.AwaitingApproval, fsm.Approved, fsm.EvApprove, "alice"),
		rec(fsm.Approved, fsm.Executing, fsm.EvStart, "supervisor"),
	}
	rs[2].GrantID, rs[2].Approval = "grt-1", a
	return rs, a
}

// TestRecordTransitions_AGrantCoveredApprovalIsInTheSameCommit is issue 19
// item 2 for a call a scoped grant covers: the task's four records and the
// approval's record are one commit, and the approval lands exactly as
// SaveApproval writes it (the same row, the same audit record).
func TestRecordTransitions_AGrantCoveredApprovalIsInTheSameCommit(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		s, _ := e.open(t, t.TempDir())
		ctx := context.Background()
		// When the records of a grant-covered call go as one batch
		rs, a := grantCovered("task-batch", t0)
		c0 := s.group.commits.Load()
		require.NoError(t, s.RecordTransitions(ctx, rs))
		// Then they are one commit, the approval's record with them
		require.Equal(t, int64(1), s.group.commits.Load()-c0)
		got, err := s.Approval(ctx, a.ID)
		require.NoError(t, err)
		require.Equal(t, approval.StatusApproved, got.Status)
		require.Equal(t, "grt-1", got.GrantID)
		require.Equal(t, "alice", got.DecidedBy)
		tr, err := s.Transitions(ctx, "task-batch")
		require.NoError(t, err)
		require.Len(t, tr, 4)
		// And the approval's audit record is the one SaveApproval writes
		_, b := grantCovered("task-alone", t0)
		require.NoError(t, s.SaveApproval(ctx, b))
		withApproval := func(id string) []AuditRecord {
			var out []AuditRecord
			for _, r := range auditAll(t, s, AuditQuery{}) {
				if r.Subject == id {
					out = append(out, r)
				}
			}
			return out
		}
		inBatch, alone := withApproval(a.ID), withApproval(b.ID)
		require.NotEmpty(t, alone)
		require.Len(t, inBatch, len(alone))
		for i := range alone {
			x, y := inBatch[i], alone[i]
			require.Equal(t, y.Type, x.Type)
			require.Equal(t, y.Actor, x.Actor)
			require.Equal(t, strings.ReplaceAll(y.Summary, "task-alone", "task-batch"), x.Summary)
		}
	})
}

// TestRecordTransitions_AnUnknownApprovalRecordFailsTheCommit: a record
// the store cannot write fails the whole batch (the command it precedes
// is then not sent) rather than being dropped.
func TestRecordTransitions_AnUnknownApprovalRecordFailsTheCommit(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		s, _ := e.open(t, t.TempDir())
		ctx := context.Background()
		rs, _ := grantCovered("task-odd", t0)
		rs[2].Approval = "not an approval"
		err := s.RecordTransitions(ctx, rs)
		require.ErrorContains(t, err, "approval record of unknown type string")
		tr, err := s.Transitions(ctx, "task-odd")
		require.NoError(t, err)
		require.Empty(t, tr, "nothing of the batch is written")
	})
}

// TestRecordTransitions_AllOrNothing: a batch whose commit fails leaves
// nothing of any of its records behind, and the caller hears of it.
func TestRecordTransitions_AllOrNothing(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		errDisk := errors.New("disk full")
		var fail atomic.Bool
		s, _ := e.open(t, t.TempDir(), func(c *Conf) {
			c.beforeCommit = func() error {
				if fail.Load() {
					return errDisk
				}
				return nil
			}
		})
		ctx := context.Background()
		fail.Store(true)
		require.ErrorIs(t, s.RecordTransitions(ctx, preauthorized("task-lost", t0)), errDisk)
		fail.Store(false)
		trs, err := s.Transitions(ctx, "task-lost")
		require.NoError(t, err)
		require.Empty(t, trs)
		_, err = s.Task(ctx, "task-lost")
		require.ErrorIs(t, err, ErrNotFound)
		require.Empty(t, auditAll(t, s, AuditQuery{TaskID: "task-lost"}))
		// And the store takes the next batch
		require.NoError(t, s.RecordTransitions(ctx, preauthorized("task-kept", t0)))
		trs, err = s.Transitions(ctx, "task-kept")
		require.NoError(t, err)
		require.Len(t, trs, 3)
	})
}

// holdLeader starts a write that holds the store's group commit (its
// transaction open) until the returned release is called, and waits for
// n more writes to queue behind it.
func holdLeader(t *testing.T, s *Store) (waitQueued func(n int), release func()) {
	t.Helper()
	entered, done := make(chan struct{}), make(chan struct{})
	var once sync.Once
	errc := make(chan error, 1)
	go func() {
		errc <- s.tx(context.Background(), "test", func(tx txn) error {
			close(entered)
			<-done
			return nil
		})
	}()
	<-entered
	release = func() {
		once.Do(func() {
			close(done)
			require.NoError(t, <-errc)
		})
	}
	t.Cleanup(release)
	waitQueued = func(n int) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			s.group.mu.Lock()
			q := len(s.group.queue)
			s.group.mu.Unlock()
			if q >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d writes queued", q, n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return waitQueued, release
}

func createRecord(id, robot string) actions.TransitionRecord {
	return actions.TransitionRecord{
		TaskID: id, RobotID: robot, Tool: "move_base_to", Arguments: map[string]any{"x": 1.0},
		To: fsm.Requested, At: t0, By: "agent", Reason: "move the base",
	}
}

// TestGroupCommit_QueuedWritesShareOneCommitAndKeepTheirOwnErrors: the
// writes of several robots that queue while a commit is in progress are
// committed together in the next one; a write whose statements fail is
// rolled back alone and only its caller gets its error.
func TestGroupCommit_QueuedWritesShareOneCommitAndKeepTheirOwnErrors(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		s, _ := e.open(t, t.TempDir())
		ctx := context.Background()
		waitQueued, release := holdLeader(t, s)
		// Given eight robots' writes queued behind a commit in progress,
		// robot 3's failing after it wrote its rows
		const robots = 8
		errs := make([]error, robots)
		var wg sync.WaitGroup
		for k := range robots {
			rec := createRecord(fmt.Sprintf("task-r%d", k), fmt.Sprintf("r%d", k))
			wg.Go(func() {
				if k == 3 {
					errs[k] = s.tx(ctx, "transition", func(tx txn) error {
						if err := s.writeTransition(tx, &rec, t0); err != nil {
							return err
						}
						return fmt.Errorf("robot %d's own failure", k)
					})
					return
				}
				errs[k] = s.RecordTransition(ctx, rec)
			})
		}
		waitQueued(robots)
		c0, w0 := s.group.commits.Load(), s.group.writes.Load()
		// When the commit in progress ends
		release()
		wg.Wait()
		// Then the eight were one commit
		require.Equal(t, int64(1), s.group.commits.Load()-c0)
		require.Equal(t, int64(robots), s.group.writes.Load()-w0)
		// And only robot 3 failed, with its own error, and nothing of it
		// is on the disk; every other robot's record is
		for k := range robots {
			id := fmt.Sprintf("task-r%d", k)
			trs, err := s.Transitions(ctx, id)
			require.NoError(t, err)
			if k == 3 {
				require.ErrorContains(t, errs[k], "robot 3's own failure")
				require.Empty(t, trs)
				_, err := s.Task(ctx, id)
				require.ErrorIs(t, err, ErrNotFound)
				require.Empty(t, auditAll(t, s, AuditQuery{TaskID: id}))
				continue
			}
			require.NoError(t, errs[k], "robot %d", k)
			require.Len(t, trs, 1, "robot %d", k)
			require.Equal(t, fmt.Sprintf("r%d", k), trs[0].RobotID)
		}
	})
}

// TestGroupCommit_AFailedCommitFailsEveryWriteOfItsGroup: when the shared
// transaction cannot commit, every caller of the group hears so and
// nothing of any of them is on the disk; the store goes on.
func TestGroupCommit_AFailedCommitFailsEveryWriteOfItsGroup(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		errDisk := errors.New("disk full")
		// armed: 1 lets the next commit (the held leader's) pass and fails
		// the ones after it, until disarmed (0).
		var armed atomic.Int32
		s, _ := e.open(t, t.TempDir(), func(c *Conf) {
			c.beforeCommit = func() error {
				if armed.CompareAndSwap(1, 2) || armed.Load() != 2 {
					return nil
				}
				return errDisk
			}
		})
		ctx := context.Background()
		waitQueued, release := holdLeader(t, s)
		const robots = 6
		errs := make([]error, robots)
		var wg sync.WaitGroup
		for k := range robots {
			wg.Go(func() { errs[k] = s.RecordTransitions(ctx, preauthorized(fmt.Sprintf("task-r%d", k), t0)) })
		}
		waitQueued(robots)
		c0 := s.group.commits.Load()
		armed.Store(1)
		release()
		wg.Wait()
		armed.Store(0)
		require.Equal(t, int64(1), s.group.commits.Load()-c0, "the six robots' writes were one group")
		for k := range robots {
			require.ErrorIs(t, errs[k], errDisk, "robot %d", k)
			trs, err := s.Transitions(ctx, fmt.Sprintf("task-r%d", k))
			require.NoError(t, err)
			require.Empty(t, trs, "robot %d", k)
		}
		require.NoError(t, s.RecordTransition(ctx, createRecord("task-after", "r0")))
	})
}

// TestGroupCommit_ManyRobotsLoseNothing runs sixteen robots' writes at
// once (run it with -race): every write whose caller was told it
// committed is on the disk exactly once, every failing write's caller
// got its own error and left nothing behind, and no write waited in a
// group that did not commit it.
func TestGroupCommit_ManyRobotsLoseNothing(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		s, _ := e.open(t, t.TempDir())
		ctx := context.Background()
		const robots, each = 16, 25
		type outcome struct {
			id  string
			err error
		}
		outs := make([][]outcome, robots)
		c0, w0 := s.group.commits.Load(), s.group.writes.Load()
		var wg sync.WaitGroup
		for k := range robots {
			wg.Go(func() {
				for i := range each {
					id := fmt.Sprintf("task-r%d-%d", k, i)
					rec := createRecord(id, fmt.Sprintf("r%d", k))
					var err error
					if (k+i)%7 == 0 {
						err = s.tx(ctx, "transition", func(tx txn) error {
							if err := s.writeTransition(tx, &rec, t0); err != nil {
								return err
							}
							return fmt.Errorf("%s failed on purpose", id)
						})
					} else {
						recs := []actions.TransitionRecord{rec}
						if i%2 == 0 {
							recs = preauthorized(id, t0)
							for j := range recs {
								recs[j].RobotID = rec.RobotID
							}
						}
						err = s.RecordTransitions(ctx, recs)
					}
					outs[k] = append(outs[k], outcome{id: id, err: err})
				}
			})
		}
		wg.Wait()
		commits, writes := s.group.commits.Load()-c0, s.group.writes.Load()-w0
		require.Equal(t, int64(robots*each), writes)
		require.LessOrEqual(t, commits, writes)
		t.Logf("%d writes in %d commits", writes, commits)
		all, err := s.Transitions(ctx, "")
		require.NoError(t, err)
		count := map[string]int{}
		for _, tr := range all {
			count[tr.TaskID]++
		}
		for k := range robots {
			for i, o := range outs[k] {
				if (k+i)%7 == 0 {
					require.ErrorContains(t, o.err, o.id+" failed on purpose")
					require.Zero(t, count[o.id], o.id)
					continue
				}
				require.NoError(t, o.err, o.id)
				want := 1
				if i%2 == 0 {
					want = 3
				}
				require.Equal(t, want, count[o.id], o.id)
			}
		}
	})
}

// TestGroupCommit_ALoneWriteIsNeverHeldBack: writes that never overlap
// commit one by one — nothing waits for company.
func TestGroupCommit_ALoneWriteIsNeverHeldBack(t *testing.T) {
	s, _ := openTest(t, t.TempDir())
	ctx := context.Background()
	c0, w0 := s.group.commits.Load(), s.group.writes.Load()
	for i := range 20 {
		require.NoError(t, s.RecordTransition(ctx, createRecord(fmt.Sprintf("task-%d", i), "r1")))
	}
	require.Equal(t, int64(20), s.group.commits.Load()-c0)
	require.Equal(t, int64(20), s.group.writes.Load()-w0)
}

// TestStore_HotWritesArePrepared: the hot writes' statements are
// prepared once at Open, on both engines, and serve every transaction.
func TestStore_HotWritesArePrepared(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		s, _ := e.open(t, t.TempDir())
		for _, q := range preparedQueries(s.d) {
			require.NotNil(t, s.stmts[q], "%.60s", q)
		}
		ctx := context.Background()
		require.NoError(t, s.RecordTransitions(ctx, preauthorized("task-p", t0)))
		s.TaskChanged(actions.TaskView{ID: "task-p", Tool: "move_base_to", Status: fsm.Executing, Text: "Driving.", UpdatedAt: t0.Add(time.Second)})
		flush(t, s)
		v, err := s.Task(ctx, "task-p")
		require.NoError(t, err)
		require.Equal(t, "Driving.", v.Text)
		recs := auditAll(t, s, AuditQuery{TaskID: "task-p"})
		require.Len(t, recs, 3)
		var d map[string]any
		require.NoError(t, json.Unmarshal(recs[0].Details, &d))
		require.Equal(t, "move_base_to", d["tool"])
	})
}

// TestStore_GroupSavepointsStayInMemory: the writer keeps its statement
// journals (a group's savepoints) in memory, never in a temporary file.
func TestStore_GroupSavepointsStayInMemory(t *testing.T) {
	s, _ := openTest(t, t.TempDir())
	var store int
	require.NoError(t, s.w.QueryRow(`PRAGMA temp_store`).Scan(&store))
	require.Equal(t, 2, store, "temp_store=MEMORY")
}

// TestTransitionDetails_EncodeAsTheMapTheyReplaced: a transition's audit
// details are byte for byte what the map of them encoded to.
func TestTransitionDetails_EncodeAsTheMapTheyReplaced(t *testing.T) {
	for _, r := range []actions.TransitionRecord{
		{Tool: "move_base_to", To: fsm.Requested, Arguments: map[string]any{"x": 1.5, "label": "<b>&\"q\"\u2028"}},
		{Tool: "return_to_safe_pose", To: fsm.Requested, Arguments: map[string]any{}},
		{Tool: "move_arm_to", From: fsm.AwaitingApproval, To: fsm.Approved, Event: fsm.EvApprove, GrantID: "grt_<1>", ApprovalID: "apr_&2"},
		{Tool: "grasp", From: fsm.Approved, To: fsm.Executing, Event: fsm.EvStart, GrantID: "g"},
		{Tool: "t\x00ool\xff", From: fsm.Executing, To: fsm.Succeeded, Event: fsm.EvSucceed, ApprovalID: "a"},
	} {
		details := map[string]any{"tool": r.Tool, "from": string(r.From), "to": string(r.To), "event": string(r.Event)}
		typed := transitionDetails{Tool: r.Tool, From: string(r.From), To: string(r.To), Event: string(r.Event), GrantID: r.GrantID, ApprovalID: r.ApprovalID}
		if r.From == "" {
			details["arguments"] = r.Arguments
			args := r.Arguments
			typed.Arguments = &args
		}
		if r.GrantID != "" {
			details["grant_id"] = r.GrantID
		}
		if r.ApprovalID != "" {
			details["approval_id"] = r.ApprovalID
		}
		require.Equal(t, mustJSON(details), mustJSON(typed))
	}
}
