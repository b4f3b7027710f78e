// Package sim is the bundled robot simulator: a deterministic kinematic model
// of a differential-drive mobile manipulator (base, 4-joint arm, parallel
// gripper, pinhole RGB-D camera, battery) in a 10 m × 10 m room with a table
// and a few objects, all taken from the robot's hw-config.
//
// The simulator is meant to behave like a real robot, including the ways real
// robots fail, because the bridge's safety supervisor is tested against it:
// controllers honour speed and acceleration limits and reject goals outside
// joint limits, a command watchdog stops the robot when the bridge goes quiet,
// and faults (motor stall, stuck joint, dropped state, delayed acks, lost
// link, spurious robot e-stop, gripper slip, sensor noise) can be injected
// through a Go API or an HTTP handler.
//
// Lease epochs fence a cluster of bridges: the simulator keeps the newest
// epoch a command (Command, robot.Command.Epoch), stop (StopFrom) or
// refresh (RefreshFrom) carried; a motion command of an older epoch is
// refused (ErrStaleEpoch) and moves nothing, a stop of any epoch is
// obeyed, a refresh of an older epoch feeds no watchdog. (Epoch, the sim
// time's start, is unrelated to these.) The command log records each
// command's and stop's epoch and bridge; without a cluster they are zero
// and absent from its JSON.
//
// The simulator keeps its own record of what reached and what moved the
// robot, for judging safety from the robot's side: the command log
// (CommandLog, GET /v1/sim/log) and the motion trace (Trace, GET
// /v1/sim/trace), one sample per physics step in which anything moved, in
// a bounded ring (DefaultTraceSize) that says exactly how many samples a
// reader lost to it.
//
// Physics advances only through Step, and sim time starts at the fixed Epoch,
// so two simulators with the same seed that receive the same calls produce
// identical trajectories and detections. All randomness comes from one
// seeded math/rand/v2 source, drawn only inside Step and the per-message
// fault checks. Run drives Step in real time from an injected clock. Sim is
// safe for concurrent use; it never calls out while holding its lock.
//
// The package imports only the shared data packages (robot, hwconfig, geom)
// and kinematics, never the bridge's supervisor or transports.
package sim
