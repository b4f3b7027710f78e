package toolapi

import (
	"encoding/json"
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
