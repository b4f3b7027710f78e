package actions

import (
	"fmt"
	"time"

	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// operatorName names who decided, without doubling the word when the
// credential itself is called "operator".
func operatorName(by string) string {
	switch by {
	case "":
		return "an operator"
	case "operator":
		return "the operator"
	}
	return "operator " + by
}

func orNone(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}

func orSomeone(s string) string {
	if s == "" {
		return "an operator"
	}
	return s
}

func progressWords(v TaskView) string {
	if v.Progress.Fraction <= 0 {
		return "it had barely started"
	}
	return fmt.Sprintf("%.0f%% of it", v.Progress.Fraction*100)
}

// failureError builds the error of a task that a monitor stopped.
func (r *Runner) failureError(t *task, out safety.Outcome, where string) *toolerr.Error {
	typ := toolerr.ActionFailed
	var retry time.Duration
	what := "failed"
	if out.Trip != nil {
		switch out.Trip.Kind {
		case safety.TripDeadline:
			typ, what = toolerr.Timeout, "timed out"
		case safety.TripSilence, safety.TripLinkDown:
			typ, what = toolerr.Unavailable, "lost the robot link"
			retry = 2 * time.Second
		}
	}
	detail := "a monitor tripped"
	if out.Trip != nil {
		detail = out.Trip.Detail
	}
	var rec string
	switch out.Kind {
	case safety.OutcomeRecovered:
		rec = "robot stopped; " + out.Recovery.Text
	case safety.OutcomeFault:
		rec = "robot stopped"
		if out.Recovery.Text != "" {
			rec += "; " + out.Recovery.Text
		}
		rec += "; a fault is latched and nothing moves until an operator clears it"
	}
	e := toolerr.New(typ, "%s %s (%s); %s; %s", t.req.Tool, what, detail, rec, where)
	e.RetryAfter = retry
	if out.Trip != nil {
		e.With("monitor", string(out.Trip.Kind))
		e.Err = out.Trip.Err
	}
	e.With("recovery", out.Recovery.Text)
	if out.Kind == safety.OutcomeFault {
		e.With("fault_latched", true)
		e.Suggestion = "tell the user: the robot is stopped with a latched fault and an operator must inspect it and clear the fault before anything can move; do not retry"
	}
	return e
}

// whereNow says where the robot is, relative to the task's goal.
func (r *Runner) whereNow(p *plan, st robot.State) string {
	var parts []string
	if p.target != nil {
		d := distance(st.Base, *p.target)
		if d <= r.cfg.Base.GoalTolerance+0.01 {
			parts = append(parts, fmt.Sprintf("base stopped at %s", p.goal))
		} else {
			parts = append(parts, fmt.Sprintf("base stopped %.2f m short of %s, at (%.2f, %.2f) facing %.0f°", d, p.goal, st.Base.X, st.Base.Y, robot.Degrees(st.Base.Theta)))
		}
	} else {
		parts = append(parts, fmt.Sprintf("base stopped at (%.2f, %.2f) facing %.0f°", st.Base.X, st.Base.Y, robot.Degrees(st.Base.Theta)))
	}
	if r.cfg.Arm != nil && len(st.Joints) > 0 {
		if name := r.poseName(st); name != "" {
			parts = append(parts, "arm in "+name)
		} else {
			parts = append(parts, "arm between named poses")
		}
	}
	if st.Gripper != nil {
		switch {
		case st.Gripper.Holding != "":
			parts = append(parts, "holding "+st.Gripper.Holding)
		case st.Gripper.Closed:
			parts = append(parts, "gripper closed and empty")
		default:
			parts = append(parts, "gripper open")
		}
	}
	parts = append(parts, "no task running")
	return joinWords(parts)
}

func joinWords(parts []string) string {
	s := ""
	for i, p := range parts {
		if i > 0 {
			s += "; "
		}
		s += p
	}
	return s
}

func distance(a, b robot.Pose2D) float64 {
	dx, dy := a.X-b.X, a.Y-b.Y
	return sqrt(dx*dx + dy*dy)
}

func (r *Runner) poseName(st robot.State) string {
	for _, n := range r.cfg.PoseNames() {
		q, err := r.cfg.PoseJoints(n)
		if err != nil {
			continue
		}
		match := true
		for i, v := range q {
			if i >= len(st.Joints) || abs(st.Joints[i].Position-v) > 0.05 {
				match = false
				break
			}
		}
		if match {
			return n
		}
	}
	return ""
}

// progressOf turns a state into progress: completed steps weighted by
// their expected durations plus the running step's fraction.
func (r *Runner) progressOf(t *task, step int, st robot.State) Progress {
	p := t.plan
	if step >= len(p.steps) {
		return Progress{Fraction: 1, Text: "done"}
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
	txt := p.describe(step)
	if p.target != nil {
		togo := distance(st.Base, *p.target)
		txt += fmt.Sprintf(": %.2f m to go", togo)
	} else {
		txt += fmt.Sprintf(": %.0f%% done", overall*100)
	}
	return Progress{Fraction: overall, Text: txt}
}
