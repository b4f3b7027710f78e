package hwconfig

import (
	"errors"
	"fmt"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
)

// Sentinel errors callers branch on. Every error Parse and Validate return
// for a bad config matches ErrInvalid with errors.Is, so a caller can tell
// "the file is wrong" from "the file could not be read".
var (
	// ErrInvalid marks a config that is malformed or inconsistent.
	ErrInvalid = errors.New("invalid hw-config")
	// ErrNoArm is returned by arm helpers on a robot without an arm.
	ErrNoArm = errors.New("the robot has no arm")
	// ErrUnknownPose is returned when a named arm pose does not exist.
	ErrUnknownPose = errors.New("unknown arm pose")
)

// FieldError is one problem with one field of a config. Its message names
// the field by its YAML path (arm.joints[1].min, actions.stop.approval) and
// says what is allowed, so an operator can fix the file without reading
// code.
type FieldError struct {
	// Field is the YAML path of the offending field, e.g.
	// "arm.joints[1].min"; empty when the problem concerns the whole
	// document (a YAML syntax error).
	Field string
	// Value is the offending value as decoded, or nil when it is missing.
	Value any
	// Problem says what is wrong, in words.
	Problem string
	// Allowed states the allowed values or range; empty when the problem
	// says it all.
	Allowed string
	// Line is the 1-based line in the YAML source the field (or its nearest
	// enclosing section) is on; 0 when unknown, e.g. for a config built in
	// code.
	Line int
}

// Error implements error: "field: problem (allowed: …) [line N]".
func (e *FieldError) Error() string {
	var b strings.Builder
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Problem)
	if e.Allowed != "" {
		b.WriteString(" (allowed: ")
		b.WriteString(e.Allowed)
		b.WriteString(")")
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, " [line %d]", e.Line)
	}
	return b.String()
}

// Is makes every FieldError match ErrInvalid.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// ValidationError carries every problem Validate found, in a stable order,
// so that one run of check-config lists them all instead of one per edit.
type ValidationError struct {
	Problems []*FieldError
}

// Error implements error. A single problem reads as that problem; several
// are listed one per line.
func (e *ValidationError) Error() string {
	if len(e.Problems) == 1 {
		return e.Problems[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "hw-config has %d problems:", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p.Error())
	}
	return b.String()
}

// Unwrap returns the individual problems so errors.As finds a *FieldError
// and errors.Is finds ErrInvalid.
func (e *ValidationError) Unwrap() []error {
	out := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p
	}
	return out
}

// Field returns the first problem with the given YAML path, or nil.
func (e *ValidationError) Field(path string) *FieldError {
	for _, p := range e.Problems {
		if p.Field == path {
			return p
		}
	}
	return nil
}

// problems collects FieldErrors, keeping only the first per field so that a
// generic check (NaN, negative duration) and a specific one do not report
// the same field twice.
type problems struct {
	list []*FieldError
	seen map[string]bool
}

// add records a problem unless the field already has one.
func (p *problems) add(field string, value any, allowed, format string, args ...any) {
	if p.seen == nil {
		p.seen = map[string]bool{}
	}
	if p.seen[field] {
		return
	}
	p.seen[field] = true
	p.list = append(p.list, &FieldError{
		Field: field, Value: value, Allowed: allowed,
		Problem: fmt.Sprintf(format, args...),
	})
}

// has reports whether field already has a problem; dependent checks use it
// to avoid cascades.
func (p *problems) has(field string) bool { return p.seen[field] }

// err returns nil or a *ValidationError.
func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	return &ValidationError{Problems: p.list}
}

// nodePath returns n's YAML path without goccy's leading "$.", e.g.
// "transport.kind".
func nodePath(n ast.Node) string {
	return trimRoot(n.GetPath())
}

// trimRoot strips the "$" root marker from a goccy YAML path.
func trimRoot(p string) string {
	p = strings.TrimPrefix(p, "$")
	return strings.TrimPrefix(p, ".")
}

// nodeLine returns n's 1-based source line, or 0.
func nodeLine(n ast.Node) int {
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return tk.Position.Line
	}
	return 0
}

// unwrapNode looks through tag and anchor wrappers to the value node.
func unwrapNode(n ast.Node) ast.Node {
	for {
		switch v := n.(type) {
		case *ast.TagNode:
			n = v.Value
		case *ast.AnchorNode:
			n = v.Value
		default:
			return n
		}
		if n == nil {
			return &ast.NullNode{BaseNode: &ast.BaseNode{}}
		}
	}
}

// scalarText returns a scalar node's text. ok is false for a null (the field
// stays unset); a mapping or sequence is an error naming the field.
func scalarText(n ast.Node, want string) (s string, ok bool, err error) {
	switch v := unwrapNode(n).(type) {
	case *ast.NullNode:
		return "", false, nil
	case *ast.StringNode:
		return v.Value, true, nil
	case *ast.LiteralNode:
		if v.Value != nil {
			return v.Value.Value, true, nil
		}
		return "", true, nil
	case ast.ScalarNode:
		if tk := v.GetToken(); tk != nil {
			return tk.Value, true, nil
		}
		return v.String(), true, nil
	default:
		return "", false, &FieldError{
			Field: nodePath(n), Line: nodeLine(n),
			Problem: fmt.Sprintf("got a %s", n.Type().YAMLName()),
			Allowed: want,
		}
	}
}

// scalarFloat decodes a numeric node with the YAML library's own rules
// (.inf, .nan, 1e3, 0x10), so Point2 accepts what a float64 field accepts.
func scalarFloat(n ast.Node) (float64, error) {
	switch unwrapNode(n).(type) {
	case *ast.IntegerNode, *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
	default:
		return 0, errors.New("not a number")
	}
	var f float64
	if err := yaml.NodeToValue(n, &f); err != nil {
		return 0, err
	}
	return f, nil
}

// joinStrings joins enum values for an "allowed" list.
func joinStrings[T ~string](vs []T) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}
