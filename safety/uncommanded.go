package safety

import (
	"context"
	"fmt"
	"math"
	"time"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
)

// TripUncommandedMotion is the trip of a robot that moved while no task of
// this bridge was commanding it (safety.uncommanded_motion).
const TripUncommandedMotion TripKind = "uncommanded_motion"

// uncommandedStates is how many states in a row must show the robot
// moving, over more than one control period, before the motion counts as
// uncommanded: one noisy velocity sample is not a motion.
const uncommandedStates = 3

// idleWatch is the uncommanded-motion monitor's state, guarded by the
// supervisor's mu. While no supervised motion runs, this bridge holds the
// robot and the robot has come to rest since the last one (settled), a
// run of states that show it moving (its velocity, base or a joint, over
// the rest thresholds: odometry or localisation corrections of a robot at
// rest move its pose, not its velocity) longer than one control period is
// motion nobody here commanded: the robot is stopped, and with
// latch_fault a fault latches.
type idleWatch struct {
	settled bool
	// movingSince and moving count the current run of moving states.
	movingSince time.Time
	moving      int
	// tripped is set from a trip until the robot is at rest again; while
	// it is set and the robot still moves, the stop is sent again every
	// repeat (lastStop).
	tripped  bool
	lastStop time.Time
}

// uncommandedVerdict is what onState must do for the monitor, outside
// the lock.
type uncommandedVerdict struct {
	// how says what moved ("" when nothing is to be done).
	how string
	// first is true for the trip (a fault latches, by policy), false for
	// a repeated stop of a robot that keeps moving after it.
	first bool
}

// watchIdleLocked feeds the monitor state st, received at now; fenced is
// true when another bridge holds the robot. It runs under s.mu.
func (s *Supervisor) watchIdleLocked(st robot.State, now time.Time, fenced bool) uncommandedVerdict {
	w := &s.idle
	if s.set.uncommanded == hwconfig.UncommandedOff || s.active != nil || fenced || s.closed {
		// A supervised motion (or another bridge) moves the robot: watch
		// again once it has come to rest afterwards.
		*w = idleWatch{}
		return uncommandedVerdict{}
	}
	moving := st.Moving(RestLinear, RestAngular)
	if !moving {
		w.settled, w.tripped = true, false
		w.moving, w.movingSince = 0, time.Time{}
		return uncommandedVerdict{}
	}
	if !w.settled {
		// Still coming to rest after the last motion (or after start).
		return uncommandedVerdict{}
	}
	if w.tripped {
		if now.Sub(w.lastStop) >= s.uncommandedRepeat() {
			w.lastStop = now
			return uncommandedVerdict{how: movingWords(st)}
		}
		return uncommandedVerdict{}
	}
	if w.moving == 0 {
		w.movingSince = now
	}
	w.moving++
	if w.moving < uncommandedStates || now.Sub(w.movingSince) <= s.set.controlPeriod {
		return uncommandedVerdict{}
	}
	w.tripped, w.lastStop = true, now
	w.moving, w.movingSince = 0, time.Time{}
	return uncommandedVerdict{how: movingWords(st), first: true}
}

// uncommandedRepeat is how often the stop is sent again to a robot that
// keeps moving after an uncommanded-motion trip.
func (s *Supervisor) uncommandedRepeat() time.Duration {
	return max(10*s.set.controlPeriod, 100*time.Millisecond)
}

// movingWords says how st shows the robot moving: "the base was moving at
// 0.30 m/s, 0.00 rad/s" or "joint elbow was moving at 0.40 rad/s".
func movingWords(st robot.State) string {
	if math.Abs(st.Velocity.V) > RestLinear || math.Abs(st.Velocity.W) > RestAngular {
		return fmt.Sprintf("the base was moving at %s m/s, %s rad/s", robot.Fixed(math.Abs(st.Velocity.V), 2), robot.Fixed(math.Abs(st.Velocity.W), 2))
	}
	for _, j := range st.Joints {
		if math.Abs(j.Velocity) > RestAngular {
			return fmt.Sprintf("joint %s was moving at %s rad/s", j.Name, robot.Fixed(math.Abs(j.Velocity), 2))
		}
	}
	return "it was moving"
}

// onUncommanded acts on a verdict: the stop first, then the fault (by
// policy) and the report.
func (s *Supervisor) onUncommanded(v uncommandedVerdict, detected time.Time) {
	err := s.stopNow(context.Background())
	lat := s.clock.Since(detected)
	what := "the robot moved while no task was commanding it: " + v.how
	if !v.first {
		s.log.Warn("uncommanded motion continues; stop sent again", "how", v.how, "stop_latency", lat, "err", err)
		s.emit(Event{Kind: EventStopSent, At: detected, By: "supervisor", Reason: what + "; stopped again", Monitor: TripUncommandedMotion, Latency: lat, Err: err})
		return
	}
	s.log.Error("uncommanded motion", "how", v.how, "policy", string(s.set.uncommanded), "stop_latency", lat, "err", err)
	s.emit(Event{Kind: EventMonitorTripped, At: detected, Monitor: TripUncommandedMotion, Reason: what})
	s.emit(Event{Kind: EventStopSent, At: detected, By: "supervisor", Reason: what, Monitor: TripUncommandedMotion, Latency: lat, Err: err})
	if s.set.uncommanded != hwconfig.UncommandedLatchFault {
		return
	}
	did := "The bridge commanded a stop."
	if err != nil {
		did = "The bridge tried to command a stop, and the stop failed: " + err.Error() + "."
	}
	s.latchFault("", what, FaultWords{
		What:     "The robot moved while no task was commanding it: " + v.how + ".",
		RobotDid: did,
		Check:    "Find what moved the robot (another controller or node, a goal left running, someone pushing it) and make sure it is at rest, then clear the fault.",
	})
}
