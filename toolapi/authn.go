package toolapi

import (
	"errors"
	"net/http"
)

// Errors of Tokens.Authenticate. Front ends that are not mounted behind
// the HTTP middleware (gRPC, Connect) branch on them to answer in their
// own protocol: Unauthenticated rather than an HTTP 401 with a JSON body.
var (
	// ErrNoToken: the request carries no bearer token.
	ErrNoToken = errors.New("a bearer token is required (authorization: Bearer <token>)")
	// ErrInvalidToken: the bearer token is neither the agent's nor the
	// operator's.
	ErrInvalidToken = errors.New("the bearer token is not valid")
)

// Authenticate maps the Authorization header of h ("Bearer <token>",
// scheme case-insensitive) to its principal with the same constant-time
// comparison the HTTP middleware uses, so every front end accepts exactly
// the same credentials. It returns ErrNoToken or ErrInvalidToken.
func (t Tokens) Authenticate(h http.Header) (Principal, error) {
	tok := bearer(&http.Request{Header: h})
	if tok == "" {
		return Principal{}, ErrNoToken
	}
	p, ok := t.authenticate(tok)
	if !ok {
		return Principal{}, ErrInvalidToken
	}
	return p, nil
}

// Allows reports whether a credential of role r may use something that
// requires role need: the operator role includes the agent role, and
// RolePublic needs nothing.
func (r Role) Allows(need Role) bool { return r.allows(need) }
