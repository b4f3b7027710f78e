package perception

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jonboulle/clockwork"
	unorm "golang.org/x/text/unicode/norm"

	"github.com/robot-bridge/robot-bridge/actions"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
)

// Defaults of Conf and of the hw-config's perception section when it
// leaves a field at zero.
const (
	DefaultStaleAfter  = 5 * time.Second
	DefaultForgetAfter = 5 * time.Minute
	DefaultNMSIoU      = 0.5
	DefaultMaxObjects  = 8
	// MaxObjectsLimit is the largest budget a query may ask for: beyond it
	// the text stops being something a model reads closely.
	MaxObjectsLimit    = 50
	DefaultAheadDeg    = 5.0
	DefaultMatchRadius = 0.3
	DefaultMaxTracks   = 2000
)

// Conf configures a Summarizer.
type Conf struct {
	// Config is the robot's hw-config (required): the camera model, the
	// arm's mount and reach, the world's surfaces and the perception
	// section. A robot without a camera is allowed; its scene is always
	// empty and says why.
	Config *hwconfig.Config
	// Clock (optional) tells the time for staleness. It defaults to the
	// real clock.
	Clock clockwork.Clock
	// Logger (optional). It defaults to slog.Default(); a
	// component=perception attribute is added.
	Logger *slog.Logger
	// AheadDeg is the half-width of the dead band, in degrees of bearing,
	// inside which an object is "ahead" rather than left or right
	// (optional). It defaults to 5.
	AheadDeg float64
	// MatchRadius is how far (metres) a detection may be from a track of
	// the same label and still be the same object, before adding 5 % of
	// the range and half the object's size for estimation error (optional).
	// It defaults to 0.3.
	MatchRadius float64
	// MaxTracks caps the objects remembered; the longest unseen are
	// forgotten first (optional). It defaults to 2000.
	MaxTracks int
	// MaxDetections caps one frame; a larger frame is ignored as a whole
	// (optional). It defaults to DefaultMaxDetections.
	MaxDetections int
	// PixelNoise is the standard deviation of a box edge in pixels, used
	// to weigh the surface-plane position estimate (optional). It
	// defaults to 1.5.
	PixelNoise float64
	// DepthNoiseBase and DepthNoiseQuad model the depth's standard
	// deviation as base + quad·depth², the shape of stereo and
	// time-of-flight depth error (optional). They default to 0.01 m and
	// 0.01 m⁻¹ — about 2 % at 2 m, typical of RealSense-class cameras.
	DepthNoiseBase, DepthNoiseQuad float64
	// SeenWithin is how recent a detection must be for an object still in
	// the field of view to count as seen now (optional). It defaults to two
	// camera periods (0.4 s at 5 Hz), so one missed frame does not flicker.
	SeenWithin time.Duration
}

// Summarizer keeps track of the objects the camera reports and describes
// them on request. Update or Observe feed it frames; Describe and Lookup
// read it. All methods are safe for concurrent use; none calls out while
// holding the lock.
//
// Summarizer implements actions.Objects.
type Summarizer struct {
	cam   *Camera // nil when the robot has no camera
	world *world
	clock clockwork.Clock
	log   *slog.Logger
	lim   Limits

	minConf, nmsIoU    float64
	staleAfter, forget time.Duration
	seenWithin         time.Duration
	maxObjects         int
	aheadDeg, matchR   float64
	maxTracks          int
	pixelNoise         float64
	depthBase          float64
	depthQuad          float64
	hasArm             bool
	armX, armY, reach  float64

	mu        sync.Mutex
	tracks    []*track          // guarded by mu
	byID      map[string]*track // guarded by mu
	nextID    map[string]int    // guarded by mu; per id prefix, never reused
	pose      robot.Pose2D      // guarded by mu; the newest pose
	havePose  bool              // guarded by mu
	hist      poseHistory       // guarded by mu
	lastFrame time.Time         // guarded by mu; stamp of the last frame used
	last      frameStats        // guarded by mu; of the last frame
	// Scratch buffers reused frame to frame, guarded by mu.
	dets    []robot.Detection
	ests    []estimate
	pairs   []pair
	kept    []robot.Detection
	order   []int32
	taken   []bool
	fresh   []int
	byLabel []*track
}

var _ actions.Objects = (*Summarizer)(nil)

// track is one remembered object.
type track struct {
	id, label string
	room      robot.Vec3 // smoothed centre, room frame
	size      float64
	conf      float64
	hits      int
	lastSeen  time.Time
	matched   bool // scratch for one frame
}

// frameStats counts what happened to the detections of one frame, so the
// scene can say what was left out instead of dropping it silently.
type frameStats struct {
	at         time.Time
	received   int
	rejected   int // malformed
	suppressed int // duplicates removed by NMS
	unplaced   int // no position (above the horizon) or beyond range
	firstErr   string
}

type pair struct {
	det int
	tr  *track
	d   float64
}

// New returns a Summarizer for conf, filling defaults; errors wrap
// ErrInvalidConfig and name the field.
func New(conf Conf) (*Summarizer, error) {
	c := conf.Config
	if c == nil {
		return nil, fmt.Errorf("%w: Conf.Config is required", ErrInvalidConfig)
	}
	s := &Summarizer{
		world:  newWorld(c.World),
		clock:  conf.Clock,
		log:    conf.Logger,
		byID:   map[string]*track{},
		nextID: map[string]int{},
	}
	if s.clock == nil {
		s.clock = clockwork.NewRealClock()
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.log = s.log.With("component", "perception")
	if c.Camera != nil {
		cam, err := NewCamera(c.Camera)
		if err != nil {
			return nil, err
		}
		s.cam = cam
		s.lim = Limits{Width: c.Camera.Width, Height: c.Camera.Height, MaxDetections: conf.MaxDetections}.withDefaults()
	}
	p := c.Perception
	if math.IsNaN(p.MinConfidence) || p.MinConfidence < 0 || p.MinConfidence > 1 {
		return nil, fmt.Errorf("%w: perception.min_confidence must be in [0, 1], got %v", ErrInvalidConfig, p.MinConfidence)
	}
	if math.IsNaN(p.NMSIoU) || p.NMSIoU < 0 || p.NMSIoU > 1 {
		return nil, fmt.Errorf("%w: perception.nms_iou must be in (0, 1], got %v", ErrInvalidConfig, p.NMSIoU)
	}
	if p.StaleAfter < 0 || p.ForgetAfter < 0 {
		return nil, fmt.Errorf("%w: perception.stale_after and forget_after must not be negative", ErrInvalidConfig)
	}
	if p.MaxObjects < 0 || p.MaxObjects > MaxObjectsLimit {
		return nil, fmt.Errorf("%w: perception.max_objects must be in [1, %d], got %d", ErrInvalidConfig, MaxObjectsLimit, p.MaxObjects)
	}
	s.minConf = p.MinConfidence
	s.nmsIoU = orF(p.NMSIoU, DefaultNMSIoU)
	s.staleAfter = orD(p.StaleAfter.D(), DefaultStaleAfter)
	s.forget = orD(p.ForgetAfter.D(), DefaultForgetAfter)
	if s.forget < s.staleAfter {
		return nil, fmt.Errorf("%w: perception.forget_after (%v) must not be shorter than stale_after (%v)", ErrInvalidConfig, s.forget, s.staleAfter)
	}
	s.maxObjects = p.MaxObjects
	if s.maxObjects == 0 {
		s.maxObjects = DefaultMaxObjects
	}
	s.aheadDeg = orF(conf.AheadDeg, DefaultAheadDeg)
	s.matchR = orF(conf.MatchRadius, DefaultMatchRadius)
	s.pixelNoise = orF(conf.PixelNoise, 1.5)
	s.depthBase = orF(conf.DepthNoiseBase, 0.01)
	s.depthQuad = orF(conf.DepthNoiseQuad, 0.01)
	s.maxTracks = conf.MaxTracks
	if s.maxTracks <= 0 {
		s.maxTracks = DefaultMaxTracks
	}
	s.seenWithin = conf.SeenWithin
	if s.seenWithin <= 0 {
		s.seenWithin = 400 * time.Millisecond
		if s.cam != nil {
			s.seenWithin = time.Duration(2 / s.cam.rateHz * float64(time.Second))
		}
	}
	if a := c.Arm; a != nil {
		s.hasArm = true
		s.armX, s.armY = a.Mount.X, a.Mount.Y
		s.reach = a.Reach
		if s.reach <= 0 {
			for _, l := range a.LinkLengths {
				s.reach += l
			}
		}
	}
	return s, nil
}

func orF(v, def float64) float64 {
	if v <= 0 || math.IsNaN(v) {
		return def
	}
	return v
}

func orD(v, def time.Duration) time.Duration {
	if v <= 0 {
		return def
	}
	return v
}

// Camera returns the camera model, nil for a robot without a camera.
func (s *Summarizer) Camera() *Camera { return s.cam }

// Limits returns the detection limits of this robot's camera, for
// DecodeDetections on input from outside.
func (s *Summarizer) Limits() Limits { return s.lim }

// Run feeds every state from states to Update until ctx ends or states is
// closed. It is the usual way to attach the summarizer to a robot.Hub
// subscription.
func (s *Summarizer) Run(ctx context.Context, states <-chan robot.State) {
	for {
		select {
		case <-ctx.Done():
			return
		case st, ok := <-states:
			if !ok {
				return
			}
			s.Update(st)
		}
	}
}

// Update takes one robot state snapshot: it records the pose and, when the
// snapshot carries a camera frame not seen before (told apart by the
// detections' stamps, since a transport repeats the latest frame in every
// state), feeds it to the tracker with the pose the robot had when the
// image was taken. Detections without stamps cannot be told apart, so each
// state counts as a new frame: harmless for positions, but the objects
// stay "seen now" for as long as the transport repeats them.
func (s *Summarizer) Update(st robot.State) {
	now := s.clock.Now()
	if !finitePose(st.Base) {
		s.log.Warn("ignoring state with a non-finite pose", "pose", st.Base)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pose, s.havePose = st.Base, true
	if !st.Stamp.IsZero() {
		s.hist.add(st.Stamp, st.Base)
	}
	if len(st.Detections) == 0 {
		return
	}
	var stamp time.Time
	for i := range st.Detections {
		if st.Detections[i].Stamp.After(stamp) {
			stamp = st.Detections[i].Stamp
		}
	}
	if !stamp.IsZero() && stamp.Equal(s.lastFrame) {
		return
	}
	s.lastFrame = stamp
	pose, at := st.Base, now
	if !stamp.IsZero() && !st.Stamp.IsZero() {
		if p, ok := s.hist.at(stamp); ok {
			pose = p
		}
		// The image is older than the state by age; date it in our clock.
		if age := st.Stamp.Sub(stamp); age > 0 && age < s.staleAfter {
			at = now.Add(-age)
		}
	}
	s.observeLocked(pose, st.Detections, at)
}

// Observe feeds one camera frame taken at time at (this summarizer's
// clock) with the robot at pose. Invalid detections are skipped and
// counted; the scene mentions them.
func (s *Summarizer) Observe(pose robot.Pose2D, dets []robot.Detection, at time.Time) {
	if !finitePose(pose) {
		s.log.Warn("ignoring frame with a non-finite pose", "pose", pose)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pose, s.havePose = pose, true
	s.observeLocked(pose, dets, at)
}

func finitePose(p robot.Pose2D) bool {
	for _, v := range [...]float64{p.X, p.Y, p.Theta} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}

func (s *Summarizer) observeLocked(pose robot.Pose2D, in []robot.Detection, at time.Time) {
	st := frameStats{at: at, received: len(in)}
	defer func() { s.last = st }()
	if s.cam == nil {
		st.unplaced = len(in)
		return
	}
	if len(in) > s.lim.MaxDetections {
		st.rejected = len(in)
		st.firstErr = fmt.Sprintf("frame of %d detections exceeds the cap of %d", len(in), s.lim.MaxDetections)
		s.log.Warn("ignoring frame", "reason", st.firstErr)
		return
	}
	s.dets = s.dets[:0]
	// Validate into the scratch buffer; the copy's label is normalised
	// there, never the caller's.
	for i := range in {
		s.dets = append(s.dets, in[i])
		if err := checkDetection(i, &s.dets[len(s.dets)-1], s.lim); err != nil {
			s.dets = s.dets[:len(s.dets)-1]
			if st.rejected == 0 {
				st.firstErr = err.Error()
			}
			st.rejected++
		}
	}
	if st.rejected > 0 {
		s.log.Warn("skipped invalid detections", "count", st.rejected, "first", st.firstErr)
	}
	// Non-maximum suppression per label: strongest first, drop boxes that
	// overlap a kept box of the same label by nms_iou or more. An index
	// is sorted rather than the detections themselves, which hold
	// pointers and are four times the size.
	s.order = s.order[:0]
	for i := range s.dets {
		s.order = append(s.order, int32(i))
	}
	slices.SortFunc(s.order, func(i, j int32) int {
		a, b := &s.dets[i], &s.dets[j]
		if c := strings.Compare(a.Label, b.Label); c != 0 {
			return c
		}
		switch {
		case a.Confidence > b.Confidence:
			return -1
		case a.Confidence < b.Confidence:
			return 1
		}
		return int(i - j)
	})
	s.kept = s.kept[:0]
	start := 0 // first kept index of the current label
	for _, i := range s.order {
		d := &s.dets[i]
		if len(s.kept) > 0 && s.kept[len(s.kept)-1].Label != d.Label {
			start = len(s.kept)
		}
		dup := false
		for j := start; j < len(s.kept); j++ {
			if iou(&s.kept[j].BBox, &d.BBox) >= s.nmsIoU {
				dup = true
				break
			}
		}
		if dup {
			st.suppressed++
			continue
		}
		s.kept = append(s.kept, *d)
	}
	s.dets, s.kept = s.kept, s.dets
	// Place every detection in the room.
	s.ests = s.ests[:0]
	n := 0
	for i := range s.dets {
		e, ok := s.locate(pose, &s.dets[i])
		if !ok || e.rng > s.cam.maxRange+rangeSlack(s.cam.maxRange) {
			st.unplaced++
			continue
		}
		s.dets[n] = s.dets[i]
		s.ests = append(s.ests, e)
		n++
	}
	s.dets = s.dets[:n]
	s.associate(at)
	s.pruneLocked(at)
}

// rangeSlack is how far beyond the camera's range an estimate may fall and
// still be taken as measurement noise of an object inside the range.
func rangeSlack(maxRange float64) float64 { return 0.2 + 0.05*maxRange }

// associate matches the placed detections to tracks of the same label,
// nearest pairs first inside a gate that grows with range, updates the
// matched tracks and starts new ones for the rest.
func (s *Summarizer) associate(at time.Time) {
	s.pairs = s.pairs[:0]
	// Tracks sorted by label, so each detection is compared only with
	// tracks of its own label (the detections are label-sorted by NMS).
	s.byLabel = append(s.byLabel[:0], s.tracks...)
	slices.SortFunc(s.byLabel, func(a, b *track) int { return strings.Compare(a.label, b.label) })
	lo, hi := 0, 0 // s.byLabel[lo:hi] has the current detection's label
	for i := range s.dets {
		label := s.dets[i].Label
		if i == 0 || label != s.dets[i-1].Label {
			lo, _ = slices.BinarySearchFunc(s.byLabel, label, func(t *track, l string) int { return strings.Compare(t.label, l) })
			for hi = lo; hi < len(s.byLabel) && s.byLabel[hi].label == label; hi++ {
				s.byLabel[hi].matched = false
			}
		}
		e := &s.ests[i]
		gate := s.matchR + 0.05*e.rng + e.size/2
		for _, t := range s.byLabel[lo:hi] {
			dx, dy, dz := t.room.X-e.room.X, t.room.Y-e.room.Y, t.room.Z-e.room.Z
			if d2 := dx*dx + dy*dy + dz*dz; d2 <= gate*gate {
				s.pairs = append(s.pairs, pair{det: i, tr: t, d: math.Sqrt(d2)})
			}
		}
	}
	slices.SortFunc(s.pairs, func(a, b pair) int {
		switch {
		case a.d < b.d:
			return -1
		case a.d > b.d:
			return 1
		}
		return a.det - b.det
	})
	s.taken = slices.Grow(s.taken[:0], len(s.dets))[:len(s.dets)]
	clear(s.taken)
	for _, p := range s.pairs {
		if s.taken[p.det] || p.tr.matched {
			continue
		}
		s.taken[p.det], p.tr.matched = true, true
		s.updateTrack(p.tr, &s.dets[p.det], &s.ests[p.det], at)
	}
	// New objects are numbered nearest first, so within one label a lower
	// number means closer at first sight — easier for a person to follow
	// than the detector's order.
	s.fresh = s.fresh[:0]
	for i := range s.dets {
		if !s.taken[i] {
			s.fresh = append(s.fresh, i)
		}
	}
	slices.SortFunc(s.fresh, func(a, b int) int { return cmp.Compare(s.ests[a].rng, s.ests[b].rng) })
	for _, i := range s.fresh {
		prefix := idPrefix(s.dets[i].Label)
		s.nextID[prefix]++
		t := &track{id: prefix + "-" + strconv.Itoa(s.nextID[prefix]), label: s.dets[i].Label}
		s.updateTrack(t, &s.dets[i], &s.ests[i], at)
		s.tracks = append(s.tracks, t)
		s.byID[t.id] = t
	}
}

// updateTrack folds one detection into t: a running mean over the first
// hits (noise averages out on a still object), then an exponential average
// with weight 0.3 so a moved object is followed within a few frames.
func (s *Summarizer) updateTrack(t *track, d *robot.Detection, e *estimate, at time.Time) {
	t.hits++
	a := math.Max(1/float64(t.hits), 0.3)
	t.room = add(t.room, scale(sub(e.room, t.room), a))
	t.size += a * (e.size - t.size)
	if t.hits == 1 {
		t.conf = d.Confidence
	} else {
		t.conf += 0.5 * (d.Confidence - t.conf)
	}
	if at.After(t.lastSeen) {
		t.lastSeen = at
	}
}

// pruneLocked forgets tracks unseen for longer than forget_after and, over
// the cap, the longest unseen. A tentative track — one low-confidence
// detection never confirmed by a second — is forgotten once it is stale:
// it was almost certainly a false positive, and listing such blips for
// minutes buries the real objects in the text a model reads.
func (s *Summarizer) pruneLocked(now time.Time) {
	n := 0
	for _, t := range s.tracks {
		unseen := now.Sub(t.lastSeen)
		tentative := t.hits < 2 && t.conf < s.minConf
		if unseen > s.forget || (tentative && unseen > s.staleAfter) {
			delete(s.byID, t.id)
			continue
		}
		s.tracks[n] = t
		n++
	}
	clear(s.tracks[n:])
	s.tracks = s.tracks[:n]
	if over := len(s.tracks) - s.maxTracks; over > 0 {
		slices.SortStableFunc(s.tracks, func(a, b *track) int { return b.lastSeen.Compare(a.lastSeen) })
		for _, t := range s.tracks[s.maxTracks:] {
			delete(s.byID, t.id)
		}
		clear(s.tracks[s.maxTracks:])
		s.tracks = s.tracks[:s.maxTracks]
	}
}

// maxIDPrefix caps the stem of an object id, in bytes.
const maxIDPrefix = 32

// idPrefix turns a label into the stem of its objects' ids, a safe
// identifier whatever the label says: lower-case ASCII letters and digits
// in runs joined by single '-', at most 32 bytes, never ending in '-'.
// Accents are dropped from Latin letters ("Café" is cafe); any other
// character separates runs; "object" when nothing is left (a label in
// another script: its objects are object-1, object-2, …). The grasp tool's
// object_id accepts exactly such ids.
func idPrefix(label string) string {
	for i := range len(label) {
		if label[i] >= utf8.RuneSelf {
			label = unorm.NFKD.String(label)
			break
		}
	}
	var buf [maxIDPrefix]byte
	n, dash := 0, false
	for _, r := range label {
		switch {
		case 'a' <= r && r <= 'z', '0' <= r && r <= '9':
		case 'A' <= r && r <= 'Z':
			r += 'a' - 'A'
		case unicode.Is(unicode.Mn, r):
			continue // the accent of a decomposed letter
		default:
			dash = true
			continue
		}
		need := 1
		if dash && n > 0 {
			need = 2
		}
		if n+need > maxIDPrefix {
			break
		}
		if need == 2 {
			buf[n] = '-'
			n++
		}
		buf[n] = byte(r)
		n++
		dash = false
	}
	if n == 0 {
		return "object"
	}
	return string(buf[:n])
}

// poseHistory is a ring of recent (stamp, pose) pairs, to find where the
// robot was when an image was taken.
type poseHistory struct {
	stamps  [64]time.Time
	poses   [64]robot.Pose2D
	n, head int
}

func (h *poseHistory) add(t time.Time, p robot.Pose2D) {
	if h.n > 0 && !t.After(h.stamps[(h.head+63)%64]) {
		return // Out of order or repeated: keep the ring sorted.
	}
	h.stamps[h.head], h.poses[h.head] = t, p
	h.head = (h.head + 1) % 64
	if h.n < 64 {
		h.n++
	}
}

// at interpolates the pose at t; false when t is outside the recorded span.
func (h *poseHistory) at(t time.Time) (robot.Pose2D, bool) {
	for k := 0; k < h.n; k++ {
		i := (h.head + 63 - k) % 64 // newest first
		if h.stamps[i].After(t) {
			continue
		}
		if h.stamps[i].Equal(t) || k == 0 {
			if k == 0 && !h.stamps[i].Equal(t) {
				return robot.Pose2D{}, false // Newer than anything recorded.
			}
			return h.poses[i], true
		}
		j := (i + 1) % 64 // the next newer sample
		f := float64(t.Sub(h.stamps[i])) / float64(h.stamps[j].Sub(h.stamps[i]))
		a, b := h.poses[i], h.poses[j]
		return robot.Pose2D{
			X:     a.X + f*(b.X-a.X),
			Y:     a.Y + f*(b.Y-a.Y),
			Theta: robot.NormalizeAngle(a.Theta + f*robot.NormalizeAngle(b.Theta-a.Theta)),
		}, true
	}
	return robot.Pose2D{}, false
}
