package bridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
)

// Conf configures a Bridge.
type Conf struct {
	// Config is the robot's hw-config (required).
	Config *hwconfig.Config
	// Listen is the HTTP address (optional). It defaults to 127.0.0.1:8080;
	// use 127.0.0.1:0 in tests.
	Listen string
	// DataDir holds the store and generated tokens (optional). It defaults
	// to ./var.
	DataDir string
	// Logger (optional). It defaults to a discarding logger.
	Logger *slog.Logger
	// Env reads environment variables (optional). It defaults to one that
	// returns "" for everything.
	Env func(string) string
	// Out receives the lines a user must read at start-up, like where the
	// generated tokens are (optional). It defaults to io.Discard.
	Out io.Writer
}

// Bridge is the running daemon.
type Bridge struct {
	conf Conf
	log  *slog.Logger

	mu     sync.Mutex
	ln     net.Listener
	srv    *http.Server
	cancel context.CancelFunc
	done   chan struct{}
}

// New validates conf, fills defaults and builds every part, without
// starting anything.
func New(conf Conf) (*Bridge, error) {
	if conf.Config == nil {
		return nil, errors.New("bridge: Conf.Config is required")
	}
	if conf.Listen == "" {
		conf.Listen = "127.0.0.1:8080"
	}
	if conf.DataDir == "" {
		conf.DataDir = "./var"
	}
	if conf.Logger == nil {
		conf.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if conf.Env == nil {
		conf.Env = func(string) string { return "" }
	}
	if conf.Out == nil {
		conf.Out = io.Discard
	}
	return &Bridge{conf: conf, log: conf.Logger.With("component", "bridge")}, nil
}

// Start opens the listener and serves until Stop or ctx ends.
func (b *Bridge) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", b.conf.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", b.conf.Listen, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	b.mu.Lock()
	b.ln, b.srv = ln, srv
	b.done = make(chan struct{})
	b.mu.Unlock()
	go func() {
		defer close(b.done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			b.log.Error("http server stopped", "err", err)
		}
	}()
	return nil
}

// Addr returns the address the API listens on.
func (b *Bridge) Addr() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ln == nil {
		return b.conf.Listen
	}
	return b.ln.Addr().String()
}

// Stop shuts the bridge down in order; its last act is to command the
// robot to stop.
func (b *Bridge) Stop(ctx context.Context) error {
	b.mu.Lock()
	srv, done := b.srv, b.done
	b.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Shutdown(ctx)
	<-done
	return err
}
