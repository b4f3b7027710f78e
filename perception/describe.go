package perception

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// Query narrows what Describe reports. The zero value asks for everything
// within the configured budget.
type Query struct {
	// Label keeps only objects of this label, case-insensitively (optional).
	Label string `json:"label,omitempty"`
	// MaxObjects is the budget of objects described, 1..MaxObjectsLimit
	// (optional). It defaults to perception.max_objects.
	MaxObjects int `json:"max_objects,omitempty"`
	// MinConfidence hides objects whose confidence is lower, 0..1
	// (optional). The text says how many it hid.
	MinConfidence float64 `json:"min_confidence,omitempty"`
}

// Frames holds one point in both frames.
type Frames struct {
	// Robot is relative to the robot's current pose: x forward, y left,
	// z up from the floor.
	Robot robot.Vec3 `json:"robot"`
	// Room is in the room frame of the hw-config.
	Room robot.Vec3 `json:"room"`
}

// Bearing words. An object is ahead inside the dead band (Conf.AheadDeg),
// left or right up to 135° off the heading, behind beyond.
const (
	Ahead  = "ahead"
	Left   = "left"
	Right  = "right"
	Behind = "behind"
)

// Object is one object as the scene reports it.
type Object struct {
	ID         string  `json:"id"`
	Label      string  `json:"label"`
	Confidence float64 `json:"confidence"`
	// Uncertain is true when the confidence is below
	// perception.min_confidence: maybe a false detection.
	Uncertain bool   `json:"uncertain"`
	Position  Frames `json:"position"`
	// Surface is what the object rests on: a surface's name from the
	// hw-config, "floor", or "" when no known surface fits.
	Surface string `json:"surface"`
	// Reachable is true when the object is within the arm's horizontal
	// reach from the arm mount at the robot's current pose.
	Reachable bool `json:"reachable"`
	// DistanceM is the horizontal distance from the robot's centre.
	DistanceM float64 `json:"distance_m"`
	// Bearing is ahead, left, right or behind; BearingDeg is the angle off
	// the robot's heading, positive to the left.
	Bearing    string  `json:"bearing"`
	BearingDeg float64 `json:"bearing_deg"`
	// InView is true when the object's estimated position is inside the
	// camera's field of view and range at the robot's current pose.
	InView bool `json:"in_view"`
	// SeenNow is true when the object is in view and was detected within
	// the last couple of camera frames. Only such objects are described as
	// currently seen.
	SeenNow  bool      `json:"seen_now"`
	LastSeen time.Time `json:"last_seen"`
	SeenAgoS float64   `json:"seen_ago_s"`
	// Stale is true when the object was last seen longer ago than
	// perception.stale_after: its position may be out of date, and grasp
	// will not accept its id.
	Stale bool `json:"stale"`

	sortBearing float64 // unrounded, for relations
}

// Scene is the answer of describe_scene.
type Scene struct {
	// Text is a few sentences for the model.
	Text string `json:"text"`
	// Objects are the objects described, most relevant first; never more
	// than the budget.
	Objects []Object `json:"objects"`
	// Total is how many objects matched the query; Shown how many are in
	// Objects. Total > Shown means the budget cut the list.
	Total int `json:"total"`
	Shown int `json:"shown"`
	// HiddenLowConfidence is how many objects the query's min_confidence
	// hid.
	HiddenLowConfidence int `json:"hidden_low_confidence,omitempty"`
	// Pose is the robot's pose the robot frame refers to.
	Pose robot.Pose2D `json:"robot_pose"`
	// At is when the scene was described.
	At time.Time `json:"at"`
}

// QuerySchema is the JSON Schema of describe_scene's arguments, matching
// Query and the checks Describe makes.
const QuerySchema = `{
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "label": {"type": "string", "maxLength": 64, "description": "only objects with this label, e.g. cup"},
    "max_objects": {"type": "integer", "minimum": 1, "maximum": 50, "description": "how many objects to describe at most (default from the robot config)"},
    "min_confidence": {"type": "number", "minimum": 0, "maximum": 1, "description": "hide detections less confident than this"}
  }
}`

func invalidParam(field, format string, args ...any) error {
	return toolerr.New(toolerr.InvalidParams, format, args...).With("field", field)
}

// Describe reports the remembered objects matching q, most relevant first
// (see relevance), as data and text. It fails only for an invalid query
// (a *toolerr.Error of type INVALID_PARAMS naming the field) or a done ctx.
func (s *Summarizer) Describe(ctx context.Context, q Query) (Scene, error) {
	if err := ctx.Err(); err != nil {
		return Scene{}, toolerr.New(toolerr.Unavailable, "describe_scene was cancelled").Wrap(err)
	}
	q.Label = strings.TrimSpace(q.Label)
	switch {
	case q.MaxObjects < 0 || q.MaxObjects > MaxObjectsLimit:
		return Scene{}, invalidParam("max_objects", "max_objects must be between 1 and %d, got %d", MaxObjectsLimit, q.MaxObjects)
	case math.IsNaN(q.MinConfidence) || q.MinConfidence < 0 || q.MinConfidence > 1:
		return Scene{}, invalidParam("min_confidence", "min_confidence must be between 0 and 1, got %v", q.MinConfidence)
	case len(q.Label) > MaxLabelLen:
		return Scene{}, invalidParam("label", "label must be at most %d characters", MaxLabelLen)
	}
	budget := q.MaxObjects
	if budget == 0 {
		budget = s.maxObjects
	}
	now := s.clock.Now()

	s.mu.Lock()
	s.pruneLocked(now)
	pose, havePose := s.pose, s.havePose
	last := s.last
	sc := Scene{Pose: pose, At: now}
	var others map[string]int // labels that did not match q.Label
	objs := make([]Object, 0, min(len(s.tracks), 64))
	for _, t := range s.tracks {
		if q.Label != "" && !strings.EqualFold(t.label, q.Label) {
			if others == nil {
				others = map[string]int{}
			}
			others[t.label]++
			continue
		}
		if t.conf < q.MinConfidence {
			sc.HiddenLowConfidence++
			continue
		}
		objs = append(objs, s.object(t, pose, now))
	}
	s.mu.Unlock()

	slices.SortFunc(objs, relevance)
	sc.Total = len(objs)
	sc.Shown = min(len(objs), budget)
	var b strings.Builder
	s.writeText(&b, q, objs, sc, others, last, havePose, now)
	sc.Text = b.String()
	sc.Objects = objs[:sc.Shown:sc.Shown]
	return sc, nil
}

// relevance orders objects for the model: what it can act on first. Fresh
// objects before stale ones, confident before uncertain, reachable before
// out of reach, then nearest first; the id breaks ties so the order is
// stable.
func relevance(a, b Object) int {
	return cmp.Or(
		boolCmp(a.Stale, b.Stale),
		boolCmp(a.Uncertain, b.Uncertain),
		boolCmp(!a.Reachable, !b.Reachable),
		cmp.Compare(a.DistanceM, b.DistanceM),
		strings.Compare(a.ID, b.ID),
	)
}

// boolCmp orders false before true.
func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

func (s *Summarizer) object(t *track, pose robot.Pose2D, now time.Time) Object {
	rp := ToRobot(pose, t.room)
	ago := max(now.Sub(t.lastSeen), 0)
	bearing := robot.Degrees(math.Atan2(rp.Y, rp.X))
	o := Object{
		ID:          t.id,
		Label:       t.label,
		Confidence:  round(t.conf, 2),
		Uncertain:   t.conf < s.minConf,
		Position:    Frames{Robot: round3(rp), Room: round3(t.room)},
		Surface:     s.world.supportOf(t.room, t.size),
		DistanceM:   round(math.Hypot(rp.X, rp.Y), 2),
		Bearing:     s.bearingWord(bearing),
		BearingDeg:  round(bearing, 1),
		LastSeen:    t.lastSeen,
		SeenAgoS:    round(ago.Seconds(), 1),
		Stale:       ago > s.staleAfter,
		sortBearing: bearing,
	}
	if s.hasArm {
		o.Reachable = math.Hypot(rp.X-s.armX, rp.Y-s.armY) <= s.reach
	}
	if s.cam != nil {
		o.InView = s.cam.seesObject(rp, t.size, rangeSlack(s.cam.maxRange))
	}
	o.SeenNow = o.InView && ago <= s.seenWithin
	return o
}

// seesObject reports whether an object of the given size centred at p
// (robot frame) is at least partly in the image, in front of the camera
// and within its range plus slack metres — the slack absorbs range noise
// of an estimate. Partly matters: an object cut by the image border is in
// view, as a detector reports it.
func (c *Camera) seesObject(p robot.Vec3, size, slack float64) bool {
	u, v, z, ok := c.Project(p)
	if !ok || z < 0.05 || norm(sub(p, c.origin)) > c.maxRange+slack {
		return false
	}
	hw, hh := c.fx*size/2/z, c.fy*size/2/z
	return u+hw > 0 && u-hw < c.width && v+hh > 0 && v-hh < c.height
}

func (s *Summarizer) bearingWord(deg float64) string {
	switch {
	case math.Abs(deg) <= s.aheadDeg:
		return Ahead
	case math.Abs(deg) > 135:
		return Behind
	case deg > 0:
		return Left
	}
	return Right
}

func round(v float64, places int) float64 {
	p := math.Pow10(places)
	r := math.Round(v*p) / p
	if r == 0 {
		return 0 // No "-0" in JSON.
	}
	return r
}

func round3(v robot.Vec3) robot.Vec3 {
	return robot.Vec3{X: round(v.X, 3), Y: round(v.Y, 3), Z: round(v.Z, 3)}
}

// Lookup resolves an object id for grasp. An id that was never issued, was
// forgotten, or whose object is stale is NOT_FOUND, with a suggestion to
// call describe_scene (and, for a stale one, to look at where it was).
func (s *Summarizer) Lookup(ctx context.Context, id string) (actions.ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return actions.ObjectInfo{}, toolerr.New(toolerr.Unavailable, "object lookup was cancelled").Wrap(err)
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.byID[id]
	if !ok || now.Sub(t.lastSeen) > s.forget {
		e := toolerr.New(toolerr.NotFound, "no object with id %q is known", id).With("id", id)
		e.Suggestion = "call describe_scene and use one of the ids it lists"
		if ids := s.freshIDsLocked(now, 10); len(ids) > 0 {
			e.With("known_ids", ids)
		}
		return actions.ObjectInfo{}, e
	}
	if ago := now.Sub(t.lastSeen); ago > s.staleAfter {
		e := toolerr.New(toolerr.NotFound, "object %s was last seen %s ago, longer than %s, so its position can no longer be trusted",
			id, fmtAgo(ago), s.staleAfter).With("id", id).With("last_seen", t.lastSeen)
		e.Suggestion = "call describe_scene to get current ids; if " + id + " is not listed, turn or move the robot so the camera sees where it was, then call describe_scene again"
		return actions.ObjectInfo{}, e
	}
	return actions.ObjectInfo{ID: t.id, Label: t.label, Position: t.room, LastSeen: t.lastSeen}, nil
}

func (s *Summarizer) freshIDsLocked(now time.Time, n int) []string {
	var ids []string
	for _, t := range s.tracks {
		if now.Sub(t.lastSeen) <= s.staleAfter {
			ids = append(ids, t.id)
		}
	}
	slices.Sort(ids)
	if len(ids) > n {
		ids = ids[:n]
	}
	return ids
}

// fmtAgo writes a duration for a sentence: tenths of a second below 10 s,
// whole seconds below 2 min, whole minutes beyond.
func fmtAgo(d time.Duration) string {
	switch sec := d.Seconds(); {
	case sec < 10:
		return strconv.FormatFloat(round(sec, 1), 'f', -1, 64) + " s"
	case sec < 120:
		return strconv.Itoa(int(math.Round(sec))) + " s"
	default:
		return strconv.Itoa(int(math.Round(sec/60))) + " min"
	}
}

// writeText renders the scene's sentences:
//
//  1. a headline: how many objects, how many within reach, and — when the
//     budget cut the list — "showing 5 of 23" with the labels left out;
//  2. one sentence per shown object, most relevant first: id, label,
//     surface, distance and side, reach, and how fresh the sighting is;
//  3. the left-to-right order of the confident objects seen now, as the
//     robot sees them;
//  4. what was left out of the last frame (malformed, unplaced detections)
//     and of the query (low confidence), so nothing is dropped silently.
func (s *Summarizer) writeText(b *strings.Builder, q Query, objs []Object, sc Scene, others map[string]int, last frameStats, havePose bool, now time.Time) {
	shown := objs[:sc.Shown]
	labelled := ""
	if q.Label != "" {
		labelled = " labelled " + q.Label
	}
	switch {
	case s.cam == nil:
		b.WriteString("This robot has no camera configured, so it cannot see objects.")
		return
	case sc.Total == 0 && q.Label != "":
		fmt.Fprintf(b, "No object%s known.", labelled)
		if len(others) > 0 {
			b.WriteString(" Other objects: ")
			writeCounts(b, others)
			b.WriteString("; call describe_scene without label to see them.")
		} else {
			s.writeLookAround(b)
		}
	case sc.Total == 0:
		if !havePose {
			b.WriteString("No camera frame received yet, so nothing is known about the scene.")
		} else {
			b.WriteString("No objects detected.")
			s.writeLookAround(b)
		}
	default:
		reach, seen := 0, 0
		for i := range objs {
			if objs[i].Reachable && !objs[i].Stale {
				reach++
			}
			if objs[i].SeenNow {
				seen++
			}
		}
		fmt.Fprintf(b, "%d %s%s known, %d seen now", sc.Total, plural(sc.Total, "object"), labelled, seen)
		if s.hasArm {
			fmt.Fprintf(b, ", %d within reach", reach)
		}
		b.WriteString(".")
		if sc.Shown < sc.Total {
			hidden := map[string]int{}
			for _, o := range objs[sc.Shown:] {
				hidden[o.Label]++
			}
			fmt.Fprintf(b, " Showing %d of %d (reachable, then nearest first); not shown: ", sc.Shown, sc.Total)
			writeCounts(b, hidden)
			if q.Label == "" {
				b.WriteString("; ask with label= to narrow.")
			} else {
				fmt.Fprintf(b, "; ask with a larger max_objects (up to %d) to see more.", MaxObjectsLimit)
			}
		}
	}
	for i := range shown {
		b.WriteByte(' ')
		s.writeObject(b, &shown[i])
	}
	writeRelations(b, shown)
	if sc.HiddenLowConfidence > 0 {
		fmt.Fprintf(b, " %d less confident %s than min_confidence %g not shown.", sc.HiddenLowConfidence, plural(sc.HiddenLowConfidence, "detection"), q.MinConfidence)
	}
	if !last.at.IsZero() && now.Sub(last.at) <= s.staleAfter {
		if last.unplaced > 0 {
			fmt.Fprintf(b, " %d %s in the last frame could not be placed (no depth and no surface below it, or beyond %g m).",
				last.unplaced, plural(last.unplaced, "detection"), s.cam.maxRange)
		}
		if last.rejected > 0 {
			fmt.Fprintf(b, " %d malformed %s in the last frame ignored.", last.rejected, plural(last.rejected, "detection"))
		}
	}
}

func (s *Summarizer) writeLookAround(b *strings.Builder) {
	fmt.Fprintf(b, " The camera covers about %.0f° ahead out to %g m; turn or move the robot to look elsewhere.", s.cam.HorizontalFOVDeg(), s.cam.maxRange)
}

// plural returns word for one, word+"s" otherwise; the package only
// pluralises regular nouns (object, detection).
func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// writeCounts writes "10 box, 5 cup": most frequent label first.
func writeCounts(b *strings.Builder, counts map[string]int) {
	type lc struct {
		label string
		n     int
	}
	list := make([]lc, 0, len(counts))
	for l, n := range counts {
		list = append(list, lc{l, n})
	}
	slices.SortFunc(list, func(a, b lc) int { return cmp.Or(cmp.Compare(b.n, a.n), strings.Compare(a.label, b.label)) })
	const maxLabels = 6
	for i, e := range list {
		if i == maxLabels {
			fmt.Fprintf(b, " and %d more labels", len(list)-maxLabels)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(b, "%d %s", e.n, e.label)
	}
}

// writeObject writes one object's sentence, e.g.
// "cup-1: cup on the table, 0.92 m away 23° to the left, within reach."
func (s *Summarizer) writeObject(b *strings.Builder, o *Object) {
	b.WriteString(o.ID)
	b.WriteString(": ")
	if o.Uncertain {
		fmt.Fprintf(b, "possibly a %s (uncertain, confidence %.2f)", o.Label, o.Confidence)
	} else {
		b.WriteString(o.Label)
	}
	switch o.Surface {
	case "":
		fmt.Fprintf(b, " at %.2f m height, not on a known surface", o.Position.Room.Z)
	case Floor:
		b.WriteString(" on the floor")
	default:
		b.WriteString(" on the ")
		b.WriteString(o.Surface)
	}
	fmt.Fprintf(b, ", %.2f m ", o.DistanceM)
	deg := math.Abs(o.BearingDeg)
	switch o.Bearing {
	case Ahead:
		b.WriteString("ahead")
	case Behind:
		side := "left"
		if o.BearingDeg < 0 {
			side = "right"
		}
		fmt.Fprintf(b, "behind (%.0f° to the %s)", deg, side)
	default:
		fmt.Fprintf(b, "away %.0f° to the %s", deg, o.Bearing)
	}
	if s.hasArm {
		if o.Reachable {
			b.WriteString(", within reach")
		} else {
			rp := o.Position.Robot
			fmt.Fprintf(b, ", out of reach by %.2f m", math.Hypot(rp.X-s.armX, rp.Y-s.armY)-s.reach)
		}
	}
	ago := fmtAgo(time.Duration(o.SeenAgoS * float64(time.Second)))
	switch {
	case o.Stale:
		fmt.Fprintf(b, "; last seen %s ago, may have moved", ago)
	case !o.SeenNow && !o.InView:
		fmt.Fprintf(b, "; seen %s ago, out of view now", ago)
	case !o.SeenNow:
		fmt.Fprintf(b, "; seen %s ago, not detected in the latest frames", ago)
	}
	b.WriteByte('.')
}

// writeRelations states the left-to-right order, as seen from the robot, of
// the confident objects seen now: "cup-1 is left of bottle-1." for two,
// "Left to right as seen from the robot: a, b, c." for more. Objects
// within 2° of each other are in line; the nearer is named as in front.
func writeRelations(b *strings.Builder, shown []Object) {
	var row []*Object
	for i := range shown {
		if o := &shown[i]; o.SeenNow && !o.Uncertain && !o.Stale {
			row = append(row, o)
		}
	}
	if len(row) < 2 {
		return
	}
	slices.SortStableFunc(row, func(a, b *Object) int { return cmp.Compare(b.sortBearing, a.sortBearing) })
	if len(row) == 2 {
		l, r := row[0], row[1]
		if l.sortBearing-r.sortBearing < 2 {
			near, far := l, r
			if far.DistanceM < near.DistanceM {
				near, far = far, near
			}
			fmt.Fprintf(b, " Seen from the robot, %s is in front of %s.", near.ID, far.ID)
			return
		}
		fmt.Fprintf(b, " Seen from the robot, %s is left of %s.", l.ID, r.ID)
		return
	}
	b.WriteString(" Left to right as seen from the robot: ")
	for i, o := range row {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(o.ID)
	}
	b.WriteByte('.')
}
