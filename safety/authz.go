package safety

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ErrNotAuthorized is the root of every refusal by the authorization gate
// for want of a valid grant.
var ErrNotAuthorized = errors.New("motion not authorized")

// Sentinels a Grants refusal wraps (besides ErrNotAuthorized) when the
// grant itself has ended, so the supervisor can tell the agent which: an
// operator withdrew it, or its time ran out. A motion running on a grant
// that ends is stopped at once (ARCHITECTURE.md, invariant 11).
var (
	// ErrGrantRevoked: an operator revoked or deleted the grant.
	ErrGrantRevoked = errors.New("grant revoked")
	// ErrGrantExpired: the grant's time-to-live ran out.
	ErrGrantExpired = errors.New("grant expired")
)

// Revocation is implemented by a Grants error for a grant an operator
// revoked, naming who and their reason ("" for none); ok is false when the
// error is not a revocation. A motion that finds its grant revoked on its
// own re-check stops with the same words as one the revocation's push
// stopped, not with the refusal's longer text.
type Revocation interface {
	Revocation() (by, reason string, ok bool)
}

// Use is one motion command asking to pass the gate on a grant.
type Use struct {
	// GrantID names the grant the task holds ("" for none).
	GrantID string
	// TaskID is the task sending the command. A single-use grant binds to
	// the first task that uses it; any other task is refused.
	TaskID string
	// Tool and Args are the task's tool call; ArgsHash is ArgsHash(Args).
	Tool     string
	Args     map[string]any
	ArgsHash string
	// RobotID is the robot the command is for.
	RobotID string
	// Now is the supervisor's clock reading.
	Now time.Time
}

// Grants checks operator grants. The approval service implements it.
//
// Authorize returns nil only if grantID exists, is not revoked, is for
// this robot and tool, and either matches ArgsHash exactly (approve once)
// or is a scoped grant whose bounds contain Args; and it has not expired,
// unless it is already bound to this TaskID (a task that started on a valid
// grant may finish its motion). Errors wrap ErrNotAuthorized and say why.
type Grants interface {
	Authorize(u Use) error
}

// GrantsFunc adapts a function to Grants (tests, config-only setups).
type GrantsFunc func(Use) error

// Authorize implements Grants.
func (f GrantsFunc) Authorize(u Use) error { return f(u) }

// ArgsHash is the canonical hash of a tool call that grants and
// idempotency keys bind to: SHA-256 over the tool name and the arguments
// as JSON with sorted keys (encoding/json sorts map keys), hex-encoded.
func ArgsHash(tool string, args map[string]any) string {
	b, err := json.Marshal(args)
	if err != nil {
		// Arguments come from decoded JSON and always re-encode; an
		// unencodable value must still never collide with a valid one.
		b = []byte(fmt.Sprintf("unencodable:%v", err))
	}
	h := sha256.New()
	h.Write([]byte(tool))
	h.Write([]byte{0})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}
