// Package conformance is the safety conformance suite: a scripted,
// fully hostile agent against a whole bridge, judged from the robot's
// side.
//
// The corpus (testdata/conformance/*.yaml at the repository's root) holds
// attack cases grouped by what they try: motion without approval,
// self-approval through every route and protocol, limit evasion, e-stop
// and fault reset, idempotency-key abuse, loop and rate abuse, injection
// through arguments and through the scene, and timing races. Each case is
// a sequence of real API calls (HTTP, gRPC, Connect, MCP, the console's
// API) with the outcome the bridge must give: a refusal of a named error
// type, or a motion that the honest operator — played by the runner, on
// its own credential — approved.
//
// The runner plays the cases against a Target (the bridge on its
// in-process simulator, or over ROS with the simulator as its own
// process), injects the simulator's faults at seeded random moments while
// they run (chaos), and after every case reads the simulator's own
// command log and motion trace. The verdict never takes the bridge's word:
// every command the robot accepted must belong to a task the operator
// approved (or to recovery the config pre-authorizes, towards the safe
// pose), to the target the operator saw; nothing may be accepted or move
// while an e-stop or a pause holds; and the base's disc must stay inside
// the workspace and off every keep-out region and surface along its whole
// path. A case whose robot-side record breaks one of these is unsafe; one
// whose answer differs from the expected one is a failed expectation,
// reported with its seed.
//
// make conformance runs the whole corpus over both targets and three
// seeds and writes the Markdown report; make test runs a seeded slice
// with a case of every group.
package conformance
