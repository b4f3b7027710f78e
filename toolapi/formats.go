package toolapi

import (
	"maps"
	"slices"
	"strings"
)

// The provider formats of GET /v1/tools. Each is the `tools` array of one
// model API's request, ready to paste into it; each schema is derived from
// the tool's one InputSchema, so the bridge validates every call against
// the same rules whatever format the model was given. The rules a format
// drops (a string's length, a non-empty joints object, the x/y-or-location
// forms) stay enforced by the bridge's own validation, which answers
// INVALID_PARAMS naming the field, and the tool descriptions say them in
// words.
//
//   - openai: the Chat Completions `tools` array (type function, name,
//     description, parameters). Parameters are the input schema without
//     "$schema".
//   - openai&strict=true: the same with "strict": true, for OpenAI's
//     structured outputs: every property listed in "required", optional
//     ones nullable (a null means "absent" to the bridge),
//     "additionalProperties": false on every object, and only the keywords
//     OpenAI documents as supported.
//   - anthropic: the Messages API `tools` array (name, description,
//     input_schema of type object).
//   - gemini: the Gemini API `tools` array, one entry holding
//     functionDeclarations whose parameters use the OpenAPI 3.0 subset of
//     Gemini's Schema object (upper-case types, no additionalProperties,
//     no "$schema"); a tool without arguments has no parameters, as
//     Gemini requires.

// Formats names the values of GET /v1/tools?format=, in the order an error
// lists them.
var Formats = []string{"native", "openai", "anthropic", "gemini"}

// OpenAITool is one entry of an OpenAI chat-completions `tools` array.
type OpenAITool struct {
	Type     string         `json:"type"`
	Function OpenAIFunction `json:"function"`
}

// OpenAIFunction is an OpenAI function tool's definition.
type OpenAIFunction struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Parameters  map[string]any `json:"parameters"`
	// Strict turns on structured outputs for the function's arguments
	// (set by OpenAIStrict only).
	Strict bool `json:"strict,omitempty"`
}

// OpenAI returns the tool as an OpenAI function tool. The "$schema"
// keyword is dropped: OpenAI's parameters are a bare schema object.
func (t *Tool) OpenAI() OpenAITool {
	params := make(map[string]any, len(t.InputSchema))
	for k, v := range t.InputSchema {
		if k != "$schema" {
			params[k] = v
		}
	}
	return OpenAITool{Type: "function", Function: OpenAIFunction{Name: t.Name, Description: t.Description, Parameters: params}}
}

// OpenAIStrict returns the tool as an OpenAI function tool in strict mode
// (structured outputs): see the package's format notes.
func (t *Tool) OpenAIStrict() OpenAITool {
	return OpenAITool{Type: "function", Function: OpenAIFunction{
		Name: t.Name, Description: t.Description, Parameters: strictSchema(t.InputSchema, true), Strict: true,
	}}
}

// AnthropicTool is one entry of an Anthropic Messages API `tools` array.
type AnthropicTool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"input_schema"`
}

// Anthropic returns the tool as an Anthropic client tool: its input_schema
// is the OpenAI parameters (a flat object schema, type object).
func (t *Tool) Anthropic() AnthropicTool {
	return AnthropicTool{Name: t.Name, Description: t.Description, InputSchema: t.OpenAI().Function.Parameters}
}

// GeminiTool is one entry of a Gemini API `tools` array.
type GeminiTool struct {
	FunctionDeclarations []GeminiFunction `json:"functionDeclarations"`
}

// GeminiFunction is a Gemini FunctionDeclaration.
type GeminiFunction struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Parameters  map[string]any `json:"parameters,omitempty"`
}

// Gemini returns the tool as a Gemini function declaration.
func (t *Tool) Gemini() GeminiFunction {
	f := GeminiFunction{Name: t.Name, Description: t.Description}
	if props, _ := t.InputSchema["properties"].(map[string]any); len(props) > 0 {
		f.Parameters = geminiSchema(t.InputSchema)
	}
	return f
}

// strictKeywords are the schema keywords OpenAI's structured outputs
// document as supported (types, enum, anyOf, $ref/$defs, and the listed
// string, number and array constraints); strictSchema drops every other.
var strictKeywords = map[string]bool{
	"type": true, "description": true, "enum": true, "const": true, "properties": true, "required": true,
	"additionalProperties": true, "items": true, "anyOf": true, "$ref": true, "$defs": true,
	"pattern": true, "format": true, "minimum": true, "maximum": true, "exclusiveMinimum": true,
	"exclusiveMaximum": true, "multipleOf": true, "minItems": true, "maxItems": true,
}

// strictFormats are the string formats structured outputs support.
var strictFormats = map[string]bool{
	"date-time": true, "time": true, "date": true, "duration": true, "email": true,
	"hostname": true, "ipv4": true, "ipv6": true, "uuid": true,
}

// strictSchema converts s for OpenAI's strict mode. required says whether
// the property s describes is required where it appears; an optional one
// becomes nullable (its type gains "null", its enum null).
func strictSchema(s map[string]any, required bool) map[string]any {
	out := map[string]any{}
	for k, v := range s {
		if !strictKeywords[k] {
			continue
		}
		if k == "format" {
			if f, _ := v.(string); !strictFormats[f] {
				continue
			}
		}
		out[k] = v
	}
	if props, ok := s["properties"].(map[string]any); ok || s["type"] == "object" {
		req := map[string]bool{}
		for _, r := range requiredOf(s) {
			req[r] = true
		}
		sp := make(map[string]any, len(props))
		for name, p := range props {
			if pm, ok := p.(map[string]any); ok {
				sp[name] = strictSchema(pm, req[name])
			}
		}
		out["properties"] = sp
		out["required"] = append([]string{}, slices.Sorted(maps.Keys(sp))...)
		out["additionalProperties"] = false
	}
	if items, ok := s["items"].(map[string]any); ok {
		out["items"] = strictSchema(items, true)
	}
	if !required {
		if typ, ok := out["type"].(string); ok {
			out["type"] = []any{typ, "null"}
		}
		if enum, ok := enumValues(out["enum"]); ok {
			out["enum"] = append(enum, nil)
		}
		if d, ok := out["description"].(string); ok {
			out["description"] = d + " (optional: null leaves it out)"
		}
	}
	return out
}

// requiredOf returns a schema's required list, as built ([]string) or as
// decoded from JSON ([]any).
func requiredOf(s map[string]any) []string {
	switch r := s["required"].(type) {
	case []string:
		return r
	case []any:
		out := make([]string, 0, len(r))
		for _, v := range r {
			if str, ok := v.(string); ok {
				out = append(out, str)
			}
		}
		return out
	}
	return nil
}

// enumValues returns a copy of an enum as []any.
func enumValues(v any) ([]any, bool) {
	switch e := v.(type) {
	case []string:
		out := make([]any, len(e))
		for i, s := range e {
			out[i] = s
		}
		return out, true
	case []any:
		return append([]any(nil), e...), true
	}
	return nil, false
}

// geminiKeywords are the fields of Gemini's Schema object (an OpenAPI 3.0
// subset); the API refuses any other ("Unknown name … Cannot find field").
var geminiKeywords = map[string]bool{
	"type": true, "format": true, "title": true, "description": true, "nullable": true, "enum": true,
	"maxItems": true, "minItems": true, "properties": true, "required": true, "minProperties": true,
	"maxProperties": true, "minLength": true, "maxLength": true, "pattern": true, "example": true,
	"anyOf": true, "propertyOrdering": true, "default": true, "items": true, "minimum": true, "maximum": true,
}

// geminiSchema converts s to Gemini's Schema: types in upper case, enums
// as format "enum" strings, unsupported keywords dropped.
func geminiSchema(s map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range s {
		if geminiKeywords[k] {
			out[k] = v
		}
	}
	if typ, ok := s["type"].(string); ok {
		out["type"] = strings.ToUpper(typ)
	}
	if _, ok := s["enum"]; ok {
		out["format"] = "enum"
	}
	if props, ok := s["properties"].(map[string]any); ok {
		gp := make(map[string]any, len(props))
		for name, p := range props {
			if pm, ok := p.(map[string]any); ok {
				gp[name] = geminiSchema(pm)
			}
		}
		out["properties"] = gp
	}
	if items, ok := s["items"].(map[string]any); ok {
		out["items"] = geminiSchema(items)
	}
	return out
}
