package mqtt

import (
	"bytes"
	"sync"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// retainGuard is a mochi hook that takes retained messages out of the
// embedded broker's unsynchronised paths.
//
// mochi v2.7.9 stores a retained message (TopicsIndex.RetainMessage, on a
// PUBLISH or a last will) under a topic node's lock, but reads the node's
// retained topic while matching a wildcard SUBSCRIBE (scanMessages)
// without it: a data race whenever a robot publishes its retained state
// while the bridge subscribes to robots/+/… (mochi-mqtt/server#200). The
// guard does both under one mutex of its own instead:
//
//   - a retained PUBLISH or last will is stored by the guard, and passed
//     on to mochi without its retain flag, so mochi only delivers it to
//     the current subscribers (which get retain = 0 for a live message, as
//     MQTT says);
//   - a SUBSCRIBE asks mochi for no retained messages (retain handling 2)
//     and the guard sends the matching ones itself, once the subscription
//     is in place, with the retain flag set.
//
// A retained message is sent at QoS 0 on a subscription (over the
// loopback connection of the embedded broker, which a broker restart
// would empty anyway). Delayed wills (MQTT 5) keep mochi's path: the
// bridge's clients speak MQTT 3.1.1, which has none.
type retainGuard struct {
	mochi.HookBase
	topics *mochi.TopicsIndex

	mu sync.Mutex
	// wanted is each client's retain handling per filter of its SUBSCRIBE
	// under way, between OnSubscribe and OnSubscribed (guarded by mu).
	wanted map[*mochi.Client]map[string]byte
}

func newRetainGuard(topics *mochi.TopicsIndex) *retainGuard {
	return &retainGuard{topics: topics, wanted: map[*mochi.Client]map[string]byte{}}
}

// ID implements mochi.Hook.
func (g *retainGuard) ID() string { return "robot-bridge-retain-guard" }

// Provides implements mochi.Hook.
func (g *retainGuard) Provides(b byte) bool {
	return bytes.Contains([]byte{mochi.OnPublish, mochi.OnWill, mochi.OnSubscribe, mochi.OnSubscribed, mochi.OnDisconnect}, []byte{b})
}

// OnPublish stores a retained message and passes it on without the flag.
func (g *retainGuard) OnPublish(_ *mochi.Client, pk packets.Packet) (packets.Packet, error) {
	if !pk.FixedHeader.Retain {
		return pk, nil
	}
	g.mu.Lock()
	g.topics.RetainMessage(pk.Copy(false))
	g.mu.Unlock()
	pk.FixedHeader.Retain = false
	return pk, nil
}

// OnWill stores a retained last will (one sent at once) and passes it on
// without the flag.
func (g *retainGuard) OnWill(cl *mochi.Client, will mochi.Will) (mochi.Will, error) {
	if !will.Retain || will.WillDelayInterval > 0 {
		return will, nil
	}
	pk := packets.Packet{
		FixedHeader: packets.FixedHeader{Type: packets.Publish, Retain: true, Qos: will.Qos},
		TopicName:   will.TopicName,
		Payload:     will.Payload,
		Properties:  packets.Properties{User: will.User},
		Origin:      cl.ID,
	}
	g.mu.Lock()
	g.topics.RetainMessage(pk)
	g.mu.Unlock()
	will.Retain = false
	return will, nil
}

// OnSubscribe keeps what each filter asked of retained messages and asks
// mochi for none.
func (g *retainGuard) OnSubscribe(cl *mochi.Client, pk packets.Packet) packets.Packet {
	want := make(map[string]byte, len(pk.Filters))
	filters := make(packets.Subscriptions, len(pk.Filters))
	for i, f := range pk.Filters {
		want[f.Filter] = f.RetainHandling
		f.RetainHandling = 2
		filters[i] = f
	}
	pk.Filters = filters
	g.mu.Lock()
	g.wanted[cl] = want
	g.mu.Unlock()
	return pk
}

// OnSubscribed sends each accepted filter's retained messages, as mochi
// would have (not for a shared subscription; with retain handling 1 only
// for a new subscription, which the guard cannot tell apart, so it sends
// them as for 0).
func (g *retainGuard) OnSubscribed(cl *mochi.Client, pk packets.Packet, codes []byte) {
	g.mu.Lock()
	want := g.wanted[cl]
	delete(g.wanted, cl)
	var out []packets.Packet
	for i, f := range pk.Filters {
		if i >= len(codes) || codes[i] >= packets.ErrUnspecifiedError.Code || want[f.Filter] == 2 || mochi.IsSharedFilter(f.Filter) {
			continue
		}
		for _, m := range g.topics.Messages(f.Filter) {
			c := m.Copy(false)
			c.FixedHeader.Retain, c.FixedHeader.Qos, c.PacketID = true, 0, 0
			out = append(out, c)
		}
	}
	g.mu.Unlock()
	for _, m := range out {
		if err := cl.WritePacket(m); err != nil {
			return
		}
	}
}

// OnDisconnect forgets a SUBSCRIBE that never completed.
func (g *retainGuard) OnDisconnect(cl *mochi.Client, _ error, _ bool) {
	g.mu.Lock()
	delete(g.wanted, cl)
	g.mu.Unlock()
}
