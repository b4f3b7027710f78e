package toolapi

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"
)

// Connections. The loop guard keys a call without a session_id by the
// connection it came on (an HTTP/1.1 keep-alive connection, or an HTTP/2
// connection carrying gRPC or Connect streams), so two agents — or curl
// and an agent — sharing one credential never trip each other's
// LOOP_DETECTED, while a model repeating a failing call on its connection
// still does. An agent that opens a new connection for every call is seen
// by the loop guard one call at a time: it should send a session_id. The
// rate limit and call budget stay per credential and session_id, so a new
// connection never buys more calls.

type connIDKey struct{}

var connSeq atomic.Uint64

// ConnContext gives every accepted connection an id of its own; set it as
// the http.Server's ConnContext (the bridge does). Behind a server without
// it, the tool API keys a connection by the client's address and port.
func ConnContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connIDKey{}, "c"+strconv.FormatUint(connSeq.Add(1), 10))
}

// WithConnID returns ctx carrying connection id id, for front ends that
// are not net/http servers (a stdio proxy's one stream, a test).
func WithConnID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, connIDKey{}, id)
}

// ConnIDFromContext returns the connection id ctx carries.
func ConnIDFromContext(ctx context.Context) (string, bool) {
	var id string
	switch v := ctx.Value(connIDKey{}).(type) {
	case string:
		id = v
	case *string:
		id = *v // a reqCtx's
	}
	return id, id != ""
}

// loopKey is the loop guard's key of a call: the credential with the
// session_id, or without one the connection (in its own namespace, so no
// session_id can name a connection's bucket).
func loopKey(ctx context.Context, principal, sessionID string) sessionKey {
	if sessionID == "" {
		if id, ok := ConnIDFromContext(ctx); ok {
			return sessionKey{principal: principal, conn: true, id: id}
		}
	}
	return sessionKey{principal: principal, id: sessionID}
}
