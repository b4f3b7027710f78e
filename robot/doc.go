// Package robot holds the data types every part of the bridge shares: the
// robot's physical state as the bridge sees it, the motion commands a
// transport may carry to the robot, and camera detections. It has no logic
// beyond small helpers that describe a state in words, and no dependencies
// on any other package of the bridge, so the simulator and every transport
// can use it without importing the supervisor.
package robot
