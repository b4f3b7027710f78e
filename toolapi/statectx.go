package toolapi

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// stateCtx is the context of one state tool's run: its parent's, bounded
// by the state timeout, and counting the tries of its reads (attempts, for
// the call's log line). The bound is context.WithDeadline's, made only
// when something asks for Done: a read that never waits (a cache read,
// the common case) costs no timer and no registration with the parent.
// Until then Err answers as the made context would: the parent's error,
// else DeadlineExceeded once the deadline has passed.
type stateCtx struct {
	parent   context.Context
	deadline time.Time
	attempts atomic.Int32

	mu       sync.Mutex
	made     context.Context // guarded by mu
	cancel   context.CancelFunc
	released bool // guarded by mu
}

var _ context.Context = (*stateCtx)(nil)

// newStateCtx bounds parent by timeout from now, as context.WithTimeout
// does; release it when the run ends.
func newStateCtx(parent context.Context, timeout time.Duration) *stateCtx {
	return &stateCtx{parent: parent, deadline: time.Now().Add(timeout)}
}

// Deadline implements context.Context: the earlier of the parent's and
// its own.
func (c *stateCtx) Deadline() (time.Time, bool) {
	if d, ok := c.parent.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

// Done implements context.Context.
func (c *stateCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.made == nil {
		c.made, c.cancel = context.WithDeadline(c.parent, c.deadline)
		if c.released {
			c.cancel()
		}
	}
	return c.made.Done()
}

// Err implements context.Context.
func (c *stateCtx) Err() error {
	c.mu.Lock()
	made, released := c.made, c.released
	c.mu.Unlock()
	switch {
	case made != nil:
		return made.Err()
	case c.parent.Err() != nil:
		return c.parent.Err()
	case !time.Now().Before(c.deadline):
		return context.DeadlineExceeded
	case released:
		return context.Canceled
	}
	return nil
}

// Value implements context.Context; it counts the run's attempts.
func (c *stateCtx) Value(key any) any {
	if _, ok := key.(attemptKey); ok {
		return &c.attempts
	}
	return c.parent.Value(key)
}

// release ends the run, as a context.WithTimeout's cancel does.
func (c *stateCtx) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.released = true
	if c.cancel != nil {
		c.cancel()
	}
}
