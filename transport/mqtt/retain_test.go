package mqtt

import (
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/stretchr/testify/require"
)

func embeddedClient(t *testing.T, b *Broker, id string, will bool) paho.Client {
	t.Helper()
	o := paho.NewClientOptions().AddBroker(b.URL()).SetClientID(id).SetCleanSession(true).SetAutoReconnect(false)
	if will {
		o.SetWill("robots/"+id+"/status", "offline", 1, true)
	}
	c := paho.NewClient(o)
	tok := c.Connect()
	require.True(t, tok.WaitTimeout(5*time.Second))
	require.NoError(t, tok.Error())
	t.Cleanup(func() { c.Disconnect(0) })
	return c
}

type got struct {
	topic, payload string
	retained       bool
}

func subscribe(t *testing.T, c paho.Client, filter string) <-chan got {
	t.Helper()
	ch := make(chan got, 64)
	tok := c.Subscribe(filter, 1, func(_ paho.Client, m paho.Message) {
		// Never block paho's (ordered) delivery: a full buffer drops,
		// which only the flood at the end can cause.
		select {
		case ch <- got{m.Topic(), string(m.Payload()), m.Retained()}:
		default:
		}
	})
	require.True(t, tok.WaitTimeout(5*time.Second))
	require.NoError(t, tok.Error())
	return ch
}

func next(t *testing.T, ch <-chan got) got {
	t.Helper()
	select {
	case g := <-ch:
		return g
	case <-time.After(5 * time.Second):
		t.Fatal("no message")
		return got{}
	}
}

// The embedded broker keeps retained messages and last wills as any
// broker does, and a wildcard subscription racing retained publishes is
// not a data race (mochi-mqtt/server#200; run under -race).
func TestBroker_RetainedMessagesAndWillsWithoutARace(t *testing.T) {
	b, err := StartBroker("127.0.0.1:0", slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	pub := embeddedClient(t, b, "r1", true)

	// Given a retained state, When a client subscribes with a wildcard,
	// Then it gets the state flagged retained, and later ones live.
	require.True(t, pub.Publish("robots/r1/state", 1, true, "s1").WaitTimeout(5*time.Second))
	sub := embeddedClient(t, b, "bridge", false)
	ch := subscribe(t, sub, "robots/+/state")
	require.Equal(t, got{"robots/r1/state", "s1", true}, next(t, ch))
	require.True(t, pub.Publish("robots/r1/state", 1, true, "s2").WaitTimeout(5*time.Second))
	require.Equal(t, got{"robots/r1/state", "s2", false}, next(t, ch))

	// A retained last will reaches the subscribers at once and a later
	// subscriber as retained.
	st := subscribe(t, sub, "robots/+/status")
	embeddedClient(t, b, "r2", true)
	cl, ok := b.srv.Clients.Get("r2")
	require.True(t, ok)
	require.NoError(t, cl.Net.Conn.Close()) // an abrupt end: the will is sent
	require.Equal(t, got{"robots/r2/status", "offline", false}, next(t, st))
	late := embeddedClient(t, b, "late", false)
	lch := subscribe(t, late, "robots/r2/+")
	require.Equal(t, got{"robots/r2/status", "offline", true}, next(t, lch))

	// An empty retained payload removes the retained message.
	require.True(t, pub.Publish("robots/r1/state", 1, true, "").WaitTimeout(5*time.Second))
	require.Equal(t, got{"robots/r1/state", "", false}, next(t, ch))
	later := embeddedClient(t, b, "later", false)
	lc := subscribe(t, later, "robots/r1/#")
	select {
	case g := <-lc:
		t.Fatalf("a removed retained message was sent: %+v", g)
	case <-time.After(200 * time.Millisecond):
	}

	// Retained publishes racing wildcard subscriptions.
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 300 {
			pub.Publish(fmt.Sprintf("robots/r%d/state", i%7), 0, true, "x")
		}
	})
	wg.Go(func() {
		for i := range 60 {
			c := embeddedClient(t, b, fmt.Sprintf("scan-%d", i), false)
			c.Subscribe("robots/+/state", 0, nil).WaitTimeout(5 * time.Second)
			c.Disconnect(0)
		}
	})
	wg.Wait()
}
