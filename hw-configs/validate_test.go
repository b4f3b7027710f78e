package hwconfig

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// loadShipped returns a fresh, valid copy of the shipped config.
func loadShipped(t *testing.T) *Config {
	t.Helper()
	c, err := Load(shippedConfig)
	require.NoError(t, err)
	return c
}

// loadBaseOnly returns a fresh, valid base-only config.
func loadBaseOnly(t *testing.T) *Config {
	t.Helper()
	c, err := Load("testdata/good/base-only-ros.yaml")
	require.NoError(t, err)
	return c
}

func TestValidate_RejectsEachDefect(t *testing.T) {
	// Cases that are awkward to write as YAML, or that guard checks the
	// fixtures do not reach, built by breaking one field of a good config.
	tests := []struct {
		name      string
		baseOnly  bool
		mutate    func(c *Config)
		field     string
		allowedIn string
	}{
		{"nan inside a pose", false, func(c *Config) { c.Poses["ready"]["elbow"] = math.NaN() }, "poses.ready.elbow", "finite"},
		{"inf in a workspace point", false, func(c *Config) { c.Base.Workspace[2][0] = math.Inf(1) }, "base.workspace[2][0]", "finite"},
		{"nan in camera intrinsics", false, func(c *Config) { c.Camera.Fy = math.NaN() }, "camera.fy", "finite"},
		{"nan joint limit", false, func(c *Config) { c.Arm.Joints[2].Max = math.NaN() }, "arm.joints[2].max", "finite"},
		{"negative state timeout", false, func(c *Config) { c.Safety.StateTimeout = Duration(-time.Second) }, "safety.state_timeout", "positive duration"},
		{"missing approval ttl", false, func(c *Config) { c.Safety.ApprovalTTL = 0 }, "safety.approval_ttl", "positive duration"},
		{"negative sim command timeout", false, func(c *Config) { c.Sim.CommandTimeout = Duration(-1) }, "sim.command_timeout", "positive duration"},
		{"missing robot id", false, func(c *Config) { c.Robot.ID = "" }, "robot.id", "lowercase"},
		{"missing transport kind", false, func(c *Config) { c.Transport.Kind = "" }, "transport.kind", "sim, ros, mqtt"},
		{"transport kind set in code", false, func(c *Config) { c.Transport.Kind = "can" }, "transport.kind", "sim, ros, mqtt"},
		{"mqtt section missing", false, func(c *Config) { c.Transport.Kind = TransportMQTT }, "transport.mqtt", "an mqtt section"},
		{"bad mqtt broker", false, func(c *Config) {
			c.Transport.MQTT = &MQTTConf{Broker: "http://x", TopicPrefix: "robots"}
		}, "transport.mqtt.broker", "tcp://127.0.0.1:1883"},
		{"mqtt wildcard in prefix", false, func(c *Config) {
			c.Transport.MQTT = &MQTTConf{TopicPrefix: "robots/#"}
		}, "transport.mqtt.topic_prefix", "without '+', '#'"},
		{"bad ros topic", true, func(c *Config) { c.Transport.ROS.OdomTopic = "odom topic" }, "transport.ros.odom_topic", "ROS graph name"},
		{"bad ros base mode", true, func(c *Config) { c.Transport.ROS.BaseMode = "teleport" }, "transport.ros.base_mode", "move_base, cmd_vel"},
		{"bad ros master uri", true, func(c *Config) { c.Transport.ROS.MasterURI = "localhost:11311" }, "transport.ros.master_uri", "http://127.0.0.1:11311"},
		{"bad ros node name", true, func(c *Config) { c.Transport.ROS.NodeName = "a/b" }, "transport.ros.node_name", "letters, digits"},
		{"zero linear accel", false, func(c *Config) { c.Base.MaxLinearAccel = 0 }, "base.max_linear_accel", "> 0"},
		{"yaw tolerance too large", false, func(c *Config) { c.Base.YawToleranceDeg = 270 }, "base.yaw_tolerance_deg", "(0, 180]"},
		{"repeated closing point", false, func(c *Config) {
			c.Base.Workspace = append(c.Base.Workspace, c.Base.Workspace[0])
		}, "base.workspace", "distinct"},
		{"collinear workspace", false, func(c *Config) {
			c.Base.Workspace = []Point2{{0, 0}, {1, 0}, {2, 0}}
		}, "base.workspace", "simple outline"},
		{"huge polygon", false, func(c *Config) {
			c.World.Bounds = make([]Point2, MaxPolygonPoints+1)
		}, "world.bounds", "at most 256 points"},
		{"missing world bounds", false, func(c *Config) { c.World.Bounds = nil }, "world.bounds", "at least 3"},
		{"surface outside the room", false, func(c *Config) {
			c.World.Surfaces[0].Polygon = []Point2{{4, 4}, {6, 4}, {6, 6}, {4, 6}}
		}, "world.surfaces[0].polygon", "inside world.bounds"},
		{"duplicate region name", false, func(c *Config) { c.World.Regions[1].Name = "dock" }, "world.regions[1].name", "unique"},
		{"empty joint name", false, func(c *Config) { c.Arm.Joints[0].Name = "" }, "arm.joints[0].name", "unique, non-empty"},
		{"equal joint limits", false, func(c *Config) { c.Arm.Joints[3].Min = c.Arm.Joints[3].Max }, "arm.joints[3].min", "min < max"},
		{"negative link length", false, func(c *Config) { c.Arm.LinkLengths[1] = -0.35 }, "arm.link_lengths[1]", "> 0 m"},
		{"reach beyond the links", false, func(c *Config) { c.Arm.Reach = 2 }, "arm.reach", "(0, 0.87]"},
		{"no joints", false, func(c *Config) { c.Arm.Joints = nil }, "arm.joints", "at least one joint"},
		{"zero gripper opening", false, func(c *Config) { c.Gripper.MaxOpening = 0 }, "gripper.max_opening", "> 0 m"},
		{"location with a bad name", false, func(c *Config) { c.Locations["Kitchen Table"] = Location{} }, "locations.Kitchen Table", "lowercase"},
		{"location theta out of range", false, func(c *Config) {
			l := c.Locations["home"]
			l.ThetaDeg = 720
			c.Locations["home"] = l
		}, "locations.home.theta_deg", "[-360, 360]"},
		{"poses on a base-only robot", true, func(c *Config) { c.Poses = map[string]ArmPose{"x": {}} }, "poses", "no poses"},
		{"safe arm pose on a base-only robot", true, func(c *Config) { c.SafePose.Arm = "stowed" }, "safe_pose.arm", "empty"},
		{"safe pose missing timeout", false, func(c *Config) { c.SafePose.Timeout = 0 }, "safe_pose.timeout", "positive duration"},
		{"safe pose gripper drops", false, func(c *Config) { c.SafePose.Gripper = "drop" }, "safe_pose.gripper", "hold, open"},
		{"missing safe pose base", false, func(c *Config) { c.SafePose.Base = "" }, "safe_pose.base", "stop"},
		{"camera pitch beyond vertical", false, func(c *Config) { c.Camera.PitchDeg = 120 }, "camera.pitch_deg", "[-90, 90]"},
		{"camera below the floor", false, func(c *Config) { c.Camera.Mount.Z = -0.1 }, "camera.mount.z", ">= 0"},
		{"principal point below the image", false, func(c *Config) { c.Camera.Cy = -1 }, "camera.cy", "[0, 480]"},
		{"missing approval", false, func(c *Config) { c.Actions[ToolGrasp] = ActionConf{} }, "actions.grasp.approval", "required, never"},
		{"grasp without a gripper", false, func(c *Config) { c.Gripper = nil }, "actions.grasp", "move_base_to, move_arm_to, return_to_safe_pose"},
		{"stale after missing with a camera", false, func(c *Config) { c.Perception.StaleAfter = 0 }, "perception.stale_after", "positive duration"},
		{"forget before stale", false, func(c *Config) { c.Perception.ForgetAfter = Duration(time.Second) }, "perception.forget_after", ">= perception.stale_after"},
		{"nms iou zero after defaults", false, func(c *Config) { c.Perception.NMSIoU = -0.1 }, "perception.nms_iou", "(0, 1]"},
		{"negative max objects", false, func(c *Config) { c.Perception.MaxObjects = -1 }, "perception.max_objects", "> 0"},
		{"state faster than physics", false, func(c *Config) { c.Sim.StateHz = 500 }, "sim.state_hz", "at most sim.physics_hz"},
		{"battery above full", false, func(c *Config) { c.Sim.Battery = 120 }, "sim.battery", "(0, 100]"},
		{"false positive rate above one", false, func(c *Config) { c.Sim.FalsePositiveRate = 2 }, "sim.false_positive_rate", "[0, 1]"},
		{"negative detection noise", false, func(c *Config) { c.Sim.DetectionNoisePx = -1 }, "sim.detection_noise_px", ">= 0"},
		{"sim start in the keep-out", false, func(c *Config) { c.Sim.Start = Location{X: 4, Y: -4} }, "sim.start", "outside every keep-out region"},
		{"sim start outside the workspace", false, func(c *Config) { c.Sim.Start = Location{X: 4.8, Y: 0} }, "sim.start", "inside base.workspace"},
		{"object without a label", false, func(c *Config) { c.Sim.Objects[0].Label = "" }, "sim.objects[0].label", "class name"},
		{"object below the floor", false, func(c *Config) { c.Sim.Objects[0].Z = -1 }, "sim.objects[0].z", ">= 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Given a valid config with one field broken
			c := loadShipped(t)
			if tt.baseOnly {
				c = loadBaseOnly(t)
			}
			tt.mutate(c)

			// When it is validated
			err := c.Validate()

			// Then the problem names the field and what is allowed
			_ = requireProblem(t, err, tt.field, tt.allowedIn)
		})
	}
}

func TestValidate_ReportsEveryProblemAtOnce(t *testing.T) {
	// Given a config with three unrelated defects
	c := loadShipped(t)
	c.Robot.ID = "Bad ID"
	c.Arm.Joints[1].Min = 5
	c.Actions[ToolStop] = ActionConf{Approval: ApprovalRequired}

	// When it is validated
	err := c.Validate()

	// Then all three are reported, in config order
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	var fields []string
	for _, p := range ve.Problems {
		fields = append(fields, p.Field)
	}
	require.Equal(t, []string{"robot.id", "arm.joints[1].min", "actions.stop.approval"}, fields)
	require.Contains(t, err.Error(), "hw-config has 3 problems:")
}

func TestValidate_OneProblemPerField(t *testing.T) {
	// Given a value that several checks would object to (NaN is neither
	// positive nor finite)
	c := loadShipped(t)
	c.Base.MaxLinearSpeed = math.NaN()

	// When it is validated
	err := c.Validate()

	// Then the field is reported once
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	require.Len(t, ve.Problems, 1, "%v", err)
}

func TestValidate_ErrorsAreTyped(t *testing.T) {
	// Given an invalid config
	c := loadShipped(t)
	c.SafePose.Timeout = Duration(-time.Second)

	// When it is validated
	err := c.Validate()

	// Then callers can branch with errors.Is and errors.As
	require.ErrorIs(t, err, ErrInvalid)
	var fe *FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "safe_pose.timeout", fe.Field)
	require.Equal(t, "-1s", fe.Value)
	require.Equal(t, "safe_pose.timeout: -1s is negative (allowed: a positive duration like 500ms or 2s)", fe.Error())
}

func TestValidate_NilConfig(t *testing.T) {
	var c *Config
	require.ErrorIs(t, c.Validate(), ErrInvalid)
}

func TestValidate_NonConvexBoundsAndWorkspace(t *testing.T) {
	tests := []struct {
		name      string
		workspace []Point2
		ok        bool
	}{
		{"workspace inside the L", []Point2{{0, 0}, {20, 0}, {20, 3}, {3, 3}, {3, 15}, {0, 15}}, true},
		{"workspace cutting the inner corner", []Point2{{0, 0}, {20, 0}, {20, 3}, {0, 15}}, false},
		{"workspace touching the walls", []Point2{{-0.5, -0.5}, {20.5, -0.5}, {20.5, 3.5}, {3.5, 3.5}, {3.5, 15.5}, {-0.5, 15.5}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Given an L-shaped room and a workspace
			c := loadBaseOnly(t)
			c.Base.Workspace = tt.workspace

			// When it is validated
			err := c.Validate()

			// Then only a workspace that stays in the room is accepted
			if tt.ok {
				require.NoError(t, err)
				return
			}
			_ = requireProblem(t, err, "base.workspace", "inside world.bounds")
		})
	}
}

func TestValidate_LocationsLeaveRoomForTheFootprint(t *testing.T) {
	// The base is a disc of base.radius (0.3 m in the shipped config): a
	// named location or start pose whose centre is inside the workspace
	// but whose footprint is not is refused at load time, naming the
	// location, the obstacle and the nearest point where the base fits.
	at := func(name string, x, y float64) func(c *Config) {
		return func(c *Config) {
			l := c.Locations[name]
			l.X, l.Y = x, y
			c.Locations[name] = l
		}
	}
	tests := []struct {
		name      string
		mutate    func(c *Config)
		field     string
		allowedIn string
		problem   string
	}{
		{"table location overlapping the table", at("table", 1.7, 1.0), "locations.table", "from every surface", `0.2 m from surface "table", so the base's footprint (radius 0.3 m) overlaps it; the nearest point where it fits is (1.598, 1.000)`},
		{"table location on the table", at("table", 2.5, 1.0), "locations.table", "from every surface", `inside surface "table"`},
		{"dock footprint over the workspace edge", at("dock", -4.4, -4.0), "locations.dock", "inside base.workspace", "from the workspace edge, so the base's footprint (radius 0.3 m) leaves it; the nearest point where it fits is (-4.198, -4.000)"},
		{"home next to the stairs", at("home", 3.45, -4.0), "locations.home", "outside every keep-out region by at least", `0.15 m from keep-out region "stairs"`},
		{"a larger base no longer fits at the dock", func(c *Config) { c.Base.Radius = 0.6 }, "locations.dock", "at least base.radius (0.6 m) inside base.workspace", "leaves it"},
		{"sim start against the table", func(c *Config) { c.Sim.Start = Location{X: 2.5, Y: 0.3} }, "sim.start", "from every surface", `surface "table"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Given the shipped config with one base position moved
			c := loadShipped(t)
			tt.mutate(c)

			// When it is validated
			err := c.Validate()

			// Then the position is refused, naming what it overlaps
			fe := requireProblem(t, err, tt.field, tt.allowedIn)
			require.Contains(t, fe.Problem, tt.problem)
		})
	}
}

func TestValidate_LocationOneRadiusFromAnObstacleIsAccepted(t *testing.T) {
	// Given locations exactly one base radius from the table, the stairs
	// and the workspace edge (touching is allowed)
	c := loadShipped(t)
	c.Locations["table"] = Location{X: 1.6, Y: 1.0}
	c.Locations["stairs_top"] = Location{X: 4.0, Y: -2.7}
	c.Locations["east_wall"] = Location{X: 4.2, Y: 0}

	// When it is validated
	// Then it is accepted
	require.NoError(t, c.Validate())
}
