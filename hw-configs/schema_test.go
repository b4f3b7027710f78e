package hwconfig

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/invopop/jsonschema"
	sjs "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
)

// The JSON Schema of a hw-config, for editors (yaml-language-server):
// generated from the Go types with their field comments as descriptions,
// committed as hwconfig.schema.json, and kept current by
// TestSchema_IsCurrent. Regenerate with `go generate ./hw-configs/`.

// SchemaFile is the committed schema, beside the bundled configs.
const SchemaFile = SchemaFileName

var updateSchema = flag.Bool("update-schema", false, "rewrite "+SchemaFile+" from the Go types")

// durationPattern is what Duration's UnmarshalYAML accepts and Validate
// does not refuse: a positive Go duration with units, or 0.
const durationPattern = `^(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`

// generateSchema reflects Config into a JSON Schema: YAML keys, strict
// objects (additionalProperties false, as the loader refuses unknown
// keys), required only what Validate requires in every config, enums
// for the typed values, and each Go doc comment as a description.
func generateSchema(t *testing.T) []byte {
	t.Helper()
	r := &jsonschema.Reflector{
		FieldNameTag:               "yaml",
		RequiredFromJSONSchemaTags: true,
		Mapper: func(rt reflect.Type) *jsonschema.Schema {
			switch rt {
			case reflect.TypeFor[Duration]():
				return &jsonschema.Schema{
					AnyOf:       []*jsonschema.Schema{{Type: "string", Pattern: durationPattern}, {Const: 0}},
					Description: "A Go duration with a unit: 500ms, 2s, 1m30s (a bare number other than 0 is refused).",
				}
			case reflect.TypeFor[Point2]():
				return &jsonschema.Schema{
					Type: "array", Items: &jsonschema.Schema{Type: "number"}, MinItems: new(uint64(2)), MaxItems: new(uint64(2)),
					Description: "A point [x, y] in metres in the room frame.",
				}
			case reflect.TypeFor[Transport]():
				return enumSchema(Transports, "How the bridge reaches the robot.")
			case reflect.TypeFor[Approval]():
				return enumSchema(Approvals, "required: every call needs an operator's approval; never: the config authorizes every call.")
			case reflect.TypeFor[RobotOverride]():
				return &jsonschema.Schema{
					Type:        "object",
					Description: "One robot's partial hw-config: any of " + strings.Join(overridable, ", ") + ", merged onto the template.",
				}
			case reflect.TypeFor[AfterCrash]():
				return enumSchema(AfterCrashPolicies, "What a bridge that finds it was not shut down cleanly does at start.")
			case reflect.TypeFor[UncommandedMotion]():
				return enumSchema(UncommandedMotionPolicies, "What the supervisor does when the robot moves while no task commands it.")
			}
			return nil
		},
	}
	require.NoError(t, r.AddGoComments("github.com/robot-bridge/robot-bridge/hw-configs", "."))
	yamlKeysInComments(r.CommentMap, reflect.TypeFor[Config](), map[reflect.Type]bool{})
	for k, c := range r.CommentMap {
		// Doc comments are wrapped for source; an editor wraps itself.
		r.CommentMap[k] = strings.ReplaceAll(c, "\n", " ")
	}
	s := r.Reflect(&Config{})
	s.ID = "https://github.com/robot-bridge/robot-bridge/hw-configs/" + SchemaFile
	s.Title = "robot-bridge hw-config"
	s.Description = "One robot's hardware configuration: transport, limits, named locations and poses, safe pose, camera, action timeouts and approval policy."
	// Map keys the loader checks: location and pose names, action tools.
	defs := s.Definitions
	names := &jsonschema.Schema{Type: "string", Pattern: namePattern.String()}
	cfg := defs["Config"]
	for _, key := range []string{"locations", "poses"} {
		p, ok := cfg.Properties.Get(key)
		require.True(t, ok, key)
		p.PropertyNames = names
	}
	actions, ok := cfg.Properties.Get("actions")
	require.True(t, ok)
	actions.PropertyNames = enumSchema(ActionTools, "")
	// Optional input topics may be none.
	ros := defs["ROSConf"]
	for _, key := range []string{"battery_topic", "estop_topic", "joint_states_topic", "detections_topic"} {
		p, ok := ros.Properties.Get(key)
		require.True(t, ok, key)
		p.Examples = []any{TopicNone}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	require.NoError(t, enc.Encode(s))
	// The schema's own MarshalJSON escapes <, > and & for HTML; a schema
	// file is read by editors and people.
	return bytes.NewBufferString(strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(b.String())).Bytes()
}

// yamlKeysInComments makes each field comment that starts with the Go
// field name ("MaxLinearSpeed in m/s") start with its YAML key
// ("max_linear_speed in m/s"), the name an editor's user sees.
func yamlKeysInComments(comments map[string]string, t reflect.Type, seen map[reflect.Type]bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map || t.Kind() == reflect.Array {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return
	}
	seen[t] = true
	for f := range t.Fields() {
		key := t.PkgPath() + "." + t.Name() + "." + f.Name
		if c, ok := comments[key]; ok {
			for _, sep := range []string{" ", ",", ":"} {
				if rest, ok := strings.CutPrefix(c, f.Name+sep); ok {
					comments[key] = yamlName(f) + sep + rest
					break
				}
			}
		}
		yamlKeysInComments(comments, f.Type, seen)
	}
}

func enumSchema[T ~string](vs []T, desc string) *jsonschema.Schema {
	s := &jsonschema.Schema{Type: "string", Description: desc}
	for _, v := range vs {
		s.Enum = append(s.Enum, string(v))
	}
	return s
}

func TestSchema_IsCurrent(t *testing.T) {
	// Given the schema generated from the Go types now
	got := generateSchema(t)
	if *updateSchema {
		require.NoError(t, os.WriteFile(SchemaFile, got, 0o644))
	}

	// When it is compared with the committed file
	want, err := os.ReadFile(SchemaFile)
	require.NoError(t, err)

	// Then they are the same: a config field added, renamed or re-documented
	// without regenerating fails here
	if !bytes.Equal(want, got) {
		t.Fatalf("%s is stale: a config type changed. Regenerate it with `go generate ./hw-configs/` "+
			"(it runs go test . -run '^TestSchema_IsCurrent$' -update-schema in hw-configs/) and commit it", SchemaFile)
	}
}

func TestSchema_DescribesEveryField(t *testing.T) {
	// Given the committed schema
	var s map[string]any
	b, err := os.ReadFile(SchemaFile)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &s))

	// Then every property of every definition has a description (from
	// its Go doc comment), so an editor can explain it
	var missing []string
	for name, d := range s["$defs"].(map[string]any) {
		props, _ := d.(map[string]any)["properties"].(map[string]any)
		for key, p := range props {
			pm := p.(map[string]any)
			if pm["description"] == nil && pm["$ref"] == nil {
				missing = append(missing, name+"."+key)
			}
		}
	}
	require.Empty(t, missing, "fields without a doc comment")
}

// compileSchema compiles the committed schema.
func compileSchema(t *testing.T) *sjs.Schema {
	t.Helper()
	f, err := os.Open(SchemaFile)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	doc, err := sjs.UnmarshalJSON(f)
	require.NoError(t, err)
	c := sjs.NewCompiler()
	require.NoError(t, c.AddResource(SchemaFile, doc))
	s, err := c.Compile(SchemaFile)
	require.NoError(t, err)
	return s
}

// yamlAsJSON decodes a YAML file into the JSON value a schema validator
// takes.
func yamlAsJSON(t *testing.T, path string) any {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var v any
	require.NoError(t, yaml.Unmarshal(b, &v))
	j, err := json.Marshal(v)
	require.NoError(t, err)
	out, err := sjs.UnmarshalJSON(bytes.NewReader(j))
	require.NoError(t, err)
	return out
}

func TestSchema_AcceptsEveryGoodConfig(t *testing.T) {
	s := compileSchema(t)
	files, err := filepath.Glob("*.yaml")
	require.NoError(t, err)
	good, err := filepath.Glob("testdata/good/*.yaml")
	require.NoError(t, err)
	ros, err := filepath.Glob("testdata/ros/heartbeat-*.yaml")
	require.NoError(t, err)
	files = append(append(files, good...), ros...)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			// Given a config the loader accepts
			_, err := Load(f)
			require.NoError(t, err)
			// When an editor checks it against the schema, Then it passes
			require.NoError(t, s.Validate(yamlAsJSON(t, f)))
		})
	}
}

func TestSchema_RefusesWhatTheLoaderRefusesOnSight(t *testing.T) {
	s := compileSchema(t)
	tests := []struct{ file, want string }{
		{"unknown-key", "additional properties"},
		{"unknown-key-in-joint", "additional properties"},
		{"unknown-transport", "value must be one of"},
		{"unknown-approval", "value must be one of"},
		{"unknown-action-tool", "invalid propertyName"},
		{"duration-without-unit", "value must be 0"},
		{"point-with-three-coordinates", "maxItems"},
		{"speed-not-a-number", "got string, want number"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			// Given a bad fixture the loader refuses while decoding
			path := filepath.Join("testdata", "bad", tt.file+".yaml")
			_, err := Load(path)
			require.Error(t, err)
			// When an editor checks it, Then the schema refuses it too
			err = s.Validate(yamlAsJSON(t, path))
			require.Error(t, err)
			require.Contains(t, strings.ToLower(err.Error()), strings.ToLower(tt.want))
		})
	}
}
