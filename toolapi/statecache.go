package toolapi

import (
	"bytes"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/robot"
)

// get_robot_state answers from an encoding made once per change of what
// it says. An answer (stateAnswer) is a pure function of its inputs: the
// state's content, the link, the state timeout, the condition, the age
// where the words say it, and the task holding the robot. Every call reads
// all of them afresh — the state, the link and the clock exactly as
// before (Server.observe), then the task — and compares them with the
// ones the cached answer was made from; the answer is reused only when
// every one is the same, else it is made again from the fresh inputs by
// the same code as always (stateText, robotWords, newStateData, the
// envelope and writeJSON's encoder) and replaces the cached one. So a
// cached answer can never say anything a fresh encode would not: a new
// state, an e-stop or a fault on the robot, a link that drops, a task that
// starts or ends, a state that turns stale, an age whose words change —
// each is a changed input, hence a new answer.
//
// The one part of the answer that changes with every call, data's
// state_age_ms, is not in the key: the encoding is kept cut around its
// digits (head, tail) and the call's own age goes in between. The age in
// words ("last seen … 2.5 s ago", said only when the state is not
// current) is in the key, as the words the call would say.
//
// Only get_robot_state's ok answer is cached; its failures (no state, link
// down, breaker open) are built and encoded per call as before.

// stateAnswer is one get_robot_state answer and the inputs it was made
// from. It is never changed once made.
type stateAnswer struct {
	// The key: every input of the answer but the age in milliseconds.
	state      robot.State // a deep copy, without Detections (never in the answer)
	linkUp     bool
	staleAfter time.Duration
	cond       robot.Condition
	// ageWords is the age as the answer's words say it, "" when they do
	// not say it (a current state).
	ageWords string
	busy     bool
	task     taskKey

	// text and robot are the envelope's text and robot fields.
	text, robot string
	// head and tail are the envelope exactly as writeJSON writes it, cut
	// around the digits of data.state_age_ms; both nil when the envelope
	// does not encode (writeJSON then reports that, as it always did).
	head, tail []byte
}

// taskKey is what the robot field says of the task holding the robot.
type taskKey struct {
	id, tool string
	status   fsm.State
}

// stateCache holds one robot's newest get_robot_state answer.
type stateCache struct{ p atomic.Pointer[stateAnswer] }

// stateAgeKey is data.state_age_ms as it is encoded, just before its
// digits.
var stateAgeKey = []byte(`"state_age_ms":`)

// answer is get_robot_state's ok answer for obs, read at the call:
// the cached answer when it was made from the same inputs, else a new one,
// which replaces it.
func (c *stateCache) answer(obs robot.Observation, active actions.TaskView, busy bool) *stateAnswer {
	cond := obs.Condition()
	var wordsBuf [16]byte
	var words []byte
	if !cond.Current() {
		words = appendAge(wordsBuf[:0], obs.Age())
	}
	if a := c.p.Load(); a != nil && a.matches(obs, cond, words, active, busy) {
		return a
	}
	a := newStateAnswer(obs, cond, string(words), active, busy)
	c.p.Store(a)
	return a
}

// matches reports whether a was made from the same inputs.
func (a *stateAnswer) matches(obs robot.Observation, cond robot.Condition, words []byte, v actions.TaskView, busy bool) bool {
	if a.cond != cond || a.linkUp != obs.LinkUp || a.staleAfter != obs.StaleAfter || a.ageWords != string(words) || a.busy != busy {
		return false
	}
	if busy && (a.task.id != v.ID || a.task.tool != v.Tool || a.task.status != v.Status) {
		return false
	}
	return sameState(&a.state, &obs.State)
}

// newStateAnswer makes the answer for obs with the code every answer is
// made with.
func newStateAnswer(obs robot.Observation, cond robot.Condition, words string, v actions.TaskView, busy bool) *stateAnswer {
	key := obs.State
	key.Detections = nil
	a := &stateAnswer{
		state: key.Clone(), linkUp: obs.LinkUp, staleAfter: obs.StaleAfter, cond: cond, ageWords: words, busy: busy,
		text: stateText(obs), robot: observedWords(obs, time.Time{}) + taskWords(v, busy),
	}
	if busy {
		a.task = taskKey{v.ID, v.Tool, v.Status}
	}
	env := outcome{data: newStateData(obs), text: a.text}.envelope(ToolGetRobotState)
	env.Robot = a.robot
	if b, err := encodeJSON(env); err == nil {
		a.head, a.tail = splitAge(b, obs.Age().Milliseconds())
	}
	return a
}

// splitAge cuts an encoded answer around the digits of its state_age_ms
// (ms); nil, nil when they are not where they must be.
func splitAge(b []byte, ms int64) (head, tail []byte) {
	if bytes.Count(b, stateAgeKey) != 1 {
		return nil, nil
	}
	i := bytes.Index(b, stateAgeKey) + len(stateAgeKey)
	digits := strconv.AppendInt(nil, ms, 10)
	if !bytes.HasPrefix(b[i:], digits) || !bytes.HasPrefix(b[i+len(digits):], []byte("}")) {
		return nil, nil
	}
	return b[:i:i], b[i+len(digits):]
}

// appendTo appends the answer with state_age_ms ageMS to dst.
func (a *stateAnswer) appendTo(dst []byte, ageMS int64) []byte {
	dst = append(dst, a.head...)
	dst = strconv.AppendInt(dst, ageMS, 10)
	return append(dst, a.tail...)
}

// sameState reports whether a and b say the same in an answer: every
// field the answer encodes or describes, floats bit for bit (0 and -0
// encode differently; a NaN never matches, and never encodes either).
// Detections are in neither. TestSameState_KnowsEveryField fails when
// robot.State gains a field this does not compare.
func sameState(a, b *robot.State) bool {
	if a.Stamp != b.Stamp || a.EStop != b.EStop || !samePose(a.Base, b.Base) ||
		!sameFloat(a.Velocity.V, b.Velocity.V) || !sameFloat(a.Velocity.W, b.Velocity.W) ||
		len(a.Joints) != len(b.Joints) || len(a.Faults) != len(b.Faults) || !sameBattery(a.Battery, b.Battery) ||
		(a.Gripper == nil) != (b.Gripper == nil) {
		return false
	}
	if a.Gripper != nil {
		g, h := a.Gripper, b.Gripper
		if !sameFloat(g.Opening, h.Opening) || g.Closed != h.Closed || g.Holding != h.Holding || !sameFloat(g.Force, h.Force) {
			return false
		}
	}
	for i := range a.Joints {
		j, k := &a.Joints[i], &b.Joints[i]
		if j.Name != k.Name || !sameFloat(j.Position, k.Position) || !sameFloat(j.Velocity, k.Velocity) {
			return false
		}
	}
	for i := range a.Faults {
		if a.Faults[i] != b.Faults[i] {
			return false
		}
	}
	return true
}

func sameFloat(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) && a == a }

func samePose(a, b robot.Pose2D) bool {
	return sameFloat(a.X, b.X) && sameFloat(a.Y, b.Y) && sameFloat(a.Theta, b.Theta)
}

func sameBattery(a, b robot.Battery) bool {
	return a.Known == b.Known && a.Charging == b.Charging && sameFloat(a.Percent, b.Percent) && sameFloat(a.Voltage, b.Voltage)
}

// appendAge appends robot.FormatAge(d) to dst without allocating: the age
// as every text says it (TestAppendAge_IsFormatAge holds them equal).
func appendAge(dst []byte, d time.Duration) []byte {
	d = max(d, 0)
	switch {
	case d < 10*time.Second:
		dst = strconv.AppendFloat(dst, math.Floor(d.Seconds()*10)/10, 'f', 1, 64)
		return append(dst, " s"...)
	case d < 2*time.Minute:
		return append(strconv.AppendInt(dst, int64(d/time.Second), 10), " s"...)
	case d < 2*time.Hour:
		return append(strconv.AppendInt(dst, int64(d/time.Minute), 10), " min"...)
	}
	return append(strconv.AppendInt(dst, int64(d/time.Hour), 10), " h"...)
}

// Header values shared by every response that sets them. net/http never
// changes a value slice in place (it copies the header when the response
// is written), and neither does this package.
var jsonContentType = []string{"application/json"}

// contentLengths holds the Content-Length values of the bodies up to
// 16 KiB, made on first use.
var contentLengths [16 << 10]atomic.Pointer[[]string]

// contentLength is the Content-Length header value of an n-byte body.
func contentLength(n int) []string {
	if n < 0 || n >= len(contentLengths) {
		return []string{strconv.Itoa(n)}
	}
	if v := contentLengths[n].Load(); v != nil {
		return *v
	}
	v := []string{strconv.Itoa(n)}
	contentLengths[n].Store(&v)
	return v
}

// bodyBufs are the buffers answers are put together in.
var bodyBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// writeStateAnswer writes a with state_age_ms ageMS as writeJSON writes
// the same envelope: status 200, the same headers, the same bytes.
func writeStateAnswer(w http.ResponseWriter, a *stateAnswer, ageMS int64) {
	bp := bodyBufs.Get().(*[]byte)
	b := a.appendTo((*bp)[:0], ageMS)
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = contentLength(len(b))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	if cap(b) <= 64<<10 {
		*bp = b[:0]
		bodyBufs.Put(bp)
	}
}
