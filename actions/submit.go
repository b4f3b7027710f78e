package actions

import (
	"context"
	"time"

	"github.com/robot-bridge/robot-bridge/fsm"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// Submit validates and plans a tool call, checks its limits, and creates
// a task that waits for approval or starts at once. It returns as soon as
// the task exists. Errors are *toolerr.Error; no task exists after one.
// The stop and cancel_task tools run synchronously: stop returns a
// succeeded view with no id whose Result lists the cancelled tasks;
// cancel_task returns the cancelled task's view.
func (r *Runner) Submit(ctx context.Context, req Request) (TaskView, error) {
	v, err := r.submit(ctx, req)
	return v, asSentences(err)
}

func (r *Runner) submit(ctx context.Context, req Request) (TaskView, error) {
	switch req.Tool {
	case ToolStop:
		return r.submitStop(ctx, req)
	case ToolReturnToSafePose:
		if !r.cfg.HasArm() {
			// A base-only robot's safe pose is "base stopped": stopping
			// needs no approval and cannot be made less safe.
			if err := checkKeys(ToolReturnToSafePose, req.Arguments); err != nil {
				return TaskView{}, err
			}
			v, err := r.submitStop(ctx, Request{
				Tool: ToolStop, Arguments: map[string]any{},
				SessionID: req.SessionID, Principal: req.Principal, TraceID: req.TraceID,
			})
			v.Tool, v.Arguments = ToolReturnToSafePose, cloneArgs(req.Arguments)
			v.Text = baseOnlySafePoseText(v.Text)
			return v, err
		}
	case ToolCancelTask:
		id, ok, err := text(req.Arguments, "task_id")
		if err != nil {
			return TaskView{}, err
		}
		if !ok {
			return TaskView{}, invalid("task_id", nil, "a task id", "cancel_task needs task_id")
		}
		if err := checkKeys(ToolCancelTask, req.Arguments, "task_id"); err != nil {
			return TaskView{}, err
		}
		by := req.Principal
		if by == "" {
			by = "agent"
		}
		return r.Cancel(ctx, id, by)
	}
	if r.isClosed() {
		return TaskView{}, toolerr.New(toolerr.Unavailable, "the bridge is shutting down")
	}
	policy, ok := r.cfg.ActionPolicy(req.Tool)
	if !ok {
		e := toolerr.New(toolerr.UnknownTool, "%q is not an action tool this robot offers (available: %s)", req.Tool, fmtList(r.cfg.ToolNames())).
			With("closest", r.cfg.ToolNames())
		return TaskView{}, e
	}
	// The latch generation is read before the check: a latch that comes
	// (and even goes) while the call is planned changes it, and the call
	// then ends before any operator sees it.
	gen := r.sup.LatchGeneration()
	if err := r.refuseLatched(); err != nil {
		return TaskView{}, err
	}
	if err := r.refuseBusy(); err != nil {
		return TaskView{}, err
	}
	args := cloneArgs(req.Arguments)
	p, err := r.pl.plan(ctx, req.Tool, args)
	if err != nil {
		return TaskView{}, toolerr.As(err)
	}
	// Limits before any operator is asked.
	if err := r.sup.CheckLimits(p.commands()...); err != nil {
		te := toolerr.As(err)
		if te.Type == toolerr.SafetyViolation {
			te = refusedBeforeAskingError(req.Tool, te)
		}
		return TaskView{}, te
	}
	needApproval := policy.Approval != hwconfig.ApprovalNever
	if needApproval && r.approver == nil {
		e := toolerr.New(toolerr.PermissionDenied, "%s needs an operator's approval, but no approval service is configured; nothing moved.", req.Tool)
		e.Suggestion = "tell the user that this bridge has no operator console for approvals; only tools configured with approval: never can run"
		return TaskView{}, e
	}
	now := r.clock.Now()
	tctx, tcancel := context.WithCancel(r.ctx)
	t := &task{
		id: r.newID(), req: req, args: args, plan: p, m: fsm.New(fsm.Requested), ctx: tctx, cancel: tcancel,
		done: make(chan struct{}), createdAt: now, updatedAt: now, changed: make(chan struct{}),
		stepStart: make([]float64, len(p.steps)),
	}
	for i := range t.stepStart {
		t.stepStart[i] = -1
	}
	t.text = requestedText(p.preview)
	// Register atomically with the busy check.
	r.mu.Lock()
	if r.live != nil {
		other := r.live
		r.mu.Unlock()
		tcancel()
		return TaskView{}, busyError(other.id, other.req.Tool, other.m.State())
	}
	if _, dup := r.tasks[t.id]; dup {
		r.mu.Unlock()
		tcancel()
		return TaskView{}, toolerr.New(toolerr.Internal, "task id %q already exists", t.id)
	}
	r.tasks[t.id] = t
	r.order = append(r.order, t.id)
	r.live = t
	forget := r.pruneLocked()
	r.mu.Unlock()
	for _, id := range forget {
		r.sup.ForgetTask(id)
	}
	by := req.Principal
	if by == "" {
		by = "agent"
	}
	if r.rec != nil {
		created := TransitionRecord{
			RobotID: r.robotID(),
			TaskID:  t.id, Tool: req.Tool, Arguments: cloneArgs(args), To: fsm.Requested,
			At: now, By: by, Reason: p.preview,
		}
		_, batch := r.rec.(BatchRecorder)
		switch {
		case !needApproval || batch:
			// Authorized by the config, or maybe by a scoped grant:
			// created, approved and executing are one commit, made
			// before the first command leaves. A request that waits for
			// an operator writes the creation first (BeforeFile below).
			r.holdCreation(t, created)
		default:
			// Recorded before the approval service records its request.
			if err := r.rec.RecordTransition(ctx, created); err != nil {
				r.log.Error("task creation not recorded", "task", t.id, "err", err)
			}
		}
	}
	// Registered as live now, so an e-stop from here on ends the task
	// through onSafetyEvent; one that latched while it was planned ends it
	// here.
	if err := r.refuseLatchedSince(t, gen); err != nil {
		return TaskView{}, err
	}
	if !needApproval {
		if err := r.fire(t, fsm.EvPreauthorized, trOpts{by: "config", reason: "approval: never for " + req.Tool, hold: true, mutate: func(t *task) {
			t.text = preauthorizedText(p.preview)
		}}); err != nil {
			// Ended in the meantime (an e-stop): that transition wrote the
			// creation's record.
			return r.Get(t.id)
		}
		return r.start(ctx, t), nil
	}
	ar := ApprovalRequest{
		TaskID: t.id, Tool: req.Tool, Arguments: cloneArgs(args), ArgsHash: safety.ArgsHash(req.Tool, args),
		RobotID: r.robotID(), Preview: p.preview, Target: p.target, RobotState: r.observe().Summary(), RequestedBy: by, SessionID: req.SessionID,
	}
	if _, batch := r.rec.(BatchRecorder); batch {
		ar.HoldRecord = true
		ar.BeforeFile = func() { r.flushHeld(t) }
	}
	approvalID, decision, err := r.approver.Request(ctx, ar)
	if err != nil {
		// A latch that engaged while the request was filed is why the
		// approval service refused it: say so (ESTOP_ACTIVE, not
		// retryable), not "could not be filed, retry in a second".
		if lerr := r.refuseLatchedSince(t, gen); lerr != nil {
			return TaskView{}, lerr
		}
		te := toolerr.New(toolerr.Unavailable, "The approval request for %s could not be filed: %s; nothing moved.", req.Tool, toolerr.Clause(toolerr.As(err).Message)).Wrap(err)
		te.RetryAfter = time.Second
		_ = r.fire(t, fsm.EvReject, trOpts{by: "approval", reason: err.Error(), mutate: func(t *task) {
			t.err, t.text = te, te.Message
		}})
		return TaskView{}, te
	}
	if err := r.refuseLatchedSince(t, gen); err != nil {
		r.approver.Withdraw(approvalID, "a latch engaged while the request was filed")
		return TaskView{}, err
	}
	// A call an operator's scoped grant covered is decided when it is
	// filed: the task answers approved (and says by which grant), never
	// "waiting for an operator" while its motion starts; its awaiting and
	// approved records go with the start's, in one commit.
	var d Decision
	decided := false
	select {
	case got, ok := <-decision:
		d, decided = got, true
		if !ok {
			d = Decision{Cancelled: true, Reason: "the approval service closed the request"}
		}
	default:
	}
	if err := r.fire(t, fsm.EvNeedApproval, trOpts{by: by, reason: "approval requested", hold: decided && d.Approved, mutate: func(t *task) {
		t.approvalID = approvalID
		t.text = waitingText(p.preview)
	}}); err != nil {
		// Cancelled or e-stopped in the meantime.
		r.approver.Withdraw(approvalID, "task ended before approval was requested")
		r.saveHeldApproval(t, d)
		return r.Get(t.id)
	}
	if decided {
		if !r.decideHeld(t, d, grantText(d, p.preview), true) {
			// Not approved, or ended first: that transition wrote what
			// was held; make sure nothing stays held.
			r.flushHeld(t)
			r.saveHeldApproval(t, d)
			return r.view(t), nil
		}
		return r.start(ctx, t), nil
	}
	r.wg.Add(1)
	go r.run(t, decision)
	return r.Get(t.id)
}

// start sets t's motion going and returns the answer to the call: the
// task as its authorization left it (taken once the motion's goroutine
// runs, it could race the start), once the records held until the start
// are on the disk; when they could not be written, the task as it is
// then (it sent nothing and has ended, saying why).
func (r *Runner) start(ctx context.Context, t *task) TaskView {
	v := r.view(t)
	ch := t.settledCh()
	r.wg.Add(1)
	go r.run(t, nil)
	if !r.awaitSettled(ctx, t, ch) {
		return r.view(t)
	}
	return v
}

func (r *Runner) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

func (r *Runner) refuseBusy() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.live != nil {
		return busyError(r.live.id, r.live.req.Tool, r.live.m.State())
	}
	return nil
}

func (r *Runner) refuseLatched() error {
	if err := r.sup.RefuseLatched(); err != nil {
		return toolerr.As(err)
	}
	s := r.sup.Status()
	// A motion requested while the robot cannot be reached fails fast: no
	// operator is asked to approve something that cannot be supervised.
	if !s.LinkUp || !s.HaveState {
		why := "the robot link is down"
		if s.LinkUp {
			why = "no state has arrived from the robot yet"
		}
		e := toolerr.New(toolerr.Unavailable, "%s; no motion can be requested until the bridge hears from the robot again.", capFirst(why)).
			With("link_up", s.LinkUp)
		e.RetryAfter = linkRetryAfter
		return e
	}
	return nil
}

// refuseLatchedSince ends t, which has sent nothing, when an e-stop or
// fault latched since generation gen (planning took a moment, or the
// approval request was being filed), and returns the refusal.
func (r *Runner) refuseLatchedSince(t *task, gen uint64) error {
	if r.sup.LatchGeneration() == gen {
		return nil
	}
	var te *toolerr.Error
	if err := r.sup.RefuseLatched(); err != nil {
		te = latchedWhilePlanningError(t.req.Tool, toolerr.As(err))
	} else {
		te = latchedWhilePlanningError(t.req.Tool, nil)
	}
	ev := fsm.EvReject
	if te.Type == toolerr.EStopActive {
		ev = fsm.EvEStop
	}
	_ = r.fire(t, ev, trOpts{by: "supervisor", reason: te.Message, mutate: func(t *task) { t.err, t.text = te, te.Message }})
	return te
}

// linkRetryAfter is the retry hint given while the robot link is down.
const linkRetryAfter = 2 * time.Second

// pruneLocked forgets the oldest ended tasks beyond MaxTasks and returns
// their ids, for the supervisor to forget them too (outside r.mu).
func (r *Runner) pruneLocked() []string {
	var forgot []string
	for len(r.order) > r.maxTasks {
		dropped := false
		for i, id := range r.order {
			if r.tasks[id].m.State().Terminal() {
				delete(r.tasks, id)
				r.order = append(r.order[:i], r.order[i+1:]...)
				forgot = append(forgot, id)
				dropped = true
				break
			}
		}
		if !dropped {
			break
		}
	}
	return forgot
}
