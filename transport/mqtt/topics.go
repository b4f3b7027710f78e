package mqtt

import "strings"

// Topics is the topic layout of one robot under a prefix:
//
//	{prefix}/{id}/state          robot → bridge, retained, JSON (State)
//	{prefix}/{id}/cmd/{action}   bridge → robot, QoS 1, JSON (Command)
//	{prefix}/{id}/ack            robot → bridge, QoS 1, JSON (Ack)
//	{prefix}/{id}/events         robot → bridge, JSON (Event)
//	{prefix}/{id}/status         robot's status, retained: online, or its last will offline
//	{prefix}/{id}/bridge         bridge's status, retained: online, or its last will offline
//	{prefix}/bridge-{bridge}     a cluster bridge's status (ClusterBridge), retained
//
// Every topic of a robot sits under {prefix}/{id}/, so a bridge in front of
// many robots subscribes to {prefix}/+/state and friends and routes by the
// second level; one robot's bridge subscribes to its own id only.
type Topics struct {
	Prefix string
	ID     string
}

func (t Topics) root() string { return t.Prefix + "/" + t.ID + "/" }

// State is the robot's state topic.
func (t Topics) State() string { return t.root() + "state" }

// Cmd is the command topic of action.
func (t Topics) Cmd(action string) string { return t.root() + "cmd/" + action }

// CmdFilter matches every command topic of the robot.
func (t Topics) CmdFilter() string { return t.root() + "cmd/+" }

// Ack is the robot's ack topic.
func (t Topics) Ack() string { return t.root() + "ack" }

// Events is the robot's event topic.
func (t Topics) Events() string { return t.root() + "events" }

// Status is the robot's status topic (its last will).
func (t Topics) Status() string { return t.root() + "status" }

// Bridge is the bridge's status topic for this robot (the bridge's last
// will).
func (t Topics) Bridge() string { return t.root() + "bridge" }

// ActionOf returns the {action} level of a command topic of this robot.
func (t Topics) ActionOf(topic string) (string, bool) {
	rest, ok := strings.CutPrefix(topic, t.root()+"cmd/")
	if !ok || rest == "" || strings.Contains(rest, "/") {
		return "", false
	}
	return rest, true
}

// FleetBridge is the status topic of a bridge that serves several robots
// over one connection (NewFleet): retained online, and the connection's
// last will offline. One connection carries one last will, so a fleet's
// cannot sit on every robot's {prefix}/{id}/bridge; a robot watches this
// topic beside its own. It has two levels, so no robot's topic ({prefix}/{id}/…,
// three or more) can be mistaken for it.
func FleetBridge(prefix string) string { return prefix + "/bridge" }

// ClusterBridge is the status topic of the bridge id in a cluster of
// bridges (FleetConf.BridgeID): retained online, and the connection's last
// will offline. Every bridge of a cluster has its own, so a robot tells
// which bridge died and stops only if it was the one that last commanded
// it. Two levels, as FleetBridge, so never a robot's topic.
func ClusterBridge(prefix, id string) string { return prefix + "/bridge-" + id }

// ClusterBridgeOf returns the bridge id of a ClusterBridge topic under
// prefix; false for any other topic.
func ClusterBridgeOf(prefix, topic string) (string, bool) {
	id, ok := strings.CutPrefix(topic, prefix+"/bridge-")
	if !ok || !ValidBridgeID(id) {
		return "", false
	}
	return id, true
}

// SplitTopic cuts a topic under prefix into the robot id and what follows
// it ({prefix}/{id}/{rest}); false when the topic is not of that shape.
func SplitTopic(prefix, topic string) (id, rest string, ok bool) {
	tail, ok := strings.CutPrefix(topic, prefix+"/")
	if !ok {
		return "", "", false
	}
	id, rest, ok = strings.Cut(tail, "/")
	if !ok || id == "" || rest == "" {
		return "", "", false
	}
	return id, rest, true
}
