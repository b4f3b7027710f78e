package mqtt

import (
	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"
)

// NoReplayStore returns a paho message store that keeps nothing, so the
// client never re-sends a message after a reconnect.
//
// paho's default (memory) store keeps every QoS 1/2 message until it is
// acknowledged and, on each reconnect, re-sends what it holds with the
// DUP flag set, even with a clean session. For a robot that is a replay:
// a motion command published before the link dropped would arrive after
// it came back, perhaps after a stop. It is also racy in paho v1.5.1: a
// message published right after the reconnect is both written by the new
// connection and found by the resume, which sets its DUP flag while the
// writer reads it (a data race, and the message sent twice).
//
// With this store a message the broker did not acknowledge before the
// link dropped is simply lost: its token does not complete and the
// sender's own ack timeout reports it (a motion command is then failed,
// never replayed; a stop is sent again by whoever needs it).
func NoReplayStore() paho.Store { return noReplayStore{} }

type noReplayStore struct{}

func (noReplayStore) Open()                             {}
func (noReplayStore) Put(string, packets.ControlPacket) {}
func (noReplayStore) Get(string) packets.ControlPacket  { return nil }
func (noReplayStore) All() []string                     { return nil }
func (noReplayStore) Del(string)                        {}
func (noReplayStore) Close()                            {}
func (noReplayStore) Reset()                            {}
