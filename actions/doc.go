// Package actions implements the robot's action tools (move_base_to,
// move_arm_to, grasp, release, return_to_safe_pose, stop, cancel_task) and
// the task runner that carries each call through its lifecycle.
//
// A call becomes a task only after its arguments resolved (named
// locations and poses through the hw-config, objects through perception,
// reachability through inverse kinematics) and its motion passed the
// supervisor's limit checks, so an operator is never asked to approve
// something the supervisor would refuse. Each task then moves through one
// fsm.Machine: it waits for an operator's decision (or is authorized by
// the config), executes under the supervisor, and ends succeeded, denied,
// expired, cancelled, recovered, in a latched fault or e-stopped. Every
// transition is handed to the Recorder before the motion it implies is
// sent; the one exception is a stop, which is sent first and recorded
// right after. A call authorized when it is made (approval: never, or an
// operator's scoped grant that covers it) writes the records before its
// first command — created, (awaiting and) approved, executing — in one
// commit when the Recorder is a BatchRecorder: the transitions that imply
// no command are held and go with the start's record, their views reach
// the Observer only once written, and the call is answered only once they
// are on the disk. The runner never touches the driver: every command goes
// through safety.Supervisor.Execute.
//
// One motion task runs at a time: a second call while one is live gets
// ROBOT_BUSY naming the live task. A task that ends other than succeeded
// carries an error that says what happened, what recovery did and where
// the robot is now, in words a model can act on.
package actions
