// Package mqtt is the MQTT transport: a driver (safety.Driver) that
// reaches one robot through an MQTT broker with versioned JSON payloads, a
// Fleet that reaches many robots over one broker connection (one driver
// each),
// the payload types and their strict decoders (fuzzed), the JSON Schemas
// robots written in other languages implement (schema/), an embedded
// broker (mochi-mqtt) for the zero-setup run, and the transport's metrics.
//
// Topics, under a configurable prefix (Topics):
//
//	{prefix}/{id}/state          robot → bridge, retained: State (session, seq, stamp)
//	{prefix}/{id}/cmd/{action}   bridge → robot, QoS 1: Command (id, issued, deadline)
//	{prefix}/{id}/ack            robot → bridge, QoS 1: Ack (accepted, progress, done, failed)
//	{prefix}/{id}/events         robot → bridge: Event
//	{prefix}/{id}/status         robot, retained: online; last will offline
//	{prefix}/{id}/bridge         bridge, retained: online; last will offline (one-robot driver)
//	{prefix}/bridge              fleet bridge, retained: online; last will offline
//
// Safety lines the driver holds: Send returns only once the robot acked
// accepted (a failed ack, no ack within ack_timeout or a lost link is an
// error, and the supervisor stops and recovers); Stop is published QoS 1
// under its own id, never waits behind a Send, and fails at once without a
// broker connection; LinkUp needs the connection, the robot's status
// online and a fresh state; incoming payloads that are oversized,
// malformed, of another version, invalid, out of order, stale or from the
// future are dropped, counted by reason and logged once per burst, never
// acted on; after a reconnect the driver resubscribes and replays no
// motion command (a robot refuses one past its deadline and acts on an id
// once).
//
// Fleets. A bridge in front of a thousand robots holds one connection,
// not a thousand: NewFleet takes every robot's hw-config and hands out one
// Driver per robot, each with the semantics above, over one paho client
// subscribed with wildcards ({prefix}/+/state, +/ack, +/status, +/events).
// Messages are dispatched by the id level of their topic to the robot's
// driver (an id not of the fleet is dropped as unknown_robot) and decoded
// on a few goroutines, each robot's always on the same one, so one robot's
// messages keep their order. A robot's last will takes its own link down;
// a lost broker connection takes every robot's down at once. The fleet
// owns the connection and counts its users: the first Start connects, the
// last Close disconnects, so closing one robot's driver never cuts the
// others off. Metrics are one set per fleet, their labels closed sets (no
// robot label). One connection carries one last will, so a fleet bridge's
// is on {prefix}/bridge, which robots watch beside their own
// {prefix}/{id}/bridge (the simulator does); a robot that watches only its
// own topic learns of a dead fleet bridge from its command watchdog. A
// fleet bridge owns its topic prefix: two fleets on one broker use two
// prefixes. New is a fleet of one that subscribes to its robot's topics
// only, with its last will on the robot's bridge topic, as before fleets.
//
// The simulator's side (simnode) can share one connection among many
// robots too (simnode.Link); see that package for what that costs.
package mqtt
