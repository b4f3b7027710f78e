package grpcapi

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"github.com/stretchr/testify/require"
)

// startHealth serves a Health whose "" and "svc" checks fail while down is
// set.
func startHealth(t *testing.T, down *atomic.Bool) *grpchealth.Client {
	t.Helper()
	check := func(context.Context) error {
		if down.Load() {
			return errors.New("robot link down")
		}
		return nil
	}
	h, err := NewHealth(HealthConf{Checks: map[string]func(context.Context) error{"": check, "svc": check}, Interval: 5 * time.Millisecond})
	require.NoError(t, err)
	mux := http.NewServeMux()
	path, hh := h.Handler()
	mux.Handle(path, hh)
	srv, h2c, _ := serveH2C(t, mux)
	return grpchealth.NewClient(h2c, srv.URL, connect.WithGRPC())
}

func TestHealth_CheckSaysWhatTheReadinessCheckSays(t *testing.T) {
	// Given a health service over a readiness check
	var down atomic.Bool
	c := startHealth(t, &down)
	ctx := context.Background()
	for _, svc := range []string{"", "svc"} {
		// When the check passes, Then it is SERVING
		down.Store(false)
		resp, err := c.Check(ctx, &grpchealth.CheckRequest{Service: svc})
		require.NoError(t, err)
		require.Equal(t, grpchealth.StatusServing, resp.Status)
		// When it fails, Then it is NOT_SERVING at once
		down.Store(true)
		resp, err = c.Check(ctx, &grpchealth.CheckRequest{Service: svc})
		require.NoError(t, err)
		require.Equal(t, grpchealth.StatusNotServing, resp.Status)
	}
	// And a service it does not know is NOT_FOUND, as the protocol asks
	_, err := c.Check(ctx, &grpchealth.CheckRequest{Service: "robotbridge.v1.NoSuchService"})
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err))
}

func TestHealth_WatchSendsEachChange(t *testing.T) {
	// Given a ready bridge being watched
	var down atomic.Bool
	c := startHealth(t, &down)
	ctx := t.Context()
	events := c.Watch(ctx, &grpchealth.CheckRequest{})
	status := func() grpchealth.Status {
		ev := <-events
		require.NoError(t, ev.Err)
		return ev.Response.Status
	}
	require.Equal(t, grpchealth.StatusServing, status())
	// When readiness fails, and comes back
	down.Store(true)
	// Then the watcher is told each change, once
	require.Equal(t, grpchealth.StatusNotServing, status())
	down.Store(false)
	require.Equal(t, grpchealth.StatusServing, status())
}

func TestNewHealth_Conf(t *testing.T) {
	ok := func(context.Context) error { return nil }
	for name, conf := range map[string]HealthConf{
		"Checks":   {},
		"nil":      {Checks: map[string]func(context.Context) error{"": nil}},
		"Interval": {Checks: map[string]func(context.Context) error{"": ok}, Interval: -time.Second},
	} {
		_, err := NewHealth(conf)
		require.ErrorIs(t, err, ErrConf, name)
	}
}
