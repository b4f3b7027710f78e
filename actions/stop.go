package actions

import (
	"context"
	"fmt"

	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// Cancel cancels a task. Awaiting approval (or approved, not started):
// the request is withdrawn and no motion is ever sent. Executing,
// stopping or recovering: the robot is stopped, no recovery motion starts
// after the cancel, and Cancel returns once the task has ended (or ctx
// ends). A task that has ended is returned as it is.
//
// The supervisor records the cancel under its gate's lock before the
// task's state is read here, so the choice below cannot race the start:
// a task still before motion now will never send a command.
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
	if t.m.State().Terminal() {
		return r.Get(id)
	}
	err := r.sup.CancelTask(ctx, t.id, by, "cancel_task")
	r.endStopped(t, by, "cancelled by "+by)
	v, werr := r.waitTerminal(ctx, t)
	if err != nil {
		return v, err
	}
	return v, werr
}

// endStopped ends t after the supervisor recorded its stop: a task that
// never reached the start is cancelled with nothing sent; a moving one is
// told to stop and ends through its supervised motion.
func (r *Runner) endStopped(t *task, by, reason string) {
	// Refused (and harmless) when the start came first: the motion then
	// ends through the supervisor, which has recorded the stop.
	r.cancelBeforeMotion(t, by, reason)
	t.cancel()
}

func (r *Runner) waitTerminal(ctx context.Context, t *task) (TaskView, error) {
	select {
	case <-t.done:
	case <-ctx.Done():
	}
	return r.Get(t.id)
}

// observe describes the robot as the supervisor last heard from it, with
// the age of that news, so words about it are exactly as true as they can
// be now.
func (r *Runner) observe() robot.Observation {
	st, at, have := r.sup.Latest()
	return robot.Observation{
		State: st, Have: have, ReceivedAt: at, Now: r.clock.Now(),
		StaleAfter: r.cfg.Safety.StateTimeout.D(), LinkUp: r.sup.Status().LinkUp,
	}
}

// cancelBeforeMotion ends a task that has sent nothing.
func (r *Runner) cancelBeforeMotion(t *task, by, reason string) {
	st, _, _ := r.sup.Latest()
	e := toolerr.New(toolerr.ActionFailed, "%s before it started; nothing moved; %s", reason, whereNow(r.cfg, nil, st, untouched))
	e.Suggestion = "the task was cancelled on request; ask the user before trying it again"
	err := r.fire(t, fsm.EvCancel, trOpts{by: by, reason: reason, beforeMotion: true, mutate: func(t *task) { t.err, t.text = e, e.Message }})
	if err == nil {
		if aid := r.approvalID(t); aid != "" && r.approver != nil {
			r.approver.Withdraw(aid, reason)
		}
	}
}

// Stop is the stop tool: the stop command goes out at once, needs no
// approval, and the live task (if any) is cancelled whatever state it is
// in — before motion it never starts, during motion no further command of
// it leaves the gate and no recovery motion starts.
func (r *Runner) Stop(ctx context.Context, by, reason string) (StopReport, error) {
	if by == "" {
		by = "agent"
	}
	if reason == "" {
		reason = "stop requested"
	}
	r.mu.Lock()
	t := r.live
	if t != nil && t.cancelBy == "" {
		t.cancelBy = by
	}
	r.mu.Unlock()
	id := ""
	if t != nil {
		id = t.id
	}
	err := r.sup.StopTask(ctx, id, by, reason)
	obs := r.observe()
	if err == nil {
		// Only a state received after this moment can show it stopped.
		obs.StopSentAt = obs.Now
	}
	rep := StopReport{State: obs.State, Robot: obs.Summary()}
	if t != nil {
		r.endStopped(t, by, "stopped by "+by)
		rep.Cancelled = append(rep.Cancelled, t.id)
	}
	if t != nil {
		rep.Text = fmt.Sprintf("task %s (%s) cancelled; %s", t.id, t.req.Tool, rep.Robot)
	} else {
		rep.Text = rep.Robot + "; no task was running"
	}
	if err != nil {
		rep.Text = "the stop command could not be delivered; " + rep.Text
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
		Progress: Progress{Fraction: 1, Text: "stop sent"}, Result: map[string]any{"cancelled": rep.Cancelled, "robot": rep.Robot},
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
	// Every pending request goes, not only the live task's (ended first,
	// so it ends estopped): none filed before the e-stop may be approved
	// after its reset.
	defer func() {
		if bw, ok := r.approver.(BulkWithdrawer); ok {
			bw.WithdrawAll("e-stop pressed by " + orSomeone(e.By))
		}
	}()
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
			e.By, orNone(e.Reason), t.req.Tool, whereNow(r.cfg, nil, st, untouched)).Wrap(safety.ErrEStopActive)
		if err := r.fire(t, fsm.EvEStop, trOpts{by: e.By, reason: e.Reason, beforeMotion: true, mutate: func(t *task) { t.err, t.text = te, te.Message }}); err == nil {
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
