package toolapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The restrictions each model API documents for the tool definitions a
// request carries, written from the providers' public documentation, so
// that a test can check every schema the bridge publishes against them
// without a network or an API key. Each checker returns nil for a tool
// the API accepts, or an error worded as the API words its 400 (so a
// failure reads like what a user would see).
//
// Anthropic, Messages API (POST /v1/messages), "tools": a client tool is
// {type?: "custom", name, description?, input_schema, cache_control?} and
// nothing else; name matches ^[a-zA-Z0-9_-]{1,128}$; input_schema is a
// JSON Schema (draft 2020-12) object with "type": "object", "properties"
// an object and "required" an array of strings when present; and
// "input_schema does not support oneOf, allOf, or anyOf at the top level".
//
// OpenAI, Chat Completions (POST /v1/chat/completions), function tools:
// {type: "function", function: {name, description?, parameters?,
// strict?}}; name "must be a-z, A-Z, 0-9, or contain underscores and
// dashes, with a maximum length of 64"; parameters "must have type
// 'object' and not have 'oneOf'/'anyOf'/'allOf'/'enum'/'const'/'not' at
// the top level", and an array schema needs items. With "strict": true
// (structured outputs, "Supported schemas"): every object sets
// "additionalProperties": false and lists every property in "required"
// (optional ones are emulated as a union with null); only the supported
// keywords appear — the types, enum, anyOf, $ref/$defs, for strings
// pattern and format (date-time, time, date, duration, email, hostname,
// ipv4, ipv6, uuid), for numbers multipleOf, maximum, exclusiveMaximum,
// minimum, exclusiveMinimum, for arrays minItems and maxItems — and never
// allOf, not, dependentRequired, dependentSchemas, if, then, else; at most
// 5 levels of nesting, 5000 object properties and 1000 enum values.
//
// Gemini API (generateContent), tools[].functionDeclarations[]: a
// FunctionDeclaration's name "must start with a letter or an underscore"
// and contain only a-z, A-Z, 0-9, underscores, dots, colons and dashes,
// at most 64; parameters is a Schema, the OpenAPI 3.0 subset: only the
// fields type, format, title, description, nullable, enum, maxItems,
// minItems, properties, required, minProperties, maxProperties,
// minLength, maxLength, pattern, example, anyOf, propertyOrdering,
// default, items, minimum, maximum (anything else — $schema,
// additionalProperties, oneOf, not, const — is "Unknown name … Cannot find
// field"); type one of the Type enum (STRING, NUMBER, INTEGER, BOOLEAN,
// ARRAY, OBJECT, NULL) and a single value (nullable instead of a type
// list); enum only on STRING; an OBJECT's properties "should be non-empty"
// (a function with no parameters leaves parameters unset); required names
// defined properties; an ARRAY has items; parameter names start with a
// letter or underscore and use only letters, digits and underscores, at
// most 64.

var (
	anthropicNameRE   = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`)
	openAIFuncNameRE  = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	geminiFuncNameRE  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$`)
	geminiParamNameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]{0,63}$`)
)

// checkAnthropicTool checks tools[i] of a Messages API request.
func checkAnthropicTool(i int, tool map[string]any) error {
	at := fmt.Sprintf("tools.%d.custom", i)
	for k := range tool {
		switch k {
		case "type", "name", "description", "input_schema", "cache_control":
		default:
			return fmt.Errorf("%s.%s: Extra inputs are not permitted", at, k)
		}
	}
	if typ, ok := tool["type"]; ok && typ != nil && typ != "custom" {
		return fmt.Errorf("%s.type: Input should be 'custom'", at)
	}
	name, _ := tool["name"].(string)
	if !anthropicNameRE.MatchString(name) {
		return fmt.Errorf("%s.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'", at)
	}
	if d, ok := tool["description"]; ok {
		if _, isStr := d.(string); !isStr {
			return fmt.Errorf("%s.description: Input should be a valid string", at)
		}
	}
	raw, ok := tool["input_schema"]
	if !ok {
		return fmt.Errorf("%s.input_schema: Field required", at)
	}
	s, ok := raw.(map[string]any)
	if !ok {
		return fmt.Errorf("%s.input_schema: Input should be a valid dictionary", at)
	}
	if s["type"] != "object" {
		return fmt.Errorf("%s.input_schema.type: Input should be 'object'", at)
	}
	for _, k := range []string{"oneOf", "allOf", "anyOf"} {
		if _, ok := s[k]; ok {
			return fmt.Errorf("%s.input_schema: input_schema does not support oneOf, allOf, or anyOf at the top level", at)
		}
	}
	if p, ok := s["properties"]; ok && p != nil {
		if _, isObj := p.(map[string]any); !isObj {
			return fmt.Errorf("%s.input_schema.properties: Input should be a valid dictionary", at)
		}
	}
	if r, ok := s["required"]; ok && r != nil {
		if !isStringList(r) {
			return fmt.Errorf("%s.input_schema.required: Input should be a valid list of strings", at)
		}
	}
	if err := compilesAsJSONSchema(s); err != nil {
		return fmt.Errorf("%s.input_schema: JSON schema is invalid - please consult https://json-schema.org or our documentation at https://docs.anthropic.com/en/docs/tool-use: %w", at, err)
	}
	return nil
}

// checkOpenAITool checks tools[i] of a Chat Completions request, in
// strict mode when its function says "strict": true.
func checkOpenAITool(i int, tool map[string]any) error {
	param := fmt.Sprintf("tools[%d].function", i)
	if tool["type"] != "function" {
		return fmt.Errorf("Invalid value for 'tools[%d].type': expected 'function'", i)
	}
	for k := range tool {
		if k != "type" && k != "function" {
			return fmt.Errorf("Unrecognized request argument supplied: tools[%d].%s", i, k)
		}
	}
	fn, ok := tool["function"].(map[string]any)
	if !ok {
		return fmt.Errorf("Missing required parameter: '%s'", param)
	}
	for k := range fn {
		switch k {
		case "name", "description", "parameters", "strict":
		default:
			return fmt.Errorf("Unrecognized request argument supplied: %s.%s", param, k)
		}
	}
	name, _ := fn["name"].(string)
	if !openAIFuncNameRE.MatchString(name) {
		return fmt.Errorf("Invalid '%s.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$' of at most 64 characters", param)
	}
	strict := fn["strict"] == true
	raw, ok := fn["parameters"]
	if !ok {
		return nil // a function without parameters takes none
	}
	params, ok := raw.(map[string]any)
	if !ok {
		return fmt.Errorf("Invalid schema for function '%s': schema must be a JSON Schema of 'type: \"object\"'", name)
	}
	if params["type"] != "object" {
		return fmt.Errorf("Invalid schema for function '%s': schema must be a JSON Schema of 'type: \"object\"', got 'type: \"%v\"'", name, params["type"])
	}
	for _, k := range []string{"oneOf", "anyOf", "allOf", "enum", "const", "not"} {
		if _, ok := params[k]; ok {
			return fmt.Errorf("Invalid schema for function '%s': schema must have type 'object' and not have 'oneOf'/'anyOf'/'allOf'/'enum'/'const'/'not' at the top level", name)
		}
	}
	if err := compilesAsJSONSchema(params); err != nil {
		return fmt.Errorf("Invalid schema for function '%s': %w", name, err)
	}
	if err := walkSchema(params, nil, func(s map[string]any, ctx []string) error {
		if hasType(s, "array") {
			if _, ok := s["items"]; !ok {
				return fmt.Errorf("Invalid schema for function '%s': In context=%s, array schema missing items", name, pyTuple(ctx))
			}
		}
		return nil
	}); err != nil {
		return err
	}
	if strict {
		return checkOpenAIStrict(name, params)
	}
	return nil
}

// openAIStrictKeywords are the keywords structured outputs support.
var openAIStrictKeywords = map[string]bool{
	"type": true, "description": true, "enum": true, "const": true, "properties": true, "required": true,
	"additionalProperties": true, "items": true, "anyOf": true, "$ref": true, "$defs": true, "definitions": true,
	"pattern": true, "format": true, "multipleOf": true, "maximum": true, "exclusiveMaximum": true,
	"minimum": true, "exclusiveMinimum": true, "minItems": true, "maxItems": true,
}

var openAIStrictFormats = map[string]bool{
	"date-time": true, "time": true, "date": true, "duration": true, "email": true,
	"hostname": true, "ipv4": true, "ipv6": true, "uuid": true,
}

func checkOpenAIStrict(name string, params map[string]any) error {
	bad := func(ctx []string, format string, a ...any) error {
		return fmt.Errorf("Invalid schema for function '%s': In context=%s, %s", name, pyTuple(ctx), fmt.Sprintf(format, a...))
	}
	props, enums := 0, 0
	err := walkSchema(params, nil, func(s map[string]any, ctx []string) error {
		if depth := strings.Count(strings.Join(ctx, "/"), "properties"); depth > 5 {
			return bad(ctx, "schema nesting is deeper than 5 levels")
		}
		for _, k := range sortedKeys(s) {
			if !openAIStrictKeywords[k] {
				return bad(ctx, "'%s' is not permitted", k)
			}
		}
		if f, ok := s["format"].(string); ok && !openAIStrictFormats[f] {
			return bad(ctx, "'format' %q is not supported", f)
		}
		if hasType(s, "object") || s["properties"] != nil {
			if s["additionalProperties"] != false {
				return bad(ctx, "'additionalProperties' is required to be supplied and to be false")
			}
			p, _ := s["properties"].(map[string]any)
			props += len(p)
			req := map[string]bool{}
			if r, ok := s["required"].([]any); ok {
				for _, v := range r {
					if str, ok := v.(string); ok {
						req[str] = true
					}
				}
			} else if _, present := s["required"]; !present && len(p) > 0 {
				return bad(ctx, "'required' is required to be supplied and to be an array including every key in properties")
			}
			for _, k := range sortedKeys(p) {
				if !req[k] {
					return bad(ctx, "'required' is required to be supplied and to be an array including every key in properties. Missing '%s'", k)
				}
			}
		}
		if e, ok := s["enum"].([]any); ok {
			enums += len(e)
			for _, v := range e {
				if !valueFitsType(s["type"], v) {
					return bad(ctx, "enum value %v does not validate against %v", v, s["type"])
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if props > 5000 {
		return fmt.Errorf("Invalid schema for function '%s': more than 5000 object properties", name)
	}
	if enums > 1000 {
		return fmt.Errorf("Invalid schema for function '%s': more than 1000 enum values", name)
	}
	return nil
}

// geminiSchemaFields are the fields of Gemini's Schema object, in their
// JSON (lowerCamelCase) and proto (snake_case) spellings.
var geminiSchemaFields = map[string]bool{
	"type": true, "format": true, "title": true, "description": true, "nullable": true, "enum": true,
	"maxItems": true, "max_items": true, "minItems": true, "min_items": true, "properties": true, "required": true,
	"minProperties": true, "min_properties": true, "maxProperties": true, "max_properties": true,
	"minLength": true, "min_length": true, "maxLength": true, "max_length": true, "pattern": true,
	"example": true, "anyOf": true, "any_of": true, "propertyOrdering": true, "property_ordering": true,
	"default": true, "items": true, "minimum": true, "maximum": true,
}

var geminiTypes = []string{"TYPE_UNSPECIFIED", "STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL"}

// checkGeminiDeclaration checks tools[i].functionDeclarations[j] of a
// generateContent request.
func checkGeminiDeclaration(i, j int, decl map[string]any) error {
	at := fmt.Sprintf("tools[%d].function_declarations[%d]", i, j)
	for k := range decl {
		switch k {
		case "name", "description", "parameters", "parametersJsonSchema", "parameters_json_schema",
			"response", "responseJsonSchema", "response_json_schema", "behavior":
		default:
			return fmt.Errorf("Invalid JSON payload received. Unknown name %q at '%s': Cannot find field.", k, at)
		}
	}
	name, _ := decl["name"].(string)
	if !geminiFuncNameRE.MatchString(name) {
		return fmt.Errorf("* GenerateContentRequest.%s.name: Invalid function name. Must start with a letter or an underscore. Must be alphameric (a-z, A-Z, 0-9), underscores (_), dots (.), colons (:) or dashes (-), with a maximum length of 64.", at)
	}
	raw, ok := decl["parameters"]
	if !ok {
		return nil
	}
	params, ok := raw.(map[string]any)
	if !ok {
		return fmt.Errorf("Invalid JSON payload received. Unknown name %q at '%s': Proto field is not repeating, cannot start list.", "parameters", at)
	}
	return checkGeminiSchema(at+".parameters", params)
}

func checkGeminiSchema(at string, s map[string]any) error {
	for _, k := range sortedKeys(s) {
		if !geminiSchemaFields[k] {
			return fmt.Errorf("Invalid JSON payload received. Unknown name %q at '%s': Cannot find field.", k, at)
		}
	}
	rawType, hasTyp := s["type"]
	typ, isStr := rawType.(string)
	if hasTyp && (!isStr || !slices.Contains(geminiTypes, strings.ToUpper(typ))) {
		return fmt.Errorf("Invalid value at '%s.type' (type.googleapis.com/google.ai.generativelanguage.v1beta.Type), %v", at, rawType)
	}
	typ = strings.ToUpper(typ)
	props, _ := s["properties"].(map[string]any)
	if typ == "OBJECT" && len(props) == 0 {
		return fmt.Errorf("* GenerateContentRequest.%s.properties: should be non-empty for OBJECT type", at)
	}
	if _, ok := s["enum"]; ok && typ != "STRING" {
		return fmt.Errorf("* GenerateContentRequest.%s.enum: only allowed for STRING type", at)
	}
	if typ == "ARRAY" {
		if _, ok := s["items"]; !ok {
			return fmt.Errorf("* GenerateContentRequest.%s.items: missing field.", at)
		}
	}
	if r, ok := s["required"]; ok {
		if !isStringList(r) {
			return fmt.Errorf("Invalid value at '%s.required', expected a list of strings", at)
		}
		for n, v := range r.([]any) {
			if _, ok := props[v.(string)]; !ok {
				return fmt.Errorf("* GenerateContentRequest.%s.required[%d]: property is not defined", at, n)
			}
		}
	}
	for _, k := range []string{"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"} {
		if v, ok := s[k]; ok {
			if f, isNum := v.(float64); !isNum || f != math.Trunc(f) {
				return fmt.Errorf("Invalid value at '%s.%s' (TYPE_INT64), %v", at, k, v)
			}
		}
	}
	for _, name := range sortedKeys(props) {
		if !geminiParamNameRE.MatchString(name) {
			return fmt.Errorf("* GenerateContentRequest.%s.properties[%s]: parameter names must start with a letter or an underscore and contain only letters, digits and underscores, at most 64", at, name)
		}
		ps, ok := props[name].(map[string]any)
		if !ok {
			return fmt.Errorf("Invalid value at '%s.properties[%s]', expected a Schema", at, name)
		}
		if err := checkGeminiSchema(at+".properties["+name+"].value", ps); err != nil {
			return err
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		return checkGeminiSchema(at+".items", items)
	}
	return nil
}

// walkSchema calls fn on s and on every subschema under properties,
// items, anyOf and $defs, with the path as OpenAI's errors name it.
func walkSchema(s map[string]any, ctx []string, fn func(map[string]any, []string) error) error {
	if err := fn(s, ctx); err != nil {
		return err
	}
	sub := func(v any, path ...string) error {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		return walkSchema(m, append(slices.Clone(ctx), path...), fn)
	}
	if props, ok := s["properties"].(map[string]any); ok {
		for _, k := range sortedKeys(props) {
			if err := sub(props[k], "properties", k); err != nil {
				return err
			}
		}
	}
	if err := sub(s["items"], "items"); err != nil {
		return err
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if list, ok := s[k].([]any); ok {
			for n, v := range list {
				if err := sub(v, k, fmt.Sprint(n)); err != nil {
					return err
				}
			}
		}
	}
	if defs, ok := s["$defs"].(map[string]any); ok {
		for _, k := range sortedKeys(defs) {
			if err := sub(defs[k], "$defs", k); err != nil {
				return err
			}
		}
	}
	return nil
}

// pyTuple renders a schema path as OpenAI's errors do: ('properties', 'x').
func pyTuple(ctx []string) string {
	if len(ctx) == 0 {
		return "()"
	}
	q := make([]string, len(ctx))
	for i, c := range ctx {
		q[i] = "'" + c + "'"
	}
	if len(q) == 1 {
		return "(" + q[0] + ",)"
	}
	return "(" + strings.Join(q, ", ") + ")"
}

func hasType(s map[string]any, typ string) bool {
	switch t := s["type"].(type) {
	case string:
		return t == typ
	case []any:
		return slices.Contains(t, any(typ))
	}
	return false
}

// valueFitsType reports whether v is of one of the JSON types declared.
func valueFitsType(declared any, v any) bool {
	var types []string
	switch t := declared.(type) {
	case nil:
		return true
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok {
				types = append(types, s)
			}
		}
	}
	kind := "null"
	switch x := v.(type) {
	case string:
		kind = "string"
	case bool:
		kind = "boolean"
	case float64:
		kind = "number"
		if x == math.Trunc(x) && slices.Contains(types, "integer") {
			kind = "integer"
		}
	case map[string]any:
		kind = "object"
	case []any:
		kind = "array"
	}
	return slices.Contains(types, kind) || (kind == "integer" && slices.Contains(types, "number"))
}

func isStringList(v any) bool {
	list, ok := v.([]any)
	if !ok {
		return false
	}
	for _, x := range list {
		if _, ok := x.(string); !ok {
			return false
		}
	}
	return true
}

// compilesAsJSONSchema reports whether s is a valid draft 2020-12 schema
// (checked against the metaschema by the compiler).
func compilesAsJSONSchema(s map[string]any) error {
	raw, err := json.Marshal(s)
	if err != nil {
		return err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("urn:provider-check", doc); err != nil {
		return err
	}
	_, err = c.Compile("urn:provider-check")
	return err
}

// checkGeminiTools checks a Gemini `tools` array.
func checkGeminiTools(tools []map[string]any) error {
	for i, tl := range tools {
		for k := range tl {
			if k != "functionDeclarations" && k != "function_declarations" {
				return fmt.Errorf("Invalid JSON payload received. Unknown name %q at 'tools[%d]': Cannot find field.", k, i)
			}
		}
		decls, _ := tl["functionDeclarations"].([]any)
		if d2, ok := tl["function_declarations"].([]any); ok {
			decls = append(decls, d2...)
		}
		for j, d := range decls {
			dm, ok := d.(map[string]any)
			if !ok {
				return fmt.Errorf("Invalid value at 'tools[%d].function_declarations[%d]', expected an object", i, j)
			}
			if err := checkGeminiDeclaration(i, j, dm); err != nil {
				return err
			}
		}
	}
	return nil
}

// uniqueNames reports a tool name used twice: every API refuses that.
func uniqueNames(names []string) error {
	sorted := slices.Clone(names)
	sort.Strings(sorted)
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return fmt.Errorf("tool names must be unique: %s", sorted[i])
		}
	}
	return nil
}
