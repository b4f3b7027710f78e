package toolapi

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/robot-bridge/robot-bridge/toolerr"
)

// FuzzExtractArguments feeds the tool_calls argument extractor and
// repairer whatever a model might emit. It must never panic; it either
// returns an object that re-encodes as JSON or an INVALID_PARAMS error
// naming the arguments field.
func FuzzExtractArguments(f *testing.F) {
	for _, s := range []string{
		`{"x": 1, "y": 2}`, "```json\n{\"x\": 1,}\n```", `{'a': 'b', c: True}`, `"{\"x\":1}"`,
		`text {"location": "table"} text`, `{"x": [1, {"y": '}'}]}`, `{`, `'`, `{"a":"\`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, _, err := ExtractArguments(s)
		if err != nil {
			te := toolerr.As(err)
			if te.Type != toolerr.InvalidParams || te.Details["field"] != "arguments" || te.SuggestionText() == "" {
				t.Fatalf("bad error for %q: %+v", s, te)
			}
			return
		}
		if m == nil {
			t.Fatalf("nil object without an error for %q", s)
		}
		if _, err := json.Marshal(m); err != nil {
			t.Fatalf("result does not re-encode: %v", err)
		}
	})
}

// FuzzDecodeCallBody feeds the POST /v1/tools/{name}/call body decoder
// arbitrary bytes. It must never panic, and every rejection must be an
// INVALID_PARAMS error an agent can act on.
func FuzzDecodeCallBody(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `{"arguments": {"x": 1}, "session_id": "s", "idempotency_key": "k", "wait_ms": 10}`,
		`{"arguments": "{'x': 1,}"}`, `{"arguments": [1]}`, `{"wait_ms": -1}`, `{"nope": 1}`, `{} x`, `{"arguments":`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, argErr, bodyErr := decodeCallBody(data)
		for _, te := range []*toolerr.Error{argErr, bodyErr} {
			if te != nil && (te.Type != toolerr.InvalidParams || te.SuggestionText() == "" || te.Message == "") {
				t.Fatalf("bad error for %q: %+v", data, te)
			}
		}
		if argErr == nil && bodyErr == nil && req.Arguments == nil {
			t.Fatalf("accepted %q without arguments", data)
		}
		if req.Wait < 0 {
			t.Fatalf("negative wait accepted for %q", data)
		}
	})
}

// FuzzDecodeToolCalls feeds the POST /v1/tool_calls decoder and planner
// arbitrary bytes. It must never panic; every rejection is an
// INVALID_PARAMS an agent can act on; and of an accepted message, no two
// calls that may run share an idempotency key (docs/DESIGN.md §4, invariant
// 7), a call with an id that may run has a key, and a call without one
// has none.
func FuzzDecodeToolCalls(f *testing.F) {
	for _, s := range []string{
		`{"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "move_base_to", "arguments": "{\"location\": \"table\"}"}}]}`,
		`{"session_id": "conv-1", "tool_calls": [{"id": "call_1", "function": {"name": "move_base_to", "arguments": "{}"}}, {"id": "call_1", "function": {"name": "move_arm_to", "arguments": "{}"}}]}`,
		`{"idempotency_key_prefix": "conv42:", "tool_calls": [{"id": "call_9", "function": {"name": "release"}}, {"function": {"name": "release"}}]}`,
		`{"session_id": "a b", "tool_calls": [{"id": "c", "function": {"name": "stop"}}, {"id": "c", "function": {"name": "stop"}}]}`,
		`{"tool_calls": []}`, `{"role": "user", "tool_calls": [{}]}`, `{"wait_ms": -1, "tool_calls": [{}]}`, `{"tool_calls": [`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		msg, te := decodeToolCalls(data)
		if te != nil {
			if te.Type != toolerr.InvalidParams || te.SuggestionText() == "" || te.Message == "" {
				t.Fatalf("bad error for %q: %+v", data, te)
			}
			return
		}
		plan := planToolCalls(msg)
		if len(plan) != len(msg.ToolCalls) || len(plan) == 0 {
			t.Fatalf("%d calls planned for %d", len(plan), len(msg.ToolCalls))
		}
		keys := map[string]int{}
		for i, pc := range plan {
			id := msg.ToolCalls[i].ID
			if pc.answerID == "" || (id != "" && pc.answerID != id) {
				t.Fatalf("call %d answers as %q for id %q", i, pc.answerID, id)
			}
			if pc.refused != nil {
				if pc.refused.Type != toolerr.InvalidParams || pc.refused.SuggestionText() == "" {
					t.Fatalf("call %d refused with %+v", i, pc.refused)
				}
				continue
			}
			if id == "" {
				if pc.req.IdempotencyKey != "" {
					t.Fatalf("call %d without an id has the key %q", i, pc.req.IdempotencyKey)
				}
				continue
			}
			if neverRefused(pc.req.Tool) {
				continue
			}
			if pc.req.IdempotencyKey == "" {
				t.Fatalf("call %d with id %q has no key", i, id)
			}
			if j, dup := keys[pc.req.IdempotencyKey]; dup {
				t.Fatalf("calls %d and %d may both run under the key %q", j, i, pc.req.IdempotencyKey)
			}
			keys[pc.req.IdempotencyKey] = i
		}
	})
}

// FuzzValidateArguments feeds every tool's null dropping and validation
// arbitrary JSON arguments (a strict-mode model's nulls among them). It
// must never panic or change the caller's arguments; dropping is
// idempotent; and arguments that pass validation hold no null anywhere,
// since a null is absent only where the argument is optional and wrong
// where it is required.
func FuzzValidateArguments(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"x": 1, "y": 2, "theta_deg": null, "location": null}`, `{"location": "home", "x": null}`,
		`{"pose": null, "joints": {"elbow": -1, "wrist": null}}`, `{"joints": {"elbow": null}}`, `{"task_id": null}`,
		`{"x": null, "y": null}`, `{"joints": null, "pose": "ready"}`, `{"reason": null}`, `{"nope": null}`,
	} {
		f.Add(s)
	}
	reg, err := NewRegistry(loadSimConfig(f))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, tool := range reg.Tools() {
			var args, before map[string]any
			if json.Unmarshal([]byte(s), &args) != nil || json.Unmarshal([]byte(s), &before) != nil {
				return
			}
			out := tool.WithoutOptionalNulls(args)
			if !reflect.DeepEqual(args, before) {
				t.Fatalf("%s: dropping nulls changed the caller's arguments %s", tool.Name, s)
			}
			if again := tool.WithoutOptionalNulls(out); !reflect.DeepEqual(again, out) {
				t.Fatalf("%s: dropping nulls twice differs for %s", tool.Name, s)
			}
			te := tool.Validate(out)
			if te != nil {
				if te.Type != toolerr.InvalidParams || te.Details["field"] == nil || te.Message == "" {
					t.Fatalf("%s: bad error for %s: %+v", tool.Name, s, te)
				}
				continue
			}
			if hasNull(out) {
				t.Fatalf("%s: accepted a null in %s", tool.Name, s)
			}
		}
	})
}

func hasNull(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		for _, e := range x {
			if hasNull(e) {
				return true
			}
		}
	case []any:
		if slices.ContainsFunc(x, hasNull) {
			return true
		}
	}
	return false
}
