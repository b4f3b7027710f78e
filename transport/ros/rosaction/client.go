package rosaction

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bluenviron/goroslib/v2"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/actionlib_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/std_msgs"
)

// GoalMsg is an action goal envelope (FooActionGoal) as a pointer type.
type GoalMsg[T any] interface {
	*T
	GoalID() actionlib_msgs.GoalID
	SetGoalID(h std_msgs.Header, id actionlib_msgs.GoalID)
}

// StatusMsg is a result or feedback envelope as a pointer type.
type StatusMsg[T any] interface {
	*T
	GoalStatus() actionlib_msgs.GoalStatus
	SetStatus(h std_msgs.Header, s actionlib_msgs.GoalStatus)
}

// ErrClosed means the client or server was closed.
var ErrClosed = errors.New("action endpoint closed")

// ClientConf configures a Client.
type ClientConf[AR, AF any] struct {
	// Node is the goroslib node the client's topics live on. Required.
	Node *goroslib.Node
	// Name is the action namespace, e.g. "move_base" or
	// "arm_controller/follow_joint_trajectory". Required.
	Name string
	// OnTerminal (optional) is called once per goal when it reaches a
	// terminal state (including LOST by Expire), with no lock held.
	OnTerminal func(g *Goal)
	// OnResult (optional) receives every result message of a goal this
	// client tracks, before OnTerminal, with no lock held.
	OnResult func(g *Goal, res *AR)
	// OnFeedback (optional) receives every feedback message of a goal this
	// client tracks, with no lock held.
	OnFeedback func(g *Goal, fb *AF)
	// Now (optional) is the clock used for status ages. It defaults to
	// time.Now.
	Now func() time.Time
	// ResultTimeout is how long a goal that the status array reports
	// finished waits for its result message before Expire ends it anyway
	// with the reported state (optional). It defaults to 1s. Like
	// actionlib's WAITING_FOR_RESULT, it lets the result's payload reach
	// OnResult before OnTerminal, whichever of the two topics arrives
	// first.
	ResultTimeout time.Duration
	// ResendPeriod is how often a goal the server has not acknowledged is
	// published again, with the same id (optional). It defaults to 50ms.
	// TCPROS delivers nothing to a subscriber whose connection is still
	// being set up, so a goal sent just after the server (re)started can
	// vanish; actionlib servers ignore a goal id they already hold, so
	// sending it again is harmless. Resending stops at the first word
	// from the server, at a cancel, or after ResendFor.
	ResendPeriod time.Duration
	// ResendFor bounds the resending (optional). It defaults to 5s.
	ResendFor time.Duration
}

// Client is an actionlib client for one action.
type Client[AG, AR, AF any, PG GoalMsg[AG], PR StatusMsg[AR], PF StatusMsg[AF]] struct {
	conf      ClientConf[AR, AF]
	goalPub   *goroslib.Publisher
	cancelPub *goroslib.Publisher
	statusSub *goroslib.Subscriber
	resultSub *goroslib.Subscriber
	fbSub     *goroslib.Subscriber
	seq       atomic.Uint64
	closed    atomic.Bool

	mu         sync.Mutex
	goals      map[string]*Goal // guarded by mu
	lastStatus time.Time        // guarded by mu
}

// Goal is the client's handle of one goal.
type Goal struct {
	// ID is the actionlib goal id.
	ID string
	// Action is the action namespace.
	Action string
	// Sent is when the goal was published.
	Sent time.Time

	acked chan struct{}
	done  chan struct{}

	mu         sync.Mutex
	state      State     // guarded by mu
	text       string    // guarded by mu
	seen       bool      // guarded by mu: the server has listed the goal
	cancelled  bool      // guarded by mu: this client asked to cancel it
	terminal   bool      // guarded by mu: ended (Done closed)
	resultWait bool      // guarded by mu: status said terminal, result not in yet
	waitSince  time.Time // guarded by mu
	lastSeen   time.Time // guarded by mu
}

// State returns the goal's latest known state and the server's text.
func (g *Goal) State() (State, string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.state, g.text
}

// CancelRequested reports whether this client asked to cancel the goal, so a
// PREEMPTED or RECALLED outcome was expected rather than imposed.
func (g *Goal) CancelRequested() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cancelled
}

// Done is closed when the goal reaches a terminal state.
func (g *Goal) Done() <-chan struct{} { return g.done }

// WaitAck blocks until the server first reports the goal (in any state) and
// returns that state: PENDING or ACTIVE for an accepted goal, REJECTED,
// RECALLED or another terminal state otherwise. It returns ctx's error when
// the server stays silent, which is how a goal the server never answers is
// told apart from a slow one.
func (g *Goal) WaitAck(ctx context.Context) (State, string, error) {
	select {
	case <-g.acked:
		s, t := g.State()
		return s, t, nil
	case <-ctx.Done():
		return 0, "", context.Cause(ctx)
	}
}

// observe applies a state the server reported in its status array or
// feedback, and returns true when this is the first word of the server
// about the goal (the acknowledgement). A terminal state does not end the
// goal here: it waits for the result message (see finish), and later
// non-terminal reports cannot undo it.
func (g *Goal) observe(s State, text string, now time.Time) (ackedNow bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lastSeen = now
	if g.terminal {
		return false
	}
	if !g.seen {
		g.seen = true
		ackedNow = true
	}
	if g.resultWait {
		return ackedNow
	}
	g.state, g.text = s, text
	if s.Terminal() {
		g.resultWait, g.waitSince = true, now
	}
	return ackedNow
}

// end makes the goal terminal in state s; it returns whether this is the
// first word about the goal and whether it ended now (false when it had
// ended already).
func (g *Goal) end(s State, text string, now time.Time) (ackedNow, endedNow bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lastSeen = now
	if g.terminal {
		return false, false
	}
	if !g.seen {
		g.seen = true
		ackedNow = true
	}
	g.state, g.text, g.terminal, g.resultWait = s, text, true, false
	return ackedNow, true
}

// NewClient advertises the goal and cancel topics and subscribes to status,
// feedback and result under conf.Name.
func NewClient[AG, AR, AF any, PG GoalMsg[AG], PR StatusMsg[AR], PF StatusMsg[AF]](conf ClientConf[AR, AF]) (*Client[AG, AR, AF, PG, PR, PF], error) {
	if conf.Node == nil {
		return nil, errors.New("rosaction: ClientConf.Node is required")
	}
	if conf.Name == "" {
		return nil, errors.New("rosaction: ClientConf.Name is required")
	}
	if conf.Now == nil {
		conf.Now = time.Now
	}
	if conf.ResultTimeout <= 0 {
		conf.ResultTimeout = time.Second
	}
	if conf.ResendPeriod <= 0 {
		conf.ResendPeriod = 50 * time.Millisecond
	}
	if conf.ResendFor <= 0 {
		conf.ResendFor = 5 * time.Second
	}
	c := &Client[AG, AR, AF, PG, PR, PF]{conf: conf, goals: map[string]*Goal{}}
	var err error
	fail := func(what string, err error) (*Client[AG, AR, AF, PG, PR, PF], error) {
		c.Close()
		return nil, fmt.Errorf("rosaction: action %s: %s: %w", conf.Name, what, err)
	}
	if c.goalPub, err = goroslib.NewPublisher(goroslib.PublisherConf{Node: conf.Node, Topic: conf.Name + "/goal", Msg: PG(new(AG))}); err != nil {
		return fail("goal publisher", err)
	}
	if c.cancelPub, err = goroslib.NewPublisher(goroslib.PublisherConf{Node: conf.Node, Topic: conf.Name + "/cancel", Msg: &actionlib_msgs.GoalID{}}); err != nil {
		return fail("cancel publisher", err)
	}
	if c.statusSub, err = goroslib.NewSubscriber(goroslib.SubscriberConf{Node: conf.Node, Topic: conf.Name + "/status", Callback: c.onStatus}); err != nil {
		return fail("status subscriber", err)
	}
	if c.resultSub, err = goroslib.NewSubscriber(goroslib.SubscriberConf{Node: conf.Node, Topic: conf.Name + "/result", Callback: func(m PR) { c.onResult(m) }}); err != nil {
		return fail("result subscriber", err)
	}
	if c.fbSub, err = goroslib.NewSubscriber(goroslib.SubscriberConf{Node: conf.Node, Topic: conf.Name + "/feedback", Callback: func(m PF) { c.onFeedback(m) }}); err != nil {
		return fail("feedback subscriber", err)
	}
	return c, nil
}

// Close ends every subscription and publication. Tracked goals stay as
// they are; the caller decides what an unfinished goal means.
func (c *Client[AG, AR, AF, PG, PR, PF]) Close() {
	c.closed.Store(true)
	for _, s := range []*goroslib.Subscriber{c.fbSub, c.resultSub, c.statusSub} {
		if s != nil {
			s.Close()
		}
	}
	for _, p := range []*goroslib.Publisher{c.cancelPub, c.goalPub} {
		if p != nil {
			p.Close()
		}
	}
}

// Send stamps goal with a fresh id (prefixed by idPrefix, which should name
// the sending node) and publishes it. It does not wait for the server; use
// the handle's WaitAck.
func (c *Client[AG, AR, AF, PG, PR, PF]) Send(goal PG, idPrefix string) (*Goal, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	g := c.track(goal, idPrefix, time.Time{})
	c.goalPub.Write(goal)
	go c.resend(g, goal)
	return g, nil
}

// SendOnce is Send for a goal whose content is only true when it is sent,
// such as an arm hold at the joint positions just measured: it stamps the
// goal with stamp (the client's clock when zero) and publishes it exactly
// once. It is never resent, because a copy reaching a server whose
// connection came up later would command a state that has aged since; a
// goal lost that way is simply not executed.
func (c *Client[AG, AR, AF, PG, PR, PF]) SendOnce(goal PG, idPrefix string, stamp time.Time) (*Goal, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	g := c.track(goal, idPrefix, stamp)
	c.goalPub.Write(goal)
	return g, nil
}

// resend publishes goal again every ResendPeriod until the server first
// mentions it, this client cancels it, the client closes, or ResendFor
// passes (see ClientConf.ResendPeriod).
func (c *Client[AG, AR, AF, PG, PR, PF]) resend(g *Goal, goal PG) {
	t := time.NewTicker(c.conf.ResendPeriod)
	defer t.Stop()
	stop := time.After(c.conf.ResendFor)
	for {
		select {
		case <-g.acked:
			return
		case <-g.done:
			return
		case <-stop:
			return
		case <-t.C:
		}
		if c.closed.Load() || g.CancelRequested() {
			return
		}
		select {
		case <-g.acked:
			return
		default:
		}
		c.goalPub.Write(goal)
	}
}

// track stamps goal with a fresh id and stamp (the client's clock when
// stamp is zero) and starts tracking it, before it is published, so that no
// status about it can arrive untracked.
func (c *Client[AG, AR, AF, PG, PR, PF]) track(goal PG, idPrefix string, stamp time.Time) *Goal {
	now := stamp
	if now.IsZero() {
		now = c.conf.Now()
	}
	n := c.seq.Add(1)
	id := idPrefix + "-" + strconv.FormatUint(n, 10) + "-" + strconv.FormatFloat(float64(now.UnixNano())/1e9, 'f', 6, 64)
	goal.SetGoalID(std_msgs.Header{Stamp: now}, actionlib_msgs.GoalID{Stamp: now, Id: id})
	g := &Goal{ID: id, Action: c.conf.Name, Sent: now, acked: make(chan struct{}), done: make(chan struct{})}
	c.mu.Lock()
	c.goals[id] = g
	c.mu.Unlock()
	return g
}

// Cancel asks the server to cancel one goal.
func (c *Client[AG, AR, AF, PG, PR, PF]) Cancel(g *Goal) {
	g.mu.Lock()
	g.cancelled = true
	g.mu.Unlock()
	if !c.closed.Load() {
		c.cancelPub.Write(&actionlib_msgs.GoalID{Id: g.ID})
	}
}

// CancelAll asks the server to cancel every goal stamped at or before
// stamp (an empty goal id, as actionlib defines; a zero stamp cancels
// every goal), including goals of other clients. A goal sent after the
// cancel with a later stamp survives it even if it reaches the server
// first, and is not counted as cancelled here either; sending the same
// cancel again therefore never touches such a goal.
func (c *Client[AG, AR, AF, PG, PR, PF]) CancelAll(stamp time.Time) {
	c.mu.Lock()
	for _, g := range c.goals {
		if !stamp.IsZero() && g.Sent.After(stamp) {
			continue
		}
		g.mu.Lock()
		g.cancelled = true
		g.mu.Unlock()
	}
	c.mu.Unlock()
	if !c.closed.Load() {
		c.cancelPub.Write(&actionlib_msgs.GoalID{Stamp: stamp})
	}
}

// StatusAge returns how long ago the server last published its status, and
// false if it never did.
func (c *Client[AG, AR, AF, PG, PR, PF]) StatusAge() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lastStatus.IsZero() {
		return 0, false
	}
	return c.conf.Now().Sub(c.lastStatus), true
}

// Pending returns the goals not yet terminal.
func (c *Client[AG, AR, AF, PG, PR, PF]) Pending() []*Goal {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Goal, 0, len(c.goals))
	for _, g := range c.goals {
		out = append(out, g)
	}
	return out
}

// Expire declares LOST every goal the server acknowledged but has not
// mentioned for longer than maxAge (the server died or hangs), and ends
// every goal reported finished whose result has not come within
// ClientConf.ResultTimeout, with the state the status reported. Nothing
// else times a goal out, so the owner calls it periodically. It returns
// the goals it ended (their OnTerminal has run).
func (c *Client[AG, AR, AF, PG, PR, PF]) Expire(maxAge time.Duration) []*Goal {
	now := c.conf.Now()
	type end struct {
		g    *Goal
		s    State
		text string
	}
	var ends []end
	c.mu.Lock()
	for id, g := range c.goals {
		g.mu.Lock()
		switch {
		case g.terminal:
		case g.resultWait && now.Sub(g.waitSince) > c.conf.ResultTimeout:
			ends = append(ends, end{g, g.state, g.text})
			delete(c.goals, id)
		case !g.resultWait && g.seen && now.Sub(g.lastSeen) > maxAge:
			ends = append(ends, end{g, Lost, fmt.Sprintf("no status from the action server for more than %s", maxAge)})
			delete(c.goals, id)
		}
		g.mu.Unlock()
	}
	c.mu.Unlock()
	out := make([]*Goal, 0, len(ends))
	for _, e := range ends {
		c.finish(e.g, e.s, e.text, now)
		out = append(out, e.g)
	}
	return out
}

// finish moves g to a terminal state (if it is not already) and notifies.
func (c *Client[AG, AR, AF, PG, PR, PF]) finish(g *Goal, s State, text string, now time.Time) {
	acked, ended := g.end(s, text, now)
	if acked {
		close(g.acked)
	}
	if ended {
		close(g.done)
		if c.conf.OnTerminal != nil {
			c.conf.OnTerminal(g)
		}
	}
}

// ack closes g's acknowledgement channel once.
func ack(g *Goal, first bool) {
	if first {
		close(g.acked)
	}
}

func (c *Client[AG, AR, AF, PG, PR, PF]) onStatus(m *actionlib_msgs.GoalStatusArray) {
	now := c.conf.Now()
	type upd struct {
		g    *Goal
		s    State
		text string
	}
	var ups, ends []upd
	c.mu.Lock()
	c.lastStatus = now
	if len(c.goals) > 0 {
		listed := make(map[string]int, len(m.StatusList))
		for i, st := range m.StatusList {
			listed[st.GoalId.Id] = i
		}
		for id, g := range c.goals {
			i, ok := listed[id]
			if ok {
				st := m.StatusList[i]
				s := State(st.Status)
				if !s.Valid() {
					continue
				}
				ups = append(ups, upd{g, s, st.Text})
				continue
			}
			g.mu.Lock()
			seen, waiting, s, text := g.seen, g.resultWait, g.state, g.text
			g.mu.Unlock()
			switch {
			case waiting:
				// Reported finished before, dropped from the list since:
				// the result went astray; the reported state stands.
				ends = append(ends, upd{g, s, text})
				delete(c.goals, id)
			case seen:
				// actionlib's rule: a goal the server listed before and
				// omits now is lost.
				ends = append(ends, upd{g, Lost, "the action server no longer lists the goal"})
				delete(c.goals, id)
			}
		}
	}
	c.mu.Unlock()
	for _, u := range ups {
		ack(u.g, u.g.observe(u.s, u.text, now))
	}
	for _, u := range ends {
		c.finish(u.g, u.s, u.text, now)
	}
}

func (c *Client[AG, AR, AF, PG, PR, PF]) lookup(id string, terminal bool) *Goal {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.goals[id]
	if g != nil && terminal {
		delete(c.goals, id)
	}
	return g
}

func (c *Client[AG, AR, AF, PG, PR, PF]) onResult(m PR) {
	st := m.GoalStatus()
	s := State(st.Status)
	if !s.Valid() {
		return
	}
	g := c.lookup(st.GoalId.Id, true)
	if g == nil {
		return
	}
	if c.conf.OnResult != nil {
		c.conf.OnResult(g, (*AR)(m))
	}
	if !s.Terminal() {
		// A result always ends a goal; a server that says otherwise is
		// treated as having aborted it.
		s = Aborted
	}
	c.finish(g, s, st.Text, c.conf.Now())
}

func (c *Client[AG, AR, AF, PG, PR, PF]) onFeedback(m PF) {
	st := m.GoalStatus()
	s := State(st.Status)
	g := c.lookup(st.GoalId.Id, false)
	if g == nil || !s.Valid() {
		return
	}
	if !s.Terminal() {
		ack(g, g.observe(s, st.Text, c.conf.Now()))
	}
	if c.conf.OnFeedback != nil {
		c.conf.OnFeedback(g, (*AF)(m))
	}
}
