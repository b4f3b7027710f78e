package grpcapi

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"connectrpc.com/connect"
)

// ErrShuttingDown is the cause of a stream's context when the server
// serving it shuts down.
var ErrShuttingDown = errors.New("the bridge is shutting down")

// shutdowns ends long-lived streams when their *http.Server shuts down.
// http.Server.Shutdown waits for active requests and does not cancel their
// contexts, so without it one open WatchTask, WatchEvents, health Watch or
// reflection stream would hold every shutdown up until its deadline.
type shutdowns struct {
	mu   sync.Mutex
	done map[*http.Server]chan struct{} // guarded by mu; closed on shutdown
}

func newShutdowns() *shutdowns { return &shutdowns{done: map[*http.Server]chan struct{}{}} }

// signal returns a channel closed when the server serving r begins
// shutting down, or nil when r carries no server (a handler called
// directly in a test).
func (s *shutdowns) signal(r *http.Request) <-chan struct{} {
	srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server)
	if !ok || srv == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.done[srv]; ok {
		return ch
	}
	ch := make(chan struct{})
	s.done[srv] = ch
	srv.RegisterOnShutdown(func() {
		// The closed channel stays: a request that still arrives on a
		// server shutting down ends at once.
		close(ch)
	})
	return ch
}

// wrap serves h with a request context that is cancelled, with cause
// ErrShuttingDown, when the server shuts down — for the requests whose
// path streaming accepts (nil: all of them). Unary calls are left alone:
// Shutdown lets them finish.
func (s *shutdowns) wrap(h http.Handler, streaming func(path string) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if streaming != nil && !streaming(r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		down := s.signal(r)
		if down == nil {
			h.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithCancelCause(r.Context())
		defer cancel(nil)
		go func() {
			select {
			case <-down:
				cancel(ErrShuttingDown)
			case <-ctx.Done():
			}
		}()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// EndOnShutdown wraps a handler of long-lived streams (the health
// service's Watch, server reflection) so that each of its requests ends
// when the *http.Server serving it begins shutting down.
func EndOnShutdown(h http.Handler) http.Handler { return newShutdowns().wrap(h, nil) }

// streamEnded is the RPC error of a stream whose context ended: UNAVAILABLE
// when the server is shutting down (the client should watch again once
// the bridge is back), otherwise the context's own error (the client went
// away or its deadline passed; connect answers CANCELED or
// DEADLINE_EXCEEDED for it).
func streamEnded(ctx context.Context) error {
	if errors.Is(context.Cause(ctx), ErrShuttingDown) {
		return connect.NewError(connect.CodeUnavailable, errors.New("the bridge is shutting down; watch again once it is back"))
	}
	return ctx.Err()
}
