package toolapi

import (
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/robot-bridge/robot-bridge/toolerr"
)

// Validate checks args against the tool's JSON Schema, then against its
// alternative argument forms (x and y, or location; pose, or joints),
// which the published schema leaves out so that it stays a flat object
// every model API accepts. A failure is an INVALID_PARAMS error that names
// one field, the value received and what is allowed (details: field,
// received, allowed), chosen so that fixing it is the model's most useful
// next step. Validate does not drop nulls: the call path hands it
// WithoutOptionalNulls(args).
func (t *Tool) Validate(args map[string]any) *toolerr.Error {
	if len(args) == 0 && t.emptyValid {
		// No arguments: known valid since the registry was built.
		return nil
	}
	if args == nil {
		args = map[string]any{}
	}
	err := t.schema.Validate(args)
	if err == nil {
		return t.checkForms(args)
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return toolerr.New(toolerr.InvalidParams, "%s: arguments could not be validated: %v", t.Name, err)
	}
	leaves := leafErrors(ve, nil)
	best := pickLeaf(leaves)
	return t.describe(best, args)
}

// WithoutOptionalNulls returns args without the null values of optional
// arguments, at every level the schema describes (joints.elbow as well
// as theta_deg): OpenAI's strict mode makes a model send every argument,
// with null for the ones it leaves out, so a null of an optional argument
// means exactly "absent". A null for a required argument stays, and is
// refused by Validate as the wrong type. args itself is not changed.
func (t *Tool) WithoutOptionalNulls(args map[string]any) map[string]any {
	out, _ := dropNulls(t.InputSchema, args)
	return out
}

// dropNulls is WithoutOptionalNulls at one level; changed is false when
// args came back as they were (then args itself is returned).
func dropNulls(schema map[string]any, args map[string]any) (map[string]any, bool) {
	props, _ := schema["properties"].(map[string]any)
	if len(args) == 0 || len(props) == 0 {
		return args, false
	}
	required := map[string]bool{}
	switch req := schema["required"].(type) {
	case []string:
		for _, r := range req {
			required[r] = true
		}
	case []any:
		for _, r := range req {
			if s, ok := r.(string); ok {
				required[s] = true
			}
		}
	}
	var out map[string]any
	for k, v := range args {
		ps, known := props[k].(map[string]any)
		if !known {
			continue // an unknown field is Validate's to refuse
		}
		var repl any
		drop := false
		switch v := v.(type) {
		case nil:
			drop = !required[k]
		case map[string]any:
			if m, changed := dropNulls(ps, v); changed {
				repl = m
			}
		}
		if !drop && repl == nil {
			continue
		}
		if out == nil {
			out = make(map[string]any, len(args))
			maps.Copy(out, args)
		}
		if drop {
			delete(out, k)
		} else {
			out[k] = repl
		}
	}
	if out == nil {
		return args, false
	}
	return out, true
}

func leafErrors(e *jsonschema.ValidationError, out []*jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return append(out, e)
	}
	for _, c := range e.Causes {
		out = leafErrors(c, out)
	}
	return out
}

// rank orders leaf errors: a wrong value of a named field first (the model
// can fix exactly that), then unknown fields, then missing or empty fields.
func rank(e *jsonschema.ValidationError) int {
	switch e.ErrorKind.(type) {
	case *kind.Type, *kind.Enum, *kind.Const, *kind.Minimum, *kind.Maximum, *kind.ExclusiveMinimum,
		*kind.ExclusiveMaximum, *kind.MinLength, *kind.MaxLength, *kind.Pattern, *kind.MultipleOf:
		return 0
	case *kind.AdditionalProperties:
		return 1
	case *kind.MinProperties, *kind.Required:
		return 2
	}
	return 5
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
	names := sortedKeys(props)
	if t.hideRobotID && len(loc) == 0 {
		names = slices.DeleteFunc(names, func(n string) bool { return n == RobotIDArg })
	}
	return names
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
		lo, hasLo := s["minLength"]
		hi, hasHi := s["maxLength"]
		if hasLo && fmt.Sprint(lo) == "0" {
			hasLo = false
		}
		switch {
		case hasLo && hasHi && fmt.Sprint(lo) == "1":
			fmt.Fprintf(&b, " of 1 to %v characters (not empty)", hi)
		case hasLo && hasHi:
			fmt.Fprintf(&b, " of %v to %v characters", lo, hi)
		case hasLo && fmt.Sprint(lo) == "1":
			b.WriteString(" that is not empty")
		case hasLo:
			fmt.Fprintf(&b, " of at least %v characters", lo)
		case hasHi:
			fmt.Fprintf(&b, " of at most %v characters", hi)
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

// checkForms refuses a call that uses none, or more than one, of the
// tool's alternative argument forms, saying which form to use and naming
// the fields: the missing field of the form the model evidently meant, or
// that it mixed two forms.
func (t *Tool) checkForms(args map[string]any) *toolerr.Error {
	if len(t.forms) == 0 {
		return nil
	}
	// robot_id belongs to every form: it says which robot, not how.
	present := slices.DeleteFunc(sortedKeys(args), func(n string) bool { return n == RobotIDArg })
	hint := t.formsHint
	mk := func(field string, received any, allowed, format string, a ...any) *toolerr.Error {
		te := toolerr.New(toolerr.InvalidParams, "%s: %s", t.Name, fmt.Sprintf(format, a...))
		te.Suggestion = "call " + t.Name + " again with one form of arguments: " + hint
		return te.With("field", field).With("received", received).With("allowed", allowed)
	}
	var touched []argForm // the forms the given fields belong to
	for _, f := range t.forms {
		if slices.ContainsFunc(present, f.has) {
			touched = append(touched, f)
		}
	}
	switch len(touched) {
	case 0:
		return mk("arguments", present, hint, "no arguments given; %s", hint)
	case 1:
		for _, r := range touched[0].required {
			if _, ok := args[r]; !ok {
				return mk(r, nil, t.allowedText([]string{r}), "missing required field %q (%s); %s", r, t.allowedText([]string{r}), hint)
			}
		}
		return nil
	}
	return mk("arguments", present, hint, "the fields given (%s) mix two ways of calling it: %s", strings.Join(present, ", "), hint)
}
