package mqtt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
)

// Broker is the embedded MQTT broker (mochi-mqtt) the bridge starts when
// transport.mqtt.broker is empty: zero setup, loopback only, no
// authentication, retained messages and last wills as any broker.
type Broker struct {
	srv  *mochi.Server
	addr string
}

// StartBroker starts an embedded broker listening on addr, which must be
// a loopback host:port (port 0 picks a free one).
func StartBroker(addr string, log *slog.Logger) (*Broker, error) {
	if log == nil {
		log = slog.Default()
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("mqtt: embedded broker address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("mqtt: embedded broker address %q is not loopback (it has no authentication)", addr)
	}
	// mochi logs every client connect at info; the bridge's own log says
	// what matters, so the broker logs warnings and worse only.
	blog := slog.New(levelFloor{log.Handler(), slog.LevelWarn}).With("component", "mqtt-broker")
	srv := mochi.New(&mochi.Options{Logger: blog, InlineClient: false})
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		return nil, fmt.Errorf("mqtt: embedded broker: %w", err)
	}
	if err := srv.AddHook(newRetainGuard(srv.Topics), nil); err != nil {
		return nil, fmt.Errorf("mqtt: embedded broker: %w", err)
	}
	tcp := listeners.NewTCP(listeners.Config{ID: "tcp", Address: addr})
	if err := srv.AddListener(tcp); err != nil {
		return nil, fmt.Errorf("mqtt: embedded broker on %s: %w", addr, err)
	}
	if err := srv.Serve(); err != nil {
		_ = srv.Close()
		return nil, fmt.Errorf("mqtt: embedded broker: %w", err)
	}
	b := &Broker{srv: srv, addr: tcp.Address()}
	log.Info("embedded MQTT broker listening", "component", "mqtt", "addr", b.addr)
	return b, nil
}

// Addr is the broker's host:port.
func (b *Broker) Addr() string { return b.addr }

// URL is the broker's tcp:// URL.
func (b *Broker) URL() string { return "tcp://" + b.addr }

// Close stops the broker; connected clients see their connection lost.
func (b *Broker) Close() error {
	if b == nil || b.srv == nil {
		return errors.New("mqtt: embedded broker not started")
	}
	return b.srv.Close()
}

// levelFloor is a slog handler that drops records below a level.
type levelFloor struct {
	slog.Handler
	min slog.Level
}

func (h levelFloor) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h levelFloor) WithAttrs(a []slog.Attr) slog.Handler {
	return levelFloor{h.Handler.WithAttrs(a), h.min}
}

func (h levelFloor) WithGroup(n string) slog.Handler {
	return levelFloor{h.Handler.WithGroup(n), h.min}
}
