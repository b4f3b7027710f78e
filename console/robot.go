package console

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/robot-bridge/robot-bridge/events"
	"github.com/robot-bridge/robot-bridge/robot"
)

// RobotView is the robot as the console shows it: the data of every
// "state" event and the robot part of the snapshot. Summary and Condition
// follow robot.Observation: "stopped" or "moving" only from a current
// state; a state older than the state timeout is stale ("last seen … ago")
// and a down link is said.
type RobotView struct {
	// RobotID is the robot this is (hw-config robot.id).
	RobotID string `json:"robot_id,omitempty"`
	// State is the newest state received, nil before the first.
	State   *robot.State `json:"state,omitempty"`
	Summary string       `json:"summary"`
	LinkUp  bool         `json:"link_up"`
	// Condition is moving or stopped for a current state, else stale,
	// link_down, stop_unconfirmed or unknown.
	Condition robot.Condition `json:"condition"`
	// Stale is true when State is not the robot's now; the page marks it
	// so, and it ages StateAgeMS itself between events.
	Stale bool `json:"stale"`
	// StateAgeMS is how long before the event State was received.
	StateAgeMS int64 `json:"state_age_ms"`
	// StaleAfterMS is the state timeout: past it the page treats a state
	// it has heard nothing newer of as stale, even if no event says so.
	StaleAfterMS int64 `json:"stale_after_ms"`
}

// ViewRobot is the console's view of an observation.
func ViewRobot(o robot.Observation) RobotView {
	cond := o.Condition()
	v := RobotView{
		Summary: o.Summary(), LinkUp: o.LinkUp, Condition: cond, Stale: !cond.Current(),
		StateAgeMS: o.Age().Milliseconds(), StaleAfterMS: o.StaleAfter.Milliseconds(),
	}
	if v.StaleAfterMS <= 0 {
		v.StaleAfterMS = robot.DefaultStaleAfter.Milliseconds()
	}
	if o.Have {
		st := o.State.Clone()
		v.State = &st
	}
	return v
}

// Defaults of RobotFeed.
const (
	DefaultStateEventHz = 10
	DefaultRefresh      = time.Second
)

// RobotFeed publishes the robot on the bus as "state" events (data
// RobotView) for the console and every event stream. States that arrive
// are published at most MaxRate times a second — but a change of
// condition (moving to stopped, current to stale, link up to down), or of
// what the state says beyond where the robot is (the robot's e-stop, its
// faults, what the gripper holds or whether it is closed), at once: an
// agent waiting on an event must not hear of those a tenth of a second
// late. Between states it looks at the robot twice per state timeout, so
// a robot that goes silent is shown stale within half a timeout of
// becoming so, not left on its last "stopped" or "moving"; while the
// robot is not current an event every Refresh keeps the age shown up to
// date.
type RobotFeed struct {
	// Bus receives the events (required).
	Bus *events.Bus
	// States streams the robot's states as they arrive (required); a
	// closed channel only ends the per-state events.
	States <-chan robot.State
	// Observe returns the robot now: the newest state with its receive
	// time, the link, the clock's now and the state timeout (required).
	Observe func() robot.Observation
	// Clock (optional) defaults to the real clock; it must be Observe's.
	Clock clockwork.Clock
	// MaxRate (optional) caps events per second while states arrive; it
	// defaults to DefaultStateEventHz. A fleet's robots share the bus, so
	// each gets a fraction (0.5 is one event every two seconds).
	MaxRate float64
	// RobotID (optional) names the robot in every event's data.
	RobotID string
	// Refresh (optional) is the interval of events while the robot is
	// not current; it defaults to DefaultRefresh.
	Refresh time.Duration
}

// Run publishes until ctx ends.
func (f RobotFeed) Run(ctx context.Context) {
	if f.Clock == nil {
		f.Clock = clockwork.NewRealClock()
	}
	if f.MaxRate <= 0 {
		f.MaxRate = DefaultStateEventHz
	}
	if f.Refresh <= 0 {
		f.Refresh = DefaultRefresh
	}
	minGap := time.Duration(float64(time.Second) / f.MaxRate)
	staleAfter := f.Observe().StaleAfter
	if staleAfter <= 0 {
		staleAfter = robot.DefaultStaleAfter
	}
	tick := f.Clock.NewTicker(min(max(staleAfter/2, time.Millisecond), f.Refresh))
	defer tick.Stop()

	var (
		published bool
		lastAt    time.Time
		lastCond  robot.Condition
		lastNews  string
	)
	publish := func(o robot.Observation) {
		v := ViewRobot(o)
		v.RobotID = f.RobotID
		f.Bus.Publish(events.TypeState, o.Now, v)
		published, lastAt, lastCond, lastNews = true, o.Now, o.Condition(), news(o.State)
	}
	states := f.States
	for {
		select {
		case <-ctx.Done():
			return
		case st, ok := <-states:
			if !ok {
				states = nil
				continue
			}
			// This state was received now, whatever the source's newest
			// still says.
			o := f.Observe()
			o.State, o.Have, o.ReceivedAt = st, true, o.Now
			if !published || o.Condition() != lastCond || news(st) != lastNews || o.Now.Sub(lastAt) >= minGap {
				publish(o)
			}
		case <-tick.Chan():
			o := f.Observe()
			c := o.Condition()
			if !published || c != lastCond || (!c.Current() && o.Now.Sub(lastAt) >= f.Refresh) {
				publish(o)
			}
		}
	}
}

// news is what a state says beyond where the robot is and how it moves:
// the robot's e-stop, its faults and its gripper's state. A change of it
// is never held back by the rate cap.
func news(st robot.State) string {
	var b strings.Builder
	if st.EStop {
		b.WriteString("estop|")
	}
	b.WriteString(strings.Join(st.Faults, ","))
	if g := st.Gripper; g != nil {
		fmt.Fprintf(&b, "|gripper closed=%t holding=%q", g.Closed, g.Holding)
	}
	return b.String()
}
