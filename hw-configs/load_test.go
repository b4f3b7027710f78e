package hwconfig

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/stretchr/testify/require"
)

// shippedConfig is the default config of `make run`.
const shippedConfig = "sim-mobile-manipulator.yaml"

// requireProblem asserts that err reports field with an allowed text
// containing allowed, that the message names both, and that the error is
// ErrInvalid. It returns the field's problem for further checks; callers
// that need none discard it with `_ =` (it is an error value, not a
// failure: the assertions have already run).
func requireProblem(t *testing.T, err error, field, allowed string) *FieldError {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, ErrInvalid)
	var fe *FieldError
	if ve, ok := errors.AsType[*ValidationError](err); ok {
		fe = ve.Field(field)
	} else {
		require.ErrorAs(t, err, &fe)
	}
	require.NotNil(t, fe, "no problem reported for field %q; got:\n%v", field, err)
	require.Equal(t, field, fe.Field, "got:\n%v", err)
	require.Contains(t, fe.Allowed, allowed, "got:\n%v", err)
	msg := err.Error()
	if field != "" {
		require.Contains(t, msg, field+": ", "the message must name the field")
	}
	require.Contains(t, msg, allowed, "the message must state what is allowed")
	return fe
}

func TestLoad_ShippedConfigLoadsAndValidates(t *testing.T) {
	// Given the config shipped as the default
	// When it is loaded
	c, err := Load(shippedConfig)

	// Then it is valid and says what the file says
	require.NoError(t, err)
	require.NoError(t, c.Validate())
	require.Equal(t, "sim-1", c.Robot.ID)
	require.Equal(t, TransportSim, c.Transport.Kind)
	require.True(t, c.HasArm())
	require.True(t, c.HasGripper())
	require.True(t, c.HasCamera())
	require.Equal(t, []string{"shoulder_yaw", "shoulder_pitch", "elbow", "wrist"}, c.JointNames())
	require.Equal(t, ActionTools, c.ToolNames())
	require.Equal(t, "stowed", c.SafePose.Arm)
	require.True(t, c.SafePose.Preauthorized)
	require.Equal(t, 15*time.Second, c.SafePose.Timeout.D())
	require.Equal(t, 500*time.Millisecond, c.Safety.StateTimeout.D())
	require.InDelta(t, 0.87, c.Arm.Reach, 1e-9, "reach defaults to the sum of the link lengths")
	require.Len(t, c.Sim.Objects, 3)
	for _, tool := range []string{ToolStop, ToolCancelTask} {
		a, ok := c.ActionPolicy(tool)
		require.True(t, ok)
		require.Equal(t, ApprovalNever, a.Approval, tool)
	}
}

func TestParse_GoodFixtures(t *testing.T) {
	tests := []struct {
		file               string
		kind               Transport
		arm, grip, cam     bool
		tools              []string
		locationsAndThetas int
	}{
		{
			file: "sim-manipulator-defaults.yaml", kind: TransportSim, arm: true, grip: true, cam: true,
			tools: ActionTools,
		},
		{
			file: "base-only-ros.yaml", kind: TransportROS,
			tools: []string{ToolMoveBaseTo, ToolReturnToSafePose, ToolStop, ToolCancelTask},
		},
		{
			file: "base-only-ros-minimal.yaml", kind: TransportROS,
			tools: []string{ToolMoveBaseTo, ToolReturnToSafePose, ToolStop, ToolCancelTask},
		},
		{
			file: "arm-no-gripper-mqtt.yaml", kind: TransportMQTT, arm: true, cam: true,
			tools: []string{ToolMoveBaseTo, ToolMoveArmTo, ToolReturnToSafePose, ToolStop, ToolCancelTask},
		},
	}
	files, err := filepath.Glob("testdata/good/*.yaml")
	require.NoError(t, err)
	require.Len(t, files, len(tests), "every good fixture needs a row here")
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			// Given a good fixture
			// When it is loaded
			c, err := Load(filepath.Join("testdata", "good", tt.file))

			// Then it validates and its capabilities are what the file describes
			require.NoError(t, err)
			require.NoError(t, c.Validate())
			require.Equal(t, tt.kind, c.Transport.Kind)
			require.Equal(t, tt.arm, c.HasArm())
			require.Equal(t, tt.grip, c.HasGripper())
			require.Equal(t, tt.cam, c.HasCamera())
			require.Equal(t, tt.tools, c.ToolNames())
			for _, tool := range tt.tools {
				_, ok := c.ActionPolicy(tool)
				require.True(t, ok, tool)
			}
		})
	}
}

// badFixtures maps each file in testdata/bad to the field its error must
// name and a piece of the allowed values it must state.
var badFixtures = map[string]struct{ field, allowed string }{
	"unknown-key":                            {"base.max_speed", "max_linear_speed"},
	"unknown-key-in-joint":                   {"arm.joints[2].max_effort", "name, min, max, max_velocity"},
	"joint-min-above-max":                    {"arm.joints[1].min", "min < max"},
	"joint-zero-max-velocity":                {"arm.joints[0].max_velocity", "> 0 rad/s"},
	"duplicate-joint-name":                   {"arm.joints[3].name", "unique"},
	"link-lengths-count":                     {"arm.link_lengths", "3 lengths"},
	"missing-safe-pose":                      {"safe_pose.arm", "one of poses: reach_table, ready, stowed"},
	"safe-pose-unknown":                      {"safe_pose.arm", "one of poses: reach_table, ready, stowed"},
	"safe-pose-base-drives":                  {"safe_pose.base", "stop"},
	"safe-pose-speed-scale-above-one":        {"safe_pose.speed_scale", "(0, 1]"},
	"negative-timeout":                       {"safe_pose.timeout", "positive duration"},
	"negative-action-timeout":                {"actions.move_base_to.timeout", "positive duration"},
	"stop-requires-approval":                 {"actions.stop.approval", "never"},
	"cancel-requires-approval":               {"actions.cancel_task.approval", "never"},
	"unknown-approval":                       {"actions.grasp.approval", "required, never"},
	"unknown-after-crash":                    {"safety.after_crash", "latch_fault, resume"},
	"unknown-uncommanded-motion":             {"safety.uncommanded_motion", "latch_fault, stop, off"},
	"unknown-action-tool":                    {"actions.fly_to", "move_base_to, move_arm_to, grasp"},
	"missing-action":                         {"actions.grasp", "approval: required"},
	"arm-tool-without-arm":                   {"actions.move_arm_to", "move_base_to, return_to_safe_pose, stop, cancel_task"},
	"gripper-without-arm":                    {"gripper", "arm"},
	"unknown-transport":                      {"transport.kind", "sim, ros, mqtt"},
	"ros-section-missing":                    {"transport.ros", "a ros section"},
	"sim-section-missing":                    {"sim", "a sim section"},
	"pose-unknown-joint":                     {"poses.ready.wirst", "shoulder_yaw, shoulder_pitch, elbow, wrist"},
	"pose-missing-joint":                     {"poses.ready", "every arm joint"},
	"pose-out-of-limits":                     {"poses.ready.elbow", "[-2.6, 2.6]"},
	"location-outside-workspace":             {"locations.table", "x in [-4.5, 4.5], y in [-4.5, 4.5]"},
	"location-in-keep-out":                   {"locations.dock", "outside every keep-out region"},
	"location-in-inflated-keep-out":          {"locations.home", "outside every keep-out region by at least base.radius (0.3 m)"},
	"location-footprint-on-table":            {"locations.table", "at least base.radius (0.3 m) from every surface"},
	"location-footprint-over-workspace-edge": {"locations.dock", "at least base.radius (0.3 m) inside base.workspace"},
	"workspace-outside-bounds":               {"base.workspace", "x in [-5, 5], y in [-5, 5]"},
	"workspace-two-points":                   {"base.workspace", "at least 3"},
	"workspace-self-intersecting":            {"base.workspace", "simple outline"},
	"point-with-three-coordinates":           {"base.workspace[1]", "[x, y]"},
	"nan-speed":                              {"base.max_linear_speed", "finite"},
	"negative-speed":                         {"base.max_angular_speed", "> 0 rad/s"},
	"speed-not-a-number":                     {"base.max_linear_speed", "a number"},
	"duration-without-unit":                  {"safety.state_timeout", "500ms"},
	"control-period-not-below-state-timeout": {"safety.control_period", "< safety.state_timeout"},
	"default-force-above-max":                {"gripper.default_force", "(0, 40]"},
	"principal-point-outside-image":          {"camera.cx", "[0, 640]"},
	"camera-zero-width":                      {"camera.width", "> 0"},
	"min-confidence-above-one":               {"perception.min_confidence", "[0, 1]"},
	"duplicate-object-id":                    {"sim.objects[1].id", "unique"},
	"object-outside-room":                    {"sim.objects[2]", "inside world.bounds"},
	"object-zero-size":                       {"sim.objects[0].size", "> 0"},
	"bad-robot-id":                           {"robot.id", "lowercase letters"},
	"duplicate-key":                          {"", ""},
	"two-documents":                          {"", "exactly one document"},
}

func TestParse_BadFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.yaml")
	require.NoError(t, err)
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".yaml"))
	}
	require.ElementsMatch(t, mapKeys(badFixtures), names, "every bad fixture needs an expectation, and every expectation a fixture")

	for name, want := range badFixtures {
		t.Run(name, func(t *testing.T) {
			// Given a fixture with one thing wrong
			// When it is loaded
			c, err := Load(filepath.Join("testdata", "bad", name+".yaml"))

			// Then it is refused with an error naming the field and what is allowed
			require.Nil(t, c)
			fe := requireProblem(t, err, want.field, want.allowed)
			if strings.ContainsAny(want.field, ".[") || name == "gripper-without-arm" {
				// A missing top-level section has no line to point at;
				// everything else does.
				require.Positive(t, fe.Line, "a problem in a file points at a line")
			}
			require.Contains(t, err.Error(), name+".yaml: ", "Load prefixes the file name")
		})
	}
}

func TestParse_DuplicateKeyIsASyntaxErrorWithLine(t *testing.T) {
	// Given a file that sets base.radius twice
	_, err := Load("testdata/bad/duplicate-key.yaml")

	// Then the error says so and where
	require.ErrorIs(t, err, ErrInvalid)
	require.Contains(t, err.Error(), `mapping key "radius" already defined`)
	require.Contains(t, err.Error(), "[line 17]")
}

func TestParse_DecodeErrorsNameTheField(t *testing.T) {
	good, err := os.ReadFile(shippedConfig)
	require.NoError(t, err)
	tests := []struct {
		name, old, new string
		field, allowed string
		message        string
	}{
		{
			name: "unknown transport", old: "  kind: sim\n", new: "  kind: zz\n",
			field: "transport.kind", allowed: "sim, ros, mqtt",
			message: `transport.kind: unknown transport "zz" (allowed: sim, ros, mqtt)`,
		},
		{
			name: "transport given as a list", old: "  kind: sim\n", new: "  kind: [sim]\n",
			field: "transport.kind", allowed: "a transport name",
		},
		{
			name: "approval in a map value", old: "stop:                {approval: never}", new: "stop:                {approval: no}",
			field: "actions.stop.approval", allowed: "required, never",
		},
		{
			name: "duration with a typo", old: "  stall_timeout: 3s\n", new: "  stall_timeout: 3 s econds\n",
			field: "safety.stall_timeout", allowed: "1m30s",
		},
		{
			name: "point with one number", old: "[[-5, -5], [5, -5]", new: "[[-5], [5, -5]",
			field: "world.bounds[0]", allowed: "[x, y]",
		},
		{
			name: "point with a word", old: "[[-5, -5], [5, -5]", new: "[[-5, west], [5, -5]",
			field: "world.bounds[0][1]", allowed: "[x, y]",
		},
		{
			name: "integer overflow", old: "  width: 640\n", new: "  width: 99999999999999999999999\n",
			field: "camera.width", allowed: "an integer",
		},
		{
			name: "mapping where a list belongs", old: "link_lengths: [0.40, 0.35, 0.12]", new: "link_lengths: {a: 1}",
			field: "arm.link_lengths", allowed: "sequence",
		},
		{
			name: "unknown top-level section", old: "robot:\n", new: "robots:\n  id: x\nrobot:\n",
			field: "robots", allowed: "at the top level: robot, transport",
		},
		{
			name: "unknown key in a location", old: "theta_deg: 180,", new: "theta: 180,",
			field: "locations.dock.theta", allowed: "x, y, theta_deg, description",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Given the shipped config with one value broken
			src := strings.Replace(string(good), tt.old, tt.new, 1)
			require.NotEqual(t, string(good), src, "the replacement must apply")

			// When it is parsed
			c, err := Parse([]byte(src))

			// Then the decode error names the YAML path and what is allowed
			require.Nil(t, c)
			fe := requireProblem(t, err, tt.field, tt.allowed)
			require.Positive(t, fe.Line)
			if tt.message != "" {
				require.Contains(t, err.Error(), tt.message)
			}
		})
	}
}

func TestParse_UnknownKeySuggestsTheClosestName(t *testing.T) {
	// Given a typo in a key
	_, err := Load("testdata/bad/unknown-key-in-joint.yaml")
	require.Error(t, err)
	good, rerr := os.ReadFile(shippedConfig)
	require.NoError(t, rerr)
	src := strings.Replace(string(good), "max_angular_speed:", "max_angulra_speed:", 1)

	// When it is parsed
	_, err = Parse([]byte(src))

	// Then the error suggests the right key
	require.ErrorContains(t, err, `unknown field "max_angulra_speed" (did you mean max_angular_speed?)`)
}

func TestParse_RejectsDocumentsThatAreNotAConfig(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"empty", "", "config is empty"},
		{"only a comment", "# nothing here\n", "config is empty"},
		{"a scalar", "42\n", "mapping"},
		{"a list", "- robot: {id: x}\n", "mapping"},
		{"broken YAML", "robot: {id: [\n", "YAML syntax error"},
		{"too large", "robot: {id: x}\n" + strings.Repeat("#", MaxConfigSize), "at most"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// When a non-config is parsed
			c, err := Parse([]byte(tt.src))

			// Then it is refused with a clear error, never a panic
			require.Nil(t, c)
			require.ErrorIs(t, err, ErrInvalid)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestLoad_MissingFileIsNotInvalid(t *testing.T) {
	// Given a path that does not exist
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))

	// Then the error is about reading, so a caller can tell it apart
	require.ErrorIs(t, err, os.ErrNotExist)
	require.NotErrorIs(t, err, ErrInvalid)
}

func TestParse_ValidationProblemsCarryLines(t *testing.T) {
	// Given the shipped config with a bad joint limit and a missing stall timeout
	good, err := os.ReadFile(shippedConfig)
	require.NoError(t, err)
	src := strings.Replace(string(good), "min: -0.6, max: 1.6", "min: 2.0, max: 1.6", 1)
	src = strings.Replace(src, "  stall_timeout: 3s\n", "", 1)

	// When it is parsed
	_, err = Parse([]byte(src))

	// Then both problems are reported, each with the line of the field (or
	// of its enclosing section when the field is absent)
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	lines := strings.Split(src, "\n")
	jmin := ve.Field("arm.joints[1].min")
	require.NotNil(t, jmin)
	require.Contains(t, lines[jmin.Line-1], "min: 2.0")
	stall := ve.Field("safety.stall_timeout")
	require.NotNil(t, stall)
	require.Equal(t, "safety:", lines[stall.Line-1])
}

func TestDecode_DoesNotApplyDefaultsOrValidate(t *testing.T) {
	// Given a config that leaves optional keys out
	b, err := os.ReadFile("testdata/good/sim-manipulator-defaults.yaml")
	require.NoError(t, err)

	// When it is only decoded
	c, err := Decode(b)

	// Then it is as written
	require.NoError(t, err)
	require.Zero(t, c.Base.GoalTolerance)
	require.Zero(t, c.Safety.ControlPeriod)
}

func TestParse_GoodConfigsRoundTripThroughYAML(t *testing.T) {
	files, err := filepath.Glob("testdata/good/*.yaml")
	require.NoError(t, err)
	files = append(files, shippedConfig)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			// Given a loaded config
			c, err := Load(f)
			require.NoError(t, err)

			// When it is written back as YAML and parsed again
			out, err := yaml.Marshal(c)
			require.NoError(t, err)
			again, err := Parse(out)

			// Then nothing changed: the written form is a faithful config
			require.NoError(t, err, "%s", out)
			require.Equal(t, c, again)
		})
	}
}

// mapKeys returns a map's keys.
func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func BenchmarkParse_ShippedConfig(b *testing.B) {
	src, err := os.ReadFile(shippedConfig)
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(src); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidate_ShippedConfig(b *testing.B) {
	c, err := Load(shippedConfig)
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}
