// Package rosaction is a small actionlib (ROS1 actions) client and server
// on goroslib publishers and subscribers, generic over the envelope types
// of package rosmsg.
//
// goroslib ships an action client and server, but the client never times
// out, calls user callbacks under its own lock, and both register their
// envelopes as "goroslib/Msg", which introspection tools cannot decode. This
// package keeps actionlib's wire protocol (goal, cancel, status, feedback
// and result topics under the action's namespace; GoalStatus values
// PENDING … LOST) and adds what the bridge needs: a goal handle whose
// acknowledgement can be awaited with a context, terminal states delivered
// through a callback that runs with no lock held, a record of whether a
// preemption was asked for by this client, and explicit expiry of goals
// whose server went silent (actionlib itself only declares a goal LOST when
// a status message omits it, so a dead server would leave it active
// forever). Like actionlib's client, a goal that the status array reports
// finished waits for its result message (at most ClientConf.ResultTimeout,
// enforced by Expire), so OnResult always runs before OnTerminal whichever
// topic delivers first.
package rosaction
