package hwconfig

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/agnivade/levenshtein"
	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// MaxConfigSize bounds a config file. Real configs are a few kilobytes; the
// cap keeps a wrong path (a log file, a bag) or an alias bomb from eating
// the bridge's memory.
const MaxConfigSize = 1 << 20

// Load reads, defaults and validates the config file at path. Errors are
// prefixed with the path and match ErrInvalid when the content is at fault.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read hw-config: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse decodes a config strictly (unknown keys are errors), fills the
// documented defaults and validates it. A decode error is a *FieldError
// naming the YAML path; a validation failure is a *ValidationError listing
// every problem. Either way the field errors carry the source line.
func Parse(b []byte) (*Config, error) {
	c, file, err := decode(b)
	if err != nil {
		return nil, err
	}
	// A fleet's robots start from the template as written, so that a
	// default derived from an overridden value (world.bounds from
	// base.workspace) follows the override.
	raw := c.Clone()
	c.ApplyDefaults()
	if err := c.Validate(); err != nil {
		if ve, ok := errors.AsType[*ValidationError](err); ok {
			annotateLines(ve, file)
		}
		return nil, err
	}
	if c.Fleet != nil {
		if c.robots, err = expandFleet(raw); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Decode decodes a config strictly without applying defaults or
// validating, for tools that want to show a file as written. Most callers
// want Parse.
func Decode(b []byte) (*Config, error) {
	c, _, err := decode(b)
	return c, err
}

// decode parses b into an AST (kept for error paths and line numbers) and
// decodes it into a Config with unknown fields disallowed.
func decode(b []byte) (c *Config, file *ast.File, err error) {
	// The YAML library is fuzzed upstream, but a panic on hostile input
	// must never take the bridge down; it becomes an ordinary error.
	defer func() {
		if r := recover(); r != nil {
			c, file = nil, nil
			err = &FieldError{Problem: fmt.Sprintf("the YAML parser failed on this input (%v)", r)}
		}
	}()
	if len(b) > MaxConfigSize {
		return nil, nil, &FieldError{
			Problem: fmt.Sprintf("config is %d bytes", len(b)),
			Allowed: fmt.Sprintf("at most %d bytes", MaxConfigSize),
		}
	}
	file, err = parser.ParseBytes(b, 0)
	if err != nil {
		return nil, nil, syntaxError(err)
	}
	var docs []*ast.DocumentNode
	for _, d := range file.Docs {
		if d != nil && d.Body != nil {
			docs = append(docs, d)
		}
	}
	switch {
	case len(docs) == 0:
		return nil, nil, &FieldError{Problem: "config is empty", Allowed: "a YAML mapping with robot, transport, base, … sections"}
	case len(docs) > 1:
		// A second document would otherwise be ignored without a word.
		return nil, nil, &FieldError{
			Problem: fmt.Sprintf("config has %d YAML documents", len(docs)),
			Allowed: "exactly one document (remove the extra ---)",
			Line:    nodeLine(docs[1].Body),
		}
	}
	body := docs[0].Body
	c = new(Config)
	if err := yaml.NodeToValue(body, c, yaml.DisallowUnknownField(), yaml.Strict()); err != nil {
		return nil, nil, decodeError(err, body)
	}
	return c, file, nil
}

// syntaxError turns a YAML syntax error into a *FieldError with the line.
func syntaxError(err error) error {
	fe := &FieldError{Problem: "YAML syntax error: " + err.Error()}
	if ye, ok := errors.AsType[yaml.Error](err); ok {
		fe.Problem = "YAML syntax error: " + ye.GetMessage()
		if tk := ye.GetToken(); tk != nil && tk.Position != nil {
			fe.Line = tk.Position.Line
		}
	}
	return fe
}

// decodeError rewrites the YAML library's decode errors into *FieldError
// with the YAML path, because "cannot unmarshal string into Go struct field
// BaseConf.MaxLinearSpeed" names Go, not the file the operator edits.
func decodeError(err error, body ast.Node) error {
	if fe, ok := errors.AsType[*FieldError](err); ok {
		return fe
	}
	var ye yaml.Error
	if !errors.As(err, &ye) {
		return &FieldError{Problem: err.Error()}
	}
	tk := ye.GetToken()
	out := &FieldError{Problem: ye.GetMessage()}
	if tk != nil {
		if tk.Position != nil {
			out.Line = tk.Position.Line
		}
		out.Field = findPath(body, tk)
		out.Value = tk.Value
	}
	var (
		unknown  *yaml.UnknownFieldError
		typeErr  *yaml.TypeError
		overflow *yaml.OverflowError
		nodeType *yaml.UnexpectedNodeTypeError
	)
	switch {
	case errors.As(err, &unknown):
		key := ""
		if tk != nil {
			key = tk.Value
		}
		parent := parentPath(out.Field)
		keys := allowedKeys(parent)
		out.Problem = fmt.Sprintf("unknown field %q", key)
		if s := closest(key, keys); s != "" {
			out.Problem += fmt.Sprintf(" (did you mean %s?)", s)
		}
		if len(keys) > 0 {
			where := parent
			if where == "" {
				where = "the top level"
			}
			out.Allowed = "at " + where + ": " + strings.Join(keys, ", ")
		}
	case errors.As(err, &typeErr):
		out.Problem = fmt.Sprintf("%s is not %s", quoteToken(tk), describeType(typeErr.DstType))
		out.Allowed = describeType(typeErr.DstType)
	case errors.As(err, &overflow):
		out.Problem = fmt.Sprintf("%s does not fit in %s", overflow.SrcNum, describeType(overflow.DstType))
		out.Allowed = describeType(overflow.DstType)
	case errors.As(err, &nodeType):
		out.Problem = fmt.Sprintf("got a %s", nodeType.Actual.YAMLName())
		out.Allowed = "a " + nodeType.Expected.YAMLName()
	}
	return out
}

// quoteToken renders a token's text for a message.
func quoteToken(tk *token.Token) string {
	if tk == nil {
		return "the value"
	}
	return strconv.Quote(tk.Value)
}

// describeType names a Go type the way a YAML author thinks of it.
func describeType(t reflect.Type) string {
	if t == nil {
		return "a value of another type"
	}
	switch t.Kind() {
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	case reflect.Pointer:
		return describeType(t.Elem())
	}
	return "a " + t.Kind().String()
}

// findPath returns the YAML path of the node carrying tk, or "".
func findPath(body ast.Node, tk *token.Token) string {
	var path string
	ast.Walk(visitFunc(func(n ast.Node) bool {
		if path != "" {
			return false
		}
		if n.GetToken() == tk {
			path = nodePath(n)
			return false
		}
		return true
	}), body)
	return path
}

// visitFunc adapts a function to ast.Visitor; returning false prunes.
type visitFunc func(ast.Node) bool

// Visit implements ast.Visitor.
func (f visitFunc) Visit(n ast.Node) ast.Visitor {
	if f(n) {
		return f
	}
	return nil
}

// annotateLines sets each problem's Line from the AST: the field's own line
// when it is written, otherwise the line of its nearest written parent (a
// missing safe_pose.arm points at safe_pose:).
func annotateLines(ve *ValidationError, file *ast.File) {
	if file == nil {
		return
	}
	lines := map[string]int{}
	for _, d := range file.Docs {
		if d == nil || d.Body == nil {
			continue
		}
		ast.Walk(visitFunc(func(n ast.Node) bool {
			p := nodePath(n)
			if _, ok := lines[p]; !ok {
				if l := nodeLine(n); l > 0 {
					lines[p] = l
				}
			}
			return true
		}), d.Body)
	}
	for _, p := range ve.Problems {
		if p.Line > 0 {
			continue
		}
		for f := p.Field; f != ""; f = parentPath(f) {
			if l, ok := lines[f]; ok {
				p.Line = l
				break
			}
		}
	}
}

// parentPath drops the last element of a YAML path: "arm.joints[1].min" →
// "arm.joints[1]" → "arm.joints" → "arm" → "".
func parentPath(p string) string {
	if strings.HasSuffix(p, "]") {
		if i := strings.LastIndexByte(p, '['); i >= 0 {
			return p[:i]
		}
	}
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[:i]
	}
	return ""
}

// allowedKeys lists the YAML keys of the struct at path, so an unknown-key
// error can say what would have been accepted there.
func allowedKeys(path string) []string {
	t := typeAt(reflect.TypeFor[Config](), path)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var keys []string
	for f := range t.Fields() {
		if name := yamlName(f); name != "" {
			keys = append(keys, name)
		}
	}
	return keys
}

// typeAt follows a YAML path through Config's type; map keys and sequence
// indexes step into element types.
func typeAt(t reflect.Type, path string) reflect.Type {
	if path == "" {
		return t
	}
	for seg := range strings.SplitSeq(path, ".") {
		name, idx, _ := strings.Cut(seg, "[")
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if name != "" {
			switch t.Kind() {
			case reflect.Struct:
				f, ok := fieldByYAMLName(t, name)
				if !ok {
					return nil
				}
				t = f.Type
			case reflect.Map:
				t = t.Elem()
			default:
				return nil
			}
		}
		for n := strings.Count("["+idx, "["); idx != "" && n > 0; n-- {
			for t.Kind() == reflect.Pointer {
				t = t.Elem()
			}
			if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
				return nil
			}
			t = t.Elem()
		}
	}
	return t
}

// fieldByYAMLName finds the struct field with the given yaml key.
func fieldByYAMLName(t reflect.Type, name string) (reflect.StructField, bool) {
	for f := range t.Fields() {
		if yamlName(f) == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// yamlName returns a field's YAML key ("" when it has none or is skipped).
func yamlName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" {
		return ""
	}
	if name == "" {
		return strings.ToLower(f.Name)
	}
	return name
}

// closest suggests the allowed name nearest to s, or "" when nothing is
// close enough to be a plausible typo.
func closest(s string, names []string) string {
	best, bestD := "", 4
	for _, n := range names {
		d := levenshtein.ComputeDistance(s, n)
		if d < bestD || (d == bestD && n < best) {
			best, bestD = n, d
		}
	}
	if bestD > len(s)/2+1 {
		return ""
	}
	return best
}

// sortedKeys returns a map's keys in order, for deterministic output.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
