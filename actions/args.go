package actions

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/robot-bridge/robot-bridge/toolerr"
)

// invalid is an INVALID_PARAMS error naming the field and what is allowed.
func invalid(field string, got any, allowed, format string, a ...any) *toolerr.Error {
	e := toolerr.New(toolerr.InvalidParams, format, a...).With("field", field)
	if got != nil {
		e.With("received", got)
	}
	if allowed != "" {
		e.With("allowed", allowed)
	}
	return e
}

// checkKeys refuses argument names the tool does not take.
func checkKeys(tool string, args map[string]any, allowed ...string) error {
	for k := range args {
		ok := slices.Contains(allowed, k)
		if !ok {
			if len(allowed) == 0 {
				return invalid(k, nil, "no arguments", "%s takes no arguments, got %q", tool, k)
			}
			return invalid(k, nil, strings.Join(allowed, ", "), "%s has no argument %q (allowed: %s)", tool, k, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// Number reads a JSON number from decoded tool arguments (float64, or
// json.Number and Go integers when a caller built the map by hand). NaN
// and infinities are not numbers. The approval service's scope checks use
// it too, so a grant and the runner read an argument the same way.
func Number(v any) (float64, bool) {
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case float32:
		f = float64(x)
	case int:
		f = float64(x)
	case int64:
		f = float64(x)
	case int32:
		f = float64(x)
	case json.Number:
		n, err := x.Float64()
		if err != nil {
			return 0, false
		}
		f = n
	default:
		return 0, false
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// number reads a finite number argument.
func number(args map[string]any, key string) (v float64, present bool, err error) {
	raw, ok := args[key]
	if !ok || raw == nil {
		return 0, false, nil
	}
	v, ok = Number(raw)
	if ok {
		return v, true, nil
	}
	switch x := raw.(type) {
	case float64, float32:
		// A number, but NaN or infinite.
		return 0, true, invalid(key, raw, "a finite number", "%s must be a finite number", key)
	case json.Number:
		if _, err := x.Float64(); err == nil {
			return 0, true, invalid(key, raw, "a finite number", "%s must be a finite number", key)
		}
		return 0, true, invalid(key, raw, "a number", "%s must be a number, got %q", key, x.String())
	}
	return 0, true, invalid(key, raw, "a number", "%s must be a number, got %v (%T)", key, raw, raw)
}

// text reads a non-empty string argument.
func text(args map[string]any, key string) (string, bool, error) {
	raw, ok := args[key]
	if !ok || raw == nil {
		return "", false, nil
	}
	s, ok := raw.(string)
	if !ok {
		return "", true, invalid(key, raw, "a string", "%s must be a string, got %v (%T)", key, raw, raw)
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return "", true, invalid(key, raw, "a non-empty string", "%s must not be empty", key)
	}
	return s, true, nil
}

func cloneArgs(a map[string]any) map[string]any {
	if a == nil {
		return map[string]any{}
	}
	out := make(map[string]any, len(a))
	for k, v := range a {
		if m, ok := v.(map[string]any); ok {
			v = cloneArgs(m)
		}
		out[k] = v
	}
	return out
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func fmtList(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

var _ = fmt.Sprintf
