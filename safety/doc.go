// Package safety is the robot's safety supervisor: the one component that
// holds a Driver and therefore the only path by which a motion command can
// reach the robot.
//
// Every command passes the authorization gate (Supervisor.Execute), which
// refuses, in this order: anything while the e-stop is latched, anything
// while a fault is latched, anything while the robot link is down or silent,
// any target outside the configured limits (a *LimitError naming the limit
// and the allowed range), and finally anything without an authorization: a
// config policy of approval "never" for the tool, an operator grant checked
// through Grants, or the supervisor's own recovery when the config marks the
// safe pose as pre-authorized. Deny always wins: a grant never overrides a
// latched e-stop or fault.
//
// While a motion runs the supervisor watches it every control period: the
// deadline, robot state silence, stall, limit breach, driver errors, the
// robot's own e-stop and robot-reported faults. When any of them trips it
// commands a stop before doing anything else, then returns the arm to the
// safe pose at reduced speed if the config pre-authorizes that, and latches
// a fault when recovery is not allowed or does not succeed. Latched e-stops
// and faults are never cleared automatically; only an operator clears them.
package safety
