package actions

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/robot-bridge/robot-bridge/fsm"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// The words of the runner: every text a model or an operator reads about
// a task is built here, by pure functions of what happened, and pinned by
// testdata/words.golden. The rules they keep (the bridge's texts corpus
// test checks them over real answers):
//
//   - A task's text and an error's message are full sentences, each
//     ending with a full stop, none longer than a model repeats well; a
//     progress text is a short phrase without one, because the tool API
//     embeds it.
//   - Names from the hw-config (locations, poses, surfaces) are proper
//     names: never "the table" for the location table.
//   - Numbers are written by robot.Fixed, robot.Heading and
//     robot.FormatPose: never "-0°".
//   - "stopped" is said of the robot only when a state received after the
//     stop showed it at rest; otherwise "stop sent, not confirmed".

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

// who names a principal (the agent credential, an operator, the bridge)
// as the subject of a sentence.
func who(by string) string {
	switch by {
	case "":
		return "someone"
	case "agent", "operator", "bridge", "supervisor":
		return "the " + by
	}
	return by
}

// capFirst starts a sentence with a capital letter when it starts with a
// plain word; a tool name or an id ("move_base_to", "task-1") is left as
// it is written.
func capFirst(s string) string {
	word, _, _ := strings.Cut(s, " ")
	word = strings.TrimRight(word, ".,;:")
	for _, r := range word {
		if !unicode.IsLower(r) && r != '-' && r != '\'' {
			return s
		}
	}
	r, n := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}

// sentence is one sentence built from clauses: the first letter capital
// when it is a plain word, one full stop at the end.
func sentence(s string) string { return toolerr.Sentence(capFirst(strings.TrimSpace(s))) }

// now is the closing sentence of a task's end: where the robot is.
func now(where string) string { return "Now: " + where + "." }

func orNone(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}

// progressWords says how far a stopped task had come.
func progressWords(v TaskView) string {
	if v.Progress.Fraction < 0.005 {
		return "it had barely started"
	}
	return fmt.Sprintf("%.0f%% of it", v.Progress.Fraction*100)
}

// StatusWords is a task status as a verb phrase that follows the task's
// name, for texts a model reads: "task-1 (move_arm_to) is waiting for an
// operator's approval", "task-1 (move_arm_to) succeeded". A status the
// runner does not know is written as its name.
func StatusWords(s fsm.State) string {
	switch s {
	case fsm.Requested:
		return "is being requested"
	case fsm.AwaitingApproval:
		return "is waiting for an operator's approval"
	case fsm.Approved:
		return "is approved and about to start"
	case fsm.Executing:
		return "is moving the robot"
	case fsm.Paused:
		return "is paused by an operator, with the robot held at rest"
	case fsm.Stopping:
		return "is stopping the robot"
	case fsm.Recovering:
		return "is returning the robot to its safe pose"
	case fsm.Succeeded:
		return "succeeded"
	case fsm.Failed:
		return "failed"
	case fsm.Cancelled:
		return "was cancelled"
	case fsm.Denied:
		return "was denied by an operator"
	case fsm.Expired:
		return "expired without an operator's decision"
	case fsm.Recovered:
		return "was stopped and recovered"
	case fsm.Fault:
		return "ended with a latched fault"
	case fsm.EStopped:
		return "was ended by the e-stop"
	case fsm.Interrupted:
		return "was interrupted by a bridge restart"
	}
	return "is " + string(s)
}

// --- a task's text while it runs ---

func requestedText(preview string) string { return sentence("requested: " + preview) }

func waitingText(preview string) string {
	return sentence("waiting for an operator to approve: " + preview)
}

func preauthorizedText(preview string) string {
	return sentence("authorized by the config; starting: " + preview)
}

func approvedText(by, preview string) string {
	return sentence("approved by " + operatorName(by) + "; starting: " + preview)
}

// grantText is the text of a call an operator's scoped grant covered when
// it was made: approved at once, by whose grant, for what, until when.
func grantText(d Decision, preview string) string {
	var b strings.Builder
	owner := d.By + "'s"
	switch d.By {
	case "":
		owner = "an operator's"
	case "operator":
		owner = "the operator's"
	}
	b.WriteString("approved by " + owner + " grant")
	if d.GrantID != "" {
		b.WriteString(" " + d.GrantID)
	}
	if d.GrantScope != "" {
		b.WriteString(" (" + d.GrantScope + ")")
	}
	if !d.GrantExpires.IsZero() {
		b.WriteString(", valid until " + clockTime(d.GrantExpires))
	}
	b.WriteString("; starting: " + preview)
	return sentence(b.String())
}

// clockTime writes a time of day for a reader: "14:05 UTC". Minutes are
// cut, not rounded, so "until 14:05" is never later than the truth.
func clockTime(t time.Time) string { return t.UTC().Format("15:04") + " UTC" }

func startedText(doing string) string { return sentence(doing) }

// stoppingText is the text of a task whose motion a monitor or a request
// is stopping.
func stoppingText(tr safety.Trip, by string) string {
	if tr.Kind == safety.TripCancelled {
		return sentence("stopping the robot at the request of " + who(by))
	}
	return sentence("stopping the robot: " + toolerr.Clause(tr.Detail))
}

// pausedText is the text of a task an operator paused: the words the
// agent's envelope carries ("paused by the operator: <reason>"), then what
// holds now and what ends it.
func pausedText(reason, by string, endsAt time.Time) string {
	return sentence("paused by the operator: "+toolerr.Clause(orNone(reason))) + " " +
		sentence(operatorName(by)+" stopped the robot and it is held at rest until an operator resumes or aborts the task; if neither happens, the task ends by itself at "+clockTime(endsAt)+" (do not retry the motion)")
}

// resumedText is the text of a paused task an operator resumed; what it
// is doing is its progress, not said twice.
func resumedText(by string) string {
	return sentence("resumed by " + operatorName(by))
}

func recoveringText(safePose string) string {
	return sentence("stopped; returning the arm to " + safePose)
}

func succeededText(done, where string) string { return sentence(done) + " " + now(where) }

// warningText is the bridge's second opinion on a step the robot
// reported finished, as in "Warning: heading 27° off the requested 0°,
// outside the 10° tolerance".
func warningText(ws []string) string {
	return "Warning: " + toolerr.Sentence(strings.Join(ws, "; "))
}

// progressText is a running step's progress: a phrase the tool API
// embeds, so no full stop.
func progressText(doing string, toGo float64, hasTarget bool, fraction float64) string {
	if hasTarget {
		return doing + ", " + robot.Fixed(toGo, 2) + " m to go"
	}
	return doing + ", " + fmt.Sprintf("%.0f%%", fraction*100) + " done"
}

// progressFinished is the progress of a task whose motion finished, and
// progressStopSent the stop tool's.
const (
	progressFinished = "finished"
	progressStopSent = "stop sent"
)

// --- a task's end ---

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
	if out.Trip != nil && out.Trip.Detail != "" {
		detail = toolerr.Clause(out.Trip.Detail)
	}
	if strings.Contains(detail, "robot link") && typ == toolerr.Unavailable {
		// "lost the robot link: the robot link went down" says it twice.
		what = "was interrupted"
	}
	first := tool + " " + what + ": " + detail + "; " + stopWords(out.StopConfirmed)
	if out.Trip != nil && out.Trip.Kind == safety.TripAborted {
		// "move_base_to was aborted by operator alice (…)", not "failed:
		// aborted by".
		first = tool + " was " + detail + "; " + stopWords(out.StopConfirmed)
	}
	if out.Trip != nil && out.Trip.Kind == safety.TripPauseLimit {
		first = tool + " ended: it was " + detail + "; " + stopWords(out.StopConfirmed)
	}
	if out.Recovery.Text != "" {
		first += "; " + toolerr.Clause(out.Recovery.Text)
	}
	msg := sentence(first)
	if out.Kind == safety.OutcomeFault {
		msg += " A fault is latched, and nothing moves until an operator clears it."
	}
	e := &toolerr.Error{Type: typ, Message: msg + " " + now(where), RetryAfter: retry}
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

// cancelReason is the reason cancel_task gives the supervisor, which
// tells a cancel from a stop in the words.
const cancelReason = "cancel_task"

// defaultStopReason is the stop tool's reason when the agent gave none.
const defaultStopReason = "stop requested"

// stopCause says who or what stopped a task, as a clause that names the
// task "it" ("the agent cancelled it", "operator alice revoked the grant
// (forklift in the aisle)").
func stopCause(req safety.StopRequest) string {
	var s string
	switch {
	case req.Cause == safety.StopGrantRevoked:
		s = operatorName(req.By) + " revoked the grant"
	case req.Cause == safety.StopGrantExpired:
		s = "the operator's grant expired"
	case req.By == "bridge":
		return "the bridge began shutting down"
	case req.Reason == cancelReason:
		return who(req.By) + " cancelled it"
	default:
		s = who(req.By) + " stopped it"
		if req.Reason == defaultStopReason {
			return s
		}
	}
	if req.Reason != "" {
		s += " (" + req.Reason + ")"
	}
	return s
}

// cancelledError builds the error of a task whose stop was requested
// during its motion (the stop tool, cancel_task, the console, or its
// grant ending).
func cancelledError(tool string, out safety.Outcome, progress, where string) *toolerr.Error {
	req := safety.StopRequest{Cause: safety.StopByRequest}
	if out.Stop != nil {
		req = *out.Stop
	}
	first := sentence(tool + " was stopped after " + progress + " because " + stopCause(req) + "; " + stopWords(out.StopConfirmed))
	msg := first + " " + now(where)
	var e *toolerr.Error
	switch req.Cause {
	case safety.StopGrantRevoked:
		e = toolerr.New(toolerr.ApprovalDenied, "%s", msg).With("reason", req.Reason).With("revoked_by", req.By)
		e.Suggestion = "the operator withdrew the permission for this motion; tell the user and ask before requesting it again"
	case safety.StopGrantExpired:
		e = toolerr.New(toolerr.ApprovalExpired, "%s", msg)
		e.Suggestion = "the operator's time-limited permission ran out during the motion; ask the user whether to request it again"
	default:
		e = toolerr.New(toolerr.ActionFailed, "%s", msg)
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

// cancelledBeforeMovedText is the text of a task whose stop was
// requested after its first command left but before the robot moved at
// all: "move_base_to was cancelled before it moved: agent-1 cancelled it;
// robot stopped. Now: base at (0.00, 0.00) facing 0°, …".
func cancelledBeforeMovedText(tool string, req safety.StopRequest, confirmed bool, where string) string {
	// A tool name is never capitalised ("release", not "Release").
	return toolerr.Sentence(tool+" was cancelled before it moved: "+stopCause(req)+"; "+stopWords(confirmed)) + " " + now(where)
}

// cancelledBeforeMovedError is the error of a task cancelled before it
// moved: none for a cancel or stop someone asked for (the status says
// cancelled and the text why), the typed error for a grant that was
// revoked or ran out (the agent must not ask for the motion again
// without the user), with the task's text as its message.
func cancelledBeforeMovedError(req safety.StopRequest, confirmed bool, text string) *toolerr.Error {
	var e *toolerr.Error
	switch req.Cause {
	case safety.StopGrantRevoked:
		e = toolerr.New(toolerr.ApprovalDenied, "%s", text).With("reason", req.Reason).With("revoked_by", req.By)
		e.Suggestion = "the operator withdrew the permission for this motion; tell the user and ask before requesting it again"
	case safety.StopGrantExpired:
		e = toolerr.New(toolerr.ApprovalExpired, "%s", text)
		e.Suggestion = "the operator's time-limited permission ran out before the robot moved; ask the user whether to request it again"
	default:
		return nil
	}
	return e.With("stop_confirmed", confirmed)
}

// The velocities above which a state shows the robot moving, for
// "cancelled before it moved" (m/s and rad/s).
const (
	movingLinEps = 0.01
	movingAngEps = 0.02
)

// movedSince reports whether the robot moved between two states: the
// base by more than 1 cm or 0.02 rad, a joint by more than 0.01 rad, or
// the fingers by more than 2 mm.
func movedSince(a, b robot.State) bool {
	if distance(a.Base, b.Base) > 0.01 || abs(robot.NormalizeAngle(a.Base.Theta-b.Base.Theta)) > 0.02 {
		return true
	}
	if len(a.Joints) != len(b.Joints) {
		return true
	}
	for i := range a.Joints {
		if abs(a.Joints[i].Position-b.Joints[i].Position) > 0.01 {
			return true
		}
	}
	if (a.Gripper == nil) != (b.Gripper == nil) {
		return true
	}
	return a.Gripper != nil && abs(a.Gripper.Opening-b.Gripper.Opening) > 0.002
}

// beforeStartError is the error of a task that a stop, a cancel, a grant's
// end or the bridge's shutdown ended before it sent anything.
func beforeStartError(tool string, req safety.StopRequest, where string) *toolerr.Error {
	e := toolerr.New(toolerr.ActionFailed, "%s", sentence(tool+" never started: "+stopCause(req)+"; nothing moved")+" "+now(where))
	e.Suggestion = "the task was cancelled on request; ask the user before trying it again"
	return e
}

// estopEndedSuggestion is the suggestion of a task the e-stop ended. The
// task's error is kept and replayed long after the press, so it must stay
// true after an operator resets the e-stop: it does not say the e-stop
// is latched now, only how to find out and what to do.
const estopEndedSuggestion = "the e-stop ended this task; read get_robot_state to see whether it is still latched: only an operator can reset it, so tell the user and wait, and ask them before trying the task again"

// estopBeforeStartError is the error of a task the e-stop ended before it
// sent anything.
func estopBeforeStartError(tool, by, reason, where string) *toolerr.Error {
	e := toolerr.New(toolerr.EStopActive, "%s",
		sentence(fmt.Sprintf("the e-stop was pressed by %s (%s) before %s started; nothing moved", who(by), orNone(reason), tool))+" "+now(where)).
		Wrap(safety.ErrEStopActive)
	e.Suggestion = estopEndedSuggestion
	return e
}

// estopDuringError is the error of a task the e-stop ended during its
// motion.
func estopDuringError(tool, by, reason string, stopConfirmed bool, where string) *toolerr.Error {
	e := toolerr.New(toolerr.EStopActive, "%s",
		sentence(fmt.Sprintf("the e-stop was pressed by %s (%s) during %s; %s; no recovery motion while it is latched", who(by), orNone(reason), tool, stopWords(stopConfirmed)))+" "+now(where)).
		Wrap(safety.ErrEStopActive)
	e.Suggestion = estopEndedSuggestion
	return e
}

// shutdownError is the error of a task the bridge's shutdown interrupted
// during its motion.
func shutdownError(tool, where string) *toolerr.Error {
	return toolerr.New(toolerr.Unavailable, "%s", sentence("the bridge shut down during "+tool+" and commanded the robot to stop")+" "+now(where))
}

// deniedError is the error of a task an operator denied; the operator's
// words are quoted verbatim. robot describes the robot now.
func deniedError(tool string, d Decision, robot string) *toolerr.Error {
	return toolerr.New(toolerr.ApprovalDenied, "%s %s",
		sentence(fmt.Sprintf("%s denied %s: %q; nothing moved", operatorName(d.By), tool, d.Reason)), now(robot+"; no task running")).
		With("reason", d.Reason).With("denied_by", d.By)
}

// expiredError is the error of a task no operator decided on in time.
func expiredError(tool, robot string) *toolerr.Error {
	return toolerr.New(toolerr.ApprovalExpired, "%s %s",
		sentence("no operator decided on "+tool+" in time; nothing moved"), now(robot+"; no task running"))
}

// withdrawnError is the error of a task whose approval request was
// withdrawn before a decision.
func withdrawnError(reason string) *toolerr.Error {
	return toolerr.New(toolerr.ActionFailed, "%s", sentence("the approval request was withdrawn ("+orNone(reason)+"); nothing moved"))
}

// busyError refuses a motion while another task holds the robot.
func busyError(id, tool string, st fsm.State) *toolerr.Error {
	return toolerr.New(toolerr.RobotBusy, "%s", sentence(fmt.Sprintf("task %s (%s) %s; one motion task runs at a time", id, tool, StatusWords(st)))).
		With("task_id", id).With("tool", tool).With("status", string(st))
}

// refusedBeforeAskingError is a limit refusal of a call, made before any
// operator was asked.
func refusedBeforeAskingError(tool string, te *toolerr.Error) *toolerr.Error {
	e := *te
	e.Message = sentence(tool+" was refused before any operator was asked; nothing moved") + " " + sentence(te.Message)
	return &e
}

// latchedWhilePlanningError is the refusal of a call during whose
// planning an e-stop or a fault latched (te, when it is still latched).
func latchedWhilePlanningError(tool string, te *toolerr.Error) *toolerr.Error {
	if te == nil {
		e := toolerr.New(toolerr.EStopActive, "%s", sentence(tool+" was refused: an e-stop or a fault latched and was released while the call was being planned; nothing moved")).
			Wrap(safety.ErrEStopActive)
		e.Suggestion = "tell the user the robot was e-stopped while this was being prepared; ask them before requesting it again"
		return e
	}
	e := *te
	e.Message = sentence(tool+" was refused: a latch engaged while the call was being planned; nothing moved") + " " + sentence(te.Message)
	return &e
}

// stopText is the stop tool's answer: what the robot is known to be
// doing now (robot, from robot.Observation.Summary), and which task the
// stop ended.
func stopText(robot, taskID, tool string, delivered bool) string {
	s := sentence(robot)
	if taskID != "" {
		s += " " + sentence(fmt.Sprintf("task %s (%s) was cancelled", taskID, tool))
	} else {
		s += " No task was running."
	}
	if !delivered {
		s = "The stop command could not be delivered. " + s
	}
	return s
}

// baseOnlySafePoseText is return_to_safe_pose's answer on a robot without
// an arm, around the stop tool's.
func baseOnlySafePoseText(stop string) string {
	return "This robot has no arm, so its safe pose is the base stopped. " + stop
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
// has a target, as a phrase ("base stopped at table, arm in stowed,
// gripper open; no task running"). It claims "stopped" only for atRest.
func whereNow(cfg *hwconfig.Config, p *plan, st robot.State, m motion) string {
	var parts []string
	at := robot.FormatPose(st.Base)
	switch {
	case m == stopUnconfirmed:
		parts = append(parts, "base last seen at "+at)
	case m == untouched:
		parts = append(parts, "base at "+at)
	case p != nil && p.target != nil:
		d := distance(st.Base, *p.target)
		if d <= cfg.Base.GoalTolerance+0.01 {
			parts = append(parts, "base stopped at "+p.goal)
		} else {
			parts = append(parts, "base stopped "+robot.Fixed(d, 2)+" m short of "+p.goal+", at "+at)
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
	return strings.Join(parts, ", ") + "; no task running"
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

// asSentences returns err with its message as full sentences, as every
// error the runner hands out has (a copy: the original may be shared).
func asSentences(err error) error {
	if err == nil {
		return nil
	}
	te := toolerr.As(err)
	if te.Message == toolerr.Sentence(te.Message) {
		return err
	}
	e := *te
	e.Message = toolerr.Sentence(e.Message)
	return &e
}
