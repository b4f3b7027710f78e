package safety

import (
	"fmt"
	"time"
)

// EventKind names a safety event.
type EventKind string

// Safety events an Observer receives.
const (
	// EventEStopPressed: the e-stop latched (operator, robot-side or the
	// stop-on-close of a shutdown never latches it).
	EventEStopPressed EventKind = "estop_pressed"
	// EventEStopReset: an operator reset the e-stop.
	EventEStopReset EventKind = "estop_reset"
	// EventFaultLatched: a fault latched; nothing moves until it is cleared.
	EventFaultLatched EventKind = "fault_latched"
	// EventFaultCleared: an operator cleared the fault.
	EventFaultCleared EventKind = "fault_cleared"
	// EventMonitorTripped: a runtime monitor tripped during a motion, or
	// the uncommanded-motion monitor between motions.
	EventMonitorTripped EventKind = "monitor_tripped"
	// EventStopSent: a stop command left the supervisor for the driver.
	// Latency is the time from detection to the driver accepting it.
	EventStopSent EventKind = "stop_sent"
	// EventCommandRefused: the gate refused a motion command.
	EventCommandRefused EventKind = "command_refused"
	// EventCommandSent: the gate passed a motion command to the driver.
	EventCommandSent EventKind = "command_sent"
	// EventRecoveryStarted and EventRecoveryFinished bracket a return to
	// the safe pose; Err is set when it failed.
	EventRecoveryStarted  EventKind = "recovery_started"
	EventRecoveryFinished EventKind = "recovery_finished"
)

// Event is one safety event, for metrics, the operator's event stream and
// the audit log.
type Event struct {
	Kind EventKind
	At   time.Time
	// RobotID is the robot whose supervisor emitted it (hw-config
	// robot.id); the supervisor sets it.
	RobotID string
	// TaskID is the task concerned, if any.
	TaskID string
	// By names who caused it (an operator, "robot", "supervisor").
	By     string
	Reason string
	// Monitor is the monitor that tripped (EventMonitorTripped, and the
	// EventStopSent it caused).
	Monitor TripKind
	// Latency is detection → stop accepted by the driver (EventStopSent).
	Latency time.Duration
	// Err is the failure of a refused command or a failed recovery.
	Err error
}

// String implements fmt.Stringer.
func (e Event) String() string {
	s := string(e.Kind)
	if e.Monitor != "" {
		s += " monitor=" + string(e.Monitor)
	}
	if e.TaskID != "" {
		s += " task=" + e.TaskID
	}
	if e.By != "" {
		s += " by=" + e.By
	}
	if e.Reason != "" {
		s += fmt.Sprintf(" reason=%q", e.Reason)
	}
	return s
}

// Observer receives safety events. It is called synchronously from the
// goroutine that caused the event, never while the supervisor holds a
// lock and always after any stop the event implies has been sent, so it
// must return quickly and must not call back into a blocking supervisor
// method.
type Observer interface {
	SafetyEvent(Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Event)

// SafetyEvent implements Observer.
func (f ObserverFunc) SafetyEvent(e Event) { f(e) }

// TripKind names the runtime monitor that ended a motion.
type TripKind string

// Runtime monitors.
const (
	// TripDeadline: the motion ran past its deadline.
	TripDeadline TripKind = "deadline"
	// TripSilence: no robot state for longer than safety.state_timeout.
	TripSilence TripKind = "state_silence"
	// TripStall: no progress for safety.stall_timeout.
	TripStall TripKind = "stall"
	// TripLimitBreach: the robot left the workspace, entered a keep-out
	// region or a joint left its limits.
	TripLimitBreach TripKind = "limit_breach"
	// TripDriverError: the driver failed a send or a refresh.
	TripDriverError TripKind = "driver_error"
	// TripRobotFault: the robot reported a fault code.
	TripRobotFault TripKind = "robot_fault"
	// TripRobotEStop: the robot's own e-stop engaged.
	TripRobotEStop TripKind = "robot_estop"
	// TripEStop: the bridge's e-stop was pressed.
	TripEStop TripKind = "estop"
	// TripLinkDown: the transport reports the robot unreachable.
	TripLinkDown TripKind = "link_down"
	// TripVerifyFailed: a step reached its goal but its check failed (a
	// grasp that holds nothing).
	TripVerifyFailed TripKind = "verify_failed"
	// TripCancelled: the task was cancelled (not a fault).
	TripCancelled TripKind = "cancelled"
	// TripGrantRevoked: an operator revoked or deleted the grant the
	// motion runs on (not a fault).
	TripGrantRevoked TripKind = "grant_revoked"
	// TripGrantExpired: the grant the motion runs on ran out (not a
	// fault).
	TripGrantExpired TripKind = "grant_expired"
	// TripShutdown: the supervisor is closing.
	TripShutdown TripKind = "shutdown"
)

// Fault reports whether the trip is a failure that calls for recovery
// (as opposed to a cancel, an e-stop or a shutdown).
func (k TripKind) Fault() bool {
	switch k {
	case TripCancelled, TripShutdown, TripEStop, TripRobotEStop:
		return false
	}
	return true
}
