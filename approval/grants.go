package approval

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// grant is a grant's state. snap's fields other than Status and TaskID
// change only on revocation; the rest is the binding to tasks. Every
// mutable field is guarded by Service.mu once the grant is in the map.
type grant struct {
	snap Grant
	// rb is the grant's robot (immutable): its labels check a grasp
	// scope's objects.
	rb *robotState
	// b is a scoped grant's compiled bounds (immutable).
	b *bounds
	// boundTask is the task an approve-once grant belongs to; started is
	// set once that task has passed the gate on it.
	boundTask string
	started   bool
	// tasks maps each task that passed the gate on a scoped grant to the
	// args hash of the call it passed with, so the supervisor's check of
	// the same call every control period is a map read (bounds are not
	// checked again). Binding does not outlive the grant: an expired
	// scoped grant refuses its tasks too.
	tasks map[string]string
	// ended is set once the grant authorizes nothing any more (revoked, or
	// its TTL timer found it dead) and Conf.GrantEnded has been told.
	ended bool
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

// coveringGrant returns the active scoped grant of robot rb for tool whose
// bounds hold args (the one lasting longest, when several do), or nil: a
// grant for another robot never covers a request. Caller holds decideMu;
// bounds are checked outside mu because a label lookup calls out.
func (s *Service) coveringGrant(rb *robotState, tool string, args map[string]any, now time.Time) *Grant {
	type cand struct {
		b    *bounds
		snap Grant
	}
	var cands []cand
	s.mu.RLock()
	for _, g := range s.grants {
		if g.b != nil && g.snap.RobotID == rb.id && g.snap.Tool == tool && g.snap.RevokedAt == nil && now.Before(g.snap.ExpiresAt) {
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
		if c.b.contains(args, rb.labelOf) == nil {
			return &c.snap
		}
	}
	return nil
}

// CreateGrant creates a scoped grant for the service's one robot; see
// CreateGrantFor. With several robots it is refused (an *InvalidError on
// robot_id listing them): a grant is one robot's, and which is never
// implied.
func (s *Service) CreateGrant(ctx context.Context, by string, scope Scope, ttl time.Duration) (Grant, error) {
	return s.CreateGrantFor(ctx, "", by, scope, ttl)
}

// CreateGrantFor creates a scoped grant for robot robotID directly: any
// call of scope.Tool by that robot inside its bounds is approved and
// authorized until ttl passes or it is revoked; it authorizes no other
// robot. The scope is checked against that robot's own config (its named
// poses and locations, its max_grant_ttl) and its objects. robotID may be
// empty only when the service has one robot; a missing or unknown one is
// an *InvalidError on robot_id that lists the robots. Requests already
// pending are left for the operator to decide.
func (s *Service) CreateGrantFor(ctx context.Context, robotID, by string, scope Scope, ttl time.Duration) (Grant, error) {
	rb, err := s.robotFor("robot_id", robotID)
	if err != nil {
		return Grant{}, err
	}
	if err := checkName("by", by); err != nil {
		return Grant{}, err
	}
	s.decideMu.Lock()
	defer s.decideMu.Unlock()
	if s.closed {
		return Grant{}, ErrClosed
	}
	g, err := s.newScoped(rb, scope, ttl, by, "scope", "ttl")
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
	s.log.Info("scoped grant created", "grant_id", snap.ID, "robot_id", snap.RobotID, "tool", snap.Tool, "by", by, "expires_at", snap.ExpiresAt, "scope", snap.Description)
	return snap, nil
}

// newScoped validates a scope and TTL against robot rb into a grant of
// that robot without id or times.
func (s *Service) newScoped(rb *robotState, sc Scope, ttl time.Duration, by, scopeField, ttlField string) (*grant, error) {
	if ttl <= 0 {
		return nil, invalid(ttlField, "required: a positive duration like \"10m\", at most %s", ttlWords(rb.maxGrantTTL))
	}
	if ttl > rb.maxGrantTTL {
		return nil, invalid(ttlField, "%s is longer than this robot's max_grant_ttl of %s", ttlWords(ttl), ttlWords(rb.maxGrantTTL))
	}
	b, err := compileScope(rb.cfg, sc, scopeField)
	if err != nil {
		return nil, err
	}
	scope := b.scope
	return &grant{
		snap: Grant{
			Kind: GrantScoped, Tool: b.tool, RobotID: rb.id, Scope: &scope, CreatedBy: by,
			Description: b.desc,
		},
		rb:    rb,
		b:     b,
		tasks: map[string]string{},
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

// onGrantTimer announces that a grant expired and, when that ends it,
// tells Conf.GrantEnded (after every lock is released).
func (s *Service) onGrantTimer(id string) {
	if end := s.expireGrant(id); end != nil {
		s.notifyEnded(*end)
	}
}

// expireGrant handles a grant's TTL timer. It returns the end to announce
// when the expiry leaves the grant usable by nobody: always for a scoped
// grant (its time limit ends the motions running on it), and for an
// approve-once grant whose task has not started (once started, that one
// motion may finish).
func (s *Service) expireGrant(id string) *GrantEnd {
	s.decideMu.Lock()
	defer s.decideMu.Unlock()
	if s.closed || s.grantTimers[id] == nil {
		return nil
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
		return nil
	}
	if d := snap.ExpiresAt.Sub(now); d > 0 {
		s.grantTimers[id] = s.clock.AfterFunc(d, func() { s.onGrantTimer(id) })
		return nil
	}
	delete(s.grantTimers, id)
	var end *GrantEnd
	s.mu.Lock()
	if !g.ended && (g.b != nil || !g.started) {
		g.ended = true
		end = &GrantEnd{
			GrantID: id, RobotID: snap.RobotID, By: SystemActor, Expired: true,
			Reason: "its time limit ran out at " + clockTime(snap.ExpiresAt),
		}
	}
	s.mu.Unlock()
	s.publish(Event{Type: EventGrantExpired, Time: now, Grant: &snap})
	s.log.Info("grant expired", "grant_id", id, "robot_id", snap.RobotID, "tool", snap.Tool, "ends_motion", end != nil)
	return end
}

// notifyEnded calls Conf.GrantEnded. Callers hold no lock of the service.
func (s *Service) notifyEnded(end GrantEnd) {
	if s.grantEnded != nil {
		s.grantEnded(end)
	}
}

// RevokeOptions are the optional parts of a revocation.
type RevokeOptions struct {
	// Reason is the operator's reason (optional). It is recorded on the
	// grant, passed to Conf.GrantEnded and named in the refusal the agent
	// whose motion stopped gets back.
	Reason string
}

// Revoke revokes a grant with no reason; see RevokeWith.
func (s *Service) Revoke(ctx context.Context, grantID, by string) (Grant, error) {
	return s.RevokeWith(ctx, grantID, by, RevokeOptions{})
}

// RevokeWith revokes a grant: it is what the operator API's
// DELETE /v1/grants/{id} does, so deleting a grant and revoking it are one
// and the same. From the moment it returns, Authorize refuses every use of
// the grant with a *RefusalError matching safety.ErrGrantRevoked that says
// who revoked it and why, also for a task that is already moving on it;
// and before it returns, Conf.GrantEnded has been told, so the supervisor
// stops that motion at once. The grant stays readable with Grant (status
// revoked) and in the Store's audit trail; Grants no longer lists it.
// Revoking a grant twice gives a *NotPendingError.
func (s *Service) RevokeWith(ctx context.Context, grantID, by string, opts RevokeOptions) (Grant, error) {
	if err := checkName("by", by); err != nil {
		return Grant{}, err
	}
	if err := checkReason("reason", opts.Reason, false); err != nil {
		return Grant{}, err
	}
	snap, end, err := s.revoke(ctx, grantID, by, opts.Reason)
	if err != nil {
		return Grant{}, err
	}
	if end != nil {
		s.notifyEnded(*end)
	}
	return snap, nil
}

// revoke records and applies a revocation under decideMu. It returns the
// end to announce, or nil when the grant had already ended by expiry.
func (s *Service) revoke(ctx context.Context, grantID, by, reason string) (Grant, *GrantEnd, error) {
	s.decideMu.Lock()
	defer s.decideMu.Unlock()
	if s.closed {
		return Grant{}, nil, ErrClosed
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
		return Grant{}, nil, &NotFoundError{Kind: "grant", ID: grantID}
	}
	if snap.RevokedAt != nil {
		return Grant{}, nil, &NotPendingError{Kind: "grant", ID: grantID, Status: string(GrantRevoked), By: snap.RevokedBy, At: *snap.RevokedAt}
	}
	if err := ctx.Err(); err != nil {
		return Grant{}, nil, err
	}
	snap.RevokedAt, snap.RevokedBy, snap.RevokeReason, snap.Status = &now, by, reason, GrantRevoked
	if err := s.store.SaveGrant(ctx, snap); err != nil {
		return Grant{}, nil, fmt.Errorf("approval: record the revocation: %w", err)
	}
	var end *GrantEnd
	s.mu.Lock()
	g.snap.RevokedAt, g.snap.RevokedBy, g.snap.RevokeReason = &now, by, reason
	if !g.ended {
		g.ended = true
		end = &GrantEnd{GrantID: grantID, RobotID: snap.RobotID, By: by, Reason: reason}
	}
	s.mu.Unlock()
	if t := s.grantTimers[grantID]; t != nil {
		t.Stop()
		delete(s.grantTimers, grantID)
	}
	s.publish(Event{Type: EventGrantRevoked, Time: now, Grant: &snap})
	s.log.Info("grant revoked", "grant_id", grantID, "robot_id", snap.RobotID, "tool", snap.Tool, "by", by, "reason", reason)
	return snap, end, nil
}

// Grants returns the active grants (neither expired nor revoked) of every
// robot, oldest first.
func (s *Service) Grants() []Grant { return s.GrantsRobot("") }

// GrantsRobot is Grants for one robot's grants ("" for every robot's). An
// unknown robot has none; see CheckRobotFilter.
func (s *Service) GrantsRobot(robotID string) []Grant {
	now := s.clock.Now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []Grant
	for _, g := range s.grants {
		if robotID != "" && g.snap.RobotID != robotID {
			continue
		}
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
