package approval

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/geom"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
)

// Tools whose calls a scope can bound, with the argument names of the tool
// API (issue 3): move_arm_to {pose | joints}, move_base_to {x, y,
// theta_deg | location}, grasp {object_id}.
const (
	ToolMoveArm  = "move_arm_to"
	ToolMoveBase = "move_base_to"
	ToolGrasp    = "grasp"
)

// maxScopeItems bounds the lists of a scope: a console sends a handful, and
// a cap keeps a hostile body from making every Authorize slow.
const maxScopeItems = 256

// bounds is a scope compiled for fast, allocation-free checks. It is
// immutable once built, so Authorize reads it without a lock.
type bounds struct {
	tool    string
	poses   map[string]struct{}
	region  geom.Polygon
	objects map[string]struct{}
	labels  map[string]struct{}
	// locations resolves move_base_to's location argument.
	locations map[string]hwconfig.Location
	// scope is the normalised scope, for snapshots.
	scope Scope
	desc  string
}

// compileScope validates sc against the robot's config and compiles it.
// prefix is the JSON path of the scope in the operator's request body, so
// errors name the field the operator sent ("grant.scope.poses[0]").
func compileScope(cfg *hwconfig.Config, sc Scope, prefix string) (*bounds, error) {
	f := func(name string) string { return prefix + "." + name }
	tool := strings.TrimSpace(sc.Tool)
	if tool == "" {
		return nil, invalid(f("tool"), "required: name the action tool the grant is for (%s)", strings.Join(grantableTools(cfg), ", "))
	}
	if len(cfg.Actions) > 0 {
		ac, ok := cfg.Actions[tool]
		if !ok {
			return nil, invalid(f("tool"), "unknown tool %q (allowed: %s)", tool, strings.Join(grantableTools(cfg), ", "))
		}
		if ac.Approval == hwconfig.ApprovalNever {
			return nil, invalid(f("tool"), "%s needs no approval on this robot, so a grant for it means nothing (allowed: %s)", tool, strings.Join(grantableTools(cfg), ", "))
		}
	}
	b := &bounds{tool: tool, scope: Scope{Tool: tool}}
	notFor := func(name string, set bool, only string) error {
		if set {
			return invalid(f(name), "does not apply to %s (only to %s)", tool, only)
		}
		return nil
	}
	for _, chk := range []struct {
		name string
		set  bool
		only string
		tool string
	}{
		{"poses", len(sc.Poses) > 0, ToolMoveArm, ToolMoveArm},
		{"region", len(sc.Region) > 0, ToolMoveBase, ToolMoveBase},
		{"rect", sc.Rect != nil, ToolMoveBase, ToolMoveBase},
		{"objects", len(sc.Objects) > 0, ToolGrasp, ToolGrasp},
		{"labels", len(sc.Labels) > 0, ToolGrasp, ToolGrasp},
	} {
		if chk.tool != tool {
			if err := notFor(chk.name, chk.set, chk.only); err != nil {
				return nil, err
			}
		}
	}

	switch tool {
	case ToolMoveArm:
		if len(sc.Poses) == 0 {
			return nil, invalid(f("poses"), "required for move_arm_to: list the named poses the arm may move to (allowed: %s)", strings.Join(sortedKeys(cfg.Poses), ", "))
		}
		set, list, err := nameSet(sc.Poses, f("poses"), func(i int, p string) error {
			if _, ok := cfg.Poses[p]; !ok {
				return invalid(fmt.Sprintf("%s[%d]", f("poses"), i), "unknown pose %q (allowed: %s)", p, strings.Join(sortedKeys(cfg.Poses), ", "))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		b.poses, b.scope.Poses = set, list
		b.desc = fmt.Sprintf("move_arm_to the named poses %s", strings.Join(list, ", "))

	case ToolMoveBase:
		switch {
		case len(sc.Region) > 0 && sc.Rect != nil:
			return nil, invalid(f("rect"), "give region or rect, not both")
		case sc.Rect != nil:
			r := *sc.Rect
			for _, v := range []struct {
				n string
				x float64
			}{{"min_x", r.MinX}, {"min_y", r.MinY}, {"max_x", r.MaxX}, {"max_y", r.MaxY}} {
				if math.IsNaN(v.x) || math.IsInf(v.x, 0) {
					return nil, invalid(f("rect."+v.n), "must be a finite number of metres")
				}
			}
			if !(r.MinX < r.MaxX) {
				return nil, invalid(f("rect"), "min_x (%g) must be less than max_x (%g)", r.MinX, r.MaxX)
			}
			if !(r.MinY < r.MaxY) {
				return nil, invalid(f("rect"), "min_y (%g) must be less than max_y (%g)", r.MinY, r.MaxY)
			}
			b.region = geom.Polygon{{X: r.MinX, Y: r.MinY}, {X: r.MaxX, Y: r.MinY}, {X: r.MaxX, Y: r.MaxY}, {X: r.MinX, Y: r.MaxY}}
		case len(sc.Region) > 0:
			if len(sc.Region) < 3 {
				return nil, invalid(f("region"), "a polygon needs at least 3 [x, y] vertices, got %d", len(sc.Region))
			}
			if len(sc.Region) > maxScopeItems {
				return nil, invalid(f("region"), "at most %d vertices, got %d", maxScopeItems, len(sc.Region))
			}
			for i, v := range sc.Region {
				if len(v) != 2 {
					return nil, invalid(fmt.Sprintf("%s[%d]", f("region"), i), "a vertex is [x, y], got %d numbers", len(v))
				}
				for _, x := range v {
					if math.IsNaN(x) || math.IsInf(x, 0) {
						return nil, invalid(fmt.Sprintf("%s[%d]", f("region"), i), "must be finite numbers of metres")
					}
				}
				b.region = append(b.region, geom.Point{X: v[0], Y: v[1]})
			}
			if area(b.region) < 1e-6 {
				return nil, invalid(f("region"), "the polygon has no area (are the vertices in a line, or repeated?)")
			}
		default:
			return nil, invalid(f("region"), "required for move_base_to: give region [[x, y], …] (at least 3 vertices) or rect {min_x, min_y, max_x, max_y} in the room frame, metres")
		}
		b.scope.Region = make([][]float64, len(b.region))
		for i, p := range b.region {
			b.scope.Region[i] = []float64{p.X, p.Y}
		}
		b.locations = cfg.Locations
		b.desc = "move_base_to targets with " + b.region.Describe()

	case ToolGrasp:
		var err error
		if b.objects, b.scope.Objects, err = nameSet(sc.Objects, f("objects"), nil); err != nil {
			return nil, err
		}
		if b.labels, b.scope.Labels, err = nameSet(sc.Labels, f("labels"), nil); err != nil {
			return nil, err
		}
		switch {
		case b.objects == nil && b.labels == nil:
			b.desc = "grasp any object"
		case b.labels == nil:
			b.desc = "grasp the objects " + strings.Join(b.scope.Objects, ", ")
		case b.objects == nil:
			b.desc = "grasp objects labelled " + strings.Join(b.scope.Labels, ", ")
		default:
			b.desc = fmt.Sprintf("grasp the objects %s or objects labelled %s", strings.Join(b.scope.Objects, ", "), strings.Join(b.scope.Labels, ", "))
		}

	default:
		b.desc = tool + " (any arguments)"
	}
	return b, nil
}

// nameSet checks a list of names (non-empty, bounded, each passing check)
// and returns it as a set and as a sorted, de-duplicated list. An empty
// list gives a nil set.
func nameSet(names []string, field string, check func(int, string) error) (map[string]struct{}, []string, error) {
	if len(names) == 0 {
		return nil, nil, nil
	}
	if len(names) > maxScopeItems {
		return nil, nil, invalid(field, "at most %d entries, got %d", maxScopeItems, len(names))
	}
	set := make(map[string]struct{}, len(names))
	for i, n := range names {
		if strings.TrimSpace(n) == "" || len(n) > 200 {
			return nil, nil, invalid(fmt.Sprintf("%s[%d]", field, i), "must be a non-empty name of at most 200 bytes")
		}
		if check != nil {
			if err := check(i, n); err != nil {
				return nil, nil, err
			}
		}
		set[n] = struct{}{}
	}
	list := make([]string, 0, len(set))
	for n := range set {
		list = append(list, n)
	}
	sort.Strings(list)
	return set, list, nil
}

// labeler resolves an object id to its label; ok is false when the object
// is unknown.
type labeler func(id string) (label string, ok bool)

// contains checks the call's arguments against the bounds. It returns nil
// when the call is inside, and a refusal naming the bound otherwise.
func (b *bounds) contains(args map[string]any, label labeler) *RefusalError {
	out := func(bound, format string, a ...any) *RefusalError {
		return &RefusalError{Cause: CauseOutsideBounds, Bound: bound, Detail: fmt.Sprintf(format, a...)}
	}
	switch {
	case b.poses != nil:
		if _, ok := args["joints"]; ok {
			return out("joints", "a move_arm_to with raw joints is outside a grant of named poses (%s)", strings.Join(b.scope.Poses, ", "))
		}
		p, ok := args["pose"].(string)
		if !ok {
			return out("pose", "the call names no pose; the grant covers only the named poses %s", strings.Join(b.scope.Poses, ", "))
		}
		if _, ok := b.poses[p]; !ok {
			return out("pose", "pose %q is not one of the granted poses %s", p, strings.Join(b.scope.Poses, ", "))
		}
	case b.region != nil:
		checked := false
		if v, ok := args["location"]; ok {
			name, _ := v.(string)
			loc, ok := b.locations[name]
			if !ok {
				return out("location", "location %q is not a named location of this robot, so it cannot be checked against the granted region", name)
			}
			if !b.region.Contains(geom.Point{X: loc.X, Y: loc.Y}) {
				return out("region", "location %q at (%g, %g) is outside the granted region (%s)", name, loc.X, loc.Y, b.region.Describe())
			}
			checked = true
		}
		_, hasX := args["x"]
		_, hasY := args["y"]
		if hasX || hasY || !checked {
			x, okx := number(args["x"])
			y, oky := number(args["y"])
			if !okx || !oky {
				return out("region", "the call has no target x and y in metres to check against the granted region")
			}
			if !b.region.Contains(geom.Point{X: x, Y: y}) {
				return out("region", "target (%g, %g) is outside the granted region (%s)", x, y, b.region.Describe())
			}
		}
	case b.objects != nil || b.labels != nil:
		id, ok := args["object_id"].(string)
		if !ok {
			return out("object", "the call names no object_id; the grant covers only %s", b.desc)
		}
		if _, ok := b.objects[id]; ok {
			return nil
		}
		if b.labels != nil {
			if l, ok := label(id); ok {
				if _, ok := b.labels[l]; ok {
					return nil
				}
				return out("object", "object %q (a %s) is not covered: the grant allows only %s", id, l, b.desc)
			}
			return out("object", "object %q is unknown, so its label cannot be checked; the grant allows only %s", id, b.desc)
		}
		return out("object", "object %q is not covered: the grant allows only %s", id, b.desc)
	}
	return nil
}

// number reads a JSON number from decoded arguments, exactly as the
// action runner does.
func number(v any) (float64, bool) { return actions.Number(v) }

// area is the polygon's unsigned shoelace area.
func area(p geom.Polygon) float64 {
	s := 0.0
	for i, j := 0, len(p)-1; i < len(p); j, i = i, i+1 {
		s += p[j].X*p[i].Y - p[i].X*p[j].Y
	}
	return math.Abs(s) / 2
}

// grantableTools lists the tools a grant can be for: every action that
// needs approval on this robot.
func grantableTools(cfg *hwconfig.Config) []string {
	var out []string
	for name, ac := range cfg.Actions {
		if ac.Approval != hwconfig.ApprovalNever {
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		return []string{ToolMoveBase, ToolMoveArm, ToolGrasp}
	}
	slices.Sort(out)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
