package toolapi

// Sensitive arguments. A tool's schema marks an argument whose value must
// never reach a log line with the annotation "x-sensitive": true on the
// property (JSON Schema ignores unknown "x-" keywords, so validators and
// models are unaffected; a client may read it as "the bridge treats this
// as private"). Redact replaces such values before anything is logged or
// written to the audit trail's details.

import "maps"

// SensitiveKeyword is the schema annotation that marks a property
// sensitive.
const SensitiveKeyword = "x-sensitive"

// Redacted replaces a sensitive value.
const Redacted = "[redacted]"

// SensitiveArgs returns the names of the tool's arguments its schema
// marks sensitive.
func (t *Tool) SensitiveArgs() []string {
	props, _ := t.InputSchema["properties"].(map[string]any)
	var out []string
	for name, p := range props {
		if m, ok := p.(map[string]any); ok && m[SensitiveKeyword] == true {
			out = append(out, name)
		}
	}
	return out
}

// Redact returns a copy of args with the tool's sensitive arguments
// replaced by Redacted. For a tool the registry does not know, every value
// is redacted: without a schema nothing is known to be safe to log.
func (r *Registry) Redact(tool string, args map[string]any) map[string]any {
	out := make(map[string]any, len(args))
	t, ok := r.Lookup(tool)
	if !ok {
		for k := range args {
			out[k] = Redacted
		}
		return out
	}
	maps.Copy(out, args)
	for _, k := range t.SensitiveArgs() {
		if _, has := out[k]; has {
			out[k] = Redacted
		}
	}
	return out
}
