package safety

import (
	"regexp"
	"strings"
	"time"

	"github.com/robot-bridge/robot-bridge/robot"
)

// FaultWords say a latched fault in an operator's words: what happened,
// what the robot and the bridge did about it, and what to check before
// clearing it. They hold rounded durations and no package, function or
// transport names; the developer detail stays in FaultStatus.Reason, one
// click away in the console.
type FaultWords struct {
	// What happened: "The robot stopped sending its state for 2.8 s
	// during move_base_to."
	What string `json:"what,omitempty"`
	// RobotDid: "The bridge commanded a stop; the robot did not confirm
	// it was at rest."
	RobotDid string `json:"robot_did,omitempty"`
	// Check: "Check the robot's network link and that it is at rest,
	// then clear the fault."
	Check string `json:"check,omitempty"`
}

// faultCause is why a motion ended in a latched fault.
type faultCause int

const (
	// causeStopUnconfirmed: the robot did not confirm the stop after a
	// trip (or a requested stop, or a pause).
	causeStopUnconfirmed faultCause = iota + 1
	// causeNotPreauthorized: stopped, but recovery is not pre-authorized.
	causeNotPreauthorized
	// causeRecoveryFailed: the recovery motion failed or could not start.
	causeRecoveryFailed
	// causeRecoveryUnrecorded: the recovery's transition could not be
	// recorded, so it did not start.
	causeRecoveryUnrecorded
	// causeMovedWhilePaused: the robot moved while it was held.
	causeMovedWhilePaused
)

// tripWhat says what a trip was, as a sentence about tool.
func tripWhat(tool string, t *Trip) string {
	if t == nil {
		return "A safety check stopped " + tool + "."
	}
	step := tool
	switch t.Kind {
	case TripSilence:
		if t.age > 0 {
			return "The robot stopped sending its state for " + robot.FormatAge(t.age) + " during " + step + "."
		}
		return "The robot stopped sending its state during " + step + "."
	case TripLinkDown:
		return "The link to the robot went down during " + step + "."
	case TripLeaseLost:
		return "This bridge lost the robot's lease during " + step + ", so it may no longer command the robot."
	case TripDeadline:
		if t.limit > 0 {
			return step + " did not finish within its " + robot.FormatAge(t.limit) + " time limit."
		}
		return step + " did not finish within its time limit."
	case TripStall:
		if t.limit > 0 {
			return step + " made no progress for " + robot.FormatAge(t.limit) + "."
		}
		return step + " stopped making progress."
	case TripLimitBreach:
		return "The robot went outside its configured limits during " + step + "."
	case TripDriverError:
		return "The bridge could not deliver a command to the robot during " + step + "."
	case TripRobotFault:
		return "The robot reported a fault of its own during " + step + "."
	case TripVerifyFailed:
		return step + " reached its goal, but the check that it worked failed."
	case TripMovedWhilePaused:
		return "The robot moved while " + step + " was paused and the robot was meant to be held still."
	case TripPauseUnconfirmed:
		return "An operator paused " + step + ", but the robot did not confirm it had come to rest."
	case TripPauseLimit:
		if t.limit > 0 {
			return step + " stayed paused for longer than " + robot.FormatAge(t.limit) + "."
		}
		return step + " stayed paused for longer than allowed."
	case TripAborted:
		return "An operator aborted " + step + "."
	case TripCancelled, TripGrantRevoked, TripGrantExpired:
		return step + " was stopped on request."
	case TripEStop, TripRobotEStop:
		return "The e-stop ended " + step + "."
	}
	return "A safety check stopped " + step + "."
}

// faultWords builds the operator's words for a fault that ended tool's
// motion for cause, from what the motion's outcome knows.
func (s *Supervisor) faultWords(tool string, cause faultCause, out Outcome) FaultWords {
	if tool == "" {
		tool = "the motion"
	}
	w := FaultWords{What: capitalize(tripWhat(tool, out.Trip))}
	stopAge := robot.FormatAge(s.set.stopTimeout)
	safe := s.set.safePoseName
	switch cause {
	case causeStopUnconfirmed:
		w.RobotDid = "The bridge commanded a stop; the robot did not confirm it was at rest within " + stopAge + "."
	case causeMovedWhilePaused:
		w.RobotDid = "The bridge commanded a stop at once"
		if out.StopConfirmed {
			w.RobotDid += "; the robot then came to rest."
		} else {
			w.RobotDid += "; the robot did not confirm it was at rest within " + stopAge + "."
		}
	case causeNotPreauthorized:
		w.RobotDid = "The bridge stopped the robot; returning it to its safe pose is not pre-authorized, so nothing else was moved."
	case causeRecoveryFailed:
		if safe != "" {
			w.RobotDid = "The bridge stopped the robot and tried to return the arm to " + safe + "; that did not succeed."
		} else {
			w.RobotDid = "The bridge stopped the robot and tried to bring it to its safe pose; that did not succeed."
		}
	case causeRecoveryUnrecorded:
		w.RobotDid = "The bridge stopped the robot; it did not start the return to the safe pose because the bridge could not write its record."
	}
	switch {
	case cause == causeMovedWhilePaused:
		w.Check = "Find out who or what moved the robot, check that it is at rest and the area is clear, then clear the fault."
	case cause == causeRecoveryUnrecorded:
		w.Check = "Check the bridge's data disk, the robot's pose and the area around it, then clear the fault."
	case out.Trip != nil && (out.Trip.Kind == TripSilence || out.Trip.Kind == TripLinkDown):
		w.Check = "Check the robot's network link and that the robot is at rest, then clear the fault."
	case out.Trip != nil && out.Trip.Kind == TripLeaseLost:
		w.Check = "Check the bridges' link to the database and which bridge drives the robot now, check that the robot is at rest, then clear the fault."
	case out.Trip != nil && out.Trip.Kind == TripLimitBreach:
		w.Check = "Check where the robot is, move it back inside its allowed area by hand if needed, then clear the fault."
	case out.Trip != nil && out.Trip.Kind == TripDriverError:
		w.Check = "Check the robot's controller and its connection to the bridge, and that the robot is at rest, then clear the fault."
	case cause == causeStopUnconfirmed:
		w.Check = "Check that the robot is at rest and that its controller obeys stop commands, then clear the fault."
	default:
		w.Check = "Check the robot's pose and the area around it, move the arm to a safe position by hand if needed, then clear the fault."
	}
	return w
}

// restoredFaultWords are the words of a fault the store restored at
// start, whose own words were not kept.
func restoredFaultWords() FaultWords {
	return FaultWords{
		What:     "The bridge started with a fault latched: its last run did not shut down cleanly, or ended with a fault still latched.",
		RobotDid: "The bridge sends the robot no motion until an operator clears the fault.",
		Check:    "Check the robot's pose and the area around it, then clear the fault.",
	}
}

func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' || strings.ContainsAny(strings.SplitN(s, " ", 2)[0], "_-") {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// goDuration matches a Go duration printed with more digits than a
// reader wants ("2.833333333s", "1.5000001ms").
var goDuration = regexp.MustCompile(`\b\d+\.\d{3,}(ns|µs|us|ms|s|m|h)\b`)

// roundDurations rewrites every over-precise Go duration in s as
// robot.FormatAge writes it ("2.833333333s" becomes "2.8 s").
func roundDurations(s string) string {
	return goDuration.ReplaceAllStringFunc(s, func(m string) string {
		d, err := time.ParseDuration(m)
		if err != nil {
			return m
		}
		return robot.FormatAge(d)
	})
}
