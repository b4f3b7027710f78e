// Package ros is the ROS1 transport: a driver (safety.Driver) that reaches
// a robot through the standard interfaces every ROS robot already has, on
// github.com/bluenviron/goroslib/v2.
//
// State comes in from nav_msgs/Odometry (base pose and velocity; every
// robot must publish it), and, where the robot has them,
// sensor_msgs/JointState (arm joints and the gripper joint; with an arm),
// vision_msgs/Detection2DArray (with a camera), sensor_msgs/BatteryState
// and a std_msgs/Bool robot e-stop (each only when the config names it).
// An input the config names must have a publisher when the driver starts;
// one it leaves out (or writes none) is neither subscribed nor waited for. Commands go out as a move_base_msgs/MoveBase goal, or as
// geometry_msgs/Twist on cmd_vel with the driver closing the loop on
// odometry (transport.ros.base_mode), a control_msgs/FollowJointTrajectory
// goal for the arm and a control_msgs/GripperCommand goal for the gripper.
// Stop cancels every goal (the arm's trajectory included) and publishes a
// zero Twist. It never commands the arm somewhere: a hold trajectory is
// added only at a joint reading no older than one control period, due no
// sooner than one period and the joint velocity limits allow. In cmd_vel
// mode the driver turns in place, drives the straight segment the limits
// checked and brakes straight before turning. Every name comes from the
// hw-config, so a
// robot is bridged by writing a config, not code.
//
// actionlib goal states map onto the driver contract like this: PENDING
// and ACTIVE mean Send succeeded; a base goal the server reports SUCCEEDED
// is the controller's verdict, which GoalSucceeded reports by the bridge's
// command id so the supervisor ends the step (safety.GoalReporter); REJECTED (and a RECALLED or terminal
// answer before acceptance) makes Send fail with a *GoalError; a goal the
// server never acknowledges fails Send when the caller's context ends (the
// supervisor bounds it by its state timeout). After acceptance, ABORTED,
// LOST, and a PREEMPTED or RECALLED the bridge did not ask for are reported
// as robot fault codes in robot.State.Faults ("goal_aborted:<action>",
// "goal_lost:<action>", "goal_preempted:<action>"), which the supervisor's
// robot-fault monitor turns into a stop and a failed task; the codes are
// cleared by the next Stop or the next goal on that action. A server that
// acknowledged a goal and then fell silent for longer than
// Conf.ActionStatusTimeout has its goal declared LOST, because goroslib
// (like actionlib) would otherwise wait forever; a robot node that dies
// altogether is caught sooner by the supervisor's state-silence watchdog.
//
// The link is kept by a monitor goroutine: it probes the ROS master, and
// when the master restarted (our node is unknown to it) or was unreachable
// it rebuilds the node and every subscription and publication. LinkUp is
// false while the master is unreachable or odometry is older than the
// safety state timeout plus five control periods (the supervisor's
// state-silence watchdog fires first, at the state timeout), and motions
// fail fast with UNAVAILABLE; the link
// recovers without restarting the bridge. Refresh publishes a
// std_msgs/Header heartbeat (transport.ros.heartbeat_topic, by default
// /<node_name>/heartbeat) that a robot's command watchdog can listen to;
// the bundled simulator node does. Detection class ids are named by
// transport.ros.class_labels or, when the config has none, by the ROS
// parameter <detections_topic>/class_labels.
//
// Discover, Graph.Match and ReadOdometry read a running robot's graph from
// the master API (action servers by the actionlib topic pattern) for
// `robot-bridge init`, which writes a starter hw-config from it.
//
// goroslib is archived upstream (ROS1 reached end of life), so it stays
// behind this package: a ROS2 transport can be added beside it.
package ros
