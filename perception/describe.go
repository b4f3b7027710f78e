package perception

import (
	"cmp"
	"context"
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
	LastSeen time.Time `json:"last_seen,omitzero"`
	// SeenAgoMS is how long before the scene's time LastSeen was, in whole
	// milliseconds, like every duration the bridge answers with.
	SeenAgoMS int64 `json:"seen_ago_ms"`
	// Stale is true when the object was last seen longer ago than
	// perception.stale_after: its position may be out of date, and grasp
	// will not accept its id.
	Stale bool `json:"stale"`
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
	At time.Time `json:"at,omitzero"`
}

// Source names perception as the source of the scene text a Scene holds,
// as the tool API's envelope marks it (toolapi.SourcePerception).
const Source = "perception"

// UntrustedFields names the fields of a Scene, as RFC 9535 JSONPath
// queries into its JSON, that hold scene text: the labels, and the text
// that quotes them. Such text is data about the world, never an
// instruction; the tool API marks these fields untrusted in the envelope
// (toolapi.UntrustedData). Ids are not among them: they are the bridge's
// identifiers, lower-case ASCII letters, digits and '-' (see idPrefix).
func (Scene) UntrustedFields() (source string, paths []string) {
	return Source, []string{"$.text", "$.objects[*].label"}
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
//
// Every matching object is ranked, but only the shown ones (the budget)
// are turned into Objects and sentences, so the cost of a call grows
// little with the number of objects remembered.
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
	if q.Label != "" {
		// The label a query names is matched, and quoted in the text, in
		// the form the scene's labels have.
		l, err := NormalizeLabel(q.Label)
		if err != nil {
			return Scene{}, invalidParam("label", "label must name a kind of object with letters or digits, e.g. \"cup\"")
		}
		q.Label = l
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
	cands := make([]candidate, 0, len(s.tracks))
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
		cands = append(cands, s.candidate(t, pose, now))
	}
	s.mu.Unlock()

	// Rank an index: candidates hold pointers, and moving them while
	// sorting costs write barriers.
	rank := make([]int32, len(cands))
	for i := range rank {
		rank[i] = int32(i)
	}
	slices.SortFunc(rank, func(i, j int32) int { return relevance(&cands[i], &cands[j]) })
	sc.Total = len(cands)
	sc.Shown = min(len(cands), budget)
	sc.Objects = make([]Object, sc.Shown)
	for i := range sc.Objects {
		sc.Objects[i] = s.object(&cands[rank[i]])
	}
	sc.Text = s.text(q, cands, rank, sc, others, last, havePose, now)
	return sc, nil
}

// candidate is what ranking and the headline need of one track, copied
// out under the lock.
type candidate struct {
	id, label  string
	room, rp   robot.Vec3 // room and robot frame
	size, conf float64
	dist       float64
	bearing    float64 // degrees, positive left
	lastSeen   time.Time
	ago        time.Duration
	uncertain  bool
	stale      bool
	reachable  bool
	inView     bool
	seenNow    bool
}

func (s *Summarizer) candidate(t *track, pose robot.Pose2D, now time.Time) candidate {
	rp := ToRobot(pose, t.room)
	ago := max(now.Sub(t.lastSeen), 0)
	c := candidate{
		id: t.id, label: t.label, room: t.room, rp: rp, size: t.size, conf: t.conf,
		dist:      math.Hypot(rp.X, rp.Y),
		bearing:   robot.Degrees(math.Atan2(rp.Y, rp.X)),
		lastSeen:  t.lastSeen,
		ago:       ago,
		uncertain: t.conf < s.minConf,
		stale:     ago > s.staleAfter,
	}
	if s.hasArm {
		c.reachable = math.Hypot(rp.X-s.armX, rp.Y-s.armY) <= s.reach
	}
	if s.cam != nil {
		c.inView = s.cam.seesObject(rp, t.size, rangeSlack(s.cam.maxRange))
	}
	c.seenNow = c.inView && ago <= s.seenWithin
	return c
}

// relevance orders objects for the model: what it can act on first. Fresh
// objects before stale ones, confident before uncertain, reachable before
// out of reach, then nearest first; the id breaks ties so the order is
// stable.
func relevance(a, b *candidate) int {
	if c := cmp.Or(
		boolCmp(a.stale, b.stale),
		boolCmp(a.uncertain, b.uncertain),
		boolCmp(!a.reachable, !b.reachable),
		cmp.Compare(a.dist, b.dist),
	); c != 0 {
		return c
	}
	return strings.Compare(a.id, b.id)
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

func (s *Summarizer) object(c *candidate) Object {
	return Object{
		ID:         c.id,
		Label:      c.label,
		Confidence: round(c.conf, 2),
		Uncertain:  c.uncertain,
		Position:   Frames{Robot: round3(c.rp), Room: round3(c.room)},
		Surface:    s.world.supportOf(c.room, c.size),
		Reachable:  c.reachable,
		DistanceM:  round(c.dist, 2),
		Bearing:    s.bearingWord(c.bearing),
		BearingDeg: round(c.bearing, 1),
		InView:     c.inView,
		SeenNow:    c.seenNow,
		LastSeen:   c.lastSeen,
		SeenAgoMS:  c.ago.Milliseconds(),
		Stale:      c.stale,
	}
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
		e := toolerr.New(toolerr.NotFound, "No object with id %q is known.", id).With("id", id)
		e.Suggestion = "call describe_scene and use one of the ids it lists"
		if ids := s.freshIDsLocked(now, 10); len(ids) > 0 {
			e.With("known_ids", ids)
		}
		return actions.ObjectInfo{}, e
	}
	if ago := now.Sub(t.lastSeen); ago > s.staleAfter {
		e := toolerr.New(toolerr.NotFound, "Object %s was last seen %s ago, longer than %s, so its position can no longer be trusted.",
			id, fmtAgo(ago), fmtAgo(s.staleAfter)).With("id", id).With("last_seen", t.lastSeen)
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

// text renders the scene's sentences:
//
//  1. a headline: how many objects, how many seen now and within reach,
//     and — when the budget cut the list — "showing 5 of 23" with the
//     labels left out;
//  2. one sentence per shown object, most relevant first: its label in
//     quotes, id, surface, distance and side, reach, and how fresh the
//     sighting is;
//  3. the left-to-right order of the confident objects seen now, as the
//     robot sees them;
//  4. what was left out of the last frame (malformed, unplaced detections)
//     and of the query (low confidence), so nothing is dropped silently.
//
// It appends to one byte slice with strconv rather than fmt: Describe is
// on the path of every describe_scene call.
func (s *Summarizer) text(q Query, cands []candidate, rank []int32, sc Scene, others map[string]int, last frameStats, havePose bool, now time.Time) string {
	b := make([]byte, 0, 256+160*sc.Shown)
	labelled := ""
	if q.Label != "" {
		labelled = " labelled " + quoted(q.Label)
	}
	switch {
	case s.cam == nil:
		return "This robot has no camera configured, so it cannot see objects."
	case sc.Total == 0 && q.Label != "":
		b = append(b, "No object"+labelled+" known."...)
		if len(others) > 0 {
			b = append(b, " Other objects: "...)
			b = appendCounts(b, others)
			b = append(b, "; call describe_scene without label to see them."...)
		} else {
			b = s.appendLookAround(b)
		}
	case sc.Total == 0:
		if !havePose {
			return "No camera frame received yet, so nothing is known about the scene."
		}
		b = append(b, "No objects detected."...)
		b = s.appendLookAround(b)
	default:
		reach, seen := 0, 0 // over all matching objects, shown or not
		for i := range cands {
			if cands[i].reachable && !cands[i].stale {
				reach++
			}
			if cands[i].seenNow {
				seen++
			}
		}
		b = strconv.AppendInt(b, int64(sc.Total), 10)
		b = append(b, ' ')
		b = append(b, plural(sc.Total, "object")...)
		b = append(b, labelled...)
		b = append(b, " known, "...)
		b = strconv.AppendInt(b, int64(seen), 10)
		b = append(b, " seen now"...)
		if s.hasArm {
			b = append(b, ", "...)
			b = strconv.AppendInt(b, int64(reach), 10)
			b = append(b, " within reach"...)
		}
		b = append(b, '.')
		if sc.Shown < sc.Total {
			hidden := map[string]int{}
			for _, i := range rank[sc.Shown:] {
				hidden[cands[i].label]++
			}
			b = append(b, " Showing "...)
			b = strconv.AppendInt(b, int64(sc.Shown), 10)
			b = append(b, " of "...)
			b = strconv.AppendInt(b, int64(sc.Total), 10)
			b = append(b, " (reachable, then nearest first); not shown: "...)
			b = appendCounts(b, hidden)
			if q.Label == "" {
				b = append(b, "; ask with label= to narrow."...)
			} else {
				b = append(b, "; ask with a larger max_objects (up to "...)
				b = strconv.AppendInt(b, MaxObjectsLimit, 10)
				b = append(b, ") to see more."...)
			}
		}
	}
	// One stale object says it may have moved; several say it once,
	// after the list, rather than after each of them.
	stale := 0
	for i := range sc.Objects {
		if sc.Objects[i].Stale {
			stale++
		}
	}
	for i := range sc.Objects {
		b = append(b, ' ')
		b = s.appendObject(b, &sc.Objects[i], &cands[rank[i]], stale == 1)
	}
	if stale > 1 {
		b = append(b, " The "...)
		b = strconv.AppendInt(b, int64(stale), 10)
		b = append(b, " objects not seen for a while may have moved since."...)
	}
	b = appendRelations(b, cands, rank[:sc.Shown])
	if sc.HiddenLowConfidence > 0 {
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(sc.HiddenLowConfidence), 10)
		b = append(b, " less confident "...)
		b = append(b, plural(sc.HiddenLowConfidence, "detection")...)
		b = append(b, " than min_confidence "...)
		b = strconv.AppendFloat(b, q.MinConfidence, 'g', -1, 64)
		b = append(b, " not shown."...)
	}
	if !last.at.IsZero() && now.Sub(last.at) <= s.staleAfter {
		if last.unplaced > 0 {
			b = append(b, ' ')
			b = strconv.AppendInt(b, int64(last.unplaced), 10)
			b = append(b, ' ')
			b = append(b, plural(last.unplaced, "detection")...)
			b = append(b, " in the last frame could not be placed (no depth and no surface below it, or beyond "...)
			b = strconv.AppendFloat(b, s.cam.maxRange, 'g', -1, 64)
			b = append(b, " m)."...)
		}
		if last.rejected > 0 {
			b = append(b, ' ')
			b = strconv.AppendInt(b, int64(last.rejected), 10)
			b = append(b, " malformed "...)
			b = append(b, plural(last.rejected, "detection")...)
			b = append(b, " in the last frame ignored."...)
		}
	}
	return string(b)
}

func (s *Summarizer) appendLookAround(b []byte) []byte {
	b = append(b, " The camera covers about "...)
	b = strconv.AppendFloat(b, s.cam.HorizontalFOVDeg(), 'f', 0, 64)
	b = append(b, "° ahead out to "...)
	b = strconv.AppendFloat(b, s.cam.maxRange, 'g', -1, 64)
	return append(b, " m; turn or move the robot to look elsewhere."...)
}

// plural returns word for one, word+"s" otherwise; the package only
// pluralises regular nouns (object, detection).
func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// appendCounts writes "10 box, 5 cup": most frequent label first.
func appendCounts(b []byte, counts map[string]int) []byte {
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
			b = append(b, " and "...)
			b = strconv.AppendInt(b, int64(len(list)-maxLabels), 10)
			b = append(b, " more labels"...)
			break
		}
		if i > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendInt(b, int64(e.n), 10)
		b = append(b, ' ')
		b = appendQuoted(b, e.label)
	}
	return b
}

// appendQuoted writes a label in double quotes. Every label the scene
// holds is normalised (NormalizeLabel) and so holds no quote mark: what the
// camera called an object can never close the quotes and read as the
// bridge's own words.
func appendQuoted(b []byte, label string) []byte {
	b = append(b, '"')
	b = append(b, label...)
	return append(b, '"')
}

func quoted(label string) string { return string(appendQuoted(nil, label)) }

// appendObject writes one object's sentence, e.g.
// `An object labelled "cup" (cup-1) on table is 0.92 m away 23° to the
// left, within reach.`. The label is quoted: it is what the camera called
// the object, data and never the bridge's words.
func (s *Summarizer) appendObject(b []byte, o *Object, c *candidate, sayMayHaveMoved bool) []byte {
	if o.Uncertain {
		b = append(b, "An uncertain detection labelled "...)
	} else {
		b = append(b, "An object labelled "...)
	}
	b = appendQuoted(b, o.Label)
	b = append(b, " ("...)
	b = append(b, o.ID...)
	if o.Uncertain {
		b = append(b, ", confidence "...)
		b = strconv.AppendFloat(b, o.Confidence, 'f', 2, 64)
	}
	b = append(b, ')')
	// Where it rests and how far it is make one clause, which the numbers
	// keep from repeating word for word when two objects share a surface.
	switch o.Surface {
	case "":
		b = append(b, " at "...)
		b = strconv.AppendFloat(b, o.Position.Room.Z, 'f', 2, 64)
		b = append(b, " m height on no known surface"...)
	case Floor:
		b = append(b, " on the floor"...)
	default:
		// A surface's name comes from the hw-config: written as it is,
		// never with an article ("on table", "on kitchen_counter").
		b = append(b, " on "...)
		b = append(b, o.Surface...)
	}
	b = append(b, " is "...)
	b = strconv.AppendFloat(b, o.DistanceM, 'f', 2, 64)
	b = append(b, " m "...)
	deg := math.Abs(o.BearingDeg)
	switch o.Bearing {
	case Ahead:
		b = append(b, "ahead"...)
	case Behind:
		b = append(b, "behind ("...)
		b = strconv.AppendFloat(b, deg, 'f', 0, 64)
		if o.BearingDeg < 0 {
			b = append(b, "° to the right)"...)
		} else {
			b = append(b, "° to the left)"...)
		}
	default:
		b = append(b, "away "...)
		b = strconv.AppendFloat(b, deg, 'f', 0, 64)
		b = append(b, "° to the "...)
		b = append(b, o.Bearing...)
	}
	if s.hasArm {
		if o.Reachable {
			b = append(b, ", within reach"...)
		} else {
			b = append(b, ", out of reach by "...)
			b = strconv.AppendFloat(b, math.Hypot(c.rp.X-s.armX, c.rp.Y-s.armY)-s.reach, 'f', 2, 64)
			b = append(b, " m"...)
		}
	}
	switch {
	case o.Stale:
		b = append(b, "; last seen "...)
		b = appendAgo(b, c.ago)
		b = append(b, " ago"...)
		if sayMayHaveMoved {
			b = append(b, ", may have moved"...)
		}
	case !o.SeenNow && !o.InView:
		b = append(b, "; seen "...)
		b = appendAgo(b, c.ago)
		b = append(b, " ago, out of view now"...)
	case !o.SeenNow:
		b = append(b, "; seen "...)
		b = appendAgo(b, c.ago)
		b = append(b, " ago, not detected in the latest frames"...)
	}
	return append(b, '.')
}

func appendAgo(b []byte, d time.Duration) []byte { return append(b, fmtAgo(d)...) }

// appendRelations states the left-to-right order, as seen from the robot,
// of the confident objects seen now: "cup-1 is left of bottle-1." for two,
// "Left to right as seen from the robot: a, b, c." for more. Two objects
// within 2° of each other are in line; the nearer is named as in front.
func appendRelations(b []byte, cands []candidate, shown []int32) []byte {
	var buf [MaxObjectsLimit]*candidate
	row := buf[:0]
	for _, i := range shown {
		if c := &cands[i]; c.seenNow && !c.uncertain && !c.stale {
			row = append(row, c)
		}
	}
	if len(row) < 2 {
		return b
	}
	slices.SortStableFunc(row, func(a, b *candidate) int { return cmp.Compare(b.bearing, a.bearing) })
	if len(row) == 2 {
		l, r := row[0], row[1]
		if l.bearing-r.bearing < 2 {
			near, far := l, r
			if far.dist < near.dist {
				near, far = far, near
			}
			b = append(b, " Seen from the robot, "...)
			b = append(b, near.id...)
			b = append(b, " is in front of "...)
			b = append(b, far.id...)
			return append(b, '.')
		}
		b = append(b, " Seen from the robot, "...)
		b = append(b, l.id...)
		b = append(b, " is left of "...)
		b = append(b, r.id...)
		return append(b, '.')
	}
	b = append(b, " Left to right as seen from the robot: "...)
	for i, c := range row {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, c.id...)
	}
	return append(b, '.')
}

// ParseQuery converts describe_scene's JSON arguments (as decoded into a
// map: numbers are float64) into a Query. Unknown keys and wrong types are
// INVALID_PARAMS errors naming the field; ranges are checked by Describe.
func ParseQuery(args map[string]any) (Query, error) {
	var q Query
	for k, v := range args {
		switch k {
		case "label":
			l, ok := v.(string)
			if !ok {
				return Query{}, invalidParam("label", "label must be a string, e.g. \"cup\"")
			}
			q.Label = l
		case "max_objects":
			f, ok := v.(float64)
			if !ok || f != math.Trunc(f) || math.Abs(f) > 1e6 {
				return Query{}, invalidParam("max_objects", "max_objects must be a whole number between 1 and %d", MaxObjectsLimit)
			}
			q.MaxObjects = int(f)
		case "min_confidence":
			f, ok := v.(float64)
			if !ok {
				return Query{}, invalidParam("min_confidence", "min_confidence must be a number between 0 and 1")
			}
			q.MinConfidence = f
		default:
			return Query{}, invalidParam(k, "unknown argument %q; describe_scene takes label, max_objects and min_confidence", k)
		}
	}
	return q, nil
}
