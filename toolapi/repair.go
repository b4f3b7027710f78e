package toolapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/robot-bridge/robot-bridge/toolerr"
)

// maxArgumentBytes bounds the argument string a model may send; tool
// arguments are small, and the repairer is linear but not free.
const maxArgumentBytes = 64 << 10

var fenceRE = regexp.MustCompile("(?s)```[A-Za-z0-9_-]*[ \t]*\r?\n?(.*?)```")

// ExtractArguments turns the arguments string of a model's tool call into
// a JSON object. Models wrap arguments in prose, in a Markdown code fence,
// encode them twice, or write trailing commas, single quotes, bare keys and
// Python's True/False/None; those are repaired because each has exactly one
// meaning. Anything else — a truncated object, two objects, a non-object —
// is an INVALID_PARAMS error that explains the parse error, never a guess.
// repairs lists what was repaired, for logs.
func ExtractArguments(raw string) (args map[string]any, repairs []string, err error) {
	return extract(raw, 0)
}

func argsError(raw, format string, a ...any) *toolerr.Error {
	shown := raw
	if len(shown) > 200 {
		shown = shown[:200] + "…"
	}
	te := toolerr.New(toolerr.InvalidParams, "the arguments could not be read as a JSON object: "+format, a...)
	te.Suggestion = `send the arguments as one JSON object with double-quoted keys and strings, e.g. {"x": 1.0, "y": 2.0}; no prose, no comments`
	return te.With("field", "arguments").With("received", shown).With("allowed", "a JSON object matching the tool's input schema")
}

func extract(raw string, depth int) (map[string]any, []string, error) {
	if len(raw) > maxArgumentBytes {
		return nil, nil, argsError(raw[:200], "they are %d bytes long; at most %d are accepted", len(raw), maxArgumentBytes)
	}
	s := strings.TrimSpace(raw)
	if s == "" || s == "null" || s == "{}" {
		return map[string]any{}, nil, nil
	}
	var repairs []string
	// 1. Strict JSON.
	if m, nested, ok := strictObject(s); ok {
		if k := duplicateKey([]byte(s)); k != "" {
			return nil, nil, duplicateKeyError(s, k)
		}
		return m, nil, nil
	} else if nested != "" && depth < 2 {
		m, r, err := extract(nested, depth+1)
		return m, append([]string{"decoded a JSON string that held the object"}, r...), err
	}
	// 2. Code fence.
	cand := s
	if ms := fenceRE.FindAllStringSubmatch(s, -1); len(ms) > 0 {
		for _, m := range ms {
			if strings.Contains(m[1], "{") {
				cand = m[1]
				repairs = append(repairs, "took the object out of a code fence")
				break
			}
		}
	}
	// 3. The first balanced object in the text.
	start := strings.IndexByte(cand, '{')
	if start < 0 {
		var v any
		if json.Unmarshal([]byte(s), &v) == nil {
			return nil, nil, argsError(raw, "they are a JSON %s, not an object", jsonKind(v))
		}
		return nil, nil, argsError(raw, "no JSON object ({ … }) was found in them")
	}
	end, err := matchBrace(cand, start)
	if err != nil {
		return nil, nil, argsError(raw, "%v", err)
	}
	span := cand[start : end+1]
	if start > 0 || end < len(cand)-1 {
		if strings.TrimSpace(cand[:start]) != "" || strings.TrimSpace(cand[end+1:]) != "" {
			repairs = append(repairs, "ignored text around the object")
		}
	}
	if rest := cand[end+1:]; strings.Contains(rest, "{") {
		if _, err := matchBrace(rest, strings.IndexByte(rest, '{')); err == nil {
			return nil, nil, argsError(raw, "they hold more than one JSON object; send exactly one")
		}
	}
	if m, _, ok := strictObject(span); ok {
		return m, repairs, nil
	}
	// 4. Lexical repairs that have exactly one meaning.
	fixed, fixes := repairJSON(span)
	repairs = append(repairs, fixes...)
	var v any
	if err := json.Unmarshal([]byte(fixed), &v); err != nil {
		return nil, nil, argsError(raw, "%s", jsonErrText(fixed, err))
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, nil, argsError(raw, "they are a JSON %s, not an object", jsonKind(v))
	}
	return m, repairs, nil
}

// strictObject decodes s as strict JSON; nested is set when s is a JSON
// string (arguments encoded twice).
func strictObject(s string) (m map[string]any, nested string, ok bool) {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, "", false
	}
	switch v := v.(type) {
	case map[string]any:
		return v, "", true
	case string:
		return nil, v, false
	}
	return nil, "", false
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "array"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return "value"
}

func jsonErrText(s string, err error) string {
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		off := int(se.Offset)
		lo, hi := max(0, off-20), min(len(s), off+20)
		return fmt.Sprintf("%v at offset %d, near %q", se, off, s[lo:hi])
	}
	return err.Error()
}

// matchBrace returns the index of the brace closing the one at start,
// skipping over single- and double-quoted strings and checking that every
// bracket closes the kind it opened.
func matchBrace(s string, start int) (int, error) {
	var stack []byte
	var quote byte
	for i := start; i < len(s); i++ {
		c := s[i]
		if quote != 0 {
			switch c {
			case '\\':
				i++
			case quote:
				quote = 0
			}
			continue
		}
		switch c {
		case '"', '\'':
			quote = c
		case '{':
			stack = append(stack, '}')
		case '[':
			stack = append(stack, ']')
		case '}', ']':
			if len(stack) == 0 || stack[len(stack)-1] != c {
				return 0, fmt.Errorf("a %q at offset %d closes a bracket it did not open (object starting at offset %d)", c, i, start)
			}
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return i, nil
			}
		}
	}
	if quote != 0 {
		return 0, fmt.Errorf("a string in the object starting at offset %d is never closed (the arguments look cut off)", start)
	}
	return 0, fmt.Errorf("the object starting at offset %d is never closed (the arguments look cut off)", start)
}

// repairJSON rewrites single-quoted strings, bare keys, Python literals
// and trailing commas into JSON. It only touches text outside strings.
func repairJSON(s string) (string, []string) {
	var b strings.Builder
	b.Grow(len(s) + 16)
	seen := map[string]bool{}
	note := func(n string) { seen[n] = true }
	prevSig := byte(0) // last significant byte written outside strings
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			j := i + 1
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(s) {
				b.WriteString(s[i:])
				return b.String(), keys(seen)
			}
			b.WriteString(s[i : j+1])
			i = j
			prevSig = '"'
		case c == '\'':
			note("turned single quotes into double quotes")
			b.WriteByte('"')
			j := i + 1
			for ; j < len(s) && s[j] != '\''; j++ {
				switch {
				case s[j] == '\\' && j+1 < len(s) && s[j+1] == '\'':
					b.WriteByte('\'')
					j++
				case s[j] == '\\' && j+1 < len(s):
					b.WriteByte('\\')
					b.WriteByte(s[j+1])
					j++
				case s[j] == '"':
					b.WriteString(`\"`)
				default:
					b.WriteByte(s[j])
				}
			}
			b.WriteByte('"')
			i = j
			prevSig = '"'
		case c == ',':
			k := i + 1
			for k < len(s) && isSpace(s[k]) {
				k++
			}
			if k < len(s) && (s[k] == '}' || s[k] == ']') {
				note("removed a trailing comma")
				continue
			}
			b.WriteByte(c)
			prevSig = c
		case isIdentStart(c):
			j := i
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			word := s[i:j]
			k := j
			for k < len(s) && isSpace(s[k]) {
				k++
			}
			switch {
			case (prevSig == '{' || prevSig == ',') && k < len(s) && s[k] == ':':
				note("quoted bare keys")
				b.WriteString(`"` + word + `"`)
			case word == "True":
				note("turned True/False/None into JSON")
				b.WriteString("true")
			case word == "False":
				note("turned True/False/None into JSON")
				b.WriteString("false")
			case word == "None":
				note("turned True/False/None into JSON")
				b.WriteString("null")
			default:
				b.WriteString(word)
			}
			i = j - 1
			prevSig = 'a'
		default:
			b.WriteByte(c)
			if !isSpace(c) {
				prevSig = c
			}
		}
	}
	return b.String(), keys(seen)
}

func keys(m map[string]bool) []string { return sortedKeys(m) }

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdent(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

// duplicateKey is the dotted path of the first key an object of the JSON
// text data holds twice ("" when none does, or data is not JSON).
// encoding/json keeps the last of them silently; a filter in front of
// the bridge that reads the first would see another target than the one
// the robot gets, so the bridge never guesses which was meant.
func duplicateKey(data []byte) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var walk func(path string) (string, bool)
	walk = func(path string) (string, bool) {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		d, ok := tok.(json.Delim)
		if !ok {
			return "", true
		}
		switch d {
		case '{':
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return "", false
				}
				k, _ := kt.(string)
				p := k
				if path != "" {
					p = path + "." + k
				}
				if seen[k] {
					return p, true
				}
				seen[k] = true
				if dup, ok := walk(p); !ok || dup != "" {
					return dup, ok
				}
			}
		case '[':
			for i := 0; dec.More(); i++ {
				if dup, ok := walk(fmt.Sprintf("%s[%d]", path, i)); !ok || dup != "" {
					return dup, ok
				}
			}
		}
		_, err = dec.Token() // the closing delimiter
		return "", err == nil
	}
	dup, _ := walk("")
	return dup
}

func duplicateKeyError(raw, key string) *toolerr.Error {
	te := argsError(raw, "the key %q is given twice; say each argument once", key)
	return te.With("field", key)
}
