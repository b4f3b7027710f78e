package rosaction

import (
	"fmt"

	"github.com/bluenviron/goroslib/v2/pkg/msgs/actionlib_msgs"
)

// State is an actionlib goal status (actionlib_msgs/GoalStatus.status).
type State uint8

// Goal states, with actionlib's numbering.
const (
	Pending    = State(actionlib_msgs.GoalStatus_PENDING)
	Active     = State(actionlib_msgs.GoalStatus_ACTIVE)
	Preempted  = State(actionlib_msgs.GoalStatus_PREEMPTED)
	Succeeded  = State(actionlib_msgs.GoalStatus_SUCCEEDED)
	Aborted    = State(actionlib_msgs.GoalStatus_ABORTED)
	Rejected   = State(actionlib_msgs.GoalStatus_REJECTED)
	Preempting = State(actionlib_msgs.GoalStatus_PREEMPTING)
	Recalling  = State(actionlib_msgs.GoalStatus_RECALLING)
	Recalled   = State(actionlib_msgs.GoalStatus_RECALLED)
	Lost       = State(actionlib_msgs.GoalStatus_LOST)
)

var stateNames = [...]string{"PENDING", "ACTIVE", "PREEMPTED", "SUCCEEDED", "ABORTED", "REJECTED", "PREEMPTING", "RECALLING", "RECALLED", "LOST"}

// String implements fmt.Stringer with actionlib's constant names.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Terminal reports whether no further transition can follow s.
func (s State) Terminal() bool {
	switch s {
	case Preempted, Succeeded, Aborted, Rejected, Recalled, Lost:
		return true
	}
	return false
}

// Valid reports whether s is one of actionlib's states.
func (s State) Valid() bool { return s <= Lost }
