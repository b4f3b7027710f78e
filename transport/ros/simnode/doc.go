// Package simnode runs the bundled simulator (package sim) as a ROS1 node
// that serves exactly the interfaces a hw-config's transport.ros section
// names, with the standard message types a real robot uses: it publishes
// nav_msgs/Odometry, sensor_msgs/JointState (arm joints and the gripper
// joint), sensor_msgs/BatteryState, vision_msgs/Detection2DArray and a
// std_msgs/Bool e-stop, and serves the move_base_msgs/MoveBase,
// control_msgs/FollowJointTrajectory and control_msgs/GripperCommand actions
// and a geometry_msgs/Twist cmd_vel input.
//
// The simulator's command watchdog is fed by the bridge's heartbeat topic
// (and by cmd_vel), so a bridge that dies mid-motion leaves a robot that
// stops by itself within sim.command_timeout, as a real base controller
// does. Transport faults injected into the simulator act on the wire:
// link_down swallows goals, heartbeats and state, drop_state drops state,
// delay_ack delays acceptance. Robot-side faults make the matching action
// ABORT, as a real controller would (motor_stall aborts move_base,
// joint_stuck aborts the arm trajectory).
//
// A trajectory to the arm's current positions is a hold: the node stops
// the simulator (which also stops the base, the simulator having no
// separate arm stop). Any other trajectory is followed at the speed its
// final point's time_from_start implies, never faster than the joint
// limits; a point due at once (time_from_start 0) is followed at full
// speed, as a real controller jumps to it. A cancelled goal is ended by
// the action server that owns it. A cmd_vel Twist of zero stops the robot; a non-zero
// one is followed by steering the simulator, at the Twist's speeds, towards
// a carrot at least half a second and one braking distance ahead (beyond
// the goal tolerance), the simulator having no velocity interface.
//
// The node re-registers with a restarted master on its own; Disconnect and
// Connect let tests crash and restart the ROS side while the simulated
// hardware keeps running.
package simnode
