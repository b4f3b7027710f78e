// Package hwconfig loads and validates the hardware configuration of one
// robot: which transport reaches it, its limits, named locations and poses,
// the safe pose, camera model, per-action timeouts and the approval policy.
//
// Loading is strict: an unknown key, a value outside an enum or an
// inconsistent limit is an error that names the field and what is allowed,
// because a typo in a safety limit must never silently fall back to a
// default.
package hwconfig
