package robot

import "sync"

// Hub fans out state snapshots to subscribers with latest-value semantics:
// a slow subscriber misses intermediate snapshots but always gets the newest
// one, and never blocks the publisher. The zero value is ready to use.
type Hub struct {
	mu     sync.Mutex
	latest State
	have   bool
	subs   map[chan State]struct{} // guarded by mu
}

// Publish records s as the latest state and offers it to every subscriber.
func (h *Hub) Publish(s State) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.latest, h.have = s, true
	for ch := range h.subs {
		select {
		case ch <- s:
		default:
			// Drop the stale value and replace it with the newest.
			select {
			case <-ch:
			default:
			}
			select {
			case ch <- s:
			default:
			}
		}
	}
}

// Latest returns the newest published state, false if none yet.
func (h *Hub) Latest() (State, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.latest, h.have
}

// Subscribe returns a channel that receives new states and a function that
// ends the subscription and closes the channel.
func (h *Hub) Subscribe() (<-chan State, func()) {
	ch := make(chan State, 1)
	h.mu.Lock()
	if h.subs == nil {
		h.subs = make(map[chan State]struct{})
	}
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			h.mu.Lock()
			delete(h.subs, ch)
			h.mu.Unlock()
			close(ch)
		})
	}
}
