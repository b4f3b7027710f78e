package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// The loop's own answer, written when a limit ends the turn: why it
// ended, what worked, what could not be obtained, in plain words — an
// error type becomes what it means, never its code.

// plainWords says what each error type means to a user.
var plainWords = map[toolerr.Type]string{
	toolerr.InvalidParams:    "the request was not valid",
	toolerr.UnknownTool:      "the robot has no such tool",
	toolerr.NotFound:         "what it named does not exist",
	toolerr.PermissionDenied: "this agent is not allowed to do that",
	toolerr.ApprovalPending:  "no operator has decided on it yet",
	toolerr.ApprovalDenied:   "the operator refused it",
	toolerr.ApprovalExpired:  "no operator decided in time, so nothing moved",
	toolerr.SafetyViolation:  "it would break a safety limit",
	toolerr.EStopActive:      "the emergency stop is engaged",
	toolerr.RobotBusy:        "the robot was busy with another task",
	toolerr.Timeout:          "it did not finish in time and the robot was stopped",
	toolerr.ActionFailed:     "it failed and the robot was stopped",
	toolerr.Unavailable:      "the robot or the bridge could not be reached",
	toolerr.RateLimited:      "too many requests were made too fast",
	toolerr.Conflict:         "it clashed with an earlier request",
	toolerr.LoopDetected:     "it kept failing the same way",
	toolerr.Internal:         "the bridge hit an internal error",
}

// typeCodes matches an error type's code in a text from the bridge.
var typeCodes = func() *regexp.Regexp {
	names := make([]string, 0, len(plainWords))
	for _, t := range toolerr.Types() {
		names = append(names, string(t))
	}
	return regexp.MustCompile(`\b(` + strings.Join(names, "|") + `)\b`)
}()

// plain replaces any error code in s (a bridge message meant for a model)
// with its meaning, for a user.
func plain(s string) string {
	return typeCodes.ReplaceAllStringFunc(s, func(code string) string { return "(" + plainWords[toolerr.Type(code)] + ")" })
}

// maxLine bounds one line of the loop's answer.
const maxLine = 300

// describeCall names a call for a user: the tool and its arguments as
// name=value.
func describeCall(tool, canonical string) string {
	var args map[string]any
	if json.Unmarshal([]byte(canonical), &args) != nil || len(args) == 0 {
		return tool
	}
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		v, _ := json.Marshal(args[k])
		parts[i] = k + "=" + strings.Trim(string(v), `"`)
	}
	return cutText(tool+" ("+strings.Join(parts, ", ")+")", 120)
}

// failureWords says how a failed result or task failed: the meaning of its
// type and the bridge's message.
func failureWords(typ, msg string) string {
	w := plainWords[toolerr.Type(typ)]
	if w == "" {
		w = "it failed"
	}
	if msg = strings.TrimSpace(plain(msg)); msg != "" {
		return w + ": " + toolerr.Clause(msg)
	}
	return w
}

func (t *turn) loopAnswer() string {
	var b strings.Builder
	b.WriteString(t.reasonSentence())
	var worked, failed []string
	seen := map[string]bool{}
	// Each signature once, as it last ended, in the order first called.
	for _, rec := range t.res.Calls {
		s := t.sigs[rec.Call.Name+"\x00"+canonicalArgs(rec.Call.Arguments)]
		if s == nil || seen[s.key] {
			continue
		}
		seen[s.key] = true
		name := describeCall(s.tool, s.args)
		switch {
		case s.lastTask != nil && fsm.State(s.lastTask.Status).Terminal() && s.lastTask.Status != string(fsm.Succeeded):
			failed = append(failed, name+": "+failureWords(s.lastTask.ErrorType, s.lastTask.ErrorMessage))
		case s.lastTask != nil && s.lastTask.Status == string(fsm.Succeeded):
			worked = append(worked, name+": done")
		case s.last.OK && s.last.NotSent:
			worked = append(worked, name+": already done earlier in this request")
		case s.last.OK && s.last.TaskStatus != "" && !fsm.State(s.last.TaskStatus).Terminal():
			worked = append(worked, name+": started, still "+strings.ReplaceAll(s.last.TaskStatus, "_", " "))
		case s.last.OK:
			worked = append(worked, name+": "+plain(toolerr.Sentence(s.last.Text)))
		default:
			failed = append(failed, name+": "+failureWords(s.last.ErrorType, s.last.Message))
		}
	}
	if len(worked) > 0 {
		b.WriteString("\nWhat worked:")
		for _, w := range worked {
			b.WriteString("\n- " + cutText(w, maxLine))
		}
	}
	if len(failed) > 0 {
		b.WriteString("\nWhat I could not get:")
		for _, f := range failed {
			b.WriteString("\n- " + cutText(toolerr.Sentence(f), maxLine))
		}
	}
	for _, ts := range t.live {
		fmt.Fprintf(&b, "\nTask %s (%s) is still %s; I did not cancel it, and the bridge keeps supervising it.", ts.ID, ts.Tool, strings.ReplaceAll(ts.Status, "_", " "))
	}
	if t.lastRobot != "" {
		b.WriteString("\nThe robot, as last reported: " + plain(t.lastRobot) + ".")
	}
	return b.String()
}

func (t *turn) reasonSentence() string {
	l := t.a.conf.Limits
	switch t.res.End {
	case EndNoAnswer:
		return "The model gave no answer."
	case EndMaxIterations:
		return fmt.Sprintf("I stopped after %d steps without finishing, the most I take for one request.", l.MaxIterations)
	case EndRepeatedFailure:
		s := t.endedSig
		return fmt.Sprintf("I stopped: %s failed %d times in a row, and trying it again would not help.", describeCall(s.tool, s.args), s.failures)
	case EndLoopDetected:
		s := t.endedSig
		return fmt.Sprintf("I stopped: the robot bridge saw me repeat %s, which kept failing the same way, and asked me to stop.", describeCall(s.tool, s.args))
	case EndCancelled:
		return "The request was interrupted before it finished."
	case EndDeadline:
		return fmt.Sprintf("I ran out of time for this request (%v).", l.TurnTimeout)
	case EndBridgeError:
		return "I lost contact with the robot bridge: " + toolerr.Sentence(bridgeWords(t.endErr))
	case EndModelError:
		return "The language model could not answer: " + toolerr.Sentence(modelWords(t.endErr))
	}
	return ""
}

func bridgeWords(err error) string {
	if be, ok := errors.AsType[*BridgeError](err); ok {
		switch {
		case be.Message != "":
			return "it could not " + be.Op + ": " + plain(be.Message)
		case be.Status != 0:
			return fmt.Sprintf("it could not %s (it answered with an HTTP error)", be.Op)
		}
		return "it could not " + be.Op + " (no answer)"
	}
	return "no answer"
}
