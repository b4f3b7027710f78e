package grpcapi

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
)

// HealthConf configures a Health checker.
type HealthConf struct {
	// Checks maps each service name the health service answers for ("" is
	// the server as a whole) to its readiness check: nil means SERVING, an
	// error NOT_SERVING (required, at least one). Any other name is
	// NOT_FOUND, as the gRPC health protocol asks.
	Checks map[string]func(context.Context) error
	// Interval is how often a Watch re-checks (optional). It defaults to
	// one second; the watcher is sent a status only when it changed.
	Interval time.Duration
}

// Health implements the standard grpc.health.v1.Health service
// (grpchealth.Checker and grpchealth.Watcher) from readiness checks, so
// that its answer is exactly what the check says at the moment it is
// asked: SERVING only while the check passes.
type Health struct {
	conf HealthConf
}

var (
	_ grpchealth.Checker = (*Health)(nil)
	_ grpchealth.Watcher = (*Health)(nil)
)

// NewHealth returns a Health checker; errors wrap ErrConf.
func NewHealth(conf HealthConf) (*Health, error) {
	switch {
	case len(conf.Checks) == 0:
		return nil, fmt.Errorf("%w: Checks is required", ErrConf)
	case conf.Interval < 0:
		return nil, fmt.Errorf("%w: Interval must not be negative", ErrConf)
	}
	for name, fn := range conf.Checks {
		if fn == nil {
			return nil, fmt.Errorf("%w: Checks[%q] is nil", ErrConf, name)
		}
	}
	if conf.Interval == 0 {
		conf.Interval = time.Second
	}
	return &Health{conf: conf}, nil
}

// Check implements grpchealth.Checker.
func (h *Health) Check(ctx context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	fn, ok := h.conf.Checks[req.Service]
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("unknown service %q", req.Service))
	}
	if err := fn(ctx); err != nil {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
}

// Watch implements grpchealth.Watcher: onChange is called every Interval
// (the handler re-checks and sends only a changed status) until stop.
func (h *Health) Watch(_ context.Context, req *grpchealth.CheckRequest, onChange func()) (func(), error) {
	if _, ok := h.conf.Checks[req.Service]; !ok {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("unknown service %q", req.Service))
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(h.conf.Interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				onChange()
			}
		}
	}()
	var stopped bool
	return func() {
		if !stopped {
			stopped = true
			close(done)
		}
	}, nil
}

// Handler returns the path prefix to mount ("/grpc.health.v1.Health/")
// and its handler, which needs no token, like GET /healthz; a Watch ends
// when the *http.Server serving it shuts down.
func (h *Health) Handler() (string, http.Handler) {
	path, hh := grpchealth.NewHandler(h)
	return path, EndOnShutdown(hh)
}
