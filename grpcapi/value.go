package grpcapi

import (
	"bytes"
	"encoding"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"
)

// The strings that stand for non-finite numbers, as proto3's JSON mapping
// spells doubles that JSON cannot hold.
const (
	nanString    = "NaN"
	posInfString = "Infinity"
	negInfString = "-Infinity"
)

// maxDepth bounds how deeply a value is walked, so a cyclic value (a
// pointer loop that encoding/json would also refuse) is an error, not a
// stack overflow.
const maxDepth = 100

// errUnencodable is the root of every conversion failure.
var errUnencodable = errors.New("grpcapi: value cannot be encoded")

// valueOf converts v into a google.protobuf.Value holding exactly what the
// HTTP API's encoding/json would write for it — the same field names,
// omitempty, custom MarshalJSON — with one difference: a non-finite float,
// which encoding/json refuses (the HTTP API then answers INTERNAL),
// becomes the string "NaN", "Infinity" or "-Infinity". A Value holding a
// non-finite number_value would marshal in binary but make the Connect
// JSON codec fail mid-response, so none is ever produced.
func valueOf(v any) (*structpb.Value, error) {
	if v == nil {
		return structpb.NewNullValue(), nil
	}
	raw, err := json.Marshal(v)
	if err == nil {
		tree, err := decodeTree(raw)
		if err != nil {
			return nil, err
		}
		return fromTree(tree, 0)
	}
	if _, ok := errors.AsType[*json.UnsupportedValueError](err); !ok {
		return nil, fmt.Errorf("%w: %w", errUnencodable, err)
	}
	// Almost certainly a NaN or an infinity somewhere inside: walk v the
	// way encoding/json does, but write those as strings.
	tree, err := treeOf(reflect.ValueOf(v), 0)
	if err != nil {
		return nil, err
	}
	return fromTree(tree, 0)
}

// structOf is valueOf for a JSON object; nil stays nil (an absent field).
func structOf(m map[string]any) (*structpb.Struct, error) {
	if m == nil {
		return nil, nil
	}
	v, err := valueOf(m)
	if err != nil {
		return nil, err
	}
	return v.GetStructValue(), nil
}

// decodeTree decodes JSON keeping numbers as json.Number, so a number too
// large for a float64 (1e999 from a custom marshaller) is an infinity to
// spell out, not a decoding error.
func decodeTree(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, fmt.Errorf("%w: %w", errUnencodable, err)
	}
	return tree, nil
}

// fromTree converts a decoded JSON tree (nil, bool, string, float64,
// json.Number, []any, map[string]any) into a Value.
func fromTree(t any, depth int) (*structpb.Value, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("%w: nested deeper than %d levels", errUnencodable, maxDepth)
	}
	switch x := t.(type) {
	case nil:
		return structpb.NewNullValue(), nil
	case bool:
		return structpb.NewBoolValue(x), nil
	case string:
		return structpb.NewStringValue(x), nil
	case float64:
		return numberValue(x), nil
	case json.Number:
		// ParseFloat returns ±Inf with a range error for huge numbers,
		// which numberValue spells out.
		f, _ := strconv.ParseFloat(string(x), 64)
		return numberValue(f), nil
	case []any:
		l := &structpb.ListValue{Values: make([]*structpb.Value, len(x))}
		for i, e := range x {
			v, err := fromTree(e, depth+1)
			if err != nil {
				return nil, err
			}
			l.Values[i] = v
		}
		return structpb.NewListValue(l), nil
	case map[string]any:
		s := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(x))}
		for k, e := range x {
			v, err := fromTree(e, depth+1)
			if err != nil {
				return nil, err
			}
			s.Fields[k] = v
		}
		return structpb.NewStructValue(s), nil
	}
	return nil, fmt.Errorf("%w: unexpected %T", errUnencodable, t)
}

// numberValue is a number, or the proto3 JSON string of a non-finite one.
func numberValue(f float64) *structpb.Value {
	if s, ok := nonFinite(f); ok {
		return structpb.NewStringValue(s)
	}
	return structpb.NewNumberValue(f)
}

func nonFinite(f float64) (string, bool) {
	switch {
	case math.IsNaN(f):
		return nanString, true
	case math.IsInf(f, 1):
		return posInfString, true
	case math.IsInf(f, -1):
		return negInfString, true
	}
	return "", false
}

var (
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// treeOf walks v the way encoding/json encodes it — MarshalJSON, then
// MarshalText, then by kind; struct fields by their json tags with
// omitempty, omitzero, "-" and embedded structs inlined — into a JSON
// tree whose non-finite floats are strings. It is the slow path, taken
// only when encoding/json refused v. Where a MarshalJSON fails (because
// of a NaN inside it, say) the value's fields are walked instead; field
// name conflicts between embedded structs resolve to the shallowest field
// (encoding/json drops ambiguous ones), which is good enough for the
// bridge's own plain data types.
func treeOf(rv reflect.Value, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("%w: nested deeper than %d levels (a cycle?)", errUnencodable, maxDepth)
	}
	if !rv.IsValid() {
		return nil, nil
	}
	if (rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface) && rv.IsNil() {
		return nil, nil
	}
	if rv.Type().Implements(jsonMarshalerType) {
		if raw, err := rv.Interface().(json.Marshaler).MarshalJSON(); err == nil {
			return decodeTree(raw)
		}
	}
	if rv.Type().Implements(textMarshalerType) {
		if raw, err := rv.Interface().(encoding.TextMarshaler).MarshalText(); err == nil {
			return string(raw), nil
		}
	}
	switch rv.Kind() {
	case reflect.Bool:
		return rv.Bool(), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return float64(rv.Uint()), nil
	case reflect.Float32, reflect.Float64:
		f := rv.Float()
		if s, ok := nonFinite(f); ok {
			return s, nil
		}
		return f, nil
	case reflect.String:
		return rv.String(), nil
	case reflect.Pointer, reflect.Interface:
		return treeOf(rv.Elem(), depth+1)
	case reflect.Slice:
		if rv.IsNil() {
			return nil, nil
		}
		if rv.Type().Elem().Kind() == reflect.Uint8 && !rv.Type().Elem().Implements(jsonMarshalerType) {
			return base64.StdEncoding.EncodeToString(rv.Bytes()), nil
		}
		return listOf(rv, depth)
	case reflect.Array:
		return listOf(rv, depth)
	case reflect.Map:
		return mapOf(rv, depth)
	case reflect.Struct:
		out := map[string]any{}
		if err := structFields(rv, depth, out); err != nil {
			return nil, err
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: unsupported type %s", errUnencodable, rv.Type())
}

func listOf(rv reflect.Value, depth int) (any, error) {
	out := make([]any, rv.Len())
	for i := range out {
		e, err := treeOf(rv.Index(i), depth+1)
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

func mapOf(rv reflect.Value, depth int) (any, error) {
	if rv.IsNil() {
		return nil, nil
	}
	out := make(map[string]any, rv.Len())
	it := rv.MapRange()
	for it.Next() {
		k, err := mapKey(it.Key())
		if err != nil {
			return nil, err
		}
		e, err := treeOf(it.Value(), depth+1)
		if err != nil {
			return nil, err
		}
		out[k] = e
	}
	return out, nil
}

// mapKey spells a map key as encoding/json does.
func mapKey(k reflect.Value) (string, error) {
	if k.Kind() == reflect.String {
		return k.String(), nil
	}
	if k.Type().Implements(textMarshalerType) {
		raw, err := k.Interface().(encoding.TextMarshaler).MarshalText()
		if err != nil {
			return "", fmt.Errorf("%w: map key: %w", errUnencodable, err)
		}
		return string(raw), nil
	}
	switch k.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(k.Int(), 10), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.FormatUint(k.Uint(), 10), nil
	}
	return "", fmt.Errorf("%w: unsupported map key type %s", errUnencodable, k.Type())
}

// structFields adds rv's fields to out: its own first, then those of its
// embedded structs that no shallower field already named.
func structFields(rv reflect.Value, depth int, out map[string]any) error {
	t := rv.Type()
	var embedded []reflect.Value
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		fv := rv.Field(i)
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if fv.Kind() == reflect.Pointer {
					if fv.IsNil() || !f.IsExported() {
						continue
					}
					fv = fv.Elem()
				}
				embedded = append(embedded, fv)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := out[name]; dup {
			continue
		}
		if hasOpt(opts, "omitzero") && fv.IsZero() {
			continue
		}
		if hasOpt(opts, "omitempty") && isEmpty(fv) {
			continue
		}
		v, err := treeOf(fv, depth+1)
		if err != nil {
			return fmt.Errorf("field %s: %w", name, err)
		}
		out[name] = v
	}
	for _, ev := range embedded {
		inner := map[string]any{}
		if err := structFields(ev, depth+1, inner); err != nil {
			return err
		}
		for k, v := range inner {
			if _, dup := out[k]; !dup {
				out[k] = v
			}
		}
	}
	return nil
}

func hasOpt(opts, want string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// isEmpty is encoding/json's notion of empty for omitempty.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

// argumentsOf turns a request's arguments into the map toolapi validates.
// Absent arguments are an empty object, as over HTTP. A non-finite
// number — which JSON, and so the HTTP API, cannot even carry — becomes
// its proto3 JSON string, so the tool's schema rejects it as the wrong
// type and names the field, instead of a NaN slipping past range checks
// (every comparison with NaN is false).
func argumentsOf(s *structpb.Struct) map[string]any {
	if s == nil {
		return map[string]any{}
	}
	m := s.AsMap()
	for k, v := range m {
		m[k] = finite(v)
	}
	return m
}

// finite replaces non-finite floats in a decoded Struct value, in place
// for maps and lists.
func finite(v any) any {
	switch x := v.(type) {
	case float64:
		if s, ok := nonFinite(x); ok {
			return s
		}
	case map[string]any:
		for k, e := range x {
			x[k] = finite(e)
		}
	case []any:
		for i, e := range x {
			x[i] = finite(e)
		}
	}
	return v
}
