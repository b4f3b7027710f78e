package bridge

import (
	"fmt"
	"net/http"

	"github.com/robot-bridge/robot-bridge/grpcapi"
	"github.com/robot-bridge/robot-bridge/toolapi"
)

// mountGRPC serves robotbridge.v1.ToolService (gRPC, gRPC-Web and Connect)
// on the API's own listener, beside the HTTP JSON API and MCP, so there is
// one port, one set of tokens and one call path for all three. It is
// mounted through the tool API's mux for its trace ids and request logs,
// but as a public route: the service authenticates each RPC itself, so a
// missing token is UNAUTHENTICATED in the caller's protocol rather than an
// HTTP 401 that a gRPC client can only guess at.
func (b *Bridge) mountGRPC() {
	svc, err := grpcapi.New(grpcapi.Conf{Tools: b.api, Auth: b.tokens, Logger: b.conf.Logger})
	if err != nil {
		// Tools and Auth are always set here: a failure is a wiring bug,
		// like a conflicting mux pattern.
		panic(fmt.Sprintf("bridge: gRPC service: %v", err))
	}
	path, h := svc.Handler()
	b.api.Mount(path, h, toolapi.RolePublic)
}

// serverProtocols are the protocols the API's http.Server speaks: HTTP/1.1
// for curl, browsers and Connect clients, and unencrypted HTTP/2 (h2c,
// prior knowledge) so that plain gRPC clients work on the loopback or
// behind a TLS-terminating proxy without the bridge holding certificates.
func serverProtocols() *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return p
}
