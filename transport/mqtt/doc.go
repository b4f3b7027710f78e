// Package mqtt is the MQTT transport: a driver (safety.Driver) that
// reaches one robot through an MQTT broker with versioned JSON payloads,
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
//	{prefix}/{id}/bridge         bridge, retained: online; last will offline
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
package mqtt
