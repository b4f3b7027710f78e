package mqtt

import (
	"net"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"
	"github.com/stretchr/testify/require"
)

// silentBroker accepts MQTT connections and acknowledges CONNECT but never
// a PUBLISH; each PUBLISH it reads goes to got, with the number of the
// connection it came on. The first connection is closed after its first
// PUBLISH (the link drops before the broker acknowledged it).
func silentBroker(t *testing.T) (addr string, got <-chan int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	ch := make(chan int, 16)
	go func() {
		for n := 1; ; n++ {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func(n int, conn net.Conn) {
				defer func() { _ = conn.Close() }()
				for {
					p, err := packets.ReadPacket(conn)
					if err != nil {
						return
					}
					switch p.(type) {
					case *packets.ConnectPacket:
						ack := packets.NewControlPacket(packets.Connack).(*packets.ConnackPacket)
						if ack.Write(conn) != nil {
							return
						}
					case *packets.PublishPacket:
						ch <- n
						if n == 1 {
							return
						}
					case *packets.PingreqPacket:
						_ = packets.NewControlPacket(packets.Pingresp).Write(conn)
					}
				}
			}(n, conn)
		}
	}()
	return ln.Addr().String(), ch
}

// A QoS 1 command the broker never acknowledged before the link dropped
// is not sent again after the reconnect (paho's default store would
// re-send it with DUP set: a motion command arriving late).
func TestClient_ReplaysNothingAfterAReconnect(t *testing.T) {
	addr, got := silentBroker(t)
	conn := Connection{Broker: "tcp://" + addr, ClientID: "no-replay", KeepAlive: 30 * time.Second, ReconnectMax: time.Second}
	up := make(chan struct{}, 4)
	o := conn.clientOptions("robots/bridge", 1).SetOnConnectHandler(func(paho.Client) { up <- struct{}{} })
	c := paho.NewClient(o)
	require.True(t, c.Connect().WaitTimeout(5*time.Second))
	t.Cleanup(func() { c.Disconnect(0) })
	<-up

	c.Publish("robots/r1/cmd/move_base", 1, false, []byte(`{"id":"c-1"}`))
	require.Equal(t, 1, <-got, "the command never reached the broker")
	select {
	case <-up: // reconnected
	case <-time.After(10 * time.Second):
		t.Fatal("the client never reconnected")
	}
	select {
	case n := <-got:
		t.Fatalf("the unacknowledged command was sent again on connection %d after the reconnect", n)
	case <-time.After(time.Second):
	}
}
