// Package fsm is the lifecycle of one action task (ARCHITECTURE.md), built
// on github.com/looplab/fsm: typed states and events, one transition table,
// and nothing else. It does no I/O and never sleeps; the action runner fires
// events and persists transitions, the supervisor decides when.
//
// The lifecycle maps onto ROS actionlib goal states like this:
//
//	requested, awaiting_approval, approved  ~ PENDING   (goal accepted, not yet active)
//	executing                               ~ ACTIVE
//	stopping (after cancel)                 ~ PREEMPTING
//	cancelled                               ~ PREEMPTED, or RECALLED when no motion was ever sent
//	succeeded                               ~ SUCCEEDED
//	denied, expired, failed                 ~ REJECTED  (nothing moved)
//	stopping → recovering → recovered       ~ ABORTED, followed by the bridge's own recovery
//	fault, estopped                         ~ ABORTED with a latched safety condition
//	interrupted                             ~ LOST      (the bridge restarted; fate unknown)
package fsm
