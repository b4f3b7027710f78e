package actions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// wrongState refuses an operator's pause, resume or abort of a task whose
// status does not allow it, naming that status (CONFLICT).
func wrongState(v TaskView, verb, need string) *toolerr.Error {
	e := toolerr.New(toolerr.Conflict, "%s", sentence(fmt.Sprintf("task %s (%s) cannot be %s: it %s, and only a task that %s can be", v.ID, v.Tool, verb, StatusWords(v.Status), need))).
		With("task_id", v.ID).With("status", string(v.Status))
	e.Suggestion = "read the task's status again; nothing was changed"
	return e
}

// endedFirst is wrongState for a task whose motion ended (with an error)
// before the operator's request took effect: it says the request was
// not carried out and how the task ended, in the task's own words.
func endedFirst(v TaskView, verb, need string) *toolerr.Error {
	if v.Error == nil || !v.Status.Terminal() {
		return wrongState(v, verb, need)
	}
	e := toolerr.New(toolerr.Conflict, "%s %s", sentence(fmt.Sprintf("task %s (%s) was not %s: it %s first", v.ID, v.Tool, verb, StatusWords(v.Status))), v.Error.Message).
		With("task_id", v.ID).With("status", string(v.Status))
	e.Suggestion = "read the task's status again; this request changed nothing"
	return e
}

func (r *Runner) task(id string) (*task, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.tasks[id]
	if !ok {
		return nil, notFoundTask(id)
	}
	return t, nil
}

// Pause pauses an executing task on behalf of operator by: a protective
// stop. The robot is stopped at once and, once a state confirms it at
// rest, the task is paused and the robot held (safety.Supervisor.
// PauseTask). It returns the task paused; CONFLICT naming its status
// when the task is not executing or its motion ended first (it had
// already succeeded, or a stop came first); and, when the robot did not
// confirm the stop, the SAFETY_VIOLATION of the latched fault together
// with the task as it ended.
func (r *Runner) Pause(ctx context.Context, id, by, reason string) (TaskView, error) {
	t, err := r.task(id)
	if err != nil {
		return TaskView{}, err
	}
	if st := t.m.State(); st != fsm.Executing {
		return r.view(t), wrongState(r.view(t), "paused", StatusWords(fsm.Executing))
	}
	_, err = r.sup.PauseTask(ctx, id, by, reason)
	switch {
	case err == nil:
		return r.view(t), nil
	case errors.Is(err, safety.ErrPauseUnconfirmed):
		v, _ := r.waitTerminal(ctx, t)
		return v, asSentences(err)
	case errors.Is(err, safety.ErrMotionEnded):
		// The motion ended by itself, or a stop came first: say how it
		// ended once the task has taken that end.
		v, _ := r.waitTerminal(ctx, t)
		return v, endedFirst(v, "paused", StatusWords(fsm.Executing))
	case errors.Is(err, safety.ErrNotHeld):
		// The supervisor has moved on (stopping, or another pause is
		// being taken): name the status the task takes for it, never
		// "it is moving the robot" in a refusal to pause a moving task.
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		v := r.waitLeft(wctx, t, fsm.Executing)
		return v, wrongState(v, "paused", StatusWords(fsm.Executing))
	}
	return r.view(t), asSentences(err)
}

// Resume resumes a paused task on behalf of operator by, under the
// authorization it already holds: the gate checks its current step's
// command again as for a new call (e-stop, fault, link, state age, the
// limits from the robot's current pose, the grant), the resume is
// recorded, and the command is sent. A refusal leaves the task paused.
func (r *Runner) Resume(ctx context.Context, id, by string) (TaskView, error) {
	t, err := r.task(id)
	if err != nil {
		return TaskView{}, err
	}
	if st := t.m.State(); st != fsm.Paused {
		return r.view(t), wrongState(r.view(t), "resumed", StatusWords(fsm.Paused))
	}
	err = r.sup.ResumeTask(ctx, id, by)
	switch {
	case err == nil:
		return r.view(t), nil
	case errors.Is(err, safety.ErrNotHeld):
		v := r.view(t)
		if errors.Is(err, safety.ErrMotionEnded) {
			v, _ = r.waitTerminal(ctx, t)
		}
		if v.Status == fsm.Paused {
			// Another resume is being taken right now.
			e := toolerr.New(toolerr.Conflict, "%s", sentence(fmt.Sprintf("task %s (%s) is already being resumed", v.ID, v.Tool))).With("task_id", v.ID).With("status", string(v.Status))
			e.Suggestion = "read the task's status again; this request changed nothing"
			return v, e
		}
		return v, endedFirst(v, "resumed", StatusWords(fsm.Paused))
	}
	te := toolerr.As(err)
	e := *te
	e.Message = sentence("the task stays paused: " + toolerr.Clause(te.Message))
	e.Suggestion = "fix what the refusal names and resume again, or abort the task"
	return r.view(t), &e
}

// Abort ends an executing or paused task on behalf of operator by the way
// a failed motion ends: the robot is stopped and, once it is confirmed at
// rest, returned to the safe pose when the config pre-authorizes it (else
// a fault latches). It returns once the task has left executing and
// paused (the stop is sent and recorded); the task then ends on its own.
func (r *Runner) Abort(ctx context.Context, id, by, reason string) (TaskView, error) {
	t, err := r.task(id)
	if err != nil {
		return TaskView{}, err
	}
	if st := t.m.State(); st != fsm.Executing && st != fsm.Paused {
		return r.view(t), wrongState(r.view(t), "aborted", "is moving the robot or is paused")
	}
	if err := r.sup.AbortTask(ctx, id, by, reason); err != nil {
		v := r.view(t)
		if errors.Is(err, safety.ErrMotionEnded) {
			v, _ = r.waitTerminal(ctx, t)
		}
		if errors.Is(err, safety.ErrNotHeld) {
			return v, wrongState(v, "aborted", "is moving the robot or is paused")
		}
		return v, asSentences(err)
	}
	return r.waitLeft(ctx, t, fsm.Executing, fsm.Paused), nil
}

// waitLeft waits until t is in none of states (or ctx ends) and returns
// its view then.
func (r *Runner) waitLeft(ctx context.Context, t *task, states ...fsm.State) TaskView {
	for {
		r.mu.Lock()
		v := r.viewLocked(t)
		ch := t.changed
		r.mu.Unlock()
		in := false
		for _, s := range states {
			in = in || v.Status == s
		}
		if !in {
			return v
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return r.view(t)
		}
	}
}
