package actions

import (
	"context"
	"fmt"

	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// Cancel cancels a task. Awaiting approval (or approved, not started):
// the request is withdrawn and no motion is ever sent. Executing: the
// robot is stopped and Cancel returns once it is confirmed stopped (or
// ctx ends). A task already stopping, recovering or ended is returned as
// it is.
func (r *Runner) Cancel(ctx context.Context, id, by string) (TaskView, error) {
	if by == "" {
		by = "agent"
	}
	r.mu.Lock()
	t, ok := r.tasks[id]
	if ok && t.cancelBy == "" {
		t.cancelBy = by
	}
	r.mu.Unlock()
	if !ok {
		return TaskView{}, notFoundTask(id)
	}
	switch t.m.State() {
	case fsm.Requested, fsm.AwaitingApproval, fsm.Approved:
		r.cancelBeforeMotion(t, by, "cancelled by "+by)
		if t.m.State() == fsm.Executing || t.m.State() == fsm.Stopping {
			// Raced with the start: the motion is being stopped.
			t.cancel()
			return r.waitTerminal(ctx, t)
		}
		return r.Get(id)
	case fsm.Executing:
		t.cancel()
		return r.waitTerminal(ctx, t)
	}
	return r.Get(id)
}

func (r *Runner) waitTerminal(ctx context.Context, t *task) (TaskView, error) {
	select {
	case <-t.done:
	case <-ctx.Done():
	}
	return r.Get(t.id)
}

// cancelBeforeMotion ends a task that has sent nothing.
func (r *Runner) cancelBeforeMotion(t *task, by, reason string) {
	st, _, _ := r.sup.Latest()
	e := toolerr.New(toolerr.ActionFailed, "%s before it started; nothing moved; %s", reason, r.whereNow(t.plan, st))
	e.Suggestion = "the task was cancelled on request; ask the user before trying it again"
	err := r.fire(t, fsm.EvCancel, trOpts{by: by, reason: reason, mutate: func(t *task) { t.err, t.text = e, e.Message }})
	if err == nil {
		if aid := r.approvalID(t); aid != "" && r.approver != nil {
			r.approver.Withdraw(aid, reason)
		}
	}
}

// Stop is the stop tool: the stop command goes out at once, needs no
// approval, and the live task (if any) is cancelled.
func (r *Runner) Stop(ctx context.Context, by, reason string) (StopReport, error) {
	if by == "" {
		by = "agent"
	}
	if reason == "" {
		reason = "stop requested"
	}
	err := r.sup.Stop(ctx, by, reason)
	st, _, _ := r.sup.Latest()
	rep := StopReport{State: st}
	r.mu.Lock()
	t := r.live
	if t != nil && t.cancelBy == "" {
		t.cancelBy = by
	}
	r.mu.Unlock()
	if t != nil {
		switch t.m.State() {
		case fsm.Requested, fsm.AwaitingApproval, fsm.Approved:
			r.cancelBeforeMotion(t, by, "stopped by "+by)
		default:
			t.cancel()
		}
		rep.Cancelled = append(rep.Cancelled, t.id)
	}
	rep.Text = "stop sent; " + st.Summary()
	if t != nil {
		rep.Text = fmt.Sprintf("stop sent; task %s (%s) cancelled; %s", t.id, t.req.Tool, st.Summary())
	} else {
		rep.Text += "; no task was running"
	}
	if err != nil {
		return rep, err
	}
	return rep, nil
}

func (r *Runner) submitStop(ctx context.Context, req Request) (TaskView, error) {
	reason, _, _ := text(req.Arguments, "reason")
	rep, err := r.Stop(ctx, req.Principal, reason)
	now := r.clock.Now()
	v := TaskView{
		Tool: ToolStop, Arguments: cloneArgs(req.Arguments), Status: fsm.Succeeded, Text: rep.Text,
		Progress: Progress{Fraction: 1, Text: "stop sent"}, Result: map[string]any{"cancelled": rep.Cancelled, "robot": rep.State.Summary()},
		SessionID: req.SessionID, Principal: req.Principal, CreatedAt: now, UpdatedAt: now,
	}
	return v, err
}

// onSafetyEvent ends tasks that have not started moving when the e-stop
// latches (a moving task ends through its supervised motion).
func (r *Runner) onSafetyEvent(e safety.Event) {
	if e.Kind != safety.EventEStopPressed {
		return
	}
	r.mu.Lock()
	t := r.live
	r.mu.Unlock()
	if t == nil {
		return
	}
	switch t.m.State() {
	case fsm.Requested, fsm.AwaitingApproval, fsm.Approved:
		st, _, _ := r.sup.Latest()
		te := toolerr.New(toolerr.EStopActive, "the e-stop was pressed by %s (%s) before %s started; nothing moved; %s",
			e.By, orNone(e.Reason), t.req.Tool, r.whereNow(t.plan, st)).Wrap(safety.ErrEStopActive)
		if err := r.fire(t, fsm.EvEStop, trOpts{by: e.By, reason: e.Reason, mutate: func(t *task) { t.err, t.text = te, te.Message }}); err == nil {
			if aid := r.approvalID(t); aid != "" && r.approver != nil {
				r.approver.Withdraw(aid, "e-stop pressed")
			}
		}
	}
}

// Close cancels every live task (withdrawing approvals, stopping motion)
// and waits, bounded by ctx, for their goroutines.
func (r *Runner) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	t := r.live
	r.mu.Unlock()
	if t != nil {
		switch t.m.State() {
		case fsm.Requested, fsm.AwaitingApproval, fsm.Approved:
			r.cancelBeforeMotion(t, "bridge", "the bridge is shutting down")
		}
	}
	r.cancel()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("actions: close: %w", ctx.Err())
	}
	r.unobs()
	return err
}
