package actions

import (
	"context"
	"errors"
	"fmt"

	"github.com/robot-bridge/robot-bridge/fsm"
)

type trOpts struct {
	by, reason string
	// mustRecord makes a recorder failure abort the transition (the
	// transition implies a motion command that must not be sent
	// unrecorded).
	mustRecord bool
	// hold makes the transition without writing its record yet: the
	// record (and the task's view, for the observer) waits for the next
	// transition of the task and is written in the same commit, before
	// that one takes effect. Only for a transition that implies no command
	// and is followed at once by one that does (a call authorized when it
	// is made: approved, then executing), so the three records before the
	// first command are one commit. Whoever holds a record makes sure the
	// next transition comes (the start, or the end of the task) and
	// answers no one before it has (awaitSettled).
	hold bool
	// mutate changes the task's fields together with its state.
	mutate func(t *task)
	// approval is written with the transition's record
	// (TransitionRecord.Approval).
	approval any
	// beforeMotion makes the transition happen only from a state in which
	// the task has sent nothing (requested, awaiting approval, approved).
	// The start is a transition too, taken under the same task lock, so
	// an event fired with beforeMotion either lands before the start (and
	// the start then fails) or is refused because the start came first —
	// never "nothing moved" said of a task whose command is on its way.
	beforeMotion bool
}

// errStarted refuses a beforeMotion transition of a task that started.
var errStarted = errors.New("the task has started its motion")

func preMotion(s fsm.State) bool {
	return s == fsm.Requested || s == fsm.AwaitingApproval || s == fsm.Approved
}

// fire records and applies ev to t. The records of held transitions
// (trOpts.hold) are written first, in the same commit when the recorder
// is a BatchRecorder. Unless mustRecord, a recorder failure is logged and
// the transition still happens; with mustRecord it does not happen, and
// the held records wait for the next transition.
func (r *Runner) fire(t *task, ev fsm.Event, o trOpts) error {
	t.tmu.Lock()
	from := t.m.State()
	if o.beforeMotion && !preMotion(from) {
		t.tmu.Unlock()
		return errStarted
	}
	to, ok := fsm.Next(from, ev)
	if !ok {
		t.tmu.Unlock()
		return &fsm.TransitionError{From: from, Event: ev}
	}
	now := r.clock.Now()
	r.mu.Lock()
	rec := TransitionRecord{
		RobotID: r.robotID(),
		TaskID:  t.id, Tool: t.req.Tool, Arguments: cloneArgs(t.args), From: from, To: to, Event: ev,
		At: now, By: o.by, Reason: o.reason, GrantID: t.grantID, ApprovalID: t.approvalID, Approval: o.approval,
	}
	r.mu.Unlock()
	hold := o.hold && r.rec != nil && !to.Terminal()
	var recErr error
	if r.rec != nil && !hold {
		n, err := r.record(context.WithoutCancel(t.ctx), append(t.pending, rec))
		if err != nil {
			if o.mustRecord {
				// The held records stay held (those a plain Recorder
				// wrote before it failed excepted): they go with the next
				// transition, the end of the task.
				t.pending = t.pending[min(n, len(t.pending)):]
				t.tmu.Unlock()
				r.log.Error("transition not recorded; its command will not be sent", "task", t.id, "event", ev, "err", err)
				return fmt.Errorf("record %s→%s: %w", from, to, err)
			}
			r.log.Error("transition not recorded", "task", t.id, "event", ev, "held", len(t.pending), "err", err)
			recErr = err
		}
	}
	// The state and the fields mutate sets change together under r.mu, so
	// no view shows a terminal status without its error; pmu is held
	// until the view is delivered, so no older view overtakes it.
	t.pmu.Lock()
	defer t.pmu.Unlock()
	r.mu.Lock()
	if _, _, err := t.m.Fire(ev); err != nil {
		r.mu.Unlock()
		t.tmu.Unlock()
		return err
	}
	t.updatedAt = now
	if o.mutate != nil {
		o.mutate(t)
	}
	if to.Terminal() {
		close(t.done)
		if r.live == t {
			r.live = nil
		}
		t.cancel()
	}
	close(t.changed)
	t.changed = make(chan struct{})
	v := r.viewLocked(t)
	r.mu.Unlock()
	if hold {
		t.pending = append(t.pending, rec)
		t.held = append(t.held, v)
		if t.settled == nil {
			t.settled = make(chan struct{})
		}
		t.tmu.Unlock()
		r.log.Info("task transition", "task", t.id, "tool", t.req.Tool, "from", from, "to", to, "event", ev, "by", o.by, "record", "with the next")
		return nil
	}
	held := t.held
	t.pending, t.held = nil, nil
	if t.settled != nil {
		t.settleErr = recErr
		close(t.settled)
		t.settled = nil
	}
	t.tmu.Unlock()
	r.log.Info("task transition", "task", t.id, "tool", t.req.Tool, "from", from, "to", to, "event", ev, "by", o.by)
	for _, hv := range held {
		r.notify(hv)
	}
	r.notify(v)
	return nil
}

// record writes recs in order, in one commit when the recorder can, and
// reports how many of them are written when it fails (a plain Recorder
// writes them one by one).
func (r *Runner) record(ctx context.Context, recs []TransitionRecord) (int, error) {
	if len(recs) == 1 {
		return 0, r.rec.RecordTransition(ctx, recs[0])
	}
	if br, ok := r.rec.(BatchRecorder); ok {
		if err := br.RecordTransitions(ctx, recs); err != nil {
			return 0, err
		}
		return len(recs), nil
	}
	for i, rec := range recs {
		if err := r.rec.RecordTransition(ctx, rec); err != nil {
			return i, err
		}
	}
	return len(recs), nil
}

// holdCreation holds the record of t's creation (requested), for the
// next transition to carry.
func (r *Runner) holdCreation(t *task, rec TransitionRecord) {
	t.tmu.Lock()
	defer t.tmu.Unlock()
	t.pending = append(t.pending, rec)
	if t.settled == nil {
		t.settled = make(chan struct{})
	}
}

// settledCh returns the channel closed once t's held records are written
// (nil when none are held).
func (t *task) settledCh() chan struct{} {
	t.tmu.Lock()
	defer t.tmu.Unlock()
	return t.settled
}

// awaitSettled waits until the held records of t are written — by the
// transition that follows them, the start or the task's end, which the
// caller has set going — and reports whether they were: an answer that
// shows a held transition must not leave before its record is on the
// disk. ch is from settledCh, taken before that transition could happen.
func (r *Runner) awaitSettled(ctx context.Context, t *task, ch chan struct{}) bool {
	if ch == nil {
		return true
	}
	select {
	case <-ch:
	case <-ctx.Done():
		return false
	}
	t.tmu.Lock()
	defer t.tmu.Unlock()
	return t.settleErr == nil
}

// flushHeld writes t's held records now, with no transition of their
// own, for a task that will make none soon.
func (r *Runner) flushHeld(t *task) {
	t.tmu.Lock()
	if len(t.pending) == 0 && len(t.held) == 0 {
		t.tmu.Unlock()
		return
	}
	t.pmu.Lock()
	defer t.pmu.Unlock()
	var err error
	if r.rec != nil && len(t.pending) > 0 {
		if _, err = r.record(context.WithoutCancel(t.ctx), t.pending); err != nil {
			r.log.Error("transitions not recorded", "task", t.id, "held", len(t.pending), "err", err)
		}
	}
	held := t.held
	t.pending, t.held = nil, nil
	if t.settled != nil {
		t.settleErr = err
		close(t.settled)
		t.settled = nil
	}
	t.tmu.Unlock()
	for _, hv := range held {
		r.notify(hv)
	}
}

// saveHeldApproval writes the approval's record d holds (Decision.Held)
// on its own, for a task that ended before its approved transition could
// carry it: the audit keeps who authorized a task even when it never ran.
func (r *Runner) saveHeldApproval(t *task, d Decision) {
	if d.Held == nil || d.Held.Save == nil {
		return
	}
	if err := d.Held.Save(context.WithoutCancel(t.ctx)); err != nil {
		r.log.Error("approval not recorded", "task", t.id, "err", err)
	}
}

func (r *Runner) notify(v TaskView) {
	if r.obs != nil {
		r.obs.TaskChanged(v)
	}
}

func (r *Runner) setProgress(t *task, p Progress) {
	// Held from the view to its delivery: see task.pmu.
	t.pmu.Lock()
	defer t.pmu.Unlock()
	r.mu.Lock()
	changed := t.progress.Text != p.Text || t.progress.Fraction != p.Fraction
	t.progress = p
	var v TaskView
	if changed {
		t.updatedAt = r.clock.Now()
		v = r.viewLocked(t)
	}
	r.mu.Unlock()
	if changed {
		r.notify(v)
	}
}

func (r *Runner) approvalID(t *task) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return t.approvalID
}

func (r *Runner) cancelledBy(t *task) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.cancelBy != "" {
		return t.cancelBy
	}
	return "agent"
}

func (r *Runner) view(t *task) TaskView {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.viewLocked(t)
}
