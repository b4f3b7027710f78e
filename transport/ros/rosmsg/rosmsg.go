package rosmsg

import (
	"time"

	"github.com/bluenviron/goroslib/v2/pkg/msg"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/actionlib_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/control_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/geometry_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/std_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/trajectory_msgs"
)

// --- move_base_msgs/MoveBase -------------------------------------------------

// MoveBaseGoal is move_base_msgs/MoveBaseGoal.
type MoveBaseGoal struct {
	msg.Package `ros:"move_base_msgs"`
	TargetPose  geometry_msgs.PoseStamped
}

// MoveBaseResult is move_base_msgs/MoveBaseResult (empty).
type MoveBaseResult struct {
	msg.Package `ros:"move_base_msgs"`
}

// MoveBaseFeedback is move_base_msgs/MoveBaseFeedback.
type MoveBaseFeedback struct {
	msg.Package  `ros:"move_base_msgs"`
	BasePosition geometry_msgs.PoseStamped
}

// MoveBaseActionGoal is move_base_msgs/MoveBaseActionGoal.
type MoveBaseActionGoal struct {
	msg.Package `ros:"move_base_msgs"`
	Header      std_msgs.Header
	GoalId      actionlib_msgs.GoalID //nolint:revive // ROS field name goal_id
	Goal        MoveBaseGoal
}

// MoveBaseActionResult is move_base_msgs/MoveBaseActionResult.
type MoveBaseActionResult struct {
	msg.Package `ros:"move_base_msgs"`
	Header      std_msgs.Header
	Status      actionlib_msgs.GoalStatus
	Result      MoveBaseResult
}

// MoveBaseActionFeedback is move_base_msgs/MoveBaseActionFeedback.
type MoveBaseActionFeedback struct {
	msg.Package `ros:"move_base_msgs"`
	Header      std_msgs.Header
	Status      actionlib_msgs.GoalStatus
	Feedback    MoveBaseFeedback
}

// --- control_msgs/FollowJointTrajectory --------------------------------------

// FollowJointTrajectoryGoal is control_msgs/FollowJointTrajectoryGoal.
type FollowJointTrajectoryGoal struct {
	msg.Package       `ros:"control_msgs"`
	Trajectory        trajectory_msgs.JointTrajectory
	PathTolerance     []control_msgs.JointTolerance
	GoalTolerance     []control_msgs.JointTolerance
	GoalTimeTolerance time.Duration
}

// FollowJointTrajectory result error codes.
const (
	FJTSuccessful            int32 = 0
	FJTInvalidGoal           int32 = -1
	FJTInvalidJoints         int32 = -2
	FJTOldHeaderTimestamp    int32 = -3
	FJTPathToleranceViolated int32 = -4
	FJTGoalToleranceViolated int32 = -5
)

// FollowJointTrajectoryResult is control_msgs/FollowJointTrajectoryResult.
type FollowJointTrajectoryResult struct {
	msg.Package     `ros:"control_msgs"`
	msg.Definitions `ros:"int32 SUCCESSFUL=0,int32 INVALID_GOAL=-1,int32 INVALID_JOINTS=-2,int32 OLD_HEADER_TIMESTAMP=-3,int32 PATH_TOLERANCE_VIOLATED=-4,int32 GOAL_TOLERANCE_VIOLATED=-5"`
	ErrorCode       int32
	ErrorString     string
}

// FollowJointTrajectoryFeedback is control_msgs/FollowJointTrajectoryFeedback.
type FollowJointTrajectoryFeedback struct {
	msg.Package `ros:"control_msgs"`
	Header      std_msgs.Header
	JointNames  []string
	Desired     trajectory_msgs.JointTrajectoryPoint
	Actual      trajectory_msgs.JointTrajectoryPoint
	Error       trajectory_msgs.JointTrajectoryPoint
}

// FollowJointTrajectoryActionGoal is control_msgs/FollowJointTrajectoryActionGoal.
type FollowJointTrajectoryActionGoal struct {
	msg.Package `ros:"control_msgs"`
	Header      std_msgs.Header
	GoalId      actionlib_msgs.GoalID //nolint:revive // ROS field name goal_id
	Goal        FollowJointTrajectoryGoal
}

// FollowJointTrajectoryActionResult is control_msgs/FollowJointTrajectoryActionResult.
type FollowJointTrajectoryActionResult struct {
	msg.Package `ros:"control_msgs"`
	Header      std_msgs.Header
	Status      actionlib_msgs.GoalStatus
	Result      FollowJointTrajectoryResult
}

// FollowJointTrajectoryActionFeedback is control_msgs/FollowJointTrajectoryActionFeedback.
type FollowJointTrajectoryActionFeedback struct {
	msg.Package `ros:"control_msgs"`
	Header      std_msgs.Header
	Status      actionlib_msgs.GoalStatus
	Feedback    FollowJointTrajectoryFeedback
}

// --- control_msgs/GripperCommand ---------------------------------------------

// GripperCommandGoal is control_msgs/GripperCommandGoal.
type GripperCommandGoal struct {
	msg.Package `ros:"control_msgs"`
	Command     control_msgs.GripperCommand
}

// GripperCommandResult is control_msgs/GripperCommandResult.
type GripperCommandResult struct {
	msg.Package `ros:"control_msgs"`
	Position    float64
	Effort      float64
	Stalled     bool
	ReachedGoal bool
}

// GripperCommandFeedback is control_msgs/GripperCommandFeedback.
type GripperCommandFeedback struct {
	msg.Package `ros:"control_msgs"`
	Position    float64
	Effort      float64
	Stalled     bool
	ReachedGoal bool
}

// GripperCommandActionGoal is control_msgs/GripperCommandActionGoal.
type GripperCommandActionGoal struct {
	msg.Package `ros:"control_msgs"`
	Header      std_msgs.Header
	GoalId      actionlib_msgs.GoalID //nolint:revive // ROS field name goal_id
	Goal        GripperCommandGoal
}

// GripperCommandActionResult is control_msgs/GripperCommandActionResult.
type GripperCommandActionResult struct {
	msg.Package `ros:"control_msgs"`
	Header      std_msgs.Header
	Status      actionlib_msgs.GoalStatus
	Result      GripperCommandResult
}

// GripperCommandActionFeedback is control_msgs/GripperCommandActionFeedback.
type GripperCommandActionFeedback struct {
	msg.Package `ros:"control_msgs"`
	Header      std_msgs.Header
	Status      actionlib_msgs.GoalStatus
	Feedback    GripperCommandFeedback
}
