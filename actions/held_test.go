package actions_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/fsm"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// batchRecorder is a BatchRecorder over the bench's fakeRecorder: every
// call (one record or a batch) is one commit, noted with the commands the
// robot had received when it was made; fail, when set, fails a commit
// (nothing of it is written).
type batchRecorder struct {
	*fakeRecorder
	mu         sync.Mutex
	commits    [][]fsm.Event
	commandsAt []int
	// approvals are the approval records written, with the commit each
	// was written in (an index into commits).
	approvals  []any
	approvalAt []int
	fail       func(events []fsm.Event) error
}

func (r *batchRecorder) RecordTransition(ctx context.Context, rec actions.TransitionRecord) error {
	return r.RecordTransitions(ctx, []actions.TransitionRecord{rec})
}

func (r *batchRecorder) RecordTransitions(ctx context.Context, recs []actions.TransitionRecord) error {
	n := len(r.robot.commands())
	evs := make([]fsm.Event, len(recs))
	for i, rec := range recs {
		evs[i] = rec.Event
	}
	r.mu.Lock()
	fail := r.fail
	r.mu.Unlock()
	if fail != nil {
		if err := fail(evs); err != nil {
			return err
		}
	}
	r.mu.Lock()
	r.commits = append(r.commits, evs)
	r.commandsAt = append(r.commandsAt, n)
	for _, rec := range recs {
		if rec.Approval != nil {
			r.approvals = append(r.approvals, rec.Approval)
			r.approvalAt = append(r.approvalAt, len(r.commits)-1)
		}
	}
	r.mu.Unlock()
	for _, rec := range recs {
		if err := r.fakeRecorder.RecordTransition(ctx, rec); err != nil {
			return err
		}
	}
	return nil
}

func (r *batchRecorder) written() ([][]fsm.Event, []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.commits), slices.Clone(r.commandsAt)
}

// committed is how many records are written.
func (r *batchRecorder) committed() int {
	r.fakeRecorder.mu.Lock()
	defer r.fakeRecorder.mu.Unlock()
	return len(r.recs)
}

func (r *batchRecorder) trail() []fsm.Event {
	r.fakeRecorder.mu.Lock()
	defer r.fakeRecorder.mu.Unlock()
	var out []fsm.Event
	for _, rec := range r.recs {
		out = append(out, rec.Event)
	}
	return out
}

// viewLog is what the observer was given, with the records written at
// that moment.
type viewLog struct {
	mu        sync.Mutex
	statuses  []fsm.State
	committed []int
}

func preauthorizedBench(t *testing.T, fail func([]fsm.Event) error) (*bench, *batchRecorder, *viewLog) {
	t.Helper()
	var rec *batchRecorder
	vl := &viewLog{}
	b := newBench(t, benchOpt{
		mutate: func(c *hwconfig.Config) {
			c.Actions["move_arm_to"] = hwconfig.ActionConf{Approval: hwconfig.ApprovalNever}
		},
		recorder: func(f *fakeRecorder) actions.Recorder {
			rec = &batchRecorder{fakeRecorder: f, fail: fail}
			return rec
		},
		observe: func(v actions.TaskView) {
			n := rec.committed()
			vl.mu.Lock()
			vl.statuses = append(vl.statuses, v.Status)
			vl.committed = append(vl.committed, n)
			vl.mu.Unlock()
		},
	})
	return b, rec, vl
}

// TestPreauthorized_OneCommitBeforeTheFirstCommand is issue 19 item 2: a
// call the config authorizes writes created, approved and executing in
// one commit, made before its first command leaves; the call is answered
// once that commit is on the disk, and the observer learns of each
// transition only once its record is written.
func TestPreauthorized_OneCommitBeforeTheFirstCommand(t *testing.T) {
	b, rec, vl := preauthorizedBench(t, nil)
	// When the agent calls an action the config authorizes
	v, err := b.submit("move_arm_to", map[string]any{"pose": "ready"})
	require.NoError(t, err)
	// Then the answer is the task as its authorization left it
	require.Equal(t, fsm.Approved, v.Status, v.Text)
	require.Contains(t, v.Text, "uthorized by the config")
	// And by then the three records were written, as one commit, before
	// any command
	commits, at := rec.written()
	require.Equal(t, [][]fsm.Event{{"", fsm.EvPreauthorized, fsm.EvStart}}, commits)
	require.Equal(t, []int{0}, at)
	v = b.finish(v.ID)
	require.Equal(t, fsm.Succeeded, v.Status, v.Text)
	require.Len(t, b.bot.commands(), 1)
	commits, _ = rec.written()
	require.Equal(t, [][]fsm.Event{{"", fsm.EvPreauthorized, fsm.EvStart}, {fsm.EvSucceed}}, commits)
	// And the trail is the one it always was
	require.Equal(t, []fsm.Event{"", fsm.EvPreauthorized, fsm.EvStart, fsm.EvSucceed}, rec.trail())
	// And the observer saw approved, then executing, each once written
	vl.mu.Lock()
	defer vl.mu.Unlock()
	require.GreaterOrEqual(t, len(vl.statuses), 3)
	require.Equal(t, []fsm.State{fsm.Approved, fsm.Executing}, vl.statuses[:2])
	require.Equal(t, fsm.Succeeded, vl.statuses[len(vl.statuses)-1])
	for i, n := range vl.committed {
		require.GreaterOrEqual(t, n, 3, "view %d (%s) given before its record", i, vl.statuses[i])
	}
}

// TestPreauthorized_AFailedCommitSendsNothing: when the one commit before
// the first command fails, nothing is sent and the task fails saying so,
// as it did when the start was a commit of its own; the records it held
// are written with the failure's, so the trail is the one it always was.
func TestPreauthorized_AFailedCommitSendsNothing(t *testing.T) {
	errDisk := errors.New("disk full")
	b, rec, _ := preauthorizedBench(t, func(evs []fsm.Event) error {
		if slices.Contains(evs, fsm.EvStart) {
			return errDisk
		}
		return nil
	})
	v, err := b.submit("move_arm_to", map[string]any{"pose": "ready"})
	require.NoError(t, err)
	waitFor(t, func() bool { v, _ = b.run.Get(v.ID); return v.Terminal() })
	require.Equal(t, fsm.Failed, v.Status)
	require.Equal(t, toolerr.Internal, v.Error.Type)
	require.Contains(t, v.Error.Message, "could not be recorded")
	require.Empty(t, b.bot.commands(), "an unrecorded transition sends nothing")
	require.Equal(t, []fsm.Event{"", fsm.EvPreauthorized, fsm.EvReject}, rec.trail())
}

// TestPreauthorized_NothingWrittenIsNotAnsweredApproved: when neither the
// start's commit nor the failure's could be written, the call is not
// answered "approved" — a status no record backs — but with the task as
// it ended: failed, nothing sent.
func TestPreauthorized_NothingWrittenIsNotAnsweredApproved(t *testing.T) {
	errDisk := errors.New("disk full")
	b, rec, _ := preauthorizedBench(t, func([]fsm.Event) error { return errDisk })
	v, err := b.submit("move_arm_to", map[string]any{"pose": "ready"})
	require.NoError(t, err)
	require.Equal(t, fsm.Failed, v.Status, v.Text)
	require.NotNil(t, v.Error)
	require.Equal(t, toolerr.Internal, v.Error.Type)
	require.Empty(t, b.bot.commands())
	require.Empty(t, rec.trail())
}

// TestGrantCovered_OneCommitWithTheApprovalBeforeTheFirstCommand is issue
// 19 item 2 for a call an operator's scoped grant covers when it is filed:
// created, awaiting, approved and executing land in one commit before its
// first command, and the approval service's record of the request (which
// grant, whose) rides in that same commit.
func TestGrantCovered_OneCommitWithTheApprovalBeforeTheFirstCommand(t *testing.T) {
	var rec *batchRecorder
	b := newBench(t, benchOpt{recorder: func(f *fakeRecorder) actions.Recorder {
		rec = &batchRecorder{fakeRecorder: f}
		return rec
	}})
	var saved []any
	b.appr.Covering = func(r actions.ApprovalRequest) actions.Decision {
		require.True(t, r.HoldRecord, "a runner with a BatchRecorder asks to hold the record")
		v := "approval record of " + r.TaskID
		return actions.Decision{
			Approved: true, By: "alice", GrantID: "grant-" + r.TaskID, GrantScope: "move_arm_to", GrantExpires: time.Date(2026, 1, 2, 14, 5, 30, 0, time.UTC),
			Held: &actions.HeldRecord{Value: v, Save: func(context.Context) error { saved = append(saved, v); return nil }},
		}
	}
	v, err := b.submit("move_arm_to", map[string]any{"pose": "ready"})
	require.NoError(t, err)
	require.Equal(t, fsm.Approved, v.Status, v.Text)
	commits, at := rec.written()
	require.Equal(t, [][]fsm.Event{{"", fsm.EvNeedApproval, fsm.EvApprove, fsm.EvStart}}, commits)
	require.Equal(t, []int{0}, at, "the commit was made before any command")
	rec.mu.Lock()
	require.Equal(t, []any{"approval record of " + v.ID}, rec.approvals)
	require.Equal(t, []int{0}, rec.approvalAt)
	rec.mu.Unlock()
	require.Empty(t, saved, "the record went with the start, not alone")
	v = b.finish(v.ID)
	require.Equal(t, fsm.Succeeded, v.Status, v.Text)
	require.Equal(t, []fsm.Event{"", fsm.EvNeedApproval, fsm.EvApprove, fsm.EvStart, fsm.EvSucceed}, rec.trail())
}

// TestGrantCovered_ATaskThatEndsBeforeItStartsStillWritesItsApproval: the
// approval's record the runner held is written alone when the task ends
// (here: cancelled while its request was filed) before it could carry it,
// so the audit keeps who authorized a task that never ran; nothing moves.
func TestGrantCovered_ATaskThatEndsBeforeItStartsStillWritesItsApproval(t *testing.T) {
	var rec *batchRecorder
	b := newBench(t, benchOpt{recorder: func(f *fakeRecorder) actions.Recorder {
		rec = &batchRecorder{fakeRecorder: f}
		return rec
	}})
	var saved []any
	b.appr.Covering = func(r actions.ApprovalRequest) actions.Decision {
		_, err := b.run.Cancel(context.Background(), r.TaskID, "agent")
		require.NoError(t, err)
		v := "approval record of " + r.TaskID
		return actions.Decision{
			Approved: true, By: "alice", GrantID: "grant-" + r.TaskID,
			Held: &actions.HeldRecord{Value: v, Save: func(context.Context) error { saved = append(saved, v); return nil }},
		}
	}
	v, err := b.submit("move_arm_to", map[string]any{"pose": "ready"})
	require.NoError(t, err)
	require.Equal(t, fsm.Cancelled, v.Status, v.Text)
	require.Equal(t, []any{"approval record of " + v.ID}, saved)
	require.Equal(t, []fsm.Event{"", fsm.EvCancel}, rec.trail())
	require.Empty(t, b.bot.commands())
}

// TestOperatorApproval_EveryTransitionStillItsOwnCommit: a call that
// waits for an operator writes each transition when it happens (the
// operator's wait is no place to hold a record).
func TestOperatorApproval_EveryTransitionStillItsOwnCommit(t *testing.T) {
	var rec *batchRecorder
	b := newBench(t, benchOpt{recorder: func(f *fakeRecorder) actions.Recorder {
		rec = &batchRecorder{fakeRecorder: f}
		return rec
	}})
	v, err := b.submit("move_arm_to", map[string]any{"pose": "ready"})
	require.NoError(t, err)
	require.Equal(t, fsm.AwaitingApproval, v.Status)
	commits, _ := rec.written()
	require.Equal(t, [][]fsm.Event{{""}, {fsm.EvNeedApproval}}, commits)
	b.approve(v)
	v = b.finish(v.ID)
	require.Equal(t, fsm.Succeeded, v.Status, v.Text)
	commits, at := rec.written()
	require.Equal(t, [][]fsm.Event{{""}, {fsm.EvNeedApproval}, {fsm.EvApprove}, {fsm.EvStart}, {fsm.EvSucceed}}, commits)
	require.Equal(t, []int{0, 0, 0, 0, 1}, at)
}
