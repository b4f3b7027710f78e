// Package kinematics computes forward and inverse kinematics for the arm
// model of hwconfig.ArmConf: a yaw joint at the arm mount followed by pitch
// joints that move the links in one vertical plane. The simulator uses it to
// place the fingertip, and the bridge uses it to turn "reach that cup" into
// joint goals, so both agree on where the gripper is by construction.
//
// Everything here is pure: no state, no I/O, no allocation beyond the
// returned joint slice. Bad input (nil arm, wrong joint count, NaN or
// infinite targets) yields an error wrapping ErrInvalidInput, never a panic.
package kinematics
