// Package events is the bridge's in-process event bus: the supervisor,
// the action runner, the approval service and the robot link publish what
// happens; the operator console's Server-Sent Events stream, the audit
// trail and the metrics read it. Publishing never blocks: a subscriber
// that falls a whole buffer behind is dropped (its channel closed) and must
// re-read current state and subscribe again, so a stuck browser tab can
// never slow the safety path.
package events

import (
	"sync"
	"sync/atomic"
	"time"
)

// Type names an event. The string is what SSE clients see as the event
// name.
type Type string

// Event types.
const (
	// TypeState carries a robot state snapshot (rate-limited by the
	// publisher).
	TypeState Type = "state"
	// TypeTask carries an actions.TaskView after every task change.
	TypeTask Type = "task"
	// TypeApproval carries an approval.Event (requests, decisions, grants).
	TypeApproval Type = "approval"
	// TypeSafety carries a safety.Event (e-stop, faults, monitor trips,
	// stops).
	TypeSafety Type = "safety"
	// TypeSystem carries bridge lifecycle notes (start, restart recovery,
	// shutdown).
	TypeSystem Type = "system"
	// TypeEscalation carries an escalation.Escalation when it is opened
	// and when an operator answers it (the operator hand-off).
	TypeEscalation Type = "escalation"
)

// Event is one published happening.
type Event struct {
	// Seq increases by one per published event, so a client can tell when
	// it missed some.
	Seq  uint64    `json:"seq"`
	Type Type      `json:"type"`
	Time time.Time `json:"time"`
	// Data is the payload; it must encode to JSON.
	Data any `json:"data"`
}

// Bus fans events out to subscribers. The zero value is not usable; call
// New.
type Bus struct {
	seq  atomic.Uint64
	buf  int
	mu   sync.Mutex
	subs map[*sub]struct{} // guarded by mu
}

type sub struct {
	ch     chan Event
	filter func(Event) bool
	closed bool // guarded by Bus.mu
}

// New returns a bus whose subscribers each get a buffer of buf events
// (default 256 when buf <= 0).
func New(buf int) *Bus {
	if buf <= 0 {
		buf = 256
	}
	return &Bus{buf: buf, subs: map[*sub]struct{}{}}
}

// Publish stamps and delivers an event to every subscriber whose filter
// accepts it. It never blocks.
func (b *Bus) Publish(t Type, at time.Time, data any) Event {
	e := Event{Seq: b.seq.Add(1), Type: t, Time: at, Data: data}
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		if s.filter != nil && !s.filter(e) {
			continue
		}
		select {
		case s.ch <- e:
		default:
			// Too slow: drop the subscriber rather than block.
			delete(b.subs, s)
			s.closed = true
			close(s.ch)
		}
	}
	return e
}

// Subscribe returns a channel of events accepted by filter (nil for all)
// and a function that ends the subscription. The channel is closed when
// the subscription ends or the subscriber falls too far behind.
func (b *Bus) Subscribe(filter func(Event) bool) (<-chan Event, func()) {
	s := &sub{ch: make(chan Event, b.buf), filter: filter}
	b.mu.Lock()
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	var once sync.Once
	return s.ch, func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			if !s.closed {
				delete(b.subs, s)
				s.closed = true
				close(s.ch)
			}
		})
	}
}

// Subscribers returns how many subscriptions are live.
func (b *Bus) Subscribers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}
