package hwconfig

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// FleetConf makes one hw-config describe several robots of one kind: the
// rest of the file is the template every robot starts from, and each robot
// has its own id (its MQTT topics, its safety state) and, optionally, its
// own overrides. Every robot of a fleet offers the same tools, named
// locations and named poses; an override may change their coordinates, the
// limits, the room, the simulator's seed and start, never the set of tools
// or names.
type FleetConf struct {
	// IDs lists the robots' ids (optional; give IDs or Count).
	IDs []string `yaml:"ids,omitempty"`
	// Count makes Count robots with ids IDPrefix1 … IDPrefixN, the number
	// zero-padded to the width of Count (amr-001 … amr-100) (optional;
	// give IDs or Count).
	Count int `yaml:"count,omitempty"`
	// IDPrefix is the prefix of the ids Count makes (optional). It
	// defaults to robot.id followed by "-".
	IDPrefix string `yaml:"id_prefix,omitempty"`
	// Robots holds per-robot overrides keyed by robot id (optional): a
	// partial hw-config with any of the sections robot (name only), base,
	// locations, poses, world, safety, safe_pose, camera, perception and
	// sim. Mappings merge field by field (a location names only the
	// coordinates that differ); lists replace the template's.
	Robots map[string]RobotOverride `yaml:"robots,omitempty"`
	// MetricsRobotSeries bounds the per-robot metric series (optional):
	// only the first this many robots, in fleet order, get series labelled
	// with their id; the fleet-wide aggregates are always exported. It
	// defaults to 20; 0 keeps the default, -1 exports none.
	MetricsRobotSeries int `yaml:"metrics_robot_series,omitempty"`
}

// DefaultMetricsRobotSeries is fleet.metrics_robot_series's default.
const DefaultMetricsRobotSeries = 20

// MaxFleetSize bounds a fleet's robots: one bridge's worth.
const MaxFleetSize = 10000

// RobotOverride is one robot's partial hw-config, kept as written and
// applied onto a copy of the template by Robots.
type RobotOverride struct {
	node ast.Node
}

// ParseOverride reads a robot override from YAML, for configs built in
// code ("sim: {seed: 7}").
func ParseOverride(src string) (RobotOverride, error) {
	f, err := parser.ParseBytes([]byte(src), 0)
	if err != nil {
		return RobotOverride{}, syntaxError(err)
	}
	if len(f.Docs) != 1 || f.Docs[0].Body == nil {
		return RobotOverride{}, &FieldError{Problem: "an override is one YAML mapping"}
	}
	return RobotOverride{node: f.Docs[0].Body}, nil
}

// UnmarshalYAML implements yaml.NodeUnmarshaler: the override is kept as
// written and checked when it is applied.
func (o *RobotOverride) UnmarshalYAML(n ast.Node) error {
	if _, ok := n.(*ast.MappingNode); !ok {
		if _, null := n.(*ast.NullNode); !null {
			return &FieldError{Field: nodePath(n), Line: nodeLine(n), Problem: "a robot override is a mapping of hw-config sections", Allowed: strings.Join(overridable, ", ")}
		}
	}
	o.node = n
	return nil
}

// overridable are the top-level sections an override may name.
var overridable = []string{"robot", "base", "locations", "poses", "world", "safety", "safe_pose", "camera", "perception", "sim"}

// IsFleet reports whether the config describes more than one robot's worth
// of ids (a fleet section).
func (c *Config) IsFleet() bool { return c.Fleet != nil }

// FleetIDs returns the fleet's robot ids in fleet order, or robot.id alone
// for a config without a fleet section.
func (c *Config) FleetIDs() []string {
	f := c.Fleet
	if f == nil {
		return []string{c.Robot.ID}
	}
	if len(f.IDs) > 0 {
		return slices.Clone(f.IDs)
	}
	prefix := f.IDPrefix
	if prefix == "" {
		prefix = c.Robot.ID + "-"
	}
	width := len(strconv.Itoa(f.Count))
	ids := make([]string, 0, f.Count)
	for i := 1; i <= f.Count; i++ {
		ids = append(ids, fmt.Sprintf("%s%0*d", prefix, width, i))
	}
	return ids
}

// MetricsRobotSeries is how many robots get per-robot metric series.
func (c *Config) MetricsRobotSeries() int {
	switch {
	case c.Fleet == nil:
		return 1
	case c.Fleet.MetricsRobotSeries < 0:
		return 0
	case c.Fleet.MetricsRobotSeries == 0:
		return DefaultMetricsRobotSeries
	}
	return c.Fleet.MetricsRobotSeries
}

// Robots returns one config per robot, in fleet order: the template with
// the robot's id, a simulator seed of its own (the template's seed plus
// the robot's index, unless overridden) and its overrides applied, then
// defaulted and validated. Without a fleet section it returns c itself.
// The configs returned have no fleet section. Parse has run it already,
// so a parsed config's fleet is known good.
func (c *Config) Robots() ([]*Config, error) {
	if c.Fleet == nil {
		return []*Config{c}, nil
	}
	if c.robots != nil {
		return slices.Clone(c.robots), nil
	}
	return expandFleet(c)
}

// expandFleet builds every robot's config from the template c.
func expandFleet(c *Config) ([]*Config, error) {
	ids := c.FleetIDs()
	out := make([]*Config, 0, len(ids))
	var problems []*FieldError
	for i, id := range ids {
		rc := c.Clone()
		rc.Fleet, rc.robots = nil, nil
		rc.Robot.ID = id
		if rc.Sim != nil {
			rc.Sim.Seed += int64(i)
		}
		if o, ok := c.Fleet.Robots[id]; ok && o.node != nil {
			if err := rc.override(id, o.node, c); err != nil {
				problems = append(problems, asFieldErrors(err, "fleet.robots."+id)...)
				continue
			}
		}
		rc.ApplyDefaults()
		if err := rc.Validate(); err != nil {
			problems = append(problems, asFieldErrors(err, "fleet.robots."+id)...)
			continue
		}
		out = append(out, rc)
	}
	if len(problems) > 0 {
		return nil, &ValidationError{Problems: problems}
	}
	return out, nil
}

// asFieldErrors turns an error of one robot's config into field errors
// whose paths name the robot (fleet.robots.amr-7.base.max_linear_speed).
func asFieldErrors(err error, prefix string) []*FieldError {
	var list []*FieldError
	if ve, ok := errors.AsType[*ValidationError](err); ok {
		list = ve.Problems
	} else if fe, ok := errors.AsType[*FieldError](err); ok {
		list = []*FieldError{fe}
	} else {
		list = []*FieldError{{Problem: err.Error()}}
	}
	out := make([]*FieldError, len(list))
	for i, fe := range list {
		v := *fe
		if !strings.HasPrefix(v.Field, prefix) {
			v.Field = join(prefix, v.Field)
		}
		out[i] = &v
	}
	return out
}

// override applies one robot's override node onto rc, section by section.
func (c *Config) override(id string, n ast.Node, tmpl *Config) error {
	m, ok := n.(*ast.MappingNode)
	if !ok {
		return nil // a null override changes nothing
	}
	opts := []yaml.DecodeOption{yaml.DisallowUnknownField(), yaml.Strict()}
	for _, kv := range m.Values {
		key := kv.Key.String()
		at := func(err error) error {
			fe := decodeError(err, kv.Value)
			if f, ok := errors.AsType[*FieldError](fe); ok && f.Field == "" {
				f.Field = key
			}
			return fe
		}
		var err error
		switch key {
		case "robot":
			r := c.Robot
			if err = yaml.NodeToValue(kv.Value, &r, opts...); err == nil && r.ID != id {
				return &FieldError{Field: "robot.id", Line: nodeLine(kv.Value), Value: r.ID, Problem: "a robot's id is its key under fleet.robots and cannot be overridden"}
			}
			c.Robot = r
		case "base":
			err = yaml.NodeToValue(kv.Value, &c.Base, opts...)
		case "world":
			err = yaml.NodeToValue(kv.Value, &c.World, opts...)
		case "safety":
			err = yaml.NodeToValue(kv.Value, &c.Safety, opts...)
		case "safe_pose":
			err = yaml.NodeToValue(kv.Value, &c.SafePose, opts...)
			if err == nil && c.SafePose.Arm != tmpl.SafePose.Arm {
				return &FieldError{Field: "safe_pose.arm", Line: nodeLine(kv.Value), Value: c.SafePose.Arm, Problem: "every robot of a fleet has the template's safe arm pose name; override the pose's joints under poses instead"}
			}
		case "perception":
			err = yaml.NodeToValue(kv.Value, &c.Perception, opts...)
		case "camera":
			if c.Camera == nil {
				return &FieldError{Field: "camera", Line: nodeLine(kv.Value), Problem: "the template has no camera; every robot of a fleet has the same sensors"}
			}
			err = yaml.NodeToValue(kv.Value, c.Camera, opts...)
		case "sim":
			if c.Sim == nil {
				return &FieldError{Field: "sim", Line: nodeLine(kv.Value), Problem: "the template has no sim section to override"}
			}
			err = yaml.NodeToValue(kv.Value, c.Sim, opts...)
		case "locations":
			c.Locations, err = mergeNamed(kv.Value, c.Locations, "locations", opts)
		case "poses":
			c.Poses, err = mergeNamed(kv.Value, c.Poses, "poses", opts)
		default:
			return &FieldError{Field: key, Line: nodeLine(kv.Key), Problem: fmt.Sprintf("%q cannot be overridden per robot: every robot of a fleet has the same transport, actions and hardware", key), Allowed: strings.Join(overridable, ", ")}
		}
		if err != nil {
			return at(err)
		}
	}
	return nil
}

// mergeNamed applies a mapping of named entries (locations, poses) onto a
// copy of the template's: each entry merges onto the template's entry of
// that name, and a name the template lacks is refused, since every robot
// of a fleet offers the same names to the agent.
func mergeNamed[V any](n ast.Node, base map[string]V, section string, opts []yaml.DecodeOption) (map[string]V, error) {
	m, ok := n.(*ast.MappingNode)
	if !ok {
		return nil, &FieldError{Field: section, Line: nodeLine(n), Problem: "must be a mapping of names the template defines"}
	}
	out := maps.Clone(base)
	for _, kv := range m.Values {
		name := kv.Key.String()
		v, ok := out[name]
		if !ok {
			return nil, &FieldError{
				Field: section + "." + name, Line: nodeLine(kv.Key),
				Problem: fmt.Sprintf("%q is not one of the template's %s: a fleet's robots offer the same names, only their values may differ", name, section),
				Allowed: strings.Join(slices.Sorted(maps.Keys(base)), ", "),
			}
		}
		v = cloneValue(v)
		if err := yaml.NodeToValue(kv.Value, &v, opts...); err != nil {
			return nil, err
		}
		out[name] = v
	}
	return out, nil
}

// cloneValue copies a map value (ArmPose is a map and must not be merged
// into the template's own).
func cloneValue[V any](v V) V {
	if p, ok := any(v).(ArmPose); ok {
		return any(maps.Clone(p)).(V)
	}
	return v
}

// fleet validates the fleet section and expands it, so that a parsed
// config's robots are known good.
func (v *validator) fleet() {
	f := v.c.Fleet
	if f == nil {
		return
	}
	switch {
	case len(f.IDs) > 0 && f.Count > 0:
		v.p.add("fleet", nil, "either fleet.ids or fleet.count", "gives both ids and count")
		return
	case len(f.IDs) == 0 && f.Count == 0:
		v.p.add("fleet", nil, "fleet.ids (a list of robot ids) or fleet.count (with fleet.id_prefix)", "names no robots")
		return
	case f.Count < 0 || f.Count > MaxFleetSize:
		v.p.add("fleet.count", f.Count, fmt.Sprintf("1 to %d", MaxFleetSize), "is out of range")
		return
	case len(f.IDs) > MaxFleetSize:
		v.p.add("fleet.ids", len(f.IDs), fmt.Sprintf("at most %d robots", MaxFleetSize), "lists too many robots")
		return
	case f.MetricsRobotSeries < -1:
		v.p.add("fleet.metrics_robot_series", f.MetricsRobotSeries, "-1 (none), 0 (the default, 20) or a positive count", "is out of range")
	}
	if v.c.Transport.Kind == TransportROS {
		v.p.add("fleet", nil, "transport.kind mqtt or sim", "a fleet over ROS1 is not supported: one ROS master serves one robot here; run one bridge per robot, or bridge the fleet over MQTT")
		return
	}
	if f.IDPrefix != "" && !robotIDPattern.MatchString(f.IDPrefix+"1") {
		v.p.add("fleet.id_prefix", f.IDPrefix, robotIDAllowed, "does not make valid robot ids")
		return
	}
	ids := v.c.FleetIDs()
	seen := make(map[string]bool, len(ids))
	for i, id := range ids {
		field := fmt.Sprintf("fleet.ids[%d]", i)
		switch {
		case !robotIDPattern.MatchString(id):
			v.p.add(field, id, robotIDAllowed, "%q is not a valid robot id", id)
		case seen[id]:
			v.p.add(field, id, "unique ids", "robot %q is listed twice", id)
		}
		seen[id] = true
	}
	for _, id := range slices.Sorted(maps.Keys(f.Robots)) {
		if !seen[id] {
			v.p.add("fleet.robots."+id, id, "one of the fleet's ids", "overrides a robot that is not in the fleet")
		}
	}
}

// MarshalYAML implements yaml.InterfaceMarshaler: an override is written
// back as the mapping it was read from.
func (o RobotOverride) MarshalYAML() (any, error) {
	if o.node == nil {
		return nil, nil
	}
	var v map[string]any
	if err := yaml.NodeToValue(o.node, &v); err != nil {
		return nil, err
	}
	return v, nil
}
