// Package hwconfig loads and validates the hardware configuration of one
// robot: which transport reaches it, its limits, named locations and poses,
// the safe pose, camera model, per-action timeouts and the approval policy.
//
// Loading is strict: an unknown key, a value outside an enum or an
// inconsistent limit is an error that names the field and what is allowed,
// because a typo in a safety limit must never silently fall back to a
// default. Load and Parse decode (goccy/go-yaml, unknown keys disallowed),
// fill the documented defaults (ApplyDefaults) and check everything
// (Validate). Every problem is a *FieldError whose Field is the YAML path
// ("arm.joints[1].min", "actions.stop.approval") and whose Allowed states
// the allowed values; Validate returns all of them at once in a
// *ValidationError. All such errors match ErrInvalid.
//
// Other packages should read the config through its helpers (JointNames,
// PoseJoints, ToolNames, ActionPolicy, Workspace, KeepOuts, …) rather than
// the raw maps, so that capability rules ("grasp needs an arm and a
// gripper") live in one place. testdata/ holds one good fixture per kind of
// robot and one bad fixture per kind of mistake; the loader is fuzzed with
// them as the seed corpus.
//
// hwconfig.schema.json is the config's JSON Schema for editors
// (yaml-language-server), generated from these types with their doc
// comments as descriptions; TestSchema_IsCurrent fails when it is stale.
package hwconfig

//go:generate go test . -run ^TestSchema_IsCurrent$ -update-schema
