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
	// mutate changes the task's fields together with its state.
	mutate func(t *task)
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

// fire records and applies ev to t. Unless mustRecord, a recorder failure
// is logged and the transition still happens.
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
		At: now, By: o.by, Reason: o.reason, GrantID: t.grantID, ApprovalID: t.approvalID,
	}
	r.mu.Unlock()
	if r.rec != nil {
		if err := r.rec.RecordTransition(context.WithoutCancel(t.ctx), rec); err != nil {
			if o.mustRecord {
				t.tmu.Unlock()
				r.log.Error("transition not recorded; its command will not be sent", "task", t.id, "event", ev, "err", err)
				return fmt.Errorf("record %s→%s: %w", from, to, err)
			}
			r.log.Error("transition not recorded", "task", t.id, "event", ev, "err", err)
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
	t.tmu.Unlock()
	r.log.Info("task transition", "task", t.id, "tool", t.req.Tool, "from", from, "to", to, "event", ev, "by", o.by)
	r.notify(v)
	return nil
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
