package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/robot-bridge/robot-bridge/robot"
)

// FaultKind names an injectable fault.
type FaultKind string

// Fault kinds. The probability of a fault applies per physics step for the
// physical ones (motor_stall, joint_stuck, robot_estop, gripper_slip,
// sensor_noise) and per message for the transport ones (drop_state per
// state publication, delay_ack per command, link_down per driver call and
// publication).
const (
	// FaultMotorStall: the base does not move despite commands; the robot
	// reports the "motor_stall" fault code.
	FaultMotorStall FaultKind = "motor_stall"
	// FaultJointStuck: the named joint (or every joint) does not move; the
	// robot reports "joint_stuck:<joint>".
	FaultJointStuck FaultKind = "joint_stuck"
	// FaultDropState: state publications are dropped.
	FaultDropState FaultKind = "drop_state"
	// FaultDelayAck: command acceptance is delayed by Delay (realised by
	// the transport, see AckDelay).
	FaultDelayAck FaultKind = "delay_ack"
	// FaultLinkDown: driver calls fail and no state arrives.
	FaultLinkDown FaultKind = "link_down"
	// FaultRobotEStop: a spurious robot-side e-stop: the robot stops at
	// once, reports EStop and refuses commands while the fault is active.
	FaultRobotEStop FaultKind = "robot_estop"
	// FaultGripperSlip: the held object slips out of the gripper.
	FaultGripperSlip FaultKind = "gripper_slip"
	// FaultSensorNoise: extra odometry, joint and detection noise.
	FaultSensorNoise FaultKind = "sensor_noise"
)

// FaultKinds lists every fault kind, in documentation order.
var FaultKinds = []FaultKind{
	FaultMotorStall, FaultJointStuck, FaultDropState, FaultDelayAck,
	FaultLinkDown, FaultRobotEStop, FaultGripperSlip, FaultSensorNoise,
}

func faultKindNames() []string {
	out := make([]string, len(FaultKinds))
	for i, k := range FaultKinds {
		out[i] = string(k)
	}
	return out
}

// Defaults for kind-specific fault parameters.
const (
	DefaultAckDelay       = 500 * time.Millisecond
	DefaultOdomNoise      = 0.05 // m (and rad for heading)
	DefaultJointNoise     = 0.02 // rad
	DefaultDetectionNoise = 8.0  // px
)

// ErrInvalidFault is wrapped by every fault validation or decoding error.
var ErrInvalidFault = errors.New("invalid fault")

// FieldError names the fault field that is wrong and, for enum-like fields,
// the allowed values. It wraps ErrInvalidFault.
type FieldError struct {
	Field   string
	Message string
	Allowed []string
}

// Error implements error.
func (e *FieldError) Error() string {
	msg := fmt.Sprintf("invalid fault: field %q: %s", e.Field, e.Message)
	if len(e.Allowed) > 0 {
		msg += " (allowed: " + strings.Join(e.Allowed, ", ") + ")"
	}
	return msg
}

// Unwrap returns ErrInvalidFault.
func (e *FieldError) Unwrap() error { return ErrInvalidFault }

// Fault describes one fault to inject.
type Fault struct {
	Kind FaultKind
	// Probability (optional) that the fault takes effect, per physics step
	// or per message (see FaultKind). It defaults to 1.
	Probability float64
	// Start (optional) is the sim-time offset from injection at which the
	// fault becomes active. It defaults to 0 (at once).
	Start time.Duration
	// Duration (optional) is how long the fault stays active. It defaults
	// to 0, meaning until cleared.
	Duration time.Duration
	// Joint (joint_stuck, optional) names the stuck joint. It defaults to
	// "all".
	Joint string
	// Delay (delay_ack, optional) is how long acceptance is delayed. It
	// defaults to DefaultAckDelay.
	Delay time.Duration
	// OdomStd, JointStd and DetectionPx (sensor_noise, optional) are the
	// extra noise standard deviations in m (and rad for heading), rad and
	// px. They default to DefaultOdomNoise, DefaultJointNoise and
	// DefaultDetectionNoise.
	OdomStd     float64
	JointStd    float64
	DetectionPx float64
}

func (f Fault) appliesToJoint(name string) bool {
	return f.Joint == "" || f.Joint == "all" || f.Joint == name
}

// normalize fills defaults and validates f against the robot's joints.
func (f Fault) normalize(joints []string) (Fault, error) {
	if !slices.Contains(FaultKinds, f.Kind) {
		msg := fmt.Sprintf("unknown fault kind %q", f.Kind)
		if f.Kind == "" {
			msg = "is required"
		}
		return f, &FieldError{Field: "kind", Message: msg, Allowed: faultKindNames()}
	}
	if f.Probability == 0 {
		f.Probability = 1
	}
	if !finite(f.Probability) || f.Probability <= 0 || f.Probability > 1 {
		return f, &FieldError{Field: "probability", Message: fmt.Sprintf("%v must be in (0, 1]", f.Probability)}
	}
	if f.Start < 0 {
		return f, &FieldError{Field: "start", Message: fmt.Sprintf("%v must be >= 0", f.Start)}
	}
	if f.Duration < 0 {
		return f, &FieldError{Field: "duration", Message: fmt.Sprintf("%v must be >= 0 (0 means until cleared)", f.Duration)}
	}
	kindOnly := func(field string, set bool, kind FaultKind) error {
		if set && f.Kind != kind {
			return &FieldError{Field: field, Message: fmt.Sprintf("only applies to kind %s, not %s", kind, f.Kind)}
		}
		return nil
	}
	for _, err := range []error{
		kindOnly("joint", f.Joint != "", FaultJointStuck),
		kindOnly("delay", f.Delay != 0, FaultDelayAck),
		kindOnly("odom_std", f.OdomStd != 0, FaultSensorNoise),
		kindOnly("joint_std", f.JointStd != 0, FaultSensorNoise),
		kindOnly("detection_px", f.DetectionPx != 0, FaultSensorNoise),
	} {
		if err != nil {
			return f, err
		}
	}
	switch f.Kind {
	case FaultJointStuck:
		if f.Joint == "" {
			f.Joint = "all"
		}
		if len(joints) == 0 {
			return f, &FieldError{Field: "kind", Message: "joint_stuck needs an arm and this robot has none"}
		}
		if f.Joint != "all" && !slices.Contains(joints, f.Joint) {
			return f, &FieldError{Field: "joint", Message: fmt.Sprintf("unknown joint %q", f.Joint), Allowed: append([]string{"all"}, joints...)}
		}
	case FaultDelayAck:
		if f.Delay == 0 {
			f.Delay = DefaultAckDelay
		}
		if f.Delay < 0 || f.Delay > time.Minute {
			return f, &FieldError{Field: "delay", Message: fmt.Sprintf("%v must be in (0, 1m]", f.Delay)}
		}
	case FaultSensorNoise:
		f.OdomStd = orDefault(f.OdomStd, DefaultOdomNoise)
		f.JointStd = orDefault(f.JointStd, DefaultJointNoise)
		f.DetectionPx = orDefault(f.DetectionPx, DefaultDetectionNoise)
		for _, p := range []struct {
			name string
			v    float64
			max  float64
		}{{"odom_std", f.OdomStd, 1}, {"joint_std", f.JointStd, 1}, {"detection_px", f.DetectionPx, 200}} {
			if !finite(p.v) || p.v < 0 || p.v > p.max {
				return f, &FieldError{Field: p.name, Message: fmt.Sprintf("%v must be in [0, %g]", p.v, p.max)}
			}
		}
	}
	return f, nil
}

// FaultState is where a fault is in its life.
type FaultState string

// Fault states.
const (
	FaultPending FaultState = "pending"
	FaultActive  FaultState = "active"
	FaultExpired FaultState = "expired"
)

// FaultStatus reports one injected fault.
type FaultStatus struct {
	ID         string     `json:"id"`
	Fault      Fault      `json:"fault"`
	State      FaultState `json:"state"`
	InjectedAt time.Time  `json:"injected_at"`
	// Triggers counts the steps or messages the fault affected.
	Triggers int `json:"triggers"`
}

type faultEntry struct {
	id         string
	spec       Fault
	injectedAt time.Time
	triggers   int
	// latched is set once a robot_estop fault has fired; the e-stop then
	// stays engaged while the fault is active.
	latched bool
}

func (f *faultEntry) startsAt() time.Time { return f.injectedAt.Add(f.spec.Start) }

func (f *faultEntry) state(now time.Time) FaultState {
	switch {
	case now.Before(f.startsAt()):
		return FaultPending
	case f.spec.Duration > 0 && !now.Before(f.startsAt().Add(f.spec.Duration)):
		return FaultExpired
	}
	return FaultActive
}

func (f *faultEntry) active(now time.Time) bool { return f.state(now) == FaultActive }

// fire draws whether an active fault takes effect now and counts it. A
// fault with probability 1 draws nothing, so injecting it never shifts the
// random sequence of noise and detections.
func (s *Sim) fire(f *faultEntry) bool {
	if !f.active(s.now) {
		return false
	}
	if f.spec.Probability < 1 && s.rng.Float64() >= f.spec.Probability {
		return false
	}
	f.triggers++
	return true
}

// Inject adds a fault and returns its id. Sim time for Start and Duration
// counts from now.
func (s *Sim) Inject(f Fault) (string, error) {
	f, err := f.normalize(s.jointNames)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextFault++
	e := &faultEntry{id: fmt.Sprintf("f%d", s.nextFault), spec: f, injectedAt: s.now}
	s.faults = append(s.faults, e)
	s.event(EventFaultInjected, fmt.Sprintf("%s %s (probability %g, start +%v, duration %v)", e.id, f.Kind, f.Probability, f.Start, f.Duration))
	return e.id, nil
}

// ClearFault removes one fault; its effects end at once (a robot e-stop it
// caused is released, stuck joints move again on their next goal).
func (s *Sim) ClearFault(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.faults, func(f *faultEntry) bool { return f.id == id })
	if i < 0 {
		return fmt.Errorf("%w %q", ErrUnknownFault, id)
	}
	s.event(EventFaultCleared, id+" "+string(s.faults[i].spec.Kind))
	s.faults = slices.Delete(s.faults, i, i+1)
	s.refreshFaultEffects()
	return nil
}

// ClearFaults removes every fault and returns how many there were.
func (s *Sim) ClearFaults() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.faults)
	for _, f := range s.faults {
		s.event(EventFaultCleared, f.id+" "+string(f.spec.Kind))
	}
	s.faults = nil
	s.refreshFaultEffects()
	return n
}

// Faults returns the status of every injected fault, in injection order.
func (s *Sim) Faults() []FaultStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]FaultStatus, 0, len(s.faults))
	for _, f := range s.faults {
		out = append(out, FaultStatus{ID: f.id, Fault: f.spec, State: f.state(s.now), InjectedAt: f.injectedAt, Triggers: f.triggers})
	}
	return out
}

// refreshFaultEffects recomputes the effects that do not need a draw after
// faults were removed, so that State reflects a clear at once.
func (s *Sim) refreshFaultEffects() {
	estop := false
	for _, f := range s.faults {
		if f.spec.Kind == FaultRobotEStop && f.latched && f.active(s.now) {
			estop = true
		}
	}
	if s.estop && !estop {
		s.event(EventEStopReleased, "robot e-stop released")
	}
	s.estop = estop
	if !s.hasActive(FaultMotorStall) {
		s.stalled = false
	}
	if !s.hasActive(FaultJointStuck) {
		clear(s.stuck)
	}
	if !s.hasActive(FaultSensorNoise) {
		s.noisePose, s.noisePx = robot.Pose2D{}, 0
		clear(s.noiseQ)
	}
}

func (s *Sim) hasActive(k FaultKind) bool {
	for _, f := range s.faults {
		if f.spec.Kind == k && f.active(s.now) {
			return true
		}
	}
	return false
}

// applyFaults evaluates the physical faults for one physics step, in
// injection order so that the random sequence is reproducible.
func (s *Sim) applyFaults() {
	s.stalled = false
	clear(s.stuck)
	s.noisePose, s.noisePx = robot.Pose2D{}, 0
	clear(s.noiseQ)
	estop := false
	for _, f := range s.faults {
		switch f.spec.Kind {
		case FaultMotorStall:
			if s.fire(f) {
				s.stalled = true
			}
		case FaultJointStuck:
			if s.fire(f) {
				for i, n := range s.jointNames {
					if f.spec.appliesToJoint(n) {
						s.stuck[i] = true
					}
				}
			}
		case FaultRobotEStop:
			if !f.active(s.now) {
				continue
			}
			if !f.latched && s.fire(f) {
				f.latched = true
			}
			if f.latched {
				estop = true
			}
		case FaultGripperSlip:
			if s.grip.holding != "" && s.fire(f) {
				s.event(EventSlip, "the held object slipped out of the gripper")
				s.release("gripper slip")
				// The fingers snap shut on nothing.
				s.grip.opening, s.grip.moving = 0, false
			}
		case FaultSensorNoise:
			if s.fire(f) {
				s.noisePose.X += s.rng.NormFloat64() * f.spec.OdomStd
				s.noisePose.Y += s.rng.NormFloat64() * f.spec.OdomStd
				s.noisePose.Theta += s.rng.NormFloat64() * f.spec.OdomStd
				for i := range s.noiseQ {
					s.noiseQ[i] += s.rng.NormFloat64() * f.spec.JointStd
				}
				s.noisePx = math.Hypot(s.noisePx, f.spec.DetectionPx)
			}
		}
	}
	if estop && !s.estop {
		// The e-stop circuit cuts power: goals are dropped and the base
		// stops at once (stepBase zeroes the speeds).
		s.goal = nil
		s.holdArm()
		s.grip.moving = false
		s.event(EventEStop, "robot e-stop engaged")
	} else if !estop && s.estop {
		s.event(EventEStopReleased, "robot e-stop released")
	}
	s.estop = estop
}

// messageFault draws whether a message-level fault of kind k affects the
// current message; it returns the first firing fault.
func (s *Sim) messageFault(k FaultKind) *faultEntry {
	for _, f := range s.faults {
		if f.spec.Kind == k && s.fire(f) {
			return f
		}
	}
	return nil
}

// AckDelay returns how long a transport should delay accepting the next
// command: the Delay of an active delay_ack fault that fires for this
// command, 0 otherwise. Transports call it once per command.
func (s *Sim) AckDelay() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.messageFault(FaultDelayAck); f != nil {
		return f.spec.Delay
	}
	return 0
}

// LinkDrop reports whether an active link_down fault swallows the current
// driver call or publication. Transports call it once per message.
func (s *Sim) LinkDrop() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.messageFault(FaultLinkDown) != nil
}

// LinkDownActive reports whether any link_down fault is active, without a
// draw: what a transport shows as its link status.
func (s *Sim) LinkDownActive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hasActive(FaultLinkDown)
}

// publishable draws whether the next state publication gets through
// (link_down and drop_state).
func (s *Sim) publishable() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.messageFault(FaultLinkDown) != nil || s.messageFault(FaultDropState) != nil {
		s.counters.StatesDropped++
		return false
	}
	return true
}
