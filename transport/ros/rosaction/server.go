package rosaction

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/bluenviron/goroslib/v2"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/actionlib_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/std_msgs"
)

// ServerConf configures a Server.
type ServerConf[AG any] struct {
	// Node is the goroslib node the server's topics live on. Required.
	Node *goroslib.Node
	// Name is the action namespace. Required.
	Name string
	// OnGoal is called for every new goal, with no lock held; it must
	// decide (Accept or Reject) before returning or soon after. Required.
	OnGoal func(g *ServerGoal, goal *AG)
	// OnCancel (optional) is called when a client cancels a goal that is
	// not terminal yet, with no lock held. Without it a cancelled goal is
	// ended at once (RECALLED or PREEMPTED).
	OnCancel func(g *ServerGoal)
	// StatusPeriod is how often the status array is published besides on
	// every transition (optional). It defaults to 100ms.
	StatusPeriod time.Duration
	// KeepFinished is how long a finished goal stays in the status array
	// (optional). It defaults to 5s, as actionlib's status_list_timeout.
	KeepFinished time.Duration
}

// ServerGoal is one goal on a Server.
type ServerGoal struct {
	ID    string
	stamp time.Time

	state    State     // guarded by Server.mu
	text     string    // guarded by Server.mu
	ended    time.Time // guarded by Server.mu
	canceled bool      // guarded by Server.mu
	// early is true for a goal known only from a cancel that came
	// before it (guarded by Server.mu).
	early bool
}

// Server is an actionlib server for one action.
type Server[AG, AR, AF any, PG GoalMsg[AG], PR StatusMsg[AR], PF StatusMsg[AF]] struct {
	conf      ServerConf[AG]
	statusPub *goroslib.Publisher
	resultPub *goroslib.Publisher
	fbPub     *goroslib.Publisher
	goalSub   *goroslib.Subscriber
	cancelSub *goroslib.Subscriber

	pubMu sync.Mutex // orders status publications

	mu    sync.Mutex
	goals map[string]*ServerGoal // guarded by mu
	order []string               // guarded by mu
	seq   uint32                 // guarded by mu
	// lastCancel is the latest stamp of a cancel-all request: a goal
	// stamped at or before it that arrives later is cancelled on arrival
	// (guarded by mu).
	lastCancel time.Time

	stop chan struct{}
	done chan struct{}
}

// NewServer advertises status, feedback and result and subscribes to goal
// and cancel under conf.Name.
func NewServer[AG, AR, AF any, PG GoalMsg[AG], PR StatusMsg[AR], PF StatusMsg[AF]](conf ServerConf[AG]) (*Server[AG, AR, AF, PG, PR, PF], error) {
	if conf.Node == nil || conf.Name == "" || conf.OnGoal == nil {
		return nil, errors.New("rosaction: ServerConf.Node, Name and OnGoal are required")
	}
	if conf.StatusPeriod <= 0 {
		conf.StatusPeriod = 100 * time.Millisecond
	}
	if conf.KeepFinished <= 0 {
		conf.KeepFinished = 5 * time.Second
	}
	s := &Server[AG, AR, AF, PG, PR, PF]{conf: conf, goals: map[string]*ServerGoal{}, stop: make(chan struct{}), done: make(chan struct{})}
	var err error
	fail := func(what string, err error) (*Server[AG, AR, AF, PG, PR, PF], error) {
		s.closeTopics()
		return nil, fmt.Errorf("rosaction: action server %s: %s: %w", conf.Name, what, err)
	}
	if s.statusPub, err = goroslib.NewPublisher(goroslib.PublisherConf{Node: conf.Node, Topic: conf.Name + "/status", Msg: &actionlib_msgs.GoalStatusArray{}}); err != nil {
		return fail("status publisher", err)
	}
	if s.resultPub, err = goroslib.NewPublisher(goroslib.PublisherConf{Node: conf.Node, Topic: conf.Name + "/result", Msg: PR(new(AR))}); err != nil {
		return fail("result publisher", err)
	}
	if s.fbPub, err = goroslib.NewPublisher(goroslib.PublisherConf{Node: conf.Node, Topic: conf.Name + "/feedback", Msg: PF(new(AF))}); err != nil {
		return fail("feedback publisher", err)
	}
	if s.cancelSub, err = goroslib.NewSubscriber(goroslib.SubscriberConf{Node: conf.Node, Topic: conf.Name + "/cancel", Callback: s.onCancel}); err != nil {
		return fail("cancel subscriber", err)
	}
	if s.goalSub, err = goroslib.NewSubscriber(goroslib.SubscriberConf{Node: conf.Node, Topic: conf.Name + "/goal", Callback: func(m PG) { s.onGoal(m) }}); err != nil {
		return fail("goal subscriber", err)
	}
	go s.run()
	return s, nil
}

// Close stops publishing and unsubscribes.
func (s *Server[AG, AR, AF, PG, PR, PF]) Close() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
		<-s.done
	}
	s.closeTopics()
}

func (s *Server[AG, AR, AF, PG, PR, PF]) closeTopics() {
	for _, sub := range []*goroslib.Subscriber{s.goalSub, s.cancelSub} {
		if sub != nil {
			sub.Close()
		}
	}
	for _, p := range []*goroslib.Publisher{s.fbPub, s.resultPub, s.statusPub} {
		if p != nil {
			p.Close()
		}
	}
}

func (s *Server[AG, AR, AF, PG, PR, PF]) run() {
	defer close(s.done)
	t := time.NewTicker(s.conf.StatusPeriod)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.publishStatus()
		}
	}
}

func (s *Server[AG, AR, AF, PG, PR, PF]) publishStatus() {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	now := time.Now()
	s.mu.Lock()
	arr := &actionlib_msgs.GoalStatusArray{}
	keep := s.order[:0]
	for _, id := range s.order {
		g := s.goals[id]
		if !g.ended.IsZero() && now.Sub(g.ended) > s.conf.KeepFinished {
			delete(s.goals, id)
			continue
		}
		keep = append(keep, id)
		arr.StatusList = append(arr.StatusList, actionlib_msgs.GoalStatus{
			GoalId: actionlib_msgs.GoalID{Id: g.ID, Stamp: g.stamp}, Status: uint8(g.state), Text: g.text,
		})
	}
	s.order = keep
	s.seq++
	arr.Header = std_msgs.Header{Seq: s.seq, Stamp: now}
	s.mu.Unlock()
	s.statusPub.Write(arr)
}

func (s *Server[AG, AR, AF, PG, PR, PF]) onGoal(m PG) {
	id := m.GoalID()
	if id.Id == "" {
		return
	}
	s.mu.Lock()
	if g, dup := s.goals[id.Id]; dup {
		if g.early && g.state == Recalling {
			// Its cancel came first (on the cancel topic's own
			// connection, it overtook the goal): RECALLED, never run.
			g.early, g.stamp = false, id.Stamp
			s.mu.Unlock()
			s.end(g, Recalled, nil, "cancelled before it arrived", Recalling)
			return
		}
		// A re-sent goal: actionlib ignores it.
		s.mu.Unlock()
		return
	}
	g := &ServerGoal{ID: id.Id, stamp: id.Stamp, state: Pending}
	s.goals[id.Id] = g
	s.order = append(s.order, id.Id)
	if !id.Stamp.IsZero() && !id.Stamp.After(s.lastCancel) {
		// Stamped at or before the last cancel-all, which it arrived
		// after: actionlib cancels it on arrival, never run.
		g.state, g.canceled = Recalling, true
		s.mu.Unlock()
		s.end(g, Recalled, nil, "cancelled: its timestamp is before the timestamp of the last cancel request", Recalling)
		return
	}
	s.mu.Unlock()
	s.conf.OnGoal(g, (*AG)(m))
}

func (s *Server[AG, AR, AF, PG, PR, PF]) onCancel(m *actionlib_msgs.GoalID) {
	var hit []*ServerGoal
	s.mu.Lock()
	// As actionlib's ActionServer: a cancel-all's stamp is remembered so
	// that a goal it covers that arrives after it (goal and cancel travel
	// on separate connections) is cancelled on arrival, and a cancel of
	// a goal not seen yet is kept, RECALLING, for the goal to find.
	if m.Id == "" && m.Stamp.After(s.lastCancel) {
		s.lastCancel = m.Stamp
	}
	if _, known := s.goals[m.Id]; m.Id != "" && !known {
		now := time.Now()
		s.goals[m.Id] = &ServerGoal{ID: m.Id, stamp: m.Stamp, state: Recalling, canceled: true, early: true, ended: now}
		s.order = append(s.order, m.Id)
	}
	for _, g := range s.goals {
		all := m.Id == "" && (m.Stamp.IsZero() || !g.stamp.After(m.Stamp))
		if (all || g.ID == m.Id) && !g.state.Terminal() && !g.canceled {
			g.canceled = true
			switch g.state {
			case Pending:
				g.state = Recalling
			case Active:
				g.state = Preempting
			}
			hit = append(hit, g)
		}
	}
	s.mu.Unlock()
	for _, g := range hit {
		if s.conf.OnCancel != nil {
			s.conf.OnCancel(g)
			continue
		}
		s.Canceled(g, nil, "cancelled")
	}
	if len(hit) > 0 {
		s.publishStatus()
	}
}

// State returns the goal's current state.
func (s *Server[AG, AR, AF, PG, PR, PF]) State(g *ServerGoal) State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return g.state
}

// CancelRequested reports whether a client asked to cancel g.
func (s *Server[AG, AR, AF, PG, PR, PF]) CancelRequested(g *ServerGoal) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return g.canceled
}

// Forget drops a goal without a word, as if it had never arrived: the
// server behaves like one whose link swallowed the goal.
func (s *Server[AG, AR, AF, PG, PR, PF]) Forget(g *ServerGoal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.goals, g.ID)
	for i, id := range s.order {
		if id == g.ID {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
}

// Accept moves a pending goal to ACTIVE.
func (s *Server[AG, AR, AF, PG, PR, PF]) Accept(g *ServerGoal) {
	s.mu.Lock()
	changed := false
	switch g.state {
	case Pending:
		g.state, changed = Active, true
	case Recalling:
		g.state, changed = Preempting, true
	}
	s.mu.Unlock()
	if changed {
		s.publishStatus()
	}
}

// Reject ends a pending goal as REJECTED.
func (s *Server[AG, AR, AF, PG, PR, PF]) Reject(g *ServerGoal, res PR, text string) {
	s.end(g, Rejected, res, text, Pending, Recalling)
}

// Succeed ends an active goal as SUCCEEDED.
func (s *Server[AG, AR, AF, PG, PR, PF]) Succeed(g *ServerGoal, res PR, text string) {
	s.end(g, Succeeded, res, text, Active, Preempting)
}

// Abort ends an active goal as ABORTED.
func (s *Server[AG, AR, AF, PG, PR, PF]) Abort(g *ServerGoal, res PR, text string) {
	s.end(g, Aborted, res, text, Active, Preempting)
}

// Canceled ends a goal after a cancel request or a newer goal: RECALLED
// when it never became active, PREEMPTED otherwise.
func (s *Server[AG, AR, AF, PG, PR, PF]) Canceled(g *ServerGoal, res PR, text string) {
	s.mu.Lock()
	st := g.state
	s.mu.Unlock()
	if st == Pending || st == Recalling {
		s.end(g, Recalled, res, text, Pending, Recalling)
		return
	}
	s.end(g, Preempted, res, text, Active, Preempting)
}

// Feedback publishes feedback for g.
func (s *Server[AG, AR, AF, PG, PR, PF]) Feedback(g *ServerGoal, fb PF) {
	s.mu.Lock()
	st := actionlib_msgs.GoalStatus{GoalId: actionlib_msgs.GoalID{Id: g.ID, Stamp: g.stamp}, Status: uint8(g.state), Text: g.text}
	s.mu.Unlock()
	fb.SetStatus(std_msgs.Header{Stamp: time.Now()}, st)
	s.fbPub.Write(fb)
}

func (s *Server[AG, AR, AF, PG, PR, PF]) end(g *ServerGoal, to State, res PR, text string, from ...State) {
	s.mu.Lock()
	ok := false
	for _, f := range from {
		if g.state == f {
			ok = true
		}
	}
	if !ok {
		s.mu.Unlock()
		return
	}
	g.state, g.text, g.ended = to, text, time.Now()
	st := actionlib_msgs.GoalStatus{GoalId: actionlib_msgs.GoalID{Id: g.ID, Stamp: g.stamp}, Status: uint8(to), Text: text}
	s.mu.Unlock()
	if res == nil {
		res = PR(new(AR))
	}
	res.SetStatus(std_msgs.Header{Stamp: time.Now()}, st)
	s.resultPub.Write(res)
	s.publishStatus()
}
