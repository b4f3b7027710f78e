package approval

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// grant is a grant's state. snap's fields other than Status and TaskID
// change only on revocation; the rest is the binding to tasks.
type grant struct {
	snap Grant
	// b is a scoped grant's compiled bounds (immutable).
	b *bounds
	// boundTask is the task an approve-once grant belongs to; started is
	// set once that task has passed the gate on it.
	boundTask string
	started   bool
	// tasks are the tasks that started on a scoped grant while it was
	// valid; they may finish their motion after it expires.
	tasks map[string]struct{}
}

func (g *grant) snapshot(now time.Time) Grant {
	s := g.snap
	s.TaskID = g.boundTask
	switch {
	case s.RevokedAt != nil:
		s.Status = GrantRevoked
	case g.b == nil && g.started:
		s.Status = GrantUsed
	case !now.Before(s.ExpiresAt):
		s.Status = GrantExpired
	default:
		s.Status = GrantActive
	}
	return s
}

// coveringGrant returns the active scoped grant for tool whose bounds hold
// args (the one lasting longest, when several do), or nil. Caller holds
// decideMu; bounds are checked outside mu because a label lookup calls out.
func (s *Service) coveringGrant(tool string, args map[string]any, now time.Time) *Grant {
	type cand struct {
		b    *bounds
		snap Grant
	}
	var cands []cand
	s.mu.RLock()
	for _, g := range s.grants {
		if g.b != nil && g.snap.Tool == tool && g.snap.RevokedAt == nil && now.Before(g.snap.ExpiresAt) {
			cands = append(cands, cand{g.b, g.snapshot(now)})
		}
	}
	s.mu.RUnlock()
	sort.Slice(cands, func(i, j int) bool {
		if !cands[i].snap.ExpiresAt.Equal(cands[j].snap.ExpiresAt) {
			return cands[i].snap.ExpiresAt.After(cands[j].snap.ExpiresAt)
		}
		return cands[i].snap.ID < cands[j].snap.ID
	})
	for _, c := range cands {
		if c.b.contains(args, s.labelOf) == nil {
			return &c.snap
		}
	}
	return nil
}

// CreateGrant creates a scoped grant directly: any call of scope.Tool inside
// its bounds is approved and authorized until ttl passes or it is revoked.
// Requests already pending are left for the operator to decide.
func (s *Service) CreateGrant(ctx context.Context, by string, scope Scope, ttl time.Duration) (Grant, error) {
	if err := checkName("by", by); err != nil {
		return Grant{}, err
	}
	s.decideMu.Lock()
	defer s.decideMu.Unlock()
	if s.closed {
		return Grant{}, ErrClosed
	}
	g, err := s.newScoped(scope, ttl, by, "scope", "ttl")
	if err != nil {
		return Grant{}, err
	}
	if err := ctx.Err(); err != nil {
		return Grant{}, err
	}
	now := s.clock.Now()
	if g.snap.ID, err = s.uniqueID("grt_"); err != nil {
		return Grant{}, err
	}
	g.snap.CreatedAt, g.snap.ExpiresAt = now, now.Add(ttl)
	snap := g.snapshot(now)
	if err := s.store.SaveGrant(ctx, snap); err != nil {
		return Grant{}, fmt.Errorf("approval: record the grant: %w", err)
	}
	s.insertGrant(g)
	s.publish(Event{Type: EventGrantCreated, Time: now, Grant: &snap})
	s.log.Info("scoped grant created", "grant_id", snap.ID, "tool", snap.Tool, "by", by, "expires_at", snap.ExpiresAt, "scope", snap.Description)
	return snap, nil
}

// newScoped validates a scope and TTL into a grant without id or times.
func (s *Service) newScoped(sc Scope, ttl time.Duration, by, scopeField, ttlField string) (*grant, error) {
	if ttl <= 0 {
		return nil, invalid(ttlField, "required: a positive duration like \"10m\", at most %s", s.maxGrantTTL)
	}
	if ttl > s.maxGrantTTL {
		return nil, invalid(ttlField, "%s is longer than this robot's max_grant_ttl of %s", ttl, s.maxGrantTTL)
	}
	b, err := compileScope(s.cfg, sc, scopeField)
	if err != nil {
		return nil, err
	}
	scope := b.scope
	return &grant{
		snap: Grant{
			Kind: GrantScoped, Tool: b.tool, RobotID: s.robotID, Scope: &scope, CreatedBy: by,
			Description: b.desc,
		},
		b:     b,
		tasks: map[string]struct{}{},
	}, nil
}

// insertGrant stores a new grant, arms its expiry event and forgets the
// oldest dead grants beyond History. Caller holds decideMu.
func (s *Service) insertGrant(g *grant) {
	id := g.snap.ID
	now := s.clock.Now()
	s.mu.Lock()
	s.grants[id] = g
	s.grantOrder = append(s.grantOrder, id)
	if excess := len(s.grantOrder) - s.history; excess > 0 {
		kept := s.grantOrder[:0]
		for _, gid := range s.grantOrder {
			if old := s.grants[gid]; excess > 0 && (old.snap.RevokedAt != nil || !now.Before(old.snap.ExpiresAt)) {
				delete(s.grants, gid)
				if t := s.grantTimers[gid]; t != nil {
					t.Stop()
					delete(s.grantTimers, gid)
				}
				excess--
				continue
			}
			kept = append(kept, gid)
		}
		s.grantOrder = kept
	}
	s.mu.Unlock()
	s.grantTimers[id] = s.clock.AfterFunc(g.snap.ExpiresAt.Sub(now), func() { s.onGrantTimer(id) })
}

// onGrantTimer announces that a grant expired.
func (s *Service) onGrantTimer(id string) {
	s.decideMu.Lock()
	defer s.decideMu.Unlock()
	if s.closed || s.grantTimers[id] == nil {
		return
	}
	now := s.clock.Now()
	s.mu.RLock()
	g := s.grants[id]
	var snap Grant
	if g != nil {
		snap = g.snapshot(now)
	}
	s.mu.RUnlock()
	if g == nil || snap.Status == GrantRevoked {
		delete(s.grantTimers, id)
		return
	}
	if d := snap.ExpiresAt.Sub(now); d > 0 {
		s.grantTimers[id] = s.clock.AfterFunc(d, func() { s.onGrantTimer(id) })
		return
	}
	delete(s.grantTimers, id)
	s.publish(Event{Type: EventGrantExpired, Time: now, Grant: &snap})
	s.log.Info("grant expired", "grant_id", id, "tool", snap.Tool)
}

// Revoke revokes a grant. From the moment Revoke returns, Authorize refuses
// every use of it, also by a task that is already moving on it (the
// supervisor then stops that motion). Revoking a grant twice gives a
// *NotPendingError.
func (s *Service) Revoke(ctx context.Context, grantID, by string) (Grant, error) {
	if err := checkName("by", by); err != nil {
		return Grant{}, err
	}
	s.decideMu.Lock()
	defer s.decideMu.Unlock()
	if s.closed {
		return Grant{}, ErrClosed
	}
	now := s.clock.Now()
	s.mu.RLock()
	g := s.grants[grantID]
	var snap Grant
	if g != nil {
		snap = g.snapshot(now)
	}
	s.mu.RUnlock()
	if g == nil {
		return Grant{}, &NotFoundError{Kind: "grant", ID: grantID}
	}
	if snap.RevokedAt != nil {
		return Grant{}, &NotPendingError{Kind: "grant", ID: grantID, Status: string(GrantRevoked), By: snap.RevokedBy, At: *snap.RevokedAt}
	}
	if err := ctx.Err(); err != nil {
		return Grant{}, err
	}
	snap.RevokedAt, snap.RevokedBy, snap.Status = &now, by, GrantRevoked
	if err := s.store.SaveGrant(ctx, snap); err != nil {
		return Grant{}, fmt.Errorf("approval: record the revocation: %w", err)
	}
	s.mu.Lock()
	g.snap.RevokedAt, g.snap.RevokedBy = &now, by
	s.mu.Unlock()
	if t := s.grantTimers[grantID]; t != nil {
		t.Stop()
		delete(s.grantTimers, grantID)
	}
	s.publish(Event{Type: EventGrantRevoked, Time: now, Grant: &snap})
	s.log.Info("grant revoked", "grant_id", grantID, "tool", snap.Tool, "by", by)
	return snap, nil
}

// Grants returns the active grants (neither expired nor revoked), oldest
// first.
func (s *Service) Grants() []Grant {
	now := s.clock.Now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []Grant
	for _, g := range s.grants {
		if snap := g.snapshot(now); snap.Status == GrantActive {
			out = append(out, snap)
		}
	}
	sortOldestFirst(out, func(g Grant) (time.Time, string) { return g.CreatedAt, g.ID })
	return out
}

// Grant returns one grant in any status, or a *NotFoundError.
func (s *Service) Grant(id string) (Grant, error) {
	now := s.clock.Now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	g := s.grants[id]
	if g == nil {
		return Grant{}, &NotFoundError{Kind: "grant", ID: id}
	}
	return g.snapshot(now), nil
}
