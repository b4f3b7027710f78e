package toolapi

import (
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/robot-bridge/robot-bridge/toolerr"
)

// Validate checks args against the tool's JSON Schema. A failure is an
// INVALID_PARAMS error that names one field, the value received and what is
// allowed (details: field, received, allowed), chosen so that fixing it is
// the model's most useful next step.
func (t *Tool) Validate(args map[string]any) *toolerr.Error {
	if args == nil {
		args = map[string]any{}
	}
	err := t.schema.Validate(args)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return toolerr.New(toolerr.InvalidParams, "%s: arguments could not be validated: %v", t.Name, err)
	}
	leaves := leafErrors(ve, nil)
	best := pickLeaf(leaves)
	return t.describe(best, args)
}

func leafErrors(e *jsonschema.ValidationError, out []*jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return append(out, e)
	}
	// A oneOf with no match is worth reporting on its own when no branch
	// has a more specific complaint; keep the node itself as a candidate.
	if _, ok := e.ErrorKind.(*kind.OneOf); ok {
		out = append(out, e)
	}
	for _, c := range e.Causes {
		out = leafErrors(c, out)
	}
	return out
}

// rank orders leaf errors: a wrong value of a named field first (the model
// can fix exactly that), then unknown fields, then missing fields, then
// the alternative-forms hint; errors inside a "not" or a oneOf branch that
// only restate the alternatives come last.
func rank(e *jsonschema.ValidationError) int {
	switch e.ErrorKind.(type) {
	case *kind.Type, *kind.Enum, *kind.Const, *kind.Minimum, *kind.Maximum, *kind.ExclusiveMinimum,
		*kind.ExclusiveMaximum, *kind.MinLength, *kind.MaxLength, *kind.Pattern, *kind.MultipleOf:
		return 0
	case *kind.AdditionalProperties:
		return 1
	case *kind.MinProperties:
		return 2
	case *kind.Required:
		if inBranch(e) {
			return 4
		}
		return 2
	case *kind.OneOf:
		return 3
	}
	return 5
}

func inBranch(e *jsonschema.ValidationError) bool {
	return strings.Contains(e.SchemaURL, "/oneOf/") || strings.Contains(e.SchemaURL, "/not")
}

func pickLeaf(leaves []*jsonschema.ValidationError) *jsonschema.ValidationError {
	sort.SliceStable(leaves, func(i, j int) bool { return rank(leaves[i]) < rank(leaves[j]) })
	return leaves[0]
}

func (t *Tool) describe(e *jsonschema.ValidationError, args map[string]any) *toolerr.Error {
	loc := e.InstanceLocation
	field := strings.Join(loc, ".")
	received := lookupValue(args, loc)
	allowed := t.allowedText(loc)
	mk := func(field string, received any, allowed, format string, a ...any) *toolerr.Error {
		te := toolerr.New(toolerr.InvalidParams, "%s: %s", t.Name, fmt.Sprintf(format, a...))
		te.With("field", field).With("received", received).With("allowed", allowed)
		return te
	}
	switch k := e.ErrorKind.(type) {
	case *kind.AdditionalProperties:
		f := k.Properties[0]
		if field != "" {
			f = field + "." + f
		}
		names := t.fieldNames(loc)
		allowedNames := "no arguments"
		if len(names) > 0 {
			allowedNames = "only " + strings.Join(names, ", ")
		}
		return mk(f, lookupValue(args, append(append([]string(nil), loc...), k.Properties[0])), allowedNames,
			"unknown field %q; allowed fields: %s", f, allowedNames)
	case *kind.Required:
		f := k.Missing[0]
		if field != "" {
			f = field + "." + f
		}
		return mk(f, nil, t.allowedText(append(append([]string(nil), loc...), k.Missing[0])),
			"missing required field %q (%s)", f, t.allowedText(append(append([]string(nil), loc...), k.Missing[0])))
	case *kind.OneOf:
		return t.describeForms(args, mk)
	case *kind.MinProperties:
		return mk(field, received, allowed, "%s must not be empty; allowed: %s", field, allowed)
	case *kind.Type:
		return mk(field, received, allowed, "%s=%s has the wrong type (%s); allowed: %s", field, show(received), k.Got, allowed)
	case *kind.Minimum, *kind.Maximum, *kind.ExclusiveMinimum, *kind.ExclusiveMaximum:
		return mk(field, received, allowed, "%s=%s is out of range; allowed: %s", field, show(received), allowed)
	case *kind.Enum, *kind.Const:
		return mk(field, received, allowed, "%s=%s is not a known value; allowed: %s", field, show(received), allowed)
	case *kind.MinLength, *kind.MaxLength, *kind.Pattern:
		return mk(field, received, allowed, "%s=%s is not valid; allowed: %s", field, show(received), allowed)
	}
	if field == "" {
		field = "arguments"
	}
	return mk(field, received, allowed, "%s is not valid (%s); allowed: %s", field, e.Error(), allowed)
}

func show(v any) string {
	switch v := v.(type) {
	case *big.Rat:
		return v.FloatString(3)
	case string:
		if len(v) > 80 {
			v = v[:80] + "…"
		}
		return fmt.Sprintf("%q", v)
	case nil:
		return "null"
	}
	s := fmt.Sprint(v)
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return s
}

func lookupValue(args map[string]any, loc []string) any {
	var cur any = args
	for _, p := range loc {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

// propSchema walks the tool's schema to the property at loc.
func (t *Tool) propSchema(loc []string) map[string]any {
	cur := t.InputSchema
	for _, p := range loc {
		props, _ := cur["properties"].(map[string]any)
		next, ok := props[p].(map[string]any)
		if !ok {
			return nil
		}
		cur = next
	}
	return cur
}

func (t *Tool) fieldNames(loc []string) []string {
	s := t.propSchema(loc)
	if s == nil {
		return nil
	}
	props, _ := s["properties"].(map[string]any)
	return sortedKeys(props)
}

// allowedText says in words what the schema allows at loc, e.g. "a number
// in [-5, 5]" or "one of home, table, dock".
func (t *Tool) allowedText(loc []string) string {
	s := t.propSchema(loc)
	if s == nil {
		if len(loc) == 0 {
			return "an object"
		}
		return "no such field"
	}
	if enum, ok := s["enum"].([]string); ok {
		return "one of " + strings.Join(enum, ", ")
	}
	typ, _ := s["type"].(string)
	var b strings.Builder
	switch typ {
	case "number", "integer":
		if typ == "number" {
			b.WriteString("a number")
		} else {
			b.WriteString("an integer")
		}
		lo, hasLo := s["minimum"]
		hi, hasHi := s["maximum"]
		switch {
		case hasLo && hasHi:
			fmt.Fprintf(&b, " in [%v, %v]", lo, hi)
		case hasLo:
			fmt.Fprintf(&b, " ≥ %v", lo)
		case hasHi:
			fmt.Fprintf(&b, " ≤ %v", hi)
		}
	case "string":
		b.WriteString("a string")
		if p, ok := s["pattern"].(string); ok {
			fmt.Fprintf(&b, " matching %s", p)
		}
		if n, ok := s["maxLength"]; ok {
			fmt.Fprintf(&b, " of at most %v characters", n)
		}
	case "object":
		if names := t.fieldNames(loc); len(names) > 0 {
			b.WriteString("an object with fields " + strings.Join(names, ", "))
		} else {
			b.WriteString("an empty object {}")
		}
	default:
		b.WriteString("see the input schema")
	}
	if d, ok := s["description"].(string); ok && typ != "object" {
		fmt.Fprintf(&b, " (%s)", d)
	}
	return b.String()
}

// describeForms explains a call that matches none (or more than one) of
// the tool's alternative argument forms (x/y or location; pose or joints):
// the missing field of the form the model evidently meant, or that it
// mixed two forms.
func (t *Tool) describeForms(args map[string]any, mk func(string, any, string, string, ...any) *toolerr.Error) *toolerr.Error {
	present := sortedKeys(args)
	hint := t.oneOfHint
	if hint == "" {
		hint = "see the tool's input schema"
	}
	forms, _ := t.InputSchema["oneOf"].([]any)
	var meant [][]string // missing fields of each form the args touch
	for _, f := range forms {
		fm, _ := f.(map[string]any)
		req, _ := fm["required"].([]string)
		touched := false
		var missing []string
		for _, r := range req {
			if _, ok := args[r]; ok {
				touched = true
			} else {
				missing = append(missing, r)
			}
		}
		if touched {
			meant = append(meant, missing)
		}
	}
	switch {
	case len(meant) > 1:
		return mk("arguments", present, hint, "the fields given (%s) mix two ways of calling it: %s", strings.Join(present, ", "), hint)
	case len(meant) == 1 && len(meant[0]) > 0:
		f := meant[0][0]
		return mk(f, nil, t.allowedText([]string{f}), "missing required field %q (%s); %s", f, t.allowedText([]string{f}), hint)
	case len(meant) == 1:
		return mk("arguments", present, hint, "the fields given (%s) do not go together: %s", strings.Join(present, ", "), hint)
	}
	return mk("arguments", present, hint, "the fields given (%s) do not form a valid call: %s", strings.Join(present, ", "), hint)
}
