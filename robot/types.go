package robot

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
)

// Pose2D is a planar pose in the room frame: metres and radians, theta
// measured counter-clockwise from +x.
type Pose2D struct {
	X     float64 `json:"x"`
	Y     float64 `json:"y"`
	Theta float64 `json:"theta"`
}

// Twist2D is a planar velocity in the robot frame: V in m/s along +x of the
// robot, W in rad/s counter-clockwise.
type Twist2D struct {
	V float64 `json:"v"`
	W float64 `json:"w"`
}

// Vec3 is a point or vector in metres.
type Vec3 struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
	Z float64 `json:"z"`
}

// Joint is one arm joint's measured state, radians and rad/s.
type Joint struct {
	Name     string  `json:"name"`
	Position float64 `json:"position"`
	Velocity float64 `json:"velocity"`
}

// Gripper is the gripper's measured state.
type Gripper struct {
	// Opening is the finger gap in metres; 0 is fully closed.
	Opening float64 `json:"opening"`
	// Closed is true when the gripper has been commanded closed and has
	// stopped moving.
	Closed bool `json:"closed"`
	// Holding is the id of the object between the fingers, empty if none.
	Holding string `json:"holding,omitempty"`
	// Force is the grip force in newtons currently applied.
	Force float64 `json:"force"`
}

// Battery is the battery's measured state.
type Battery struct {
	// Percent is the state of charge, 0..100.
	Percent  float64 `json:"percent"`
	Voltage  float64 `json:"voltage"`
	Charging bool    `json:"charging"`
	// Known is true once the robot reported its battery. A robot without
	// a battery input never does: its battery is absent from the state's
	// JSON and its summary, never "0%".
	Known bool `json:"-"`
}

// IsZero reports a battery the robot never reported, so a State leaves
// it out of its JSON (omitzero).
func (b Battery) IsZero() bool { return !b.Known }

// UnmarshalJSON reads a reported battery: one present in JSON is known.
func (b *Battery) UnmarshalJSON(data []byte) error {
	type plain Battery
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*b = Battery(p)
	b.Known = true
	return nil
}

// Detection is one 2D detection from the robot's camera, in pixels.
type Detection struct {
	Label string `json:"label"`
	// BBox is [xmin, ymin, xmax, ymax] in pixels.
	BBox       [4]float64 `json:"bbox"`
	Confidence float64    `json:"confidence"`
	// Depth is the distance in metres along the optical axis to the
	// object's centre, 0 when unknown.
	Depth float64 `json:"depth,omitempty"`
	// Stamp is when the image was taken (robot clock).
	Stamp time.Time `json:"stamp,omitzero"`
}

// State is a snapshot of the robot as reported by its transport.
type State struct {
	// Stamp is when the robot produced the snapshot (robot clock).
	Stamp    time.Time `json:"stamp,omitzero"`
	Base     Pose2D    `json:"base"`
	Velocity Twist2D   `json:"velocity"`
	// Joints are the arm joints in hw-config order; empty for a robot
	// without an arm.
	Joints  []Joint  `json:"joints,omitempty"`
	Gripper *Gripper `json:"gripper,omitempty"`
	Battery Battery  `json:"battery,omitzero"`
	// EStop is true while the robot's own e-stop circuit is engaged.
	EStop bool `json:"estop"`
	// Faults are robot-side fault codes (motor stall, joint stuck, ...).
	Faults []string `json:"faults,omitempty"`
	// Detections are the camera's most recent detections.
	Detections []Detection `json:"-"`
}

// Moving reports whether the base or any joint moves faster than the
// given thresholds (m/s and rad/s for the base, rad/s for joints).
func (s State) Moving(linEps, angEps float64) bool {
	if math.Abs(s.Velocity.V) > linEps || math.Abs(s.Velocity.W) > angEps {
		return true
	}
	for _, j := range s.Joints {
		if math.Abs(j.Velocity) > angEps {
			return true
		}
	}
	return false
}

// JointPositions returns the joint positions in order.
func (s State) JointPositions() []float64 {
	out := make([]float64, len(s.Joints))
	for i, j := range s.Joints {
		out[i] = j.Position
	}
	return out
}

// Clone returns a deep copy of s.
func (s State) Clone() State {
	c := s
	c.Joints = append([]Joint(nil), s.Joints...)
	c.Faults = append([]string(nil), s.Faults...)
	c.Detections = append([]Detection(nil), s.Detections...)
	if s.Gripper != nil {
		g := *s.Gripper
		c.Gripper = &g
	}
	return c
}

// Summary describes the state itself in one short sentence fragment, e.g.
// "stopped at (1.20, 0.40) facing 90°, battery 87%". It knows nothing of
// how old the state is: "stopped" means only that this state shows no
// motion. To describe the robot now — a state that may be stale, a link
// that may be down, a stop that may be unconfirmed — use
// Observation.Summary.
func (s State) Summary() string {
	var b strings.Builder
	if s.Moving(movingLinEps, movingAngEps) {
		b.WriteString("moving at ")
	} else {
		b.WriteString("stopped at ")
	}
	s.writePose(&b)
	s.writeDetails(&b)
	return b.String()
}

// Thresholds of Summary's "moving": m/s for the base, rad/s for turning
// and for every joint.
const (
	movingLinEps = 0.01
	movingAngEps = 0.02
)

// writePose writes "(x, y) facing θ°".
func (s State) writePose(b *strings.Builder) {
	b.WriteString(FormatPose(s.Base))
}

// writeDetails writes the gripper, battery, e-stop and faults, each after
// a comma.
func (s State) writeDetails(b *strings.Builder) {
	if s.Gripper != nil {
		switch {
		case s.Gripper.Holding != "":
			fmt.Fprintf(b, ", holding %s", s.Gripper.Holding)
		case s.Gripper.Closed:
			b.WriteString(", gripper closed and empty")
		default:
			b.WriteString(", gripper open")
		}
	}
	if s.Battery.Known {
		fmt.Fprintf(b, ", battery %.0f%%", s.Battery.Percent)
	}
	if s.EStop {
		b.WriteString(", robot e-stop engaged")
	}
	if len(s.Faults) > 0 {
		fmt.Fprintf(b, ", robot faults: %s", strings.Join(s.Faults, ", "))
	}
}

// DefaultStaleAfter is how old a state may be and still describe the robot
// now, when an Observation does not say: the default of the hw-config's
// safety.state_timeout, past which the supervisor treats the robot as
// silent.
const DefaultStaleAfter = 500 * time.Millisecond

// Condition is what can truthfully be said about the robot's motion at one
// moment, from its newest state and how that state was received.
type Condition string

// Conditions, from the least known to the best known.
const (
	// ConditionUnknown: no state has been received.
	ConditionUnknown Condition = "unknown"
	// ConditionLinkDown: the transport does not reach the robot; the
	// newest state is history, whatever it shows.
	ConditionLinkDown Condition = "link_down"
	// ConditionStale: the link is up, but no state has arrived for longer
	// than the state timeout; the robot may be doing anything.
	ConditionStale Condition = "stale"
	// ConditionStopUnconfirmed: a stop was sent and no state has been
	// received since; the newest state is from before the stop.
	ConditionStopUnconfirmed Condition = "stop_unconfirmed"
	// ConditionMoving: a current state shows the base or a joint moving.
	ConditionMoving Condition = "moving"
	// ConditionStopped: a current state (received after the stop, if one
	// was sent) shows the robot at rest.
	ConditionStopped Condition = "stopped"
)

// Current reports whether the condition describes the robot now (moving
// or stopped), rather than what it last showed.
func (c Condition) Current() bool { return c == ConditionMoving || c == ConditionStopped }

// Observation is the newest robot state together with what decides how
// much it says about the robot now: when it was received, whether the
// link is up, and whether a stop was sent after it. Its Summary is the
// one way the bridge describes the robot to an agent or an operator, so
// that every answer is exactly true at the moment it is given.
type Observation struct {
	// State is the newest state received; meaningless unless Have.
	State State
	// Have is false until a state has been received.
	Have bool
	// ReceivedAt is when the bridge received State, on its own clock
	// (State.Stamp is the robot's clock and is not compared with it).
	ReceivedAt time.Time
	// Now is the moment the observation describes, on the bridge's clock.
	Now time.Time
	// StaleAfter is the state timeout: a state received longer ago than
	// this no longer says what the robot does now. Zero or less is
	// DefaultStaleAfter.
	StaleAfter time.Duration
	// LinkUp is whether the transport reaches the robot at Now.
	LinkUp bool
	// StopSentAt, when set, is when a stop was sent: only a state received
	// after it can show the robot stopped.
	StopSentAt time.Time
}

// Age is how long before Now the state was received (0 without a state,
// never negative).
func (o Observation) Age() time.Duration {
	if !o.Have {
		return 0
	}
	return max(0, o.Now.Sub(o.ReceivedAt))
}

// staleAfter is StaleAfter with its default.
func (o Observation) staleAfter() time.Duration {
	if o.StaleAfter <= 0 {
		return DefaultStaleAfter
	}
	return o.StaleAfter
}

// Stale reports whether the state is older than the state timeout.
func (o Observation) Stale() bool { return o.Have && o.Age() > o.staleAfter() }

// Condition says what the observation shows. A lost link outranks a stale
// state, which outranks an unconfirmed stop: each later one is claimed
// only when the earlier ones do not hold.
func (o Observation) Condition() Condition {
	switch {
	case !o.Have:
		return ConditionUnknown
	case !o.LinkUp:
		return ConditionLinkDown
	case o.Stale():
		return ConditionStale
	case !o.StopSentAt.IsZero() && !o.ReceivedAt.After(o.StopSentAt):
		return ConditionStopUnconfirmed
	case o.State.Moving(movingLinEps, movingAngEps):
		return ConditionMoving
	}
	return ConditionStopped
}

// Summary describes the robot at Now in one short sentence fragment, for
// the "robot" field of a result envelope and the operator console. It
// says "stopped" only when a current state — received within the state
// timeout, over a link that is up, and after the stop if one was sent —
// shows the robot at rest, and "moving" only from a current state that
// shows motion. Otherwise it says where the robot was last seen and how
// long ago:
//
//	stopped at (1.20, 0.40) facing 90°, gripper open, battery 87%
//	moving at (1.20, 0.40) facing 90°, gripper open, battery 87%
//	last seen moving at (1.20, 0.40) facing 90° 2.5 s ago (no state since), gripper open, battery 87%
//	robot link down; last seen at (1.20, 0.40) facing 90° 12 s ago (no state since), gripper open, battery 87%
//	stop sent, not confirmed; last seen moving at (1.20, 0.40) facing 90° 0.0 s ago (before the stop), …
//	robot state unknown (no state received yet)
func (o Observation) Summary() string {
	var b strings.Builder
	cond := o.Condition()
	stopSent := !o.StopSentAt.IsZero()
	switch cond {
	case ConditionUnknown:
		if stopSent {
			b.WriteString("stop sent, not confirmed; ")
		}
		if o.LinkUp {
			b.WriteString("robot state unknown (no state received yet)")
		} else {
			b.WriteString("robot link down, no state received yet")
		}
		return b.String()
	case ConditionMoving, ConditionStopped:
		if stopSent && cond == ConditionMoving {
			b.WriteString("stop sent, not confirmed; ")
		}
		b.WriteString(string(cond) + " at ")
		o.State.writePose(&b)
		o.State.writeDetails(&b)
		return b.String()
	}
	if stopSent {
		b.WriteString("stop sent, not confirmed; ")
	}
	if cond == ConditionLinkDown {
		b.WriteString("robot link down; ")
	}
	b.WriteString(o.LastSeen())
	if cond == ConditionStopUnconfirmed {
		b.WriteString(" (before the stop)")
	} else {
		b.WriteString(" (no state since)")
	}
	o.State.writeDetails(&b)
	return b.String()
}

// LastSeen says where the newest state showed the robot and how long ago
// it was received, whatever the condition: "last seen at (1.20, 0.40)
// facing 90° 2.5 s ago", with "moving" when that state showed motion;
// "no state received yet" without one.
func (o Observation) LastSeen() string {
	if !o.Have {
		return "no state received yet"
	}
	var b strings.Builder
	b.WriteString("last seen ")
	if o.State.Moving(movingLinEps, movingAngEps) {
		b.WriteString("moving ")
	}
	b.WriteString("at ")
	o.State.writePose(&b)
	b.WriteString(" " + FormatAge(o.Age()) + " ago")
	return b.String()
}

// FormatAge writes a state's age for a reader: tenths of a second under
// 10 s ("2.5 s"), whole seconds under two minutes ("75 s"), then whole
// minutes ("12 min") and, past two hours, whole hours ("5 h").
func FormatAge(d time.Duration) string {
	d = max(d, 0)
	switch {
	case d < 10*time.Second:
		return fmt.Sprintf("%.1f s", math.Floor(d.Seconds()*10)/10)
	case d < 2*time.Minute:
		return fmt.Sprintf("%d s", int64(d/time.Second))
	case d < 2*time.Hour:
		return fmt.Sprintf("%d min", int64(d/time.Minute))
	}
	return fmt.Sprintf("%d h", int64(d/time.Hour))
}

// Degrees converts radians to degrees normalised to (-180, 180].
func Degrees(rad float64) float64 {
	d := math.Mod(rad*180/math.Pi, 360)
	if d > 180 {
		d -= 360
	} else if d <= -180 {
		d += 360
	}
	return d
}

// Radians converts degrees to radians.
func Radians(deg float64) float64 { return deg * math.Pi / 180 }

// NormalizeAngle wraps an angle in radians to (-pi, pi].
func NormalizeAngle(a float64) float64 {
	a = math.Mod(a, 2*math.Pi)
	if a > math.Pi {
		a -= 2 * math.Pi
	} else if a <= -math.Pi {
		a += 2 * math.Pi
	}
	return a
}
