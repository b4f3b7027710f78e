package grpcapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"connectrpc.com/connect"

	"github.com/robot-bridge/robot-bridge/toolapi"
)

// authInterceptor authenticates every RPC of one service, unary and
// streaming alike, so a method added later cannot be reached without a
// token, and lets through only credentials whose role allows role.
type authInterceptor struct {
	auth Authenticator
	role toolapi.Role
	log  *slog.Logger
}

var _ connect.Interceptor = authInterceptor{}

// WrapUnary implements connect.Interceptor.
func (a authInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		ctx, err := a.authenticate(ctx, req.Spec().Procedure, req.Header())
		if err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

// WrapStreamingClient implements connect.Interceptor; clients pass through.
func (authInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler implements connect.Interceptor.
func (a authInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		ctx, err := a.authenticate(ctx, conn.Spec().Procedure, conn.RequestHeader())
		if err != nil {
			return err
		}
		return next(ctx, conn)
	}
}

// authenticate returns ctx carrying the caller, or the RPC error to answer:
// UNAUTHENTICATED without a valid token, PERMISSION_DENIED for a role that
// may not call the service. A principal the HTTP middleware already put in
// ctx is used as is.
func (a authInterceptor) authenticate(ctx context.Context, procedure string, h http.Header) (context.Context, error) {
	p, ok := toolapi.PrincipalFromContext(ctx)
	if !ok {
		var err error
		p, err = a.auth.Authenticate(h)
		if err != nil {
			a.log.Info("rpc rejected", "procedure", procedure, "code", connect.CodeUnauthenticated.String(),
				"reason", err.Error(), "trace_id", toolapi.TraceIDFromContext(ctx))
			return ctx, connect.NewError(connect.CodeUnauthenticated, err)
		}
	}
	if !p.Role.Allows(a.role) {
		a.log.Info("rpc rejected", "procedure", procedure, "code", connect.CodePermissionDenied.String(),
			"principal", p.Name, "trace_id", toolapi.TraceIDFromContext(ctx))
		return ctx, connect.NewError(connect.CodePermissionDenied,
			fmt.Errorf("the %q credential may not call %s; it needs the %s role", p.Role, procedure, a.role))
	}
	return toolapi.WithPrincipal(ctx, p), nil
}

// principal returns the caller the interceptor authenticated. Without one
// (a wiring bug: the interceptor always sets it) the RPC fails closed.
func principal(ctx context.Context) (toolapi.Principal, error) {
	p, ok := toolapi.PrincipalFromContext(ctx)
	if !ok {
		return toolapi.Principal{}, connect.NewError(connect.CodeUnauthenticated, toolapi.ErrNoToken)
	}
	return p, nil
}
