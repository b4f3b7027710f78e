package actions

import (
	"time"

	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// run waits for the operator's decision (when decision is non-nil), then
// executes the task under the supervisor and ends it.
func (r *Runner) run(t *task, decision <-chan Decision) {
	defer r.wg.Done()
	if decision != nil {
		if !r.awaitDecision(t, decision) {
			return
		}
	}
	r.execute(t)
}

func (r *Runner) awaitDecision(t *task, decision <-chan Decision) bool {
	// The approval service expires requests itself; this bound only keeps
	// a task from waiting forever on a service that never answers.
	ttl := r.cfg.Safety.ApprovalTTL.D()
	if ttl <= 0 {
		ttl = time.Minute
	}
	tm := r.clock.NewTimer(ttl + 5*time.Second)
	defer tm.Stop()
	var d Decision
	var ok bool
	select {
	case d, ok = <-decision:
		if !ok {
			d = Decision{Cancelled: true, Reason: "the approval service closed the request"}
		}
	case <-tm.Chan():
		d = Decision{Expired: true, Reason: "no decision arrived from the approval service"}
		r.approver.Withdraw(r.approvalID(t), "expired in the action runner")
	case <-t.ctx.Done():
		// Cancelled, e-stopped or closing: whoever ended it made the transition.
		return false
	}
	return r.decide(t, d, approvedText(d.By, t.plan.preview))
}

// decide applies an operator's (or a grant's) decision to a task waiting
// for one, and reports whether the task may start; approved is the text
// of an approved task.
func (r *Runner) decide(t *task, d Decision, approved string) bool {
	return r.decideHeld(t, d, approved, false)
}

// decideHeld is decide; hold holds an approval's record for the start to
// carry (trOpts.hold).
func (r *Runner) decideHeld(t *task, d Decision, approved string, hold bool) bool {
	switch {
	case d.Approved:
		var rec any
		if d.Held != nil {
			rec = d.Held.Value
		}
		err := r.fire(t, fsm.EvApprove, trOpts{by: d.By, reason: d.Reason, hold: hold, approval: rec, mutate: func(t *task) {
			t.grantID = d.GrantID
			t.text = approved
		}})
		return err == nil
	case d.Expired:
		te := expiredError(t.req.Tool, r.observe().Summary())
		_ = r.fire(t, fsm.EvExpire, trOpts{by: "approval", reason: d.Reason, mutate: func(t *task) { t.err, t.text = te, te.Message }})
	case d.Cancelled:
		// Withdrawn: the canceller fires the transition; make sure it ends.
		te := withdrawnError(d.Reason)
		by := d.By
		if by == "" {
			by = "an operator"
		}
		_ = r.fire(t, fsm.EvCancel, trOpts{by: by, reason: d.Reason, mutate: func(t *task) { t.err, t.text = te, te.Message }})
	default:
		te := deniedError(t.req.Tool, d, r.observe().Summary())
		_ = r.fire(t, fsm.EvDeny, trOpts{by: d.By, reason: d.Reason, mutate: func(t *task) { t.err, t.text = te, te.Message }})
	}
	return false
}

func (r *Runner) execute(t *task) {
	r.mu.Lock()
	grant := t.grantID
	r.mu.Unlock()
	p := t.plan
	m := safety.Motion{
		Auth:     safety.Authorization{TaskID: t.id, Tool: t.req.Tool, Args: t.args, GrantID: grant},
		Steps:    p.steps,
		Deadline: p.deadline,
		Hooks: safety.Hooks{
			BeforeStart: func() error {
				// Where the robot is as its first command leaves: a cancel
				// that finds it still there says it never moved.
				start, _, _ := r.sup.Latest()
				return r.fire(t, fsm.EvStart, trOpts{by: "supervisor", mustRecord: true, mutate: func(t *task) {
					t.startState = start
					t.text = startedText(p.describe(0))
					t.progress = Progress{Fraction: 0, Text: p.describe(0)}
				}})
			},
			Progress: func(step int, st robot.State) {
				r.noteMoved(t, st)
				r.setProgress(t, r.progressOf(t, step, st))
			},
			Stopped: func(tr safety.Trip) {
				switch tr.Kind {
				case safety.TripShutdown:
					return
				case safety.TripCancelled:
					by := tr.By
					if by == "" {
						by = r.cancelledBy(t)
					}
					_ = r.fire(t, fsm.EvCancel, trOpts{by: by, reason: tr.Detail, mutate: func(t *task) {
						t.text = stoppingText(tr, by)
						t.paused = nil
					}})
				case safety.TripAborted:
					_ = r.fire(t, fsm.EvAbort, trOpts{by: tr.By, reason: tr.Detail, mutate: func(t *task) {
						t.text = stoppingText(tr, tr.By)
						t.paused = nil
					}})
				default:
					_ = r.fire(t, fsm.EvAbort, trOpts{by: "supervisor", reason: string(tr.Kind) + ": " + tr.Detail, mutate: func(t *task) {
						t.text = stoppingText(tr, "supervisor")
						t.paused = nil
					}})
				}
			},
			Paused: func(pi safety.PauseInfo) {
				pv := &PauseView{By: pi.By, Reason: pi.Reason, Since: pi.Since, EndsAt: pi.EndsAt}
				_ = r.fire(t, fsm.EvPause, trOpts{by: pi.By, reason: pi.Reason, mutate: func(t *task) {
					t.paused, t.pauseStep = pv, pi.Step
					t.text = pausedText(pi.Reason, pi.By, pi.EndsAt)
					// The task's text says it is paused; a progress phrase
					// would say it again.
					t.progress.Text = ""
				}})
			},
			BeforeResume: func(by string) error {
				return r.fire(t, fsm.EvResume, trOpts{by: by, reason: "resumed by " + by, mustRecord: true, mutate: func(t *task) {
					t.paused = nil
					t.text = resumedText(by)
					t.progress.Text = t.plan.describe(t.pauseStep)
				}})
			},
			BeforeRecovery: func() error {
				name, _ := r.sup.SafePose()
				return r.fire(t, fsm.EvRecover, trOpts{
					by: "supervisor", reason: "pre-authorized return to " + name, mustRecord: true,
					mutate: func(t *task) { t.text = recoveringText(name) },
				})
			},
		},
	}
	out := r.sup.Execute(t.ctx, m)
	r.finish(t, out)
}

// finish maps the supervisor's outcome onto the task's final transitions.
func (r *Runner) finish(t *task, out safety.Outcome) {
	p := t.plan
	st := out.State
	m := atRest
	if !out.StopConfirmed && out.Kind != safety.OutcomeSucceeded {
		m = stopUnconfirmed
	}
	if out.Kind == safety.OutcomeRejected {
		m = untouched
	}
	where := whereNow(r.cfg, p, st, m)
	switch out.Kind {
	case safety.OutcomeSucceeded:
		res := p.result(st)
		text := succeededText(p.done, where)
		if len(out.Warnings) > 0 {
			// The robot's verdict stands; the bridge's own check that
			// disagrees is said, never hidden and never turned into a
			// failure.
			ws := make([]string, len(out.Warnings))
			for i, w := range out.Warnings {
				ws[i] = w.Text()
			}
			if res == nil {
				res = map[string]any{}
			}
			res["warnings"] = ws
			text += " " + warningText(ws)
		}
		_ = r.fire(t, fsm.EvSucceed, trOpts{by: "supervisor", mutate: func(t *task) {
			t.result = res
			t.progress = Progress{Fraction: 1, Text: progressFinished}
			t.text = text
		}})
	case safety.OutcomeRejected:
		if out.Stop != nil {
			// Stopped before its first command: the stopper cancels it too
			// (whichever is first wins), with the same words.
			by := out.Stop.By
			if by == "" {
				by = "an operator"
			}
			r.cancelBeforeMotion(t, by, out.Stop.Detail(), *out.Stop)
			break
		}
		te := toolerr.As(out.Err)
		e := *te
		e.Message = toolerr.Sentence(te.Message) + " " + now(where)
		ev := fsm.EvReject
		if e.Type == toolerr.EStopActive {
			ev = fsm.EvEStop
		}
		if t.m.State() == fsm.Executing {
			// Admitted and recorded but refused right after: cannot happen
			// with the gate's lock, but never leave a task hanging.
			ev = fsm.EvAbort
		}
		_ = r.fire(t, ev, trOpts{by: "supervisor", reason: te.Message, mutate: func(t *task) { t.err, t.text = &e, e.Message }})
		if ev == fsm.EvAbort {
			_ = r.fire(t, fsm.EvLatchFault, trOpts{by: "supervisor", reason: te.Message})
		}
	case safety.OutcomeCancelled:
		by := r.cancelledBy(t)
		if out.Stop != nil && out.Stop.By != "" {
			by = out.Stop.By
		}
		if out.Stop == nil || out.Stop.By == "" {
			stop := safety.StopRequest{Cause: safety.StopByRequest}
			if out.Stop != nil {
				stop = *out.Stop
			}
			stop.By = by
			out.Stop = &stop
		}
		r.mu.Lock()
		start, moved := t.startState, t.moved
		r.mu.Unlock()
		if !moved && !movedSince(start, st) {
			// The first command left but the robot never moved: the task
			// was cancelled before it moved, no distance short of anything
			// (issue 14). A cancel the agent or an operator asked for is
			// no failure; a grant withdrawn or run out keeps its typed
			// error, which tells the agent not to ask again unprompted.
			text := cancelledBeforeMovedText(t.req.Tool, *out.Stop, out.StopConfirmed, whereNow(r.cfg, nil, st, untouched))
			e := cancelledBeforeMovedError(*out.Stop, out.StopConfirmed, text)
			_ = r.fire(t, fsm.EvStopConfirmed, trOpts{by: by, reason: out.Stop.Detail() + "; robot confirmed stopped before it moved", mutate: func(t *task) { t.err, t.text = e, text }})
			break
		}
		e := cancelledError(t.req.Tool, out, progressWords(r.view(t)), where)
		_ = r.fire(t, fsm.EvStopConfirmed, trOpts{by: by, reason: out.Stop.Detail() + "; robot confirmed stopped", mutate: func(t *task) { t.err, t.text = e, e.Message }})
	case safety.OutcomeRecovered:
		if t.m.State() == fsm.Stopping {
			_ = r.fire(t, fsm.EvRecover, trOpts{by: "supervisor", reason: out.Recovery.Text})
		}
		e := failureError(t.req.Tool, out, where)
		_ = r.fire(t, fsm.EvRecovered, trOpts{by: "supervisor", reason: out.Recovery.Text, mutate: func(t *task) { t.err, t.text = e, e.Message }})
	case safety.OutcomeFault:
		if st := t.m.State(); st == fsm.Executing || st == fsm.Paused {
			_ = r.fire(t, fsm.EvAbort, trOpts{by: "supervisor", reason: out.FaultReason})
		}
		e := failureError(t.req.Tool, out, where)
		_ = r.fire(t, fsm.EvLatchFault, trOpts{by: "supervisor", reason: out.FaultReason, mutate: func(t *task) { t.err, t.text = e, e.Message }})
	case safety.OutcomeEStopped:
		s := r.sup.Status()
		e := estopDuringError(t.req.Tool, s.EStop.By, s.EStop.Reason, out.StopConfirmed, where)
		_ = r.fire(t, fsm.EvEStop, trOpts{by: s.EStop.By, reason: s.EStop.Reason, mutate: func(t *task) { t.err, t.text = e, e.Message }})
	case safety.OutcomeInterrupted:
		e := shutdownError(t.req.Tool, whereNow(r.cfg, p, st, stopUnconfirmed))
		_ = r.fire(t, fsm.EvInterrupt, trOpts{by: "supervisor", reason: "shutdown", mutate: func(t *task) { t.err, t.text = e, e.Message }})
	}
	// A task must never stay live after its goroutine ends.
	if !t.m.State().Terminal() {
		r.log.Error("task left live after execution; interrupting", "task", t.id, "state", t.m.State())
		_ = r.fire(t, fsm.EvInterrupt, trOpts{by: "supervisor", reason: "runner invariant"})
	}
}

// progressOf turns a state into progress: completed steps weighted by
// their expected durations plus the running step's fraction.
// noteMoved marks t as having moved once a state during its motion shows
// the robot moving or away from where its first command found it.
func (r *Runner) noteMoved(t *task, st robot.State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !t.moved && (st.Moving(movingLinEps, movingAngEps) || movedSince(t.startState, st)) {
		t.moved = true
	}
}

func (r *Runner) progressOf(t *task, step int, st robot.State) Progress {
	p := t.plan
	if step >= len(p.steps) {
		return Progress{Fraction: 1, Text: progressFinished}
	}
	rem := 0.0
	if f := p.steps[step].Remaining; f != nil {
		rem = f(st)
	}
	r.mu.Lock()
	if t.stepStart[step] < 0 || rem > t.stepStart[step] {
		t.stepStart[step] = rem
	}
	start := t.stepStart[step]
	r.mu.Unlock()
	frac := 0.0
	if start > 0 {
		frac = clamp01(1 - rem/start)
	}
	var doneDur, total float64
	for i, d := range p.stepDur {
		total += d.Seconds()
		if i < step {
			doneDur += d.Seconds()
		}
	}
	overall := frac
	if total > 0 {
		overall = (doneDur + frac*p.stepDur[step].Seconds()) / total
	}
	overall = clamp01(overall)
	toGo := 0.0
	if p.target != nil {
		toGo = distance(st.Base, *p.target)
	}
	return Progress{Fraction: overall, Text: progressText(p.describe(step), toGo, p.target != nil, overall)}
}
