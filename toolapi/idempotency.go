package toolapi

import (
	"context"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// IdemState is the state of an idempotency record.
type IdemState string

// Idempotency record states.
const (
	// IdemPending: the first request with the key is being processed.
	IdemPending IdemState = "pending"
	// IdemDone: the first request ended; its outcome is recorded.
	IdemDone IdemState = "done"
)

// IdemRecord is what the bridge remembers of one idempotency key. Every
// field is plain data so a persistent store can keep it in one row.
type IdemRecord struct {
	// Key is the scoped key (principal and the client's key).
	Key string `json:"key"`
	// Tool and ArgsHash (safety.ArgsHash of tool and arguments) are what
	// the key is bound to; another hash under the same key is a CONFLICT.
	Tool     string    `json:"tool"`
	ArgsHash string    `json:"args_hash"`
	State    IdemState `json:"state"`
	// TaskID is the task the first request created ("" if none).
	TaskID string `json:"task_id,omitempty"`
	// Error is the outcome of a first request that failed without
	// creating a task (replayed as is).
	Error     *ErrorBody `json:"error,omitempty"`
	CreatedAt time.Time  `json:"created_at,omitzero"`
}

// IdempotencyStore remembers idempotency keys for at least 24 hours.
// MemIdempotencyStore implements it; a SQLite store can implement it with
// one table keyed by Key (Reserve is an INSERT … ON CONFLICT DO NOTHING
// followed by a SELECT, in one transaction).
type IdempotencyStore interface {
	// Reserve creates a pending record for key bound to tool and argsHash
	// and returns it with reserved true, unless a live record exists, in
	// which case it returns that record with reserved false. It is atomic:
	// of concurrent Reserves of one key exactly one reserves.
	Reserve(ctx context.Context, key, tool, argsHash string) (rec IdemRecord, reserved bool, err error)
	// Complete records the outcome of the reserved request: the task it
	// created, or the error it ended with.
	Complete(ctx context.Context, key, taskID string, errBody *ErrorBody) error
	// Release forgets a pending reservation whose request ended with a
	// retryable error before any task existed, so the same key may try
	// again.
	Release(ctx context.Context, key string) error
	// Lookup returns the live record of key.
	Lookup(ctx context.Context, key string) (IdemRecord, bool, error)
}

// MemIdempotencyStore is an in-memory IdempotencyStore; keys survive for
// TTL on the injected clock, not across restarts.
type MemIdempotencyStore struct {
	clock clockwork.Clock
	ttl   time.Duration

	mu        sync.Mutex
	recs      map[string]IdemRecord // guarded by mu
	lastSweep time.Time             // guarded by mu
}

var _ IdempotencyStore = (*MemIdempotencyStore)(nil)

// NewMemIdempotencyStore returns an empty store that forgets keys ttl
// after they were reserved.
func NewMemIdempotencyStore(clock clockwork.Clock, ttl time.Duration) *MemIdempotencyStore {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	return &MemIdempotencyStore{clock: clock, ttl: ttl, recs: map[string]IdemRecord{}}
}

func (s *MemIdempotencyStore) live(r IdemRecord, now time.Time) bool {
	return now.Sub(r.CreatedAt) < s.ttl
}

// Reserve implements IdempotencyStore.
func (s *MemIdempotencyStore) Reserve(_ context.Context, key, tool, argsHash string) (IdemRecord, bool, error) {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.lastSweep) > time.Minute {
		for k, r := range s.recs {
			if !s.live(r, now) {
				delete(s.recs, k)
			}
		}
		s.lastSweep = now
	}
	if r, ok := s.recs[key]; ok && s.live(r, now) {
		return r, false, nil
	}
	r := IdemRecord{Key: key, Tool: tool, ArgsHash: argsHash, State: IdemPending, CreatedAt: now}
	s.recs[key] = r
	return r, true, nil
}

// Complete implements IdempotencyStore.
func (s *MemIdempotencyStore) Complete(_ context.Context, key, taskID string, errBody *ErrorBody) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.recs[key]
	if !ok {
		return nil
	}
	r.State, r.TaskID, r.Error = IdemDone, taskID, errBody
	s.recs[key] = r
	return nil
}

// Release implements IdempotencyStore.
func (s *MemIdempotencyStore) Release(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.recs[key]; ok && r.State == IdemPending {
		delete(s.recs, key)
	}
	return nil
}

// Lookup implements IdempotencyStore.
func (s *MemIdempotencyStore) Lookup(_ context.Context, key string) (IdemRecord, bool, error) {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.recs[key]
	if !ok || !s.live(r, now) {
		return IdemRecord{}, false, nil
	}
	return r, true, nil
}
