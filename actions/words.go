package actions

import (
	"fmt"
	"strings"
	"time"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
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

// failureError builds the error of a task that a monitor stopped. The
// words about the robot are exactly as true as the outcome: "robot
// stopped" only when a state received after the stop showed it at rest.
func failureError(tool string, out safety.Outcome, where string) *toolerr.Error {
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
	rec := stopWords(out.StopConfirmed)
	if out.Recovery.Text != "" {
		rec += "; " + out.Recovery.Text
	}
	if out.Kind == safety.OutcomeFault {
		rec += "; a fault is latched and nothing moves until an operator clears it"
	}
	e := toolerr.New(typ, "%s %s (%s); %s; %s", tool, what, detail, rec, where)
	e.RetryAfter = retry
	if out.Trip != nil {
		e.With("monitor", string(out.Trip.Kind))
		e.Err = out.Trip.Err
	}
	e.With("recovery", out.Recovery.Text).With("stop_confirmed", out.StopConfirmed)
	if out.Kind == safety.OutcomeFault {
		e.With("fault_latched", true)
		e.Suggestion = "tell the user: the robot is stopped with a latched fault and an operator must inspect it and clear the fault before anything can move; do not retry"
		if !out.StopConfirmed {
			e.Suggestion = "tell the user: a stop was sent but the robot did not confirm it; a fault is latched and an operator must inspect the robot and clear the fault before anything can move; do not retry"
		}
	}
	return e
}

// stopWords says whether the robot is known to have stopped.
func stopWords(confirmed bool) string {
	if confirmed {
		return "robot stopped"
	}
	return "stop sent, not confirmed"
}

// cancelledError builds the error of a task whose stop was requested
// during its motion (the stop tool, cancel_task, the console, or its
// grant ending).
func cancelledError(tool string, out safety.Outcome, progress, where string) *toolerr.Error {
	req := safety.StopRequest{Cause: safety.StopByRequest}
	if out.Stop != nil {
		req = *out.Stop
	}
	var e *toolerr.Error
	switch req.Cause {
	case safety.StopGrantRevoked:
		e = toolerr.New(toolerr.ApprovalDenied, "%s was stopped after %s because %s; %s; %s", tool, progress, req.Detail(), stopWords(out.StopConfirmed), where).
			With("reason", req.Reason).With("revoked_by", req.By)
		e.Suggestion = "the operator withdrew the permission for this motion; tell the user and ask before requesting it again"
	case safety.StopGrantExpired:
		e = toolerr.New(toolerr.ApprovalExpired, "%s was stopped after %s because %s; %s; %s", tool, progress, req.Detail(), stopWords(out.StopConfirmed), where)
		e.Suggestion = "the operator's time-limited permission ran out during the motion; ask the user whether to request it again"
	default:
		by := req.By
		if by == "" {
			by = "request"
		}
		e = toolerr.New(toolerr.ActionFailed, "cancelled by %s after %s; %s; %s", by, progress, stopWords(out.StopConfirmed), where)
		e.Suggestion = "the task was cancelled on request; ask the user before trying it again"
	}
	if out.Recovery.Text != "" {
		e.With("recovery", out.Recovery.Text)
	}
	if out.Trip != nil {
		e.With("monitor", string(out.Trip.Kind))
	}
	return e.With("stop_confirmed", out.StopConfirmed)
}

// motion says what is known about the robot's motion when a task ends.
type motion int

const (
	// atRest: a state received after the task's last command (or its
	// stop) shows the robot at rest.
	atRest motion = iota
	// stopUnconfirmed: a stop was sent but no state received after it
	// shows the robot at rest.
	stopUnconfirmed
	// untouched: the task sent nothing; say where the robot is without a
	// claim about stopping it.
	untouched
)

// whereNow says where the robot is, relative to the task's goal when p
// has a target. It claims "stopped" only for atRest.
func whereNow(cfg *hwconfig.Config, p *plan, st robot.State, m motion) string {
	var parts []string
	at := fmt.Sprintf("(%.2f, %.2f) facing %.0f°", st.Base.X, st.Base.Y, robot.Degrees(st.Base.Theta))
	switch {
	case m == stopUnconfirmed:
		parts = append(parts, "base last seen at "+at)
	case m == untouched:
		parts = append(parts, "base at "+at)
	case p != nil && p.target != nil:
		d := distance(st.Base, *p.target)
		if d <= cfg.Base.GoalTolerance+0.01 {
			parts = append(parts, fmt.Sprintf("base stopped at %s", p.goal))
		} else {
			parts = append(parts, fmt.Sprintf("base stopped %.2f m short of %s, at %s", d, p.goal, at))
		}
	default:
		parts = append(parts, "base stopped at "+at)
	}
	if cfg.Arm != nil && len(st.Joints) > 0 {
		if name := poseName(cfg, st); name != "" {
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
	return strings.Join(parts, "; ")
}

func distance(a, b robot.Pose2D) float64 {
	dx, dy := a.X-b.X, a.Y-b.Y
	return sqrt(dx*dx + dy*dy)
}

// poseName names the configured arm pose the joints are at, "" for none.
func poseName(cfg *hwconfig.Config, st robot.State) string {
	for _, n := range cfg.PoseNames() {
		q, err := cfg.PoseJoints(n)
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
