package grpcapi

import (
	"fmt"
	"slices"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/fsm"
	robotbridgev1 "github.com/robot-bridge/robot-bridge/gen/robotbridge/v1"
	"github.com/robot-bridge/robot-bridge/toolapi"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// ErrorTypeToProto returns the protobuf value of t. The enum's value
// names are toolerr's own strings ("APPROVAL_DENIED"), so the JSON
// encoding of an error says what the HTTP API says; deriving one from the
// other by name keeps the two closed sets from drifting silently, and a
// test checks that every toolerr type has its value. A type outside the
// closed set (which toolapi never produces) is INTERNAL, as
// toolapi.ErrorBodyOf treats it.
func ErrorTypeToProto(t toolerr.Type) robotbridgev1.ErrorType {
	if v, ok := robotbridgev1.ErrorType_value[string(t)]; ok && v != 0 {
		return robotbridgev1.ErrorType(v)
	}
	return robotbridgev1.ErrorType_INTERNAL
}

// ErrorTypeFromProto returns the toolerr type of e; an unspecified or
// unknown value (from a newer peer) is toolerr.Internal.
func ErrorTypeFromProto(e robotbridgev1.ErrorType) toolerr.Type {
	name, ok := robotbridgev1.ErrorType_name[int32(e)]
	if !ok || e == robotbridgev1.ErrorType_ERROR_TYPE_UNSPECIFIED {
		return toolerr.Internal
	}
	return toolerr.Type(name)
}

// EnvelopeToProto converts a result envelope to its protobuf form. It
// fails only when Data or an error's Details hold something no JSON
// encoder could write (a channel, a cycle); non-finite numbers are
// spelled out as strings rather than failing (see the package comment).
func EnvelopeToProto(env toolapi.Envelope) (*robotbridgev1.Envelope, error) {
	out := &robotbridgev1.Envelope{Ok: new(env.OK), Tool: env.Tool, Text: env.Text, Robot: env.Robot, Task: taskRefToProto(env.Task)}
	if env.Data != nil {
		v, err := valueOf(env.Data)
		if err != nil {
			return nil, fmt.Errorf("data: %w", err)
		}
		out.Data = v
	}
	if e := env.Error; e != nil {
		details, err := structOf(e.Details)
		if err != nil {
			return nil, fmt.Errorf("error details: %w", err)
		}
		out.Error = errorToProto(e)
		out.Error.Details = details
	}
	if m := env.OperatorMessage; m != nil {
		out.OperatorMessage = &robotbridgev1.OperatorMessage{EscalationId: m.EscalationID, Text: m.Text, By: m.By}
	}
	for _, u := range env.Untrusted {
		out.Untrusted = append(out.Untrusted, &robotbridgev1.Untrusted{Source: u.Source, Fields: slices.Clone(u.Fields)})
	}
	return out, nil
}

// errorToProto converts an error body without its details (which can
// fail; see structOf).
func errorToProto(e *toolapi.ErrorBody) *robotbridgev1.Error {
	return &robotbridgev1.Error{
		Type: ErrorTypeToProto(e.Type), Message: e.Message, Retryable: new(e.Retryable),
		RetryAfterMs: new(e.RetryAfterMS), Suggestion: e.Suggestion,
	}
}

// EnvelopeFromProto converts a protobuf envelope back, for Go clients that
// want the same type as the HTTP API's. Data and details come back as
// JSON-decoded values (map[string]any, []any, float64, ...), exactly as
// decoding the HTTP API's JSON into an Envelope gives them.
func EnvelopeFromProto(pe *robotbridgev1.Envelope) toolapi.Envelope {
	if pe == nil {
		return toolapi.Envelope{}
	}
	env := toolapi.Envelope{OK: pe.GetOk(), Tool: pe.GetTool(), Text: pe.GetText(), Robot: pe.GetRobot()}
	if pe.Data != nil {
		env.Data = pe.Data.AsInterface()
	}
	if t := pe.GetTask(); t != nil {
		env.Task = &toolapi.TaskRef{ID: t.GetId(), Status: fsm.State(t.GetStatus()), Text: t.GetText()}
		if p := t.GetProgress(); p != nil {
			env.Task.Progress = &actions.Progress{Fraction: p.GetFraction(), Text: p.GetText()}
		}
	}
	if e := pe.GetError(); e != nil {
		env.Error = &toolapi.ErrorBody{
			Type: ErrorTypeFromProto(e.GetType()), Message: e.GetMessage(), Retryable: e.GetRetryable(),
			RetryAfterMS: e.GetRetryAfterMs(), Suggestion: e.GetSuggestion(),
		}
		if e.Details != nil {
			env.Error.Details = e.Details.AsMap()
		}
	}
	if m := pe.GetOperatorMessage(); m != nil {
		env.OperatorMessage = &toolapi.OperatorMessage{EscalationID: m.GetEscalationId(), Text: m.GetText(), By: m.GetBy()}
	}
	for _, u := range pe.GetUntrusted() {
		env.Untrusted = append(env.Untrusted, toolapi.Untrusted{Source: u.GetSource(), Fields: slices.Clone(u.GetFields())})
	}
	return env
}

func taskRefToProto(t *toolapi.TaskRef) *robotbridgev1.TaskRef {
	if t == nil {
		return nil
	}
	out := &robotbridgev1.TaskRef{Id: t.ID, Status: string(t.Status), Text: t.Text}
	if t.Progress != nil {
		out.Progress = &robotbridgev1.Progress{Fraction: t.Progress.Fraction, Text: t.Progress.Text}
	}
	return out
}

// ToolToProto converts a tool as GET /v1/tools lists it.
func ToolToProto(info toolapi.ToolInfo) (*robotbridgev1.Tool, error) {
	schema, err := structOf(info.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("tool %s: input schema: %w", info.Name, err)
	}
	kind := robotbridgev1.ToolKind_TOOL_KIND_UNSPECIFIED
	switch info.Kind {
	case toolapi.KindState:
		kind = robotbridgev1.ToolKind_TOOL_KIND_STATE
	case toolapi.KindAction:
		kind = robotbridgev1.ToolKind_TOOL_KIND_ACTION
	}
	return &robotbridgev1.Tool{
		Name: info.Name, Kind: kind, Description: info.Description, InputSchema: schema,
		RequiresApproval: info.RequiresApproval, Idempotent: info.Idempotent, TimeoutMs: info.TimeoutMS,
	}, nil
}
