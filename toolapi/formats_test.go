package toolapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
)

// providerCheck runs one provider's checker on one tool given as JSON.
type providerCheck func(tool map[string]any) error

var (
	anthropicCheck providerCheck = func(t map[string]any) error { return checkAnthropicTool(0, t) }
	openAICheck    providerCheck = func(t map[string]any) error { return checkOpenAITool(0, t) }
	geminiCheck    providerCheck = func(t map[string]any) error { return checkGeminiDeclaration(0, 0, t) }
)

func decodeObject(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(s), &m), s)
	return m
}

// TestProviderCheckers_EachRuleRejectsItsViolation shows that every
// documented restriction the checkers implement accepts a conforming tool
// and refuses one that breaks only that rule, with the provider's words.
func TestProviderCheckers_EachRuleRejectsItsViolation(t *testing.T) {
	const (
		anthropicGood = `{"name": "get_weather", "description": "d", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}`
		openAIGood    = `{"type": "function", "function": {"name": "get_weather", "description": "d", "parameters": {"type": "object", "properties": {"city": {"type": "string", "minLength": 1}}, "required": ["city"]}}}`
		strictGood    = `{"type": "function", "function": {"name": "get_weather", "description": "d", "strict": true, "parameters": {"type": "object", "additionalProperties": false, "required": ["city", "unit"], "properties": {"city": {"type": "string", "pattern": "^[A-Z]"}, "unit": {"type": ["string", "null"], "enum": ["C", "F", null]}}}}}`
		geminiGood    = `{"name": "get_weather", "description": "d", "parameters": {"type": "OBJECT", "properties": {"city": {"type": "STRING", "minLength": 1}, "unit": {"type": "STRING", "format": "enum", "enum": ["C", "F"]}}, "required": ["city"]}}`
	)
	cases := []struct {
		name  string
		check providerCheck
		tool  string
		want  string // "" accepts; else a fragment of the provider's 400
	}{
		{"anthropic: a conforming tool", anthropicCheck, anthropicGood, ""},
		{"anthropic: an extra field on the tool", anthropicCheck, `{"name": "a", "input_schema": {"type": "object"}, "strict_mode": 1}`, "Extra inputs are not permitted"},
		{"anthropic: a name with a space", anthropicCheck, `{"name": "get weather", "input_schema": {"type": "object"}}`, "String should match pattern"},
		{"anthropic: no input_schema", anthropicCheck, `{"name": "a"}`, "input_schema: Field required"},
		{"anthropic: input_schema not an object type", anthropicCheck, `{"name": "a", "input_schema": {"type": "string"}}`, "Input should be 'object'"},
		{"anthropic: oneOf at the top", anthropicCheck, `{"name": "a", "input_schema": {"type": "object", "oneOf": [{"required": ["x"]}, {"required": ["y"]}]}}`, "does not support oneOf, allOf, or anyOf at the top level"},
		{"anthropic: anyOf at the top", anthropicCheck, `{"name": "a", "input_schema": {"type": "object", "anyOf": [{"required": ["x"]}]}}`, "does not support oneOf, allOf, or anyOf at the top level"},
		{"anthropic: required not a list of strings", anthropicCheck, `{"name": "a", "input_schema": {"type": "object", "required": "x"}}`, "required: Input should be a valid list of strings"},
		{"anthropic: not a valid JSON Schema", anthropicCheck, `{"name": "a", "input_schema": {"type": "object", "properties": {"x": {"type": "strng"}}}}`, "JSON schema is invalid"},

		{"openai: a conforming tool", openAICheck, openAIGood, ""},
		{"openai: not a function tool", openAICheck, `{"type": "fn", "function": {"name": "a"}}`, "expected 'function'"},
		{"openai: an extra field on the function", openAICheck, `{"type": "function", "function": {"name": "a", "input_schema": {}}}`, "Unrecognized request argument"},
		{"openai: a name longer than 64", openAICheck, `{"type": "function", "function": {"name": "` + strings.Repeat("a", 65) + `"}}`, "does not match pattern"},
		{"openai: parameters not an object type", openAICheck, `{"type": "function", "function": {"name": "a", "parameters": {"type": "array", "items": {}}}}`, `must be a JSON Schema of 'type: "object"'`},
		{"openai: oneOf at the top", openAICheck, `{"type": "function", "function": {"name": "a", "parameters": {"type": "object", "oneOf": [{"required": ["x"]}]}}}`, "not have 'oneOf'/'anyOf'/'allOf'/'enum'/'const'/'not' at the top level"},
		{"openai: not at the top", openAICheck, `{"type": "function", "function": {"name": "a", "parameters": {"type": "object", "not": {"required": ["x"]}}}}`, "at the top level"},
		{"openai: an array without items", openAICheck, `{"type": "function", "function": {"name": "a", "parameters": {"type": "object", "properties": {"xs": {"type": "array"}}}}}`, "In context=('properties', 'xs'), array schema missing items"},

		{"openai strict: a conforming tool", openAICheck, strictGood, ""},
		{"openai strict: additionalProperties missing", openAICheck, `{"type": "function", "function": {"name": "a", "strict": true, "parameters": {"type": "object", "required": ["x"], "properties": {"x": {"type": "number"}}}}}`, "'additionalProperties' is required to be supplied and to be false"},
		{"openai strict: a nested object allowing extra keys", openAICheck, `{"type": "function", "function": {"name": "a", "strict": true, "parameters": {"type": "object", "additionalProperties": false, "required": ["j"], "properties": {"j": {"type": "object", "required": [], "properties": {}}}}}}`, "In context=('properties', 'j'), 'additionalProperties' is required"},
		{"openai strict: an optional property", openAICheck, `{"type": "function", "function": {"name": "a", "strict": true, "parameters": {"type": "object", "additionalProperties": false, "required": ["x"], "properties": {"x": {"type": "number"}, "y": {"type": "number"}}}}}`, "Missing 'y'"},
		{"openai strict: minLength is not supported", openAICheck, `{"type": "function", "function": {"name": "a", "strict": true, "parameters": {"type": "object", "additionalProperties": false, "required": ["x"], "properties": {"x": {"type": "string", "minLength": 1}}}}}`, "'minLength' is not permitted"},
		{"openai strict: minProperties is not supported", openAICheck, `{"type": "function", "function": {"name": "a", "strict": true, "parameters": {"type": "object", "additionalProperties": false, "required": ["j"], "properties": {"j": {"type": "object", "minProperties": 1, "additionalProperties": false, "required": [], "properties": {}}}}}}`, "'minProperties' is not permitted"},
		{"openai strict: allOf is not supported", openAICheck, `{"type": "function", "function": {"name": "a", "strict": true, "parameters": {"type": "object", "additionalProperties": false, "required": ["x"], "properties": {"x": {"allOf": [{"type": "number"}]}}}}}`, "'allOf' is not permitted"},
		{"openai strict: an unknown annotation", openAICheck, `{"type": "function", "function": {"name": "a", "strict": true, "parameters": {"type": "object", "additionalProperties": false, "required": ["x"], "properties": {"x": {"type": "string", "x-sensitive": true}}}}}`, "'x-sensitive' is not permitted"},
		{"openai strict: an unsupported format", openAICheck, `{"type": "function", "function": {"name": "a", "strict": true, "parameters": {"type": "object", "additionalProperties": false, "required": ["x"], "properties": {"x": {"type": "string", "format": "uri"}}}}}`, `'format' "uri" is not supported`},
		{"openai strict: an enum value outside its type", openAICheck, `{"type": "function", "function": {"name": "a", "strict": true, "parameters": {"type": "object", "additionalProperties": false, "required": ["x"], "properties": {"x": {"type": "string", "enum": ["C", null]}}}}}`, "enum value <nil> does not validate"},
		{"openai strict: nested deeper than 5 levels", openAICheck, deepStrict(6), "deeper than 5 levels"},
		{"openai strict: 5 levels are fine", openAICheck, deepStrict(5), ""},

		{"gemini: a conforming declaration", geminiCheck, geminiGood, ""},
		{"gemini: no parameters for a function without any", geminiCheck, `{"name": "get_time", "description": "d"}`, ""},
		{"gemini: a name starting with a digit", geminiCheck, `{"name": "1st", "description": "d"}`, "Invalid function name"},
		{"gemini: an unknown declaration field", geminiCheck, `{"name": "a", "strict": true}`, `Unknown name "strict"`},
		{"gemini: $schema in parameters", geminiCheck, `{"name": "a", "parameters": {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "OBJECT", "properties": {"x": {"type": "NUMBER"}}}}`, `Unknown name "$schema"`},
		{"gemini: additionalProperties", geminiCheck, `{"name": "a", "parameters": {"type": "OBJECT", "additionalProperties": false, "properties": {"x": {"type": "NUMBER"}}}}`, `Unknown name "additionalProperties"`},
		{"gemini: oneOf", geminiCheck, `{"name": "a", "parameters": {"type": "OBJECT", "properties": {"x": {"type": "NUMBER"}}, "oneOf": [{"required": ["x"]}]}}`, `Unknown name "oneOf"`},
		{"gemini: a type list", geminiCheck, `{"name": "a", "parameters": {"type": "OBJECT", "properties": {"x": {"type": ["NUMBER", "NULL"]}}}}`, "generativelanguage.v1beta.Type"},
		{"gemini: an unknown type", geminiCheck, `{"name": "a", "parameters": {"type": "OBJECT", "properties": {"x": {"type": "FLOAT"}}}}`, "generativelanguage.v1beta.Type"},
		{"gemini: an object without properties", geminiCheck, `{"name": "a", "parameters": {"type": "OBJECT", "properties": {}}}`, "should be non-empty for OBJECT type"},
		{"gemini: enum on a number", geminiCheck, `{"name": "a", "parameters": {"type": "OBJECT", "properties": {"x": {"type": "NUMBER", "enum": ["1"]}}}}`, "only allowed for STRING type"},
		{"gemini: a required name that is not a property", geminiCheck, `{"name": "a", "parameters": {"type": "OBJECT", "properties": {"x": {"type": "NUMBER"}}, "required": ["y"]}}`, "property is not defined"},
		{"gemini: an array without items", geminiCheck, `{"name": "a", "parameters": {"type": "OBJECT", "properties": {"x": {"type": "ARRAY"}}}}`, "items: missing field"},
		{"gemini: a parameter name with a dash", geminiCheck, `{"name": "a", "parameters": {"type": "OBJECT", "properties": {"theta-deg": {"type": "NUMBER"}}}}`, "parameter names must start with a letter"},
		{"gemini: a fractional length", geminiCheck, `{"name": "a", "parameters": {"type": "OBJECT", "properties": {"x": {"type": "STRING", "maxLength": 1.5}}}}`, "TYPE_INT64"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.check(decodeObject(t, tc.tool))
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

// deepStrict is a strict OpenAI tool whose parameters nest objects n
// levels deep.
func deepStrict(n int) string {
	inner := `{"type": "string"}`
	for range n {
		inner = `{"type": "object", "additionalProperties": false, "required": ["p"], "properties": {"p": ` + inner + `}}`
	}
	return `{"type": "function", "function": {"name": "a", "strict": true, "parameters": ` + inner + `}}`
}

// fetchJSON gets path from h with the agent token and decodes it.
func fetchJSON(t testing.TB, h *harness, path string, v any) []byte {
	t.Helper()
	status, out := h.do("GET", path, testTokens.Agent, nil)
	require.Equal(t, http.StatusOK, status, string(out))
	require.NoError(t, json.Unmarshal(out, v), string(out))
	return out
}

// TestPublishedSchemas_PassEveryProviderForEveryHWConfig runs every tool
// of every bundled hw-config, in the format the bridge publishes for each
// model API, through that API's documented restrictions.
func TestPublishedSchemas_PassEveryProviderForEveryHWConfig(t *testing.T) {
	configs, err := filepath.Glob("../hw-configs/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, configs)
	for _, path := range configs {
		t.Run(filepath.Base(path), func(t *testing.T) {
			cfg, err := hwconfig.Load(path)
			require.NoError(t, err)
			h := newHarness(t, func(c *Conf) { c.HWConfig = cfg })
			want := names(h.srv.Registry())

			var openai, strict, anthropic []map[string]any
			fetchJSON(t, h, "/v1/tools?format=openai", &openai)
			fetchJSON(t, h, "/v1/tools?format=openai&strict=true", &strict)
			fetchJSON(t, h, "/v1/tools?format=anthropic", &anthropic)
			var gemini []map[string]any
			fetchJSON(t, h, "/v1/tools?format=gemini", &gemini)

			for name, tools := range map[string][]map[string]any{"openai": openai, "openai strict": strict, "anthropic": anthropic} {
				require.Len(t, tools, len(want), name)
			}
			var got []string
			for i := range openai {
				require.NoError(t, checkOpenAITool(i, openai[i]), "openai")
				fn := strict[i]["function"].(map[string]any)
				require.Equal(t, true, fn["strict"], "strict=true marks every function strict")
				require.NoError(t, checkOpenAITool(i, strict[i]), "openai strict")
				require.NoError(t, checkAnthropicTool(i, anthropic[i]), "anthropic")
				got = append(got, anthropic[i]["name"].(string))
			}
			require.Equal(t, want, got)
			require.NoError(t, uniqueNames(got))
			require.NoError(t, checkGeminiTools(gemini))
			require.Len(t, gemini, 1)
			require.Len(t, gemini[0]["functionDeclarations"], len(want))
		})
	}
}

// oldMoveBaseTo is move_base_to's input schema as published before the
// schemas were flattened: a top-level oneOf with not.
const oldMoveBaseTo = `{"type": "object", "additionalProperties": false,
 "properties": {"x": {"type": "number"}, "y": {"type": "number"}, "theta_deg": {"type": "number"}, "location": {"type": "string", "enum": ["dock", "home"]}},
 "oneOf": [{"required": ["x", "y"], "not": {"required": ["location"]}},
           {"required": ["location"], "not": {"anyOf": [{"required": ["x"]}, {"required": ["y"]}, {"required": ["theta_deg"]}]}}]}`

// TestOldOneOfSchema_EveryProviderRefusesIt is the regression this
// work fixes: the schema the bridge used to publish fails every checker.
func TestOldOneOfSchema_EveryProviderRefusesIt(t *testing.T) {
	params := decodeObject(t, oldMoveBaseTo)
	require.ErrorContains(t, checkAnthropicTool(0, map[string]any{"name": "move_base_to", "input_schema": params}),
		"does not support oneOf, allOf, or anyOf at the top level")
	require.ErrorContains(t, checkOpenAITool(0, map[string]any{"type": "function", "function": map[string]any{"name": "move_base_to", "parameters": params}}),
		"at the top level")
	require.ErrorContains(t, checkOpenAITool(0, map[string]any{"type": "function", "function": map[string]any{"name": "move_base_to", "parameters": params, "strict": true}}),
		"at the top level")
	// (what a user pasting the old OpenAI parameters into Gemini sent)
	require.ErrorContains(t, checkGeminiDeclaration(0, 0, map[string]any{"name": "move_base_to", "parameters": params}),
		`Unknown name "additionalProperties"`)
}

// scriptedProviders is a stand-in for the three model APIs' request
// validation: it refuses a request whose tools break the documented
// restrictions with the provider's 400 shape, and otherwise answers 200
// with a reply that calls the first tool.
func scriptedProviders(t testing.TB) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	decode := func(w http.ResponseWriter, r *http.Request, v any) bool {
		raw, err := io.ReadAll(r.Body)
		if err == nil {
			err = json.Unmarshal(raw, v)
		}
		if err != nil {
			http.Error(w, "bad JSON", http.StatusBadRequest)
			return false
		}
		return true
	}
	writeJSONTo := func(w http.ResponseWriter, status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model    string           `json:"model"`
			Messages []map[string]any `json:"messages"`
			Tools    []map[string]any `json:"tools"`
		}
		if !decode(w, r, &req) {
			return
		}
		fail := func(param, msg string) {
			writeJSONTo(w, http.StatusBadRequest, map[string]any{"error": map[string]any{
				"message": msg, "type": "invalid_request_error", "param": param, "code": "invalid_function_parameters",
			}})
		}
		if req.Model == "" || len(req.Messages) == 0 {
			fail("messages", "you must provide a model parameter and at least one message")
			return
		}
		var names []string
		for i, tl := range req.Tools {
			if err := checkOpenAITool(i, tl); err != nil {
				fail(fmt.Sprintf("tools[%d].function.parameters", i), err.Error())
				return
			}
			names = append(names, tl["function"].(map[string]any)["name"].(string))
		}
		if err := uniqueNames(names); err != nil {
			fail("tools", err.Error())
			return
		}
		writeJSONTo(w, http.StatusOK, map[string]any{"object": "chat.completion", "choices": []any{map[string]any{
			"index": 0, "finish_reason": "tool_calls", "message": map[string]any{"role": "assistant", "tool_calls": []any{
				map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": names[0], "arguments": "{}"}},
			}},
		}}})
	})
	mux.HandleFunc("POST /v1/messages", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model     string           `json:"model"`
			MaxTokens int              `json:"max_tokens"`
			Messages  []map[string]any `json:"messages"`
			Tools     []map[string]any `json:"tools"`
		}
		if !decode(w, r, &req) {
			return
		}
		fail := func(msg string) {
			writeJSONTo(w, http.StatusBadRequest, map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": msg}})
		}
		if req.Model == "" || req.MaxTokens < 1 || len(req.Messages) == 0 {
			fail("model, max_tokens and messages are required")
			return
		}
		var names []string
		for i, tl := range req.Tools {
			if err := checkAnthropicTool(i, tl); err != nil {
				fail(err.Error())
				return
			}
			names = append(names, tl["name"].(string))
		}
		if err := uniqueNames(names); err != nil {
			fail("tools: " + err.Error())
			return
		}
		writeJSONTo(w, http.StatusOK, map[string]any{"type": "message", "role": "assistant", "stop_reason": "tool_use", "content": []any{
			map[string]any{"type": "tool_use", "id": "toolu_1", "name": names[0], "input": map[string]any{}},
		}})
	})
	mux.HandleFunc("POST /v1beta/models/{model}", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Contents []map[string]any `json:"contents"`
			Tools    []map[string]any `json:"tools"`
		}
		if !decode(w, r, &req) {
			return
		}
		fail := func(msg string) {
			writeJSONTo(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"code": 400, "message": msg, "status": "INVALID_ARGUMENT"}})
		}
		if !strings.HasSuffix(r.PathValue("model"), ":generateContent") || len(req.Contents) == 0 {
			fail("contents is required")
			return
		}
		if err := checkGeminiTools(req.Tools); err != nil {
			fail(err.Error())
			return
		}
		writeJSONTo(w, http.StatusOK, map[string]any{"candidates": []any{map[string]any{"content": map[string]any{"role": "model", "parts": []any{
			map[string]any{"functionCall": map[string]any{"name": "get_robot_state", "args": map[string]any{}}},
		}}}}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// postJSON posts body to url and returns the status and response.
func postJSON(t testing.TB, url string, body any) (int, string) {
	t.Helper()
	raw, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(url, "application/json", bytes.NewReader(raw))
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(out)
}

// TestPublishedTools_AcceptedByScriptedProviderAPIs is the done-when of
// issue 12: the ?format=openai, ?format=openai&strict=true, ?format=anthropic
// (and ?format=gemini) arrays, fetched from a real tool API server, are
// posted in a chat request to local servers that validate tools the way
// the providers document, and accepted; the old oneOf schema is refused
// with each provider's 400.
func TestPublishedTools_AcceptedByScriptedProviderAPIs(t *testing.T) {
	// Given the bridge's tool API and the scripted provider APIs
	h := newHarness(t)
	prov := scriptedProviders(t)
	user := []any{map[string]any{"role": "user", "content": "where is the robot?"}}
	var openai, strict, anthropic, gemini []any
	fetchJSON(t, h, "/v1/tools?format=openai", &openai)
	fetchJSON(t, h, "/v1/tools?format=openai&strict=true", &strict)
	fetchJSON(t, h, "/v1/tools?format=anthropic", &anthropic)
	fetchJSON(t, h, "/v1/tools?format=gemini", &gemini)

	// When each array is posted as the request's tools
	// Then each provider accepts it
	for name, tools := range map[string][]any{"openai": openai, "openai strict": strict} {
		status, body := postJSON(t, prov.URL+"/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": user, "tools": tools})
		require.Equal(t, http.StatusOK, status, "%s: %s", name, body)
		require.Contains(t, body, `"tool_calls"`)
	}
	status, body := postJSON(t, prov.URL+"/v1/messages", map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": user, "tools": anthropic})
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `"tool_use"`)
	status, body = postJSON(t, prov.URL+"/v1beta/models/gemini-2.5-flash:generateContent", map[string]any{
		"contents": []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "where is the robot?"}}}}, "tools": gemini,
	})
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `"functionCall"`)

	// When the old move_base_to schema (top-level oneOf) is posted instead
	old := decodeObject(t, oldMoveBaseTo)
	oldOpenAI := []any{map[string]any{"type": "function", "function": map[string]any{"name": "move_base_to", "description": "d", "parameters": old}}}
	oldStrict := []any{map[string]any{"type": "function", "function": map[string]any{"name": "move_base_to", "description": "d", "parameters": old, "strict": true}}}
	oldAnthropic := []any{map[string]any{"name": "move_base_to", "description": "d", "input_schema": old}}
	// Then each provider refuses it with its own 400
	for _, tools := range [][]any{oldOpenAI, oldStrict} {
		status, body = postJSON(t, prov.URL+"/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": user, "tools": tools})
		require.Equal(t, http.StatusBadRequest, status, body)
		require.Contains(t, body, "schema must have type 'object' and not have 'oneOf'/'anyOf'/'allOf'/'enum'/'const'/'not' at the top level")
		require.Contains(t, body, `"code":"invalid_function_parameters"`)
	}
	status, body = postJSON(t, prov.URL+"/v1/messages", map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": user, "tools": oldAnthropic})
	require.Equal(t, http.StatusBadRequest, status, body)
	require.Contains(t, body, "tools.0.custom.input_schema: input_schema does not support oneOf, allOf, or anyOf at the top level")
}

// TestToolsFormats_UnknownValuesAre400sListingTheAllowedOnes checks the
// query parameters of GET /v1/tools.
func TestToolsFormats_UnknownValuesAre400sListingTheAllowedOnes(t *testing.T) {
	h := newHarness(t)
	cases := []struct {
		query, field, want string
	}{
		{"format=claude", "format", "allowed: native, openai, anthropic, gemini"},
		{"format=openai&strict=yes", "strict", "allowed: true or false"},
		{"format=anthropic&strict=true", "strict", "only to format=openai"},
		{"strict=true", "strict", "only to format=openai"},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			status, out := h.do("GET", "/v1/tools?"+tc.query, testTokens.Agent, nil)
			require.Equal(t, http.StatusBadRequest, status)
			env := decodeEnv(t, out)
			require.Equal(t, tc.field, env.Error.Details["field"])
			require.Contains(t, env.Error.Message, tc.want)
		})
	}
	for _, q := range []string{"", "format=native", "format=openai&strict=false", "format=openai&strict=true", "format=anthropic", "format=gemini"} {
		status, out := h.do("GET", "/v1/tools?"+q, testTokens.Agent, nil)
		require.Equal(t, http.StatusOK, status, "%s: %s", q, out)
	}
}
