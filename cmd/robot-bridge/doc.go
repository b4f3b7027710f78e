// Command robot-bridge is the daemon that lets an LLM agent operate a robot
// through tools, with a safety supervisor in between.
//
// Subcommands:
//
//	serve         run the bridge (default)
//	sim           run the bundled simulator as its own process
//	check-config  validate a hw-config file
//	tools         print the tool schemas for a hw-config
//	lifecycle     print (or write into ARCHITECTURE.md) the task lifecycle diagram
//
// main only parses flags, turns SIGINT/SIGTERM into context cancellation
// and calls into package bridge, which holds the wiring.
package main
