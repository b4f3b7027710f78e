package mqtt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"strings"
	"time"

	"github.com/robot-bridge/robot-bridge/robot"
)

// Version is the payload version this package writes and reads. Every
// JSON payload carries it as "v"; a payload of another version is dropped
// (reason "version"), so a robot and a bridge that disagree never act on
// each other's fields by accident.
const Version = 1

// MaxPayload is the largest payload the transport reads, 64 KiB. A larger
// one is dropped before it is parsed (reason "oversized"): a state of the
// bundled robot is under 2 KiB, and a cap keeps a misbehaving publisher
// from making the bridge allocate without bound.
const MaxPayload = 64 << 10

// Bounds on what one payload may carry, checked by the decoders.
const (
	maxIDLen      = 128
	maxTextLen    = 512
	maxJoints     = 64
	maxFaults     = 64
	maxDetections = 256
)

// Actions are the {action} levels of {prefix}/{id}/cmd/{action}.
const (
	ActionMoveBase = "move_base"
	ActionMoveArm  = "move_arm"
	ActionGripper  = "gripper"
	ActionStop     = "stop"
	ActionRefresh  = "refresh"
)

// Ack statuses, in the order a robot sends them for one command.
const (
	AckAccepted = "accepted"
	AckProgress = "progress"
	AckDone     = "done"
	AckFailed   = "failed"
)

// Status payloads of {prefix}/{id}/status and {prefix}/{id}/bridge: plain
// text, not JSON, as MQTT last wills usually are.
const (
	StatusOnline  = "online"
	StatusOffline = "offline"
)

// Reason is why an incoming payload was dropped: the label of the
// robot_bridge_mqtt_dropped_total metric. The set is closed, so the
// metric's cardinality is bounded.
type Reason string

// Drop reasons.
const (
	// ReasonOversized: larger than MaxPayload; not parsed.
	ReasonOversized Reason = "oversized"
	// ReasonMalformed: not one JSON object of the payload's shape.
	ReasonMalformed Reason = "malformed"
	// ReasonVersion: a "v" other than Version.
	ReasonVersion Reason = "version"
	// ReasonInvalid: well-formed JSON whose values break the contract
	// (an empty id, a non-finite number, too many joints, ...).
	ReasonInvalid Reason = "invalid"
	// ReasonOutOfOrder: a state whose seq is not above the last one of
	// its session, or from an older session.
	ReasonOutOfOrder Reason = "out_of_order"
	// ReasonStale: a state stamped longer ago than the state timeout.
	ReasonStale Reason = "stale"
	// ReasonFuture: a state stamped further ahead than max_clock_skew.
	ReasonFuture Reason = "future"
	// ReasonUnknownCommand: an ack for a command this bridge is not
	// waiting on (a late or foreign ack).
	ReasonUnknownCommand Reason = "unknown_command"
	// ReasonUnknownRobot: a payload under the topic prefix for a robot id
	// that is not one of this bridge's (a fleet bridge subscribes with
	// wildcards, so it sees every robot under its prefix).
	ReasonUnknownRobot Reason = "unknown_robot"
)

// Reasons lists every drop reason, for metrics and documentation.
var Reasons = []Reason{
	ReasonOversized, ReasonMalformed, ReasonVersion, ReasonInvalid,
	ReasonOutOfOrder, ReasonStale, ReasonFuture, ReasonUnknownCommand,
	ReasonUnknownRobot,
}

// PayloadError is an incoming payload that was dropped, with the reason
// (the metric label) and what was wrong in words.
type PayloadError struct {
	Reason Reason
	Err    error
}

// Error implements error.
func (e *PayloadError) Error() string {
	return fmt.Sprintf("mqtt payload dropped (%s): %v", e.Reason, e.Err)
}

// Unwrap returns the underlying error.
func (e *PayloadError) Unwrap() error { return e.Err }

func drop(r Reason, format string, args ...any) *PayloadError {
	return &PayloadError{Reason: r, Err: fmt.Errorf(format, args...)}
}

// Battery is the battery in a state payload; absent when the robot
// reports none.
type Battery struct {
	Percent  float64 `json:"percent"`
	Voltage  float64 `json:"voltage"`
	Charging bool    `json:"charging"`
}

// State is {prefix}/{id}/state, published retained by the robot at its
// state rate (schema/state.schema.json).
//
// Session identifies one run of the robot's publisher (a boot id): Seq
// counts from 1 within it. A state whose seq is not above the last one of
// its session is out of order; a state of a new session is accepted with
// any seq — a robot that restarted counts from 1 again — unless it is
// stamped before the last accepted state (a late message of an old run).
type State struct {
	V          int               `json:"v"`
	Session    string            `json:"session"`
	Seq        uint64            `json:"seq"`
	Stamp      time.Time         `json:"stamp"`
	Base       robot.Pose2D      `json:"base"`
	Velocity   robot.Twist2D     `json:"velocity"`
	Joints     []robot.Joint     `json:"joints,omitempty"`
	Gripper    *robot.Gripper    `json:"gripper,omitempty"`
	Battery    *Battery          `json:"battery,omitempty"`
	EStop      bool              `json:"estop"`
	Faults     []string          `json:"faults,omitempty"`
	Detections []robot.Detection `json:"detections,omitempty"`
}

// Command is {prefix}/{id}/cmd/{action} (schema/command.schema.json),
// published by the bridge at the configured QoS (1 by default). ID is the
// supervisor's command id: a robot acts on an id once, however often QoS 1
// delivers it. A motion command carries a Deadline; a robot that receives
// it later refuses it (ack failed), so a command held up by a broker or a
// reconnect never starts a motion nobody waits for any more.
//
// In a cluster of bridges every command (motion, stop, refresh) also
// carries the sender's lease Epoch and Bridge id (both omitted otherwise);
// see the package doc, "Fencing", for what a robot does with them.
type Command struct {
	V        int                `json:"v"`
	ID       string             `json:"id"`
	Action   string             `json:"action"`
	Issued   time.Time          `json:"issued"`
	Deadline time.Time          `json:"deadline,omitzero"`
	Base     *robot.BaseGoal    `json:"base,omitempty"`
	Arm      *robot.ArmGoal     `json:"arm,omitempty"`
	Gripper  *robot.GripperGoal `json:"gripper,omitempty"`
	// Epoch is the sender's lease epoch (a cluster of bridges; 0 and
	// omitted otherwise), at most MaxEpoch.
	Epoch uint64 `json:"epoch,omitempty"`
	// Bridge is the sender's bridge id (a cluster of bridges; omitted
	// otherwise): [a-z0-9][a-z0-9._-]{0,31}.
	Bridge string `json:"bridge,omitempty"`
}

// MaxEpoch is the largest epoch a payload may carry, 2^53-1: every JSON
// implementation reads an integer up to it exactly.
const MaxEpoch = 1<<53 - 1

// ValidBridgeID reports whether id is a bridge id: 1 to 32 characters of
// a-z, 0-9, '.', '_' and '-', starting with a letter or digit. It is one
// level of a topic (ClusterBridge) and safe in logs.
func ValidBridgeID(id string) bool {
	if id == "" || len(id) > 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// Ack is {prefix}/{id}/ack (schema/ack.schema.json): the robot's answer to
// a motion command, echoing its id. accepted (the goal runs), then any
// number of progress, then done (the robot's controller judged the goal
// reached) or failed (refused, or given up, with the robot's Reason).
type Ack struct {
	V      int       `json:"v"`
	ID     string    `json:"id"`
	Status string    `json:"status"`
	Reason string    `json:"reason,omitempty"`
	Stamp  time.Time `json:"stamp"`
	// Duplicate is true on the answer to a redelivered command the robot
	// had already acted on.
	Duplicate bool `json:"duplicate,omitempty"`
}

// Event is {prefix}/{id}/events (schema/event.schema.json): something the
// robot did on its own (a watchdog stop, a collision), for logs and
// operators; nothing the bridge acts on.
type Event struct {
	V         int       `json:"v"`
	Kind      string    `json:"kind"`
	Detail    string    `json:"detail,omitempty"`
	CommandID string    `json:"command_id,omitempty"`
	Stamp     time.Time `json:"stamp"`
}

// decodeStrict reads exactly one JSON object into out from raw: at most
// MaxPayload bytes, no unknown fields, nothing after it, and the right
// version.
func decodeStrict(raw []byte, out any, req fields) *PayloadError {
	if len(raw) > MaxPayload {
		return drop(ReasonOversized, "%d bytes, over the %d-byte limit", len(raw), MaxPayload)
	}
	// The version is read first, on its own, so a payload of another
	// version is named as such rather than as unknown fields.
	var probe struct {
		V *int `json:"v"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return drop(ReasonMalformed, "not a JSON object: %v", err)
	}
	if probe.V == nil {
		return drop(ReasonVersion, `no "v" field (this bridge reads version %d)`, Version)
	}
	if *probe.V != Version {
		return drop(ReasonVersion, "version %d (this bridge reads version %d)", *probe.V, Version)
	}
	if err := noNull(raw); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return drop(ReasonMalformed, "%v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return drop(ReasonMalformed, "data after the JSON object")
	}
	return required(raw, req, "")
}

// fields is what a payload must carry: each key names a required field;
// its value lists the required fields inside it (an object, or each
// element of an array of objects), or with n > 0 says it is an array of
// exactly n elements.
type fields map[string]field

type field struct {
	sub fields
	n   int
}

// The required fields of each payload, as in its schema.
var (
	poseFields  = fields{"x": {}, "y": {}, "theta": {}}
	stateFields = fields{
		"v": {}, "session": {}, "seq": {}, "stamp": {}, "base": {sub: poseFields}, "velocity": {sub: fields{"v": {}, "w": {}}},
		"estop": {},
	}
	stateOptional = fields{
		"joints":     {sub: fields{"name": {}, "position": {}, "velocity": {}}},
		"gripper":    {sub: fields{"opening": {}, "closed": {}, "force": {}}},
		"battery":    {sub: fields{"percent": {}, "voltage": {}, "charging": {}}},
		"detections": {sub: fields{"label": {}, "bbox": {n: 4}, "confidence": {}}},
	}
	commandFields   = fields{"v": {}, "id": {}, "action": {}, "issued": {}}
	commandOptional = fields{
		"base":    {sub: fields{"target": {sub: poseFields}, "max_linear": {}, "max_angular": {}}},
		"arm":     {sub: fields{"positions": {}, "velocity_scale": {}}},
		"gripper": {sub: fields{"close": {}}},
	}
	ackFields   = fields{"v": {}, "id": {}, "status": {}, "stamp": {}}
	eventFields = fields{"v": {}, "kind": {}, "stamp": {}}
)

// optional marks the entries of opt as checked only when present.
const optionalMark = -1

func withOptional(req, opt fields) fields {
	out := maps.Clone(req)
	for k, v := range opt {
		v.n = optionalMark
		if v.sub == nil {
			v.sub = fields{}
		}
		out[k] = v
	}
	return out
}

// required checks that raw (an object) has every field req names.
func required(raw []byte, req fields, path string) *PayloadError {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return drop(ReasonMalformed, "%s is not an object", orTop(path))
	}
	for k, f := range req {
		v, ok := obj[k]
		if !ok {
			if f.n == optionalMark {
				continue
			}
			return drop(ReasonInvalid, "%s%s is missing", path, k)
		}
		switch {
		case f.n > 0:
			var arr []json.RawMessage
			if err := json.Unmarshal(v, &arr); err != nil || len(arr) != f.n {
				return drop(ReasonInvalid, "%s%s must be an array of %d numbers", path, k, f.n)
			}
		case len(f.sub) > 0:
			trimmed := bytes.TrimSpace(v)
			if len(trimmed) > 0 && trimmed[0] == '[' {
				var arr []json.RawMessage
				if err := json.Unmarshal(v, &arr); err != nil {
					return drop(ReasonMalformed, "%s%s is not an array", path, k)
				}
				for i, e := range arr {
					if err := required(e, f.sub, fmt.Sprintf("%s%s[%d].", path, k, i)); err != nil {
						return err
					}
				}
				continue
			}
			if err := required(v, f.sub, path+k+"."); err != nil {
				return err
			}
		}
	}
	return nil
}

func orTop(path string) string {
	if path == "" {
		return "the payload"
	}
	return strings.TrimSuffix(path, ".")
}

// noNull refuses a JSON null anywhere: no field of the contract is
// nullable, and Go would read one as a zero value.
func noNull(raw []byte) *PayloadError {
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return drop(ReasonMalformed, "%v", err)
		}
		if tok == nil {
			return drop(ReasonInvalid, "null is not a value of this contract")
		}
	}
}

func finite(vs ...float64) bool {
	for _, v := range vs {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}

func checkID(field, id string) *PayloadError {
	switch {
	case id == "":
		return drop(ReasonInvalid, "%s is empty", field)
	case len(id) > maxIDLen:
		return drop(ReasonInvalid, "%s is %d bytes long (at most %d)", field, len(id), maxIDLen)
	}
	return nil
}

func checkText(field, s string) *PayloadError {
	if len(s) > maxTextLen {
		return drop(ReasonInvalid, "%s is %d bytes long (at most %d)", field, len(s), maxTextLen)
	}
	return nil
}

// DecodeState parses and checks a state payload. It never panics; every
// rejection is a *PayloadError.
func DecodeState(raw []byte) (State, error) {
	var s State
	if err := decodeStrict(raw, &s, withOptional(stateFields, stateOptional)); err != nil {
		return State{}, err
	}
	if err := s.check(); err != nil {
		return State{}, err
	}
	return s, nil
}

func (s *State) check() *PayloadError {
	if err := checkID("session", s.Session); err != nil {
		return err
	}
	switch {
	case s.Seq == 0:
		return drop(ReasonInvalid, "seq is missing or 0 (it counts from 1)")
	case s.Stamp.IsZero():
		return drop(ReasonInvalid, "stamp is missing")
	case !finite(s.Base.X, s.Base.Y, s.Base.Theta, s.Velocity.V, s.Velocity.W):
		return drop(ReasonInvalid, "base or velocity is not finite")
	case len(s.Joints) > maxJoints:
		return drop(ReasonInvalid, "%d joints (at most %d)", len(s.Joints), maxJoints)
	case len(s.Faults) > maxFaults:
		return drop(ReasonInvalid, "%d faults (at most %d)", len(s.Faults), maxFaults)
	case len(s.Detections) > maxDetections:
		return drop(ReasonInvalid, "%d detections (at most %d)", len(s.Detections), maxDetections)
	}
	for i, j := range s.Joints {
		if err := checkID(fmt.Sprintf("joints[%d].name", i), j.Name); err != nil {
			return err
		}
		if !finite(j.Position, j.Velocity) {
			return drop(ReasonInvalid, "joints[%d] is not finite", i)
		}
	}
	if g := s.Gripper; g != nil {
		if !finite(g.Opening, g.Force) || g.Opening < 0 {
			return drop(ReasonInvalid, "gripper opening or force is not a finite, non-negative number")
		}
		if err := checkText("gripper.holding", g.Holding); err != nil {
			return err
		}
	}
	if b := s.Battery; b != nil && (!finite(b.Percent, b.Voltage) || b.Percent < 0 || b.Percent > 100) {
		return drop(ReasonInvalid, "battery percent %v is not in [0, 100]", b.Percent)
	}
	for i, f := range s.Faults {
		if err := checkID(fmt.Sprintf("faults[%d]", i), f); err != nil {
			return err
		}
	}
	for i, d := range s.Detections {
		if err := checkText(fmt.Sprintf("detections[%d].label", i), d.Label); err != nil {
			return err
		}
		if !finite(d.BBox[0], d.BBox[1], d.BBox[2], d.BBox[3], d.Confidence, d.Depth) {
			return drop(ReasonInvalid, "detections[%d] is not finite", i)
		}
	}
	return nil
}

// RobotState is the state as the supervisor sees it.
func (s State) RobotState() robot.State {
	st := robot.State{
		Stamp: s.Stamp, Base: s.Base, Velocity: s.Velocity, Joints: s.Joints, Gripper: s.Gripper,
		EStop: s.EStop, Faults: s.Faults, Detections: s.Detections,
	}
	if b := s.Battery; b != nil {
		st.Battery = robot.Battery{Percent: b.Percent, Voltage: b.Voltage, Charging: b.Charging, Known: true}
	}
	return st
}

// StateFrom is the payload of st, as the simulator node publishes it.
func StateFrom(st robot.State, session string, seq uint64, stamp time.Time) State {
	s := State{
		V: Version, Session: session, Seq: seq, Stamp: stamp, Base: st.Base, Velocity: st.Velocity,
		Joints: st.Joints, Gripper: st.Gripper, EStop: st.EStop, Faults: st.Faults, Detections: st.Detections,
	}
	if st.Battery.Known {
		s.Battery = &Battery{Percent: st.Battery.Percent, Voltage: st.Battery.Voltage, Charging: st.Battery.Charging}
	}
	return s
}

// DecodeCommand parses and checks a command payload, as a robot does.
func DecodeCommand(raw []byte) (Command, error) {
	var c Command
	if err := decodeStrict(raw, &c, withOptional(commandFields, commandOptional)); err != nil {
		return Command{}, err
	}
	// A "bridge" that is present must be a bridge id, also when empty
	// (which the struct cannot tell from absent).
	var probe struct {
		Bridge *string `json:"bridge"`
	}
	if json.Unmarshal(raw, &probe) == nil && probe.Bridge != nil && !ValidBridgeID(*probe.Bridge) {
		return Command{}, drop(ReasonInvalid, "bridge %q is not a bridge id ([a-z0-9][a-z0-9._-]{0,31})", truncate(*probe.Bridge, 40))
	}
	if c.Epoch > MaxEpoch {
		return Command{}, drop(ReasonInvalid, "epoch %d is over %d (2^53-1)", c.Epoch, uint64(MaxEpoch))
	}
	if err := c.check(); err != nil {
		return Command{}, err
	}
	return c, nil
}

func (c *Command) check() *PayloadError {
	if err := checkID("id", c.ID); err != nil {
		return err
	}
	if c.Issued.IsZero() {
		return drop(ReasonInvalid, "issued is missing")
	}
	goals := 0
	for _, set := range []bool{c.Base != nil, c.Arm != nil, c.Gripper != nil} {
		if set {
			goals++
		}
	}
	switch c.Action {
	case ActionStop, ActionRefresh:
		if goals != 0 {
			return drop(ReasonInvalid, "a %s command carries a goal", c.Action)
		}
		return nil
	case ActionMoveBase, ActionMoveArm, ActionGripper:
	default:
		return drop(ReasonInvalid, "unknown action %q (allowed: move_base, move_arm, gripper, stop, refresh)", c.Action)
	}
	if c.Deadline.IsZero() {
		return drop(ReasonInvalid, "a %s command has no deadline", c.Action)
	}
	cmd, err := c.RobotCommand()
	if err != nil {
		return drop(ReasonInvalid, "%v", err)
	}
	switch {
	case cmd.Base != nil && !finite(cmd.Base.Target.X, cmd.Base.Target.Y, cmd.Base.Target.Theta, cmd.Base.MaxLinear, cmd.Base.MaxAngular):
		return drop(ReasonInvalid, "base goal is not finite")
	case cmd.Arm != nil && (len(cmd.Arm.Positions) > maxJoints || !finite(append([]float64{cmd.Arm.VelocityScale}, cmd.Arm.Positions...)...)):
		return drop(ReasonInvalid, "arm goal is not finite or has more than %d positions", maxJoints)
	case cmd.Gripper != nil && !finite(cmd.Gripper.Force):
		return drop(ReasonInvalid, "gripper force is not finite")
	}
	if cmd.Gripper != nil {
		if err := checkText("gripper.object_id", cmd.Gripper.ObjectID); err != nil {
			return err
		}
	}
	return nil
}

// actionOf is the topic action of a motion command kind.
func actionOf(k robot.CommandKind) (string, bool) {
	switch k {
	case robot.CmdMoveBase:
		return ActionMoveBase, true
	case robot.CmdMoveArm:
		return ActionMoveArm, true
	case robot.CmdGripper:
		return ActionGripper, true
	}
	return "", false
}

// CommandFrom is the payload of a motion command issued at issued, due to
// be accepted by deadline.
func CommandFrom(cmd robot.Command, issued, deadline time.Time) (Command, error) {
	if err := cmd.Validate(); err != nil {
		return Command{}, err
	}
	action, _ := actionOf(cmd.Kind)
	return Command{
		V: Version, ID: cmd.ID, Action: action, Issued: issued, Deadline: deadline,
		Base: cmd.Base, Arm: cmd.Arm, Gripper: cmd.Gripper, Epoch: cmd.Epoch, Bridge: cmd.Bridge,
	}, nil
}

// RobotCommand is the motion command a payload carries; an error for a
// stop or refresh, or a goal that does not match the action.
func (c Command) RobotCommand() (robot.Command, error) {
	cmd := robot.Command{ID: c.ID, Base: c.Base, Arm: c.Arm, Gripper: c.Gripper, Epoch: c.Epoch, Bridge: c.Bridge}
	switch c.Action {
	case ActionMoveBase:
		cmd.Kind = robot.CmdMoveBase
	case ActionMoveArm:
		cmd.Kind = robot.CmdMoveArm
	case ActionGripper:
		cmd.Kind = robot.CmdGripper
	default:
		return robot.Command{}, fmt.Errorf("action %q is not a motion", c.Action)
	}
	if err := cmd.Validate(); err != nil {
		return robot.Command{}, err
	}
	return cmd, nil
}

// DecodeAck parses and checks an ack payload, as the bridge does.
func DecodeAck(raw []byte) (Ack, error) {
	var a Ack
	if err := decodeStrict(raw, &a, ackFields); err != nil {
		return Ack{}, err
	}
	if err := checkID("id", a.ID); err != nil {
		return Ack{}, err
	}
	switch a.Status {
	case AckAccepted, AckProgress, AckDone, AckFailed:
	default:
		return Ack{}, drop(ReasonInvalid, "unknown status %q (allowed: accepted, progress, done, failed)", a.Status)
	}
	if a.Status == AckFailed && a.Reason == "" {
		return Ack{}, drop(ReasonInvalid, "a failed ack without a reason")
	}
	if err := checkText("reason", a.Reason); err != nil {
		return Ack{}, err
	}
	return a, nil
}

// DecodeEvent parses and checks an event payload.
func DecodeEvent(raw []byte) (Event, error) {
	var e Event
	if err := decodeStrict(raw, &e, eventFields); err != nil {
		return Event{}, err
	}
	if err := checkID("kind", e.Kind); err != nil {
		return Event{}, err
	}
	if err := checkText("detail", e.Detail); err != nil {
		return Event{}, err
	}
	if len(e.CommandID) > maxIDLen {
		return Event{}, drop(ReasonInvalid, "command_id is %d bytes long (at most %d)", len(e.CommandID), maxIDLen)
	}
	return e, nil
}

// Marshal encodes a payload; it fails only for values no decoder would
// accept (a non-finite number).
func Marshal(v any) ([]byte, error) { return json.Marshal(v) }
