package hwconfig

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/robot-bridge/robot-bridge/geom"
)

// Limits on config sizes. They are far above any real robot and keep the
// quadratic polygon checks cheap on hostile input.
const (
	// MaxPolygonPoints bounds every polygon in the config.
	MaxPolygonPoints = 256
	// MaxClassLabels bounds transport.ros.class_labels.
	MaxClassLabels = 1024
)

var (
	roomPattern        = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}$`)
	robotIDPattern     = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	namePattern        = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)
	rosNamePattern     = regexp.MustCompile(`^[~/]?[A-Za-z][A-Za-z0-9_]*(/[A-Za-z][A-Za-z0-9_]*)*$`)
	rosBaseNamePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)
	framePattern       = regexp.MustCompile(`^/?[A-Za-z][A-Za-z0-9_]*(/[A-Za-z][A-Za-z0-9_]*)*$`)
	mqttLevelPattern   = regexp.MustCompile(`^[^+#/\s\x00]+$`)
)

const (
	robotIDAllowed = "1-63 characters: lowercase letters, digits, '-' and '_', starting with a letter or digit"
	nameAllowed    = "1-63 characters: lowercase letters, digits, '-' and '_', starting with a letter"
	rosNameAllowed = "a ROS graph name: letters, digits, '_' and '/', each part starting with a letter"
	polyAllowed    = "at least 3 distinct [x, y] points in order around a simple outline"
)

// Validate checks the whole config and returns every problem found, as a
// *ValidationError whose entries are *FieldError naming the YAML path and
// the allowed values. It expects defaults to have been applied (Parse does
// both); on a config built in code call ApplyDefaults first.
func (c *Config) Validate() error {
	if c == nil {
		return &ValidationError{Problems: []*FieldError{{Problem: "config is missing"}}}
	}
	v := &validator{c: c}
	v.finiteAndDurations(reflect.ValueOf(c).Elem(), "")
	v.robot()
	v.transport()
	v.world()
	v.base()
	v.arm()
	v.gripper()
	v.locations()
	v.poses()
	v.safePose()
	v.camera()
	v.actions()
	v.safety()
	v.perception()
	v.sim()
	v.fleet()
	return v.p.err()
}

// validator holds one Validate run.
type validator struct {
	c *Config
	p problems
	// bounds and workspace are set once their polygons are known good, so
	// containment checks never run against a broken polygon.
	bounds, workspace geom.Polygon
	// fp is the base's footprint among the obstacles, built on first use
	// by footprint(); fpNames names its obstacles.
	fp      *geom.Footprint
	fpNames []placeName
}

// finiteAndDurations walks every field: NaN or ±Inf anywhere numeric is
// refused (a NaN limit makes every comparison false, which would let any
// target through), and so is a negative duration.
func (v *validator) finiteAndDurations(rv reflect.Value, path string) {
	if rv.Type() == reflect.TypeFor[Duration]() {
		if d := Duration(rv.Int()); d < 0 {
			v.p.add(path, d.String(), "a positive duration like 500ms or 2s", "%s is negative", d)
		}
		return
	}
	switch rv.Kind() {
	case reflect.Float32, reflect.Float64:
		if f := rv.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			v.p.add(path, f, "a finite number", "%v is not a finite number", f)
		}
	case reflect.Pointer:
		if !rv.IsNil() {
			v.finiteAndDurations(rv.Elem(), path)
		}
	case reflect.Struct:
		for i := range rv.NumField() {
			if name := yamlName(rv.Type().Field(i)); name != "" {
				v.finiteAndDurations(rv.Field(i), join(path, name))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range rv.Len() {
			v.finiteAndDurations(rv.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		keys := rv.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			v.finiteAndDurations(rv.MapIndex(k), join(path, k.String()))
		}
	}
}

// join appends a key to a YAML path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// finite reports whether every value is a finite number.
func finite(xs ...float64) bool {
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

// positive requires x > 0; unit goes into the allowed text.
func (v *validator) positive(field string, x float64, unit string) {
	if x > 0 || !finite(x) {
		return // NaN/Inf already reported
	}
	allowed := "> 0"
	if unit != "" {
		allowed += " " + unit
	}
	if x == 0 {
		v.p.add(field, x, allowed, "is missing or 0")
		return
	}
	v.p.add(field, x, allowed, "%g is not positive", x)
}

// inRange requires lo ≤ x ≤ hi (or lo < x when openLo).
func (v *validator) inRange(field string, x, lo, hi float64, openLo bool, unit string) {
	if !finite(x) {
		return
	}
	ok := x <= hi && (x > lo || (!openLo && x == lo))
	if ok {
		return
	}
	br := "["
	if openLo {
		br = "("
	}
	allowed := fmt.Sprintf("%s%g, %g]", br, lo, hi)
	if unit != "" {
		allowed += " " + unit
	}
	v.p.add(field, x, allowed, "%g is out of range", x)
}

// requiredDuration requires d > 0 (negatives are reported by the walk).
func (v *validator) requiredDuration(field string, d Duration) {
	if d == 0 {
		v.p.add(field, nil, "a positive duration like 500ms or 2s", "is missing")
	}
}

func (v *validator) robot() {
	id := v.c.Robot.ID
	switch {
	case id == "":
		v.p.add("robot.id", nil, robotIDAllowed, "is missing")
	case !robotIDPattern.MatchString(id):
		v.p.add("robot.id", id, robotIDAllowed, "%q is not a valid robot id (it becomes part of MQTT topics and ROS names)", id)
	}
}

func (v *validator) transport() {
	t := v.c.Transport
	switch t.Kind {
	case "":
		v.p.add("transport.kind", nil, joinStrings(Transports), "is missing")
	case TransportSim:
		// The sim section is checked by sim().
	case TransportROS:
		if t.ROS == nil {
			v.p.add("transport.ros", nil, "a ros section (its keys are optional; write ros: {} for all defaults)",
				"is missing; transport.kind ros needs it")
		}
	case TransportMQTT:
		if t.MQTT == nil {
			v.p.add("transport.mqtt", nil, "an mqtt section (its keys are optional; write mqtt: {} for the embedded broker)",
				"is missing; transport.kind mqtt needs it")
		}
	default:
		v.p.add("transport.kind", string(t.Kind), joinStrings(Transports), "unknown transport %q", string(t.Kind))
	}
	if r := t.ROS; r != nil {
		v.ros(r)
	}
	if m := t.MQTT; m != nil {
		v.mqtt(m)
	}
}

func (v *validator) ros(r *ROSConf) {
	const p = "transport.ros."
	if r.MasterURI != "" {
		u, err := url.Parse(r.MasterURI)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.p.add(p+"master_uri", r.MasterURI, "an http URL like http://127.0.0.1:11311, or empty for ROS_MASTER_URI",
				"%q is not a ROS master URL", r.MasterURI)
		}
	}
	if r.NodeName != "" && !rosBaseNamePattern.MatchString(r.NodeName) {
		v.p.add(p+"node_name", r.NodeName, "letters, digits and '_', starting with a letter", "%q is not a ROS node name", r.NodeName)
	}
	if r.BaseMode != "" && r.BaseMode != BaseModeMoveBase && r.BaseMode != BaseModeCmdVel {
		v.p.add(p+"base_mode", r.BaseMode, BaseModeMoveBase+", "+BaseModeCmdVel, "unknown base mode %q", r.BaseMode)
	}
	names := []struct{ key, val string }{
		{"odom_topic", r.OdomTopic},
		{"joint_states_topic", r.JointStatesTopic},
		{"battery_topic", r.BatteryTopic},
		{"detections_topic", r.DetectionsTopic},
		{"estop_topic", r.EStopTopic},
		{"cmd_vel_topic", r.CmdVelTopic},
		{"move_base_action", r.MoveBaseAction},
		{"arm_action", r.ArmAction},
		{"gripper_action", r.GripperAction},
		{"heartbeat_topic", r.HeartbeatTopic},
	}
	for _, n := range names {
		if n.val != "" && n.val != TopicNone && !rosNamePattern.MatchString(n.val) {
			v.p.add(p+n.key, n.val, rosNameAllowed, "%q is not a valid ROS name", n.val)
		}
	}
	v.rosNone(r)
	if r.GripperJoint != "" && strings.ContainsAny(r.GripperJoint, " \t\n") {
		v.p.add(p+"gripper_joint", r.GripperJoint, "a joint name without spaces", "%q contains whitespace", r.GripperJoint)
	}
	if r.Frame != "" && !framePattern.MatchString(r.Frame) {
		v.p.add(p+"frame", r.Frame, "a tf frame id like map or odom", "%q is not a valid frame id", r.Frame)
	}
	v.classLabels(r.ClassLabels)
}

// rosNone refuses "none" where the robot cannot do without the
// interface: odometry is every robot's state, the bridge's stop goes out on
// cmd_vel, a move_base robot needs its action, an arm its joint states and
// a camera its detections. Battery and e-stop may be none.
func (v *validator) rosNone(r *ROSConf) {
	const p = "transport.ros."
	required := []struct {
		key, val, why, allowed string
		need                   bool
	}{
		{"odom_topic", r.OdomTopic, "odometry is the robot's pose and velocity, which every motion is checked against", "the nav_msgs/Odometry topic, e.g. odom", true},
		{"cmd_vel_topic", r.CmdVelTopic, "the bridge publishes its zero-velocity stop there (and drives there in cmd_vel mode)", "the geometry_msgs/Twist topic, e.g. cmd_vel", true},
		{"move_base_action", r.MoveBaseAction, "base_mode move_base sends every base goal to it", "the move_base_msgs/MoveBase action, e.g. move_base, or base_mode: cmd_vel", r.BaseMode != BaseModeCmdVel},
		{"joint_states_topic", r.JointStatesTopic, "the arm's joint positions come from it", "the sensor_msgs/JointState topic, e.g. joint_states", v.c.HasArm()},
		{"detections_topic", r.DetectionsTopic, "the camera's detections come from it", "the vision_msgs/Detection2DArray topic, e.g. detections, or no camera section", v.c.HasCamera()},
	}
	for _, q := range required {
		if q.need && q.val == TopicNone {
			v.p.add(p+q.key, q.val, q.allowed, "cannot be none: %s", q.why)
		}
	}
}

// classLabels checks transport.ros.class_labels: the list is the label
// database of detection class ids, so every entry must be a usable,
// distinct name, and it only means something on a robot with a camera.
func (v *validator) classLabels(labels []string) {
	const p = "transport.ros.class_labels"
	const allowed = "a list of distinct, non-empty labels without commas, class id i naming entry i"
	if len(labels) == 0 {
		return
	}
	if v.c.Camera == nil {
		v.p.add(p, labels, "class_labels only with a camera section", "names detection classes, but the robot has no camera")
		return
	}
	if len(labels) > MaxClassLabels {
		v.p.add(p, len(labels), fmt.Sprintf("at most %d labels", MaxClassLabels), "has %d labels", len(labels))
		return
	}
	seen := make(map[string]int, len(labels))
	for i, l := range labels {
		f := fmt.Sprintf("%s[%d]", p, i)
		switch {
		case strings.TrimSpace(l) == "":
			v.p.add(f, l, allowed, "is empty")
		case strings.TrimSpace(l) != l || strings.ContainsAny(l, ",\n\t"):
			v.p.add(f, l, allowed, "%q has surrounding spaces, a comma or a line break (the labels also travel as a comma-separated ROS parameter)", l)
		default:
			if j, dup := seen[l]; dup {
				v.p.add(f, l, allowed, "%q repeats class_labels[%d]", l, j)
			}
			seen[l] = i
		}
	}
}

func (v *validator) mqtt(m *MQTTConf) {
	const p = "transport.mqtt."
	if m.Broker != "" {
		schemes := []string{"tcp", "ssl", "tls", "mqtt", "mqtts", "ws", "wss"}
		u, err := url.Parse(m.Broker)
		if err != nil || !slices.Contains(schemes, u.Scheme) || u.Host == "" {
			v.p.add(p+"broker", m.Broker, "a URL like tcp://127.0.0.1:1883 (schemes "+strings.Join(schemes, ", ")+"), or empty for the embedded broker",
				"%q is not a broker URL", m.Broker)
		}
	}
	if m.Listen != "" {
		host, port, err := net.SplitHostPort(m.Listen)
		ip := net.ParseIP(host)
		switch {
		case m.Broker != "":
			v.p.add(p+"listen", m.Listen, "empty when broker is set (listen is the embedded broker's address)",
				"is set together with broker %q", m.Broker)
		case err != nil || port == "" || (ip == nil && host != "localhost") || (ip != nil && !ip.IsLoopback()):
			v.p.add(p+"listen", m.Listen, "a loopback host:port like 127.0.0.1:1883 (the embedded broker has no authentication)",
				"%q is not a loopback address", m.Listen)
		}
	}
	if m.PasswordEnv != "" && m.PasswordFile != "" {
		v.p.add(p+"password_file", m.PasswordFile, "password_env or password_file, not both", "is set together with password_env")
	}
	if (m.PasswordEnv != "" || m.PasswordFile != "") && m.Username == "" {
		v.p.add(p+"username", nil, "a username whenever a password is configured", "is missing")
	}
	if (m.CertFile == "") != (m.KeyFile == "") {
		v.p.add(p+"key_file", m.KeyFile, "cert_file and key_file both set, or both empty", "cert_file and key_file must come together")
	}
	if m.QoS != 0 && m.QoS != 1 && m.QoS != 2 {
		v.p.add(p+"qos", m.QoS, "1 or 2 (commands must arrive at least once)", "%d is not an allowed QoS", m.QoS)
	}
	if m.AckTimeout.D() > 0 && m.AckTimeout.D() < 10*time.Millisecond {
		v.p.add(p+"ack_timeout", m.AckTimeout.String(), "at least 10ms", "%s is too short for any network", m.AckTimeout.String())
	}
	if m.KeepAlive.D() > 0 && m.KeepAlive.D() < time.Second {
		v.p.add(p+"keepalive", m.KeepAlive.String(), "at least 1s (MQTT counts keepalive in whole seconds)", "%s is below one second", m.KeepAlive.String())
	}
	if m.ReconnectMax.D() > 0 && m.ReconnectMax.D() < time.Second {
		v.p.add(p+"reconnect_max", m.ReconnectMax.String(), "at least 1s (the backoff starts at 1s)", "%s is below one second", m.ReconnectMax.String())
	}
	if m.TopicPrefix != "" {
		for level := range strings.SplitSeq(m.TopicPrefix, "/") {
			if !mqttLevelPattern.MatchString(level) {
				v.p.add(p+"topic_prefix", m.TopicPrefix, "topic levels separated by '/', without '+', '#', spaces or empty levels",
					"%q is not a valid topic prefix", m.TopicPrefix)
				break
			}
		}
	}
}

// polygon checks a polygon's shape and reports whether it is usable for
// containment checks.
func (v *validator) polygon(field string, pts []Point2) bool {
	switch {
	case len(pts) == 0:
		v.p.add(field, nil, polyAllowed, "is missing")
		return false
	case len(pts) < 3:
		v.p.add(field, len(pts), polyAllowed, "has %d points", len(pts))
		return false
	case len(pts) > MaxPolygonPoints:
		v.p.add(field, len(pts), fmt.Sprintf("at most %d points", MaxPolygonPoints), "has %d points", len(pts))
		return false
	}
	for _, p := range pts {
		if !finite(p[0], p[1]) {
			return false // reported by the walk, with the exact point
		}
	}
	poly := toPolygon(pts)
	n := len(poly)
	for i := range n {
		if j := (i + 1) % n; poly[i] == poly[j] {
			v.p.add(field, pts, polyAllowed,
				"points %d and %d are the same (the polygon closes itself; do not repeat the first point)", i, j)
			return false
		}
	}
	for i := range n {
		for j := i + 2; j < n; j++ {
			if i == 0 && j == n-1 {
				continue // adjacent through the closing edge
			}
			if geom.SegmentIntersects(poly[i], poly[(i+1)%n], poly[j], poly[(j+1)%n]) {
				v.p.add(field, pts, polyAllowed,
					"edges %d and %d cross; the points must go around the outline in order", i, j)
				return false
			}
		}
	}
	if area(poly) < 1e-6 {
		v.p.add(field, pts, polyAllowed, "encloses no area (its points are on one line)")
		return false
	}
	return true
}

// area returns a polygon's unsigned area (shoelace formula).
func area(p geom.Polygon) float64 {
	s := 0.0
	for i, j := 0, len(p)-1; i < len(p); j, i = i, i+1 {
		s += p[j].X*p[i].Y - p[i].X*p[j].Y
	}
	return math.Abs(s) / 2
}

// polygonInside reports whether inner lies within outer (boundaries may
// touch): every vertex and edge midpoint of inner is in outer and no edges
// cross properly. Both must be simple polygons.
func polygonInside(inner, outer geom.Polygon) bool {
	for i, a := range inner {
		b := inner[(i+1)%len(inner)]
		mid := geom.Point{X: (a.X + b.X) / 2, Y: (a.Y + b.Y) / 2}
		if !outer.Contains(a) || !outer.Contains(mid) {
			return false
		}
		for j, c := range outer {
			if properCross(a, b, c, outer[(j+1)%len(outer)]) {
				return false
			}
		}
	}
	return true
}

// properCross reports whether segments ab and cd cross at a point interior
// to both (touching does not count).
func properCross(a, b, c, d geom.Point) bool {
	o := func(p, q, r geom.Point) float64 { return (q.X-p.X)*(r.Y-p.Y) - (q.Y-p.Y)*(r.X-p.X) }
	d1, d2, d3, d4 := o(c, d, a), o(c, d, b), o(a, b, c), o(a, b, d)
	return ((d1 > 0 && d2 < 0) || (d1 < 0 && d2 > 0)) && ((d3 > 0 && d4 < 0) || (d3 < 0 && d4 > 0))
}

func (v *validator) world() {
	if r := v.c.World.Room; r != "" && !roomPattern.MatchString(r) {
		v.p.add("world.room", r, "1-64 characters: letters, digits, spaces, '.', '_' and '-', starting with a letter or digit", "is not a room name")
	}
	w := v.c.World
	if slices.Equal(w.Bounds, v.c.Base.Workspace) {
		// Bounds defaulted to (or repeat) the workspace: a broken polygon
		// is reported once, on base.workspace.
		quiet := &validator{c: v.c}
		if quiet.polygon("world.bounds", w.Bounds) {
			v.bounds = toPolygon(w.Bounds)
		}
	} else if v.polygon("world.bounds", w.Bounds) {
		v.bounds = toPolygon(w.Bounds)
	}
	seen := map[string]string{}
	for i, s := range w.Surfaces {
		f := fmt.Sprintf("world.surfaces[%d]", i)
		v.uniqueName(f+".name", s.Name, seen)
		if v.polygon(f+".polygon", s.Polygon) && v.bounds != nil && !polygonInside(s.Poly(), v.bounds) {
			v.p.add(f+".polygon", s.Polygon, "inside world.bounds: "+v.bounds.Describe(), "is not inside the room")
		}
		if finite(s.Height) && s.Height < 0 {
			v.p.add(f+".height", s.Height, ">= 0 m", "%g m is below the floor", s.Height)
		}
	}
	seen = map[string]string{}
	for i, r := range w.Regions {
		f := fmt.Sprintf("world.regions[%d]", i)
		v.uniqueName(f+".name", r.Name, seen)
		v.polygon(f+".polygon", r.Polygon)
	}
}

// uniqueName requires a non-empty name not seen before in the same list.
func (v *validator) uniqueName(field, name string, seen map[string]string) {
	switch {
	case name == "":
		v.p.add(field, nil, "a unique, non-empty name", "is missing")
	case seen[name] != "":
		v.p.add(field, name, "a unique, non-empty name", "%q is already used by %s", name, seen[name])
	default:
		seen[name] = field
	}
}

func (v *validator) base() {
	b := v.c.Base
	v.positive("base.max_linear_speed", b.MaxLinearSpeed, "m/s")
	v.positive("base.max_angular_speed", b.MaxAngularSpeed, "rad/s")
	v.positive("base.max_linear_accel", b.MaxLinearAccel, "m/s²")
	v.positive("base.max_angular_accel", b.MaxAngularAccel, "rad/s²")
	v.positive("base.goal_tolerance", b.GoalTolerance, "m")
	v.inRange("base.yaw_tolerance_deg", b.YawToleranceDeg, 0, 180, true, "degrees")
	v.positive("base.radius", b.Radius, "m")
	if !v.polygon("base.workspace", b.Workspace) {
		return
	}
	ws := toPolygon(b.Workspace)
	if v.bounds != nil && !polygonInside(ws, v.bounds) {
		v.p.add("base.workspace", b.Workspace, "inside world.bounds: "+v.bounds.Describe(), "is not inside the room")
		return
	}
	v.workspace = ws
}

func (v *validator) arm() {
	a := v.c.Arm
	if a == nil {
		return
	}
	if len(a.Joints) == 0 {
		v.p.add("arm.joints", nil, "at least one joint", "is missing")
	}
	seen := map[string]string{}
	for i, j := range a.Joints {
		f := fmt.Sprintf("arm.joints[%d]", i)
		v.uniqueName(f+".name", j.Name, seen)
		if finite(j.Min, j.Max) && !(j.Min < j.Max) {
			v.p.add(f+".min", j.Min, fmt.Sprintf("min < max (radians; max is %g)", j.Max),
				"min %g is not below max %g", j.Min, j.Max)
		}
		v.positive(f+".max_velocity", j.MaxVelocity, "rad/s")
	}
	if want := len(a.Joints) - 1; want >= 0 && len(a.LinkLengths) != want {
		v.p.add("arm.link_lengths", len(a.LinkLengths),
			fmt.Sprintf("%d lengths, one per joint after the first (yaw) joint", want),
			"has %d lengths for %d joints", len(a.LinkLengths), len(a.Joints))
	}
	sum := 0.0
	for i, l := range a.LinkLengths {
		v.positive(fmt.Sprintf("arm.link_lengths[%d]", i), l, "m")
		sum += l
	}
	if finite(a.Reach, sum) && sum > 0 && (a.Reach <= 0 || a.Reach > sum+1e-9) {
		v.p.add("arm.reach", a.Reach, fmt.Sprintf("(0, %g] m, the sum of the link lengths", sum),
			"%g m is more than the links can reach or not positive", a.Reach)
	}
}

func (v *validator) gripper() {
	g := v.c.Gripper
	if g == nil {
		return
	}
	if v.c.Arm == nil {
		v.p.add("gripper", nil, "a gripper only together with an arm section", "is set but the robot has no arm")
	}
	v.positive("gripper.max_opening", g.MaxOpening, "m")
	v.positive("gripper.max_force", g.MaxForce, "N")
	v.positive("gripper.grasp_tolerance", g.GraspTolerance, "m")
	if g.MaxForce > 0 {
		v.inRange("gripper.default_force", g.DefaultForce, 0, g.MaxForce, true, "N (at most gripper.max_force)")
	}
}

// place checks that the base's footprint, a disc of base.radius, fits at
// a base position: its centre inside the workspace and at least the
// radius from the workspace's edge, from every surface (tables, shelves)
// and from every keep-out region. A named location that fails this would
// only be refused later, on every move_base_to, so it is refused here,
// with the nearest point where the footprint fits.
func (v *validator) place(field string, x, y float64) {
	if v.workspace == nil || !finite(x, y) {
		return
	}
	fp, names := v.footprint()
	q := geom.Point{X: x, Y: y}
	c, who := fp.Clearance(q)
	if c >= -geom.Touch {
		return
	}
	r := fp.Radius
	near := ""
	if p, ok := fp.Nearest(q, 0.002); ok {
		near = fmt.Sprintf("; the nearest point where it fits is (%.3f, %.3f)", p.X, p.Y)
	}
	if who == geom.OutsideWorkspace || !fp.Workspace.Inside(q) {
		allowed := fmt.Sprintf("a centre at least base.radius (%g m) inside base.workspace: %s", r, v.workspace.Describe())
		if !fp.Workspace.Inside(q) {
			v.p.add(field, [2]float64{x, y}, allowed, "(%g, %g) is outside the workspace%s", x, y, near)
			return
		}
		v.p.add(field, [2]float64{x, y}, allowed,
			"(%g, %g) is %.3g m from the workspace edge, so the base's footprint (radius %g m) leaves it%s",
			x, y, fp.Workspace.Distance(q, math.Inf(1)), r, near)
		return
	}
	n := names[who]
	sh := fp.Obstacles[who]
	allowed := fmt.Sprintf("a point outside every keep-out region by at least base.radius (%g m)", r)
	kind := "keep-out region"
	if n.surface {
		allowed = fmt.Sprintf("a point at least base.radius (%g m) from every surface", r)
		kind = "surface"
	}
	if sh.Inside(q) {
		v.p.add(field, [2]float64{x, y}, allowed, "(%g, %g) is inside %s %q%s", x, y, kind, n.name, near)
		return
	}
	v.p.add(field, [2]float64{x, y}, allowed,
		"(%g, %g) is %.3g m from %s %q, so the base's footprint (radius %g m) overlaps it%s",
		x, y, sh.Distance(q, math.Inf(1)), kind, n.name, r, near)
}

// placeName names one obstacle of the validator's footprint.
type placeName struct {
	name    string
	surface bool
}

// footprint builds, once, the base's footprint among the config's
// obstacles: keep-out regions and surfaces whose polygons are usable (a
// broken one is reported on its own field).
func (v *validator) footprint() (*geom.Footprint, []placeName) {
	if v.fp != nil {
		return v.fp, v.fpNames
	}
	ws, err := geom.NewShape(v.workspace)
	if err != nil {
		ws = nil
	}
	r := v.c.Base.Radius
	if !finite(r) || r < 0 {
		r = 0 // reported on base.radius
	}
	v.fp = &geom.Footprint{Radius: r, Workspace: ws}
	add := func(field string, pts []Point2, n placeName) {
		if len(pts) < 3 || v.p.has(field) {
			return
		}
		sh, err := geom.NewShape(toPolygon(pts))
		if err != nil {
			return
		}
		v.fp.Obstacles = append(v.fp.Obstacles, sh)
		v.fpNames = append(v.fpNames, n)
	}
	for i, rg := range v.c.World.Regions {
		if rg.KeepOut {
			add(fmt.Sprintf("world.regions[%d].polygon", i), rg.Polygon, placeName{name: rg.Name})
		}
	}
	for i, sf := range v.c.World.Surfaces {
		add(fmt.Sprintf("world.surfaces[%d].polygon", i), sf.Polygon, placeName{name: sf.Name, surface: true})
	}
	return v.fp, v.fpNames
}

func (v *validator) locations() {
	for _, name := range sortedKeys(v.c.Locations) {
		l := v.c.Locations[name]
		f := "locations." + name
		if !namePattern.MatchString(name) {
			v.p.add(f, name, nameAllowed, "%q is not a valid location name", name)
			continue
		}
		v.inRange(f+".theta_deg", l.ThetaDeg, -360, 360, false, "degrees")
		if l.GoalTolerance != 0 {
			v.positive(f+".goal_tolerance", l.GoalTolerance, "m (or leave it out for base.goal_tolerance)")
		}
		if l.YawToleranceDeg != 0 {
			v.inRange(f+".yaw_tolerance_deg", l.YawToleranceDeg, 0, 180, true, "degrees (or leave it out for base.yaw_tolerance_deg)")
		}
		v.place(f, l.X, l.Y)
	}
}

func (v *validator) poses() {
	a := v.c.Arm
	if a == nil {
		if len(v.c.Poses) > 0 {
			v.p.add("poses", nil, "no poses on a robot without an arm", "are set but the robot has no arm")
		}
		return
	}
	names := v.c.JointNames()
	joints := map[string]JointConf{}
	for _, j := range a.Joints {
		if _, dup := joints[j.Name]; !dup { // a duplicate is reported once, on the joint
			joints[j.Name] = j
		}
	}
	for _, pname := range sortedKeys(v.c.Poses) {
		pose := v.c.Poses[pname]
		f := "poses." + pname
		if !namePattern.MatchString(pname) {
			v.p.add(f, pname, nameAllowed, "%q is not a valid pose name", pname)
			continue
		}
		var missing []string
		for _, n := range names {
			if _, ok := pose[n]; !ok && n != "" {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			v.p.add(f, nil, "every arm joint: "+strings.Join(names, ", "),
				"does not set joint(s) %s", strings.Join(missing, ", "))
		}
		for _, jn := range sortedKeys(pose) {
			val := pose[jn]
			j, ok := joints[jn]
			if !ok {
				problem := fmt.Sprintf("unknown joint %q", jn)
				if s := closest(jn, names); s != "" {
					problem += fmt.Sprintf(" (did you mean %s?)", s)
				}
				v.p.add(f+"."+jn, jn, "the joints of arm.joints: "+strings.Join(names, ", "), "%s", problem)
				continue
			}
			if finite(val, j.Min, j.Max) && j.Min < j.Max && (val < j.Min || val > j.Max) {
				v.p.add(f+"."+jn, val, fmt.Sprintf("[%g, %g] rad, the joint's limits", j.Min, j.Max),
					"%g rad is outside the joint's limits", val)
			}
		}
	}
}

func (v *validator) safePose() {
	s := v.c.SafePose
	poseNames := v.c.PoseNames()
	posesAllowed := "one of poses: " + strings.Join(poseNames, ", ")
	if len(poseNames) == 0 {
		posesAllowed = "the name of a pose defined under poses"
	}
	switch {
	case v.c.Arm != nil && s.Arm == "":
		v.p.add("safe_pose.arm", nil, posesAllowed, "is missing; a robot with an arm needs a safe arm pose to recover to")
	case v.c.Arm != nil:
		if _, ok := v.c.Poses[s.Arm]; !ok {
			v.p.add("safe_pose.arm", s.Arm, posesAllowed, "names unknown pose %q", s.Arm)
		}
	case s.Arm != "":
		v.p.add("safe_pose.arm", s.Arm, "empty on a robot without an arm", "is set but the robot has no arm")
	}
	switch s.Base {
	case "stop":
	case "":
		v.p.add("safe_pose.base", nil, "stop (a base never drives on its own after a failure)", "is missing")
	default:
		v.p.add("safe_pose.base", s.Base, "stop (a base never drives on its own after a failure)", "unknown value %q", s.Base)
	}
	if s.Gripper != "hold" && s.Gripper != "open" {
		v.p.add("safe_pose.gripper", s.Gripper, "hold, open", "unknown value %q", s.Gripper)
	}
	v.inRange("safe_pose.speed_scale", s.SpeedScale, 0, 1, true, "fraction of the speed limits")
	v.requiredDuration("safe_pose.timeout", s.Timeout)
}

func (v *validator) camera() {
	c := v.c.Camera
	if c == nil {
		return
	}
	if c.Width <= 0 {
		v.p.add("camera.width", c.Width, "> 0 pixels", "%d is not positive", c.Width)
	}
	if c.Height <= 0 {
		v.p.add("camera.height", c.Height, "> 0 pixels", "%d is not positive", c.Height)
	}
	v.positive("camera.fx", c.Fx, "pixels")
	v.positive("camera.fy", c.Fy, "pixels")
	if c.Width > 0 {
		v.inRange("camera.cx", c.Cx, 0, float64(c.Width), false, "pixels, inside the image width")
	}
	if c.Height > 0 {
		v.inRange("camera.cy", c.Cy, 0, float64(c.Height), false, "pixels, inside the image height")
	}
	v.inRange("camera.yaw_deg", c.YawDeg, -180, 180, false, "degrees")
	v.inRange("camera.pitch_deg", c.PitchDeg, -90, 90, false, "degrees, positive down")
	if finite(c.Mount.Z) && c.Mount.Z < 0 {
		v.p.add("camera.mount.z", c.Mount.Z, ">= 0 m", "%g m is below the floor", c.Mount.Z)
	}
	v.positive("camera.max_range", c.MaxRange, "m")
	v.positive("camera.rate_hz", c.RateHz, "Hz")
}

func (v *validator) actions() {
	allowed := v.c.ToolNames()
	allowedText := strings.Join(allowed, ", ")
	for _, tool := range sortedKeys(v.c.Actions) {
		a := v.c.Actions[tool]
		f := "actions." + tool
		if !slices.Contains(ActionTools, tool) {
			problem := fmt.Sprintf("unknown action tool %q", tool)
			if s := closest(tool, ActionTools); s != "" {
				problem += fmt.Sprintf(" (did you mean %s?)", s)
			}
			v.p.add(f, tool, allowedText, "%s", problem)
			continue
		}
		if !slices.Contains(allowed, tool) {
			missing := "arm"
			if v.c.Arm != nil {
				missing = "gripper"
			}
			v.p.add(f, tool, "this robot's tools: "+allowedText, "is set but the robot has no %s", missing)
			continue
		}
		switch a.Approval {
		case "":
			v.p.add(f+".approval", nil, joinStrings(Approvals), "is missing")
		case ApprovalRequired, ApprovalNever:
		default:
			v.p.add(f+".approval", string(a.Approval), joinStrings(Approvals), "unknown approval policy %q", string(a.Approval))
		}
		if (tool == ToolStop || tool == ToolCancelTask) && a.Approval == ApprovalRequired {
			v.p.add(f+".approval", string(a.Approval), string(ApprovalNever),
				"%s must not require approval: stopping never waits for a human", tool)
		}
	}
	for _, tool := range allowed {
		if _, ok := v.c.Actions[tool]; !ok {
			v.p.add("actions."+tool, nil, "an entry like "+tool+": {approval: "+string(v.defaultApproval(tool))+"}",
				"is missing; every tool this robot offers needs an approval policy")
		}
	}
}

// defaultApproval is the policy to suggest for a missing action entry.
func (v *validator) defaultApproval(tool string) Approval {
	if tool == ToolStop || tool == ToolCancelTask {
		return ApprovalNever
	}
	return ApprovalRequired
}

func (v *validator) safety() {
	s := v.c.Safety
	v.requiredDuration("safety.state_timeout", s.StateTimeout)
	v.requiredDuration("safety.stall_timeout", s.StallTimeout)
	v.requiredDuration("safety.approval_ttl", s.ApprovalTTL)
	v.requiredDuration("safety.control_period", s.ControlPeriod)
	v.requiredDuration("safety.max_grant_ttl", s.MaxGrantTTL)
	v.requiredDuration("safety.max_pause", s.MaxPause)
	if s.ControlPeriod > 0 && s.StateTimeout > 0 && s.ControlPeriod >= s.StateTimeout {
		v.p.add("safety.control_period", s.ControlPeriod.String(),
			fmt.Sprintf("< safety.state_timeout (%s), so a lost link is noticed in time", s.StateTimeout),
			"%s is not shorter than safety.state_timeout", s.ControlPeriod)
	}
}

func (v *validator) perception() {
	p := v.c.Perception
	v.inRange("perception.min_confidence", p.MinConfidence, 0, 1, false, "")
	if v.c.Camera != nil {
		v.requiredDuration("perception.stale_after", p.StaleAfter)
	}
	v.requiredDuration("perception.forget_after", p.ForgetAfter)
	if p.StaleAfter > 0 && p.ForgetAfter > 0 && p.ForgetAfter < p.StaleAfter {
		v.p.add("perception.forget_after", p.ForgetAfter.String(),
			fmt.Sprintf(">= perception.stale_after (%s)", p.StaleAfter), "%s is shorter than stale_after", p.ForgetAfter)
	}
	v.inRange("perception.nms_iou", p.NMSIoU, 0, 1, true, "")
	if p.MaxObjects <= 0 {
		v.p.add("perception.max_objects", p.MaxObjects, "> 0", "%d is not positive", p.MaxObjects)
	}
}

func (v *validator) sim() {
	s := v.c.Sim
	if s == nil {
		if v.c.Transport.Kind == TransportSim {
			v.p.add("sim", nil, "a sim section (seed, command_timeout, start, objects)", "is missing; transport.kind sim needs it")
		}
		return
	}
	v.positive("sim.physics_hz", s.PhysicsHz, "Hz")
	v.positive("sim.state_hz", s.StateHz, "Hz")
	if s.PhysicsHz > 0 && s.StateHz > s.PhysicsHz {
		v.p.add("sim.state_hz", s.StateHz, fmt.Sprintf("(0, %g] Hz, at most sim.physics_hz", s.PhysicsHz),
			"%g Hz is faster than the physics", s.StateHz)
	}
	v.requiredDuration("sim.command_timeout", s.CommandTimeout)
	v.inRange("sim.battery", s.Battery, 0, 100, true, "percent")
	if finite(s.DetectionNoisePx) && s.DetectionNoisePx < 0 {
		v.p.add("sim.detection_noise_px", s.DetectionNoisePx, ">= 0 pixels", "%g is negative", s.DetectionNoisePx)
	}
	v.inRange("sim.false_positive_rate", s.FalsePositiveRate, 0, 1, false, "")
	v.place("sim.start", s.Start.X, s.Start.Y)
	v.inRange("sim.start.theta_deg", s.Start.ThetaDeg, -360, 360, false, "degrees")
	seen := map[string]string{}
	for i, o := range s.Objects {
		f := fmt.Sprintf("sim.objects[%d]", i)
		v.uniqueName(f+".id", o.ID, seen)
		if o.Label == "" {
			v.p.add(f+".label", nil, "a class name like cup or bottle", "is missing")
		}
		if v.bounds != nil && finite(o.X, o.Y) && !v.bounds.Contains(geom.Point{X: o.X, Y: o.Y}) {
			v.p.add(f, [2]float64{o.X, o.Y}, "inside world.bounds: "+v.bounds.Describe(),
				"(%g, %g) is outside the room", o.X, o.Y)
		}
		if finite(o.Z) && o.Z < 0 {
			v.p.add(f+".z", o.Z, ">= 0 m", "%g m is below the floor", o.Z)
		}
		v.positive(f+".size", o.Size, "m")
	}
}
