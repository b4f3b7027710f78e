package toolapi

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// Role is what a credential may do.
type Role string

// Roles. The operator role may do everything the agent role may.
const (
	// RolePublic marks a route that needs no token (health, metrics).
	RolePublic Role = ""
	// RoleAgent may call tools and read tasks.
	RoleAgent Role = "agent"
	// RoleOperator may also decide approvals and reset the e-stop (on the
	// routes the lead mounts with this role).
	RoleOperator Role = "operator"
)

// allows reports whether a credential of role r may use a route that
// requires need.
func (r Role) allows(need Role) bool {
	switch need {
	case RolePublic:
		return true
	case RoleAgent:
		return r == RoleAgent || r == RoleOperator
	case RoleOperator:
		return r == RoleOperator
	}
	return false
}

// Principal is the authenticated caller.
type Principal struct {
	// Name identifies the credential in logs, tasks and audit ("agent",
	// "operator").
	Name string
	Role Role
}

type principalKey struct{}

// PrincipalFromRequest returns the caller that the auth middleware
// authenticated for r; false on public routes.
func PrincipalFromRequest(r *http.Request) (Principal, bool) {
	return PrincipalFromContext(r.Context())
}

// PrincipalFromContext returns the authenticated caller carried by ctx.
func PrincipalFromContext(ctx context.Context) (Principal, bool) {
	switch p := ctx.Value(principalKey{}).(type) {
	case Principal:
		return p, true
	case *Principal:
		return *p, true // a reqCtx's
	}
	return Principal{}, false
}

// WithPrincipal returns ctx carrying p (for front ends and tests that call
// handlers behind their own authentication).
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// Tokens are the bearer tokens of the two roles.
type Tokens struct {
	Agent    string `json:"agent"`
	Operator string `json:"operator"`
}

// minTokenLen keeps guessable tokens out.
const minTokenLen = 16

func (t Tokens) validate() error {
	switch {
	case len(t.Agent) < minTokenLen:
		return confErr("Tokens.Agent", "must be at least %d characters", minTokenLen)
	case len(t.Operator) < minTokenLen:
		return confErr("Tokens.Operator", "must be at least %d characters", minTokenLen)
	case t.Agent == t.Operator:
		return confErr("Tokens", "the agent and operator tokens must differ")
	}
	return nil
}

// Environment variables LoadOrCreateTokens reads.
const (
	EnvAgentToken    = "ROBOT_BRIDGE_AGENT_TOKEN"
	EnvOperatorToken = "ROBOT_BRIDGE_OPERATOR_TOKEN"
	// TokensFile is the file in the data dir that holds generated tokens.
	TokensFile = "tokens.json"
)

// LoadOrCreateTokens returns the bearer tokens: from the environment
// (env, usually os.Getenv) when set, else from dataDir/tokens.json, else
// freshly generated random tokens written there with mode 0600 (created is
// then true, so the caller can print where they are). A token file that
// others can read is refused, since a leaked operator token can approve
// motions.
func LoadOrCreateTokens(dataDir string, env func(string) string) (Tokens, bool, error) {
	if env == nil {
		env = os.Getenv
	}
	fromEnv := Tokens{Agent: strings.TrimSpace(env(EnvAgentToken)), Operator: strings.TrimSpace(env(EnvOperatorToken))}
	if fromEnv.Agent != "" && fromEnv.Operator != "" {
		return fromEnv, false, fromEnv.validate()
	}
	path := filepath.Join(dataDir, TokensFile)
	var stored Tokens
	b, err := os.ReadFile(path)
	created := false
	switch {
	case err == nil:
		fi, serr := os.Stat(path)
		if serr != nil {
			return Tokens{}, false, fmt.Errorf("stat %s: %w", path, serr)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			return Tokens{}, false, fmt.Errorf("%s has mode %v; it must be readable by its owner only (chmod 600)", path, fi.Mode().Perm())
		}
		if err := json.Unmarshal(b, &stored); err != nil {
			return Tokens{}, false, fmt.Errorf("%s: %w", path, err)
		}
	case errors.Is(err, os.ErrNotExist):
		stored = Tokens{Agent: "rba_" + randomHex(24), Operator: "rbo_" + randomHex(24)}
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return Tokens{}, false, fmt.Errorf("create data dir: %w", err)
		}
		out, _ := json.MarshalIndent(stored, "", "  ")
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return Tokens{}, false, fmt.Errorf("create %s: %w", path, err)
		}
		if _, err := f.Write(append(out, '\n')); err != nil {
			_ = f.Close() // the write error is the one to report
			return Tokens{}, false, fmt.Errorf("write %s: %w", path, err)
		}
		if err := f.Close(); err != nil {
			return Tokens{}, false, fmt.Errorf("write %s: %w", path, err)
		}
		created = true
	default:
		return Tokens{}, false, fmt.Errorf("read %s: %w", path, err)
	}
	// A variable that is set wins over the file, role by role.
	if fromEnv.Agent != "" {
		stored.Agent = fromEnv.Agent
	}
	if fromEnv.Operator != "" {
		stored.Operator = fromEnv.Operator
	}
	return stored, created, stored.validate()
}

func randomHex(n int) string {
	b := make([]byte, n)
	// crypto/rand.Read never returns an error (Go 1.24+).
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// authenticate maps a bearer token to its principal, comparing against
// both tokens in constant time so timing reveals neither.
func (t Tokens) authenticate(token string) (Principal, bool) {
	a := subtle.ConstantTimeCompare([]byte(token), []byte(t.Agent))
	o := subtle.ConstantTimeCompare([]byte(token), []byte(t.Operator))
	switch {
	case o == 1:
		return Principal{Name: "operator", Role: RoleOperator}, true
	case a == 1:
		return Principal{Name: "agent", Role: RoleAgent}, true
	}
	return Principal{}, false
}

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(h) > len(prefix) && strings.EqualFold(h[:len(prefix)], prefix) {
		return strings.TrimSpace(h[len(prefix):])
	}
	return ""
}

// requireRole wraps h so that only a credential allowed need reaches it:
// no or a wrong token is 401, a valid token of a lesser role 403.
func (s *Server) requireRole(need Role, h http.Handler) http.Handler {
	if need == RolePublic {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := bearer(r)
		p, ok := s.conf.Tokens.authenticate(tok)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="robot-bridge"`)
			msg := "a bearer token is required (Authorization: Bearer <token>)"
			if tok != "" {
				msg = "the bearer token is not valid"
			}
			writeHTTPError(w, http.StatusUnauthorized, permissionDenied(msg, need))
			return
		}
		if !p.Role.allows(need) {
			writeHTTPError(w, http.StatusForbidden, permissionDenied(
				fmt.Sprintf("the %s credential may not use this route; it needs the %s role", p.Role, need), need))
			return
		}
		if rc, ok := r.Context().(*reqCtx); ok && !rc.hasP {
			// The request's own context, made by traced and not yet
			// authenticated: it takes the principal, with no new copy of
			// the request.
			rc.p, rc.hasP = p, true
			h.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
	})
}
