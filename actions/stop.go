package actions

import (
	"context"
	"fmt"

	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/safety"
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
	err := r.sup.CancelTask(ctx, t.id, by, cancelReason)
	r.endStopped(t, by, "cancelled by "+by, safety.StopRequest{Cause: safety.StopByRequest, By: by, Reason: cancelReason})
	v, werr := r.waitTerminal(ctx, t)
	if err != nil {
		return v, asSentences(err)
	}
	return v, asSentences(werr)
}

// endStopped ends t after the supervisor recorded its stop: a task that
// never reached the start is cancelled with nothing sent; a moving one is
// told to stop and ends through its supervised motion. reason is the
// transition's record; req says in the task's words who stopped it.
func (r *Runner) endStopped(t *task, by, reason string, req safety.StopRequest) {
	// Refused (and harmless) when the start came first: the motion then
	// ends through the supervisor, which has recorded the stop.
	r.cancelBeforeMotion(t, by, reason, req)
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

// cancelBeforeMotion ends a task that has sent nothing; reason is the
// transition's record, req what stopped it, for the task's words.
func (r *Runner) cancelBeforeMotion(t *task, by, reason string, req safety.StopRequest) {
	st, _, _ := r.sup.Latest()
	e := beforeStartError(t.req.Tool, req, whereNow(r.cfg, nil, st, untouched))
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
		reason = defaultStopReason
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
		r.endStopped(t, by, "stopped by "+by, safety.StopRequest{Cause: safety.StopByRequest, By: by, Reason: reason})
		rep.Cancelled = append(rep.Cancelled, t.id)
		rep.Text = stopText(rep.Robot, t.id, t.req.Tool, err == nil)
	} else {
		rep.Text = stopText(rep.Robot, "", "", err == nil)
	}
	if err != nil {
		return rep, asSentences(err)
	}
	return rep, nil
}

func (r *Runner) submitStop(ctx context.Context, req Request) (TaskView, error) {
	reason, _, _ := text(req.Arguments, "reason")
	rep, err := r.Stop(ctx, req.Principal, reason)
	now := r.clock.Now()
	v := TaskView{
		RobotID: r.robotID(), Tool: ToolStop, Arguments: cloneArgs(req.Arguments), Status: fsm.Succeeded, Text: rep.Text,
		Progress: Progress{Fraction: 1, Text: progressStopSent}, Result: map[string]any{"cancelled": rep.Cancelled, "robot": rep.Robot},
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
			by := e.By
			if by == "" {
				by = "an operator"
			}
			bw.WithdrawAll("e-stop pressed by " + by)
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
		te := estopBeforeStartError(t.req.Tool, e.By, e.Reason, whereNow(r.cfg, nil, st, untouched))
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
			r.cancelBeforeMotion(t, "bridge", "the bridge is shutting down", safety.StopRequest{Cause: safety.StopByRequest, By: "bridge"})
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
