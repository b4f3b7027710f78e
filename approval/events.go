package approval

import "sync"

// hub fans events out to subscribers without ever blocking the service: a
// subscriber whose buffer is full is dropped (its channel closed), so it
// learns it missed events and can re-read the current state with List and
// Grants before subscribing again. Losing a slow console tab is better
// than stalling an approval.
type hub struct {
	size int

	mu      sync.Mutex
	subs    map[*subscriber]struct{} // guarded by mu
	closed  bool                     // guarded by mu
	dropped int                      // guarded by mu
}

type subscriber struct {
	ch chan Event
}

func newHub(size int) *hub {
	return &hub{size: size, subs: map[*subscriber]struct{}{}}
}

// subscribe registers a subscriber. The returned function unsubscribes and
// closes the channel; it may be called more than once.
func (h *hub) subscribe() (<-chan Event, func()) {
	s := &subscriber{ch: make(chan Event, h.size)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		close(s.ch)
		return s.ch, func() {}
	}
	h.subs[s] = struct{}{}
	return s.ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[s]; ok {
			delete(h.subs, s)
			close(s.ch)
		}
	}
}

// publish delivers ev to every subscriber with room for it and drops the
// ones without. It returns how many subscribers were dropped.
func (h *hub) publish(ev Event) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for s := range h.subs {
		select {
		case s.ch <- ev:
		default:
			delete(h.subs, s)
			close(s.ch)
			n++
		}
	}
	h.dropped += n
	return n
}

// close ends every subscription.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for s := range h.subs {
		delete(h.subs, s)
		close(s.ch)
	}
}
