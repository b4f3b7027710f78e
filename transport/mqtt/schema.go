package mqtt

import "embed"

// Schemas holds the JSON Schemas of the payloads, one file per payload
// (schema/state.schema.json, command, ack, event). They are the contract
// for robots written in other languages; tests validate every payload this
// package writes against them.
//
//go:embed schema/*.schema.json
var Schemas embed.FS
