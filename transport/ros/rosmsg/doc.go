// Package rosmsg holds the ROS1 message types the ROS transport needs and
// goroslib does not ship in the form the wire needs: move_base_msgs (absent
// from goroslib), and the actionlib envelopes (FooActionGoal, FooActionResult,
// FooActionFeedback) of move_base_msgs/MoveBase, control_msgs/
// FollowJointTrajectory and control_msgs/GripperCommand as named message
// types.
//
// goroslib's own action client and server build their envelopes as
// anonymous structs, which register with the master as "goroslib/Msg": the
// MD5 sums match so roscpp and rospy peers still connect, but `rostopic
// echo`, `rostopic type` and every introspection tool see a type that does
// not exist. Declaring the envelopes here, with the package tag and Go type
// name equal to the ROS type name, makes the bridge's goals look on the wire
// exactly like those of any other ROS node. The MD5 sums are pinned in tests
// against Debian's Python message classes, rosserial's published sums and a
// rospy peer.
//
// Each envelope has small accessor methods (GoalStatus, SetStatus, GoalID,
// SetGoalID) so that the generic actionlib client and server in
// transport/ros/rosaction can handle every action with one implementation.
package rosmsg
