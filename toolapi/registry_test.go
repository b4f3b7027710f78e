package toolapi

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./toolapi -run %s -update to create it", t.Name())
	require.Equal(t, string(want), string(got), "tool descriptions or schemas changed; review, then rerun with -update")
}

func indentJSON(t *testing.T, raw []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, json.Indent(&buf, raw, "", "  "))
	buf.WriteByte('\n')
	return buf.Bytes()
}

func TestGolden_ToolsNative(t *testing.T) {
	h := newHarness(t)
	status, out := h.do("GET", "/v1/tools", testTokens.Agent, nil)
	require.Equal(t, http.StatusOK, status)
	golden(t, "tools.golden", indentJSON(t, out))
}

func TestGolden_ToolsOpenAI(t *testing.T) {
	h := newHarness(t)
	status, out := h.do("GET", "/v1/tools?format=openai", testTokens.Agent, nil)
	require.Equal(t, http.StatusOK, status)
	golden(t, "tools_openai.golden", indentJSON(t, out))
}

func TestGolden_ToolsOpenAIStrict(t *testing.T) {
	h := newHarness(t)
	status, out := h.do("GET", "/v1/tools?format=openai&strict=true", testTokens.Agent, nil)
	require.Equal(t, http.StatusOK, status)
	golden(t, "tools_openai_strict.golden", indentJSON(t, out))
}

func TestGolden_ToolsGemini(t *testing.T) {
	h := newHarness(t)
	status, out := h.do("GET", "/v1/tools?format=gemini", testTokens.Agent, nil)
	require.Equal(t, http.StatusOK, status)
	golden(t, "tools_gemini.golden", indentJSON(t, out))
}

var openAINameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// TestOpenAIFormat_ValidFunctionTools checks the ?format=openai output
// against what OpenAI accepts for function tools: type "function", a name
// matching ^[a-zA-Z0-9_-]{1,64}$, and parameters that are a JSON Schema
// object (compiled against the draft 2020-12 metaschema here).
func TestOpenAIFormat_ValidFunctionTools(t *testing.T) {
	h := newHarness(t)
	_, out := h.do("GET", "/v1/tools?format=openai", testTokens.Agent, nil)
	var tools []map[string]any
	require.NoError(t, json.Unmarshal(out, &tools))
	require.NotEmpty(t, tools)
	seen := map[string]bool{}
	for _, tl := range tools {
		require.Equal(t, "function", tl["type"])
		fn, ok := tl["function"].(map[string]any)
		require.True(t, ok)
		require.ElementsMatch(t, []string{"name", "description", "parameters"}, keysOf(fn))
		name, _ := fn["name"].(string)
		require.Regexp(t, openAINameRE, name)
		require.False(t, seen[name], "duplicate %s", name)
		seen[name] = true
		require.NotEmpty(t, fn["description"])
		params, ok := fn["parameters"].(map[string]any)
		require.True(t, ok, name)
		require.Equal(t, "object", params["type"], name)
		require.NotContains(t, params, "$schema")
		raw, _ := json.Marshal(params)
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		require.NoError(t, err)
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		require.NoError(t, c.AddResource("urn:t:"+name, doc))
		_, err = c.Compile("urn:t:" + name)
		require.NoError(t, err, name)
	}
}

func keysOf(m map[string]any) []string { return sortedKeys(m) }

func names(r *Registry) []string {
	var out []string
	for _, t := range r.Tools() {
		out = append(out, t.Name)
	}
	return out
}

func TestRegistry_FollowsCapabilities(t *testing.T) {
	all := []string{
		"get_robot_state", "describe_scene", "get_task", "list_named_poses", "get_safety_status", "list_robots", "request_operator_help",
		"move_base_to", "move_arm_to", "grasp", "release", "return_to_safe_pose", "stop", "cancel_task",
	}
	cases := []struct {
		name   string
		modify func(*hwconfig.Config)
		want   []string
	}{
		{"sim mobile manipulator has every tool", func(*hwconfig.Config) {}, all},
		{
			"no gripper: no grasp or release", func(c *hwconfig.Config) { c.Gripper = nil },
			[]string{
				"get_robot_state", "describe_scene", "get_task", "list_named_poses", "get_safety_status", "list_robots", "request_operator_help",
				"move_base_to", "move_arm_to", "return_to_safe_pose", "stop", "cancel_task",
			},
		},
		{
			"no arm: no arm tools", func(c *hwconfig.Config) { c.Arm, c.Poses = nil, nil },
			[]string{
				"get_robot_state", "describe_scene", "get_task", "list_named_poses", "get_safety_status", "list_robots", "request_operator_help",
				"move_base_to", "return_to_safe_pose", "stop", "cancel_task",
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := loadSimConfig(t)
			tc.modify(cfg)
			reg, err := NewRegistry(cfg)
			require.NoError(t, err)
			require.Equal(t, tc.want, names(reg))
		})
	}
}

func TestRegistry_KindsAndApprovalFromConfig(t *testing.T) {
	cfg := loadSimConfig(t)
	cfg.Actions["release"] = hwconfig.ActionConf{Approval: hwconfig.ApprovalNever}
	cfg.Actions["stop"] = hwconfig.ActionConf{Approval: hwconfig.ApprovalRequired}
	delete(cfg.Actions, "grasp")
	reg, err := NewRegistry(cfg)
	require.NoError(t, err)
	cases := []struct {
		tool     string
		kind     Kind
		approval bool
	}{
		{"get_robot_state", KindState, false},
		{"get_task", KindState, false},
		{"move_base_to", KindAction, true},
		{"release", KindAction, false},
		{"grasp", KindAction, true}, // not in the config: the safe default
		{"stop", KindAction, false}, // stop never needs approval, whatever the config says
		{"cancel_task", KindAction, false},
	}
	for _, tc := range cases {
		t.Run(tc.tool, func(t *testing.T) {
			tl, ok := reg.Lookup(tc.tool)
			require.True(t, ok)
			require.Equal(t, tc.kind, tl.Kind)
			require.Equal(t, tc.approval, tl.RequiresApproval)
			if tl.Kind == KindState {
				require.True(t, tl.Idempotent)
			}
		})
	}
}
