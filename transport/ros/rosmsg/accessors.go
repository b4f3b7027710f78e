package rosmsg

import (
	"github.com/bluenviron/goroslib/v2/pkg/msgs/actionlib_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/std_msgs"
)

// The accessors below let one generic actionlib client and server handle
// every envelope. They are methods on pointers, so they do not change how
// goroslib (which only looks at fields) encodes the messages.

// GoalID returns the envelope's goal id.
func (m *MoveBaseActionGoal) GoalID() actionlib_msgs.GoalID { return m.GoalId }

// SetGoalID stamps the envelope's header and goal id.
func (m *MoveBaseActionGoal) SetGoalID(h std_msgs.Header, id actionlib_msgs.GoalID) {
	m.Header, m.GoalId = h, id
}

// GoalID returns the envelope's goal id.
func (m *FollowJointTrajectoryActionGoal) GoalID() actionlib_msgs.GoalID { return m.GoalId }

// SetGoalID stamps the envelope's header and goal id.
func (m *FollowJointTrajectoryActionGoal) SetGoalID(h std_msgs.Header, id actionlib_msgs.GoalID) {
	m.Header, m.GoalId = h, id
}

// GoalID returns the envelope's goal id.
func (m *GripperCommandActionGoal) GoalID() actionlib_msgs.GoalID { return m.GoalId }

// SetGoalID stamps the envelope's header and goal id.
func (m *GripperCommandActionGoal) SetGoalID(h std_msgs.Header, id actionlib_msgs.GoalID) {
	m.Header, m.GoalId = h, id
}

// GoalStatus returns the status the envelope carries.
func (m *MoveBaseActionResult) GoalStatus() actionlib_msgs.GoalStatus { return m.Status }

// SetStatus stamps the envelope's header and status.
func (m *MoveBaseActionResult) SetStatus(h std_msgs.Header, s actionlib_msgs.GoalStatus) {
	m.Header, m.Status = h, s
}

// GoalStatus returns the status the envelope carries.
func (m *MoveBaseActionFeedback) GoalStatus() actionlib_msgs.GoalStatus { return m.Status }

// SetStatus stamps the envelope's header and status.
func (m *MoveBaseActionFeedback) SetStatus(h std_msgs.Header, s actionlib_msgs.GoalStatus) {
	m.Header, m.Status = h, s
}

// GoalStatus returns the status the envelope carries.
func (m *FollowJointTrajectoryActionResult) GoalStatus() actionlib_msgs.GoalStatus { return m.Status }

// SetStatus stamps the envelope's header and status.
func (m *FollowJointTrajectoryActionResult) SetStatus(h std_msgs.Header, s actionlib_msgs.GoalStatus) {
	m.Header, m.Status = h, s
}

// GoalStatus returns the status the envelope carries.
func (m *FollowJointTrajectoryActionFeedback) GoalStatus() actionlib_msgs.GoalStatus { return m.Status }

// SetStatus stamps the envelope's header and status.
func (m *FollowJointTrajectoryActionFeedback) SetStatus(h std_msgs.Header, s actionlib_msgs.GoalStatus) {
	m.Header, m.Status = h, s
}

// GoalStatus returns the status the envelope carries.
func (m *GripperCommandActionResult) GoalStatus() actionlib_msgs.GoalStatus { return m.Status }

// SetStatus stamps the envelope's header and status.
func (m *GripperCommandActionResult) SetStatus(h std_msgs.Header, s actionlib_msgs.GoalStatus) {
	m.Header, m.Status = h, s
}

// GoalStatus returns the status the envelope carries.
func (m *GripperCommandActionFeedback) GoalStatus() actionlib_msgs.GoalStatus { return m.Status }

// SetStatus stamps the envelope's header and status.
func (m *GripperCommandActionFeedback) SetStatus(h std_msgs.Header, s actionlib_msgs.GoalStatus) {
	m.Header, m.Status = h, s
}
