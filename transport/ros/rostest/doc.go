// Package rostest starts the real ROS parts that integration tests of the
// ROS transport meet: Debian's `rosmaster --core` on a free loopback port,
// ROS command-line tools (rostopic) and rospy scripts run by Debian's
// /usr/bin/python3, each in its own process group with a private ROS_HOME,
// killed as a group when the test ends.
//
// A missing tool fails the test (it never skips) with the apt-get command
// that installs it, because a ROS test that silently does not run proves
// nothing. The package is for tests only; it imports package testing.
package rostest
