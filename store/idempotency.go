package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/robot-bridge/robot-bridge/toolapi"
)

// idemSweepEvery is how many reservations pass between sweeps of expired
// keys.
const idemSweepEvery = 256

// Reserve implements toolapi.IdempotencyStore: in one transaction it
// returns the live record of key, or replaces an expired one and inserts a
// pending reservation. Keys survive restarts; a reservation whose task was
// created is reported done with its task id, so a retry after a crash
// finds the task (and never submits it again). Two reservations of one
// key at once reserve it once, on either engine: the insert is
// INSERT … ON CONFLICT DO NOTHING on the key, the primary key, and the
// loser reads the winner's record.
func (s *Store) Reserve(ctx context.Context, key, tool, argsHash string) (toolapi.IdemRecord, bool, error) {
	now := s.clock.Now()
	var (
		rec      toolapi.IdemRecord
		reserved bool
	)
	err := s.tx(ctx, "idempotency", func(tx txn) error {
		rec, reserved = toolapi.IdemRecord{}, false
		if s.idemSeen.Add(1)%idemSweepEvery == 0 {
			if _, err := tx.exec(ctx, `DELETE FROM idempotency WHERE created_at < ?`, ns(now.Add(-s.conf.IdempotencyTTL))); err != nil {
				return err
			}
		}
		// An expired record of this key makes room for the new one.
		if _, err := tx.exec(ctx, `DELETE FROM idempotency WHERE key=? AND created_at <= ?`,
			s.d.key(key), ns(now.Add(-s.conf.IdempotencyTTL))); err != nil {
			return err
		}
		res, err := tx.exec(ctx, `INSERT INTO idempotency(key, tool, args_hash, state, created_at, bridge_id) VALUES(?, ?, ?, ?, ?, ?)
			ON CONFLICT(key) DO NOTHING`,
			s.d.key(key), tool, argsHash, string(toolapi.IdemPending), ns(now), s.conf.BridgeID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 1 {
			rec = toolapi.IdemRecord{Key: key, Tool: tool, ArgsHash: argsHash, State: toolapi.IdemPending, CreatedAt: now}
			reserved = true
			return nil
		}
		r, ok, err := lookupIdem(ctx, s.d, tx, key)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("idempotency key was taken and then released while this reservation ran; %w", ErrUnavailable)
		}
		rec = r
		// A reservation of this store that reported failure may have been
		// committed after all (its connection broke after the commit was
		// sent). Its caller was told nothing was reserved and submitted
		// nothing, so that record is this request's to take; any other
		// record — another request's, or one with a task — is not.
		if at, ok := s.unsure.Load(key); ok && r.State == toolapi.IdemPending && r.TaskID == "" && ns(r.CreatedAt) == at.(int64) {
			reserved = true
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrUnavailable) {
			s.unsure.Store(key, ns(now))
		}
		return toolapi.IdemRecord{}, false, fmt.Errorf("store: reserve idempotency key: %w", err)
	}
	s.unsure.Delete(key)
	return rec, reserved, nil
}

func (s *Store) live(r toolapi.IdemRecord, now time.Time) bool {
	return now.Sub(r.CreatedAt) < s.conf.IdempotencyTTL
}

func lookupIdem(ctx context.Context, d *dialect, q rowQuerier, key string) (toolapi.IdemRecord, bool, error) {
	var (
		r         toolapi.IdemRecord
		state     string
		taskID    sql.NullString
		errJSON   sql.NullString
		createdAt int64
	)
	err := q.queryRow(ctx, `SELECT key, tool, args_hash, state, task_id, error, created_at FROM idempotency WHERE key=?`, d.key(key)).
		Scan(&r.Key, &r.Tool, &r.ArgsHash, &state, &taskID, &errJSON, &createdAt)
	if errors.Is(err, sql.ErrNoRows) {
		return r, false, nil
	}
	if err != nil {
		return r, false, err
	}
	r.State, r.TaskID, r.CreatedAt = toolapi.IdemState(state), taskID.String, fromNS(createdAt)
	if errJSON.Valid {
		var eb toolapi.ErrorBody
		if err := json.Unmarshal([]byte(errJSON.String), &eb); err == nil {
			r.Error = &eb
		}
	}
	if r.State == toolapi.IdemPending && r.TaskID != "" {
		// The task exists (its first transition named this key): the
		// request's outcome is that task.
		r.State = toolapi.IdemDone
	}
	return r, true, nil
}

// Complete implements toolapi.IdempotencyStore.
func (s *Store) Complete(ctx context.Context, key, taskID string, errBody *toolapi.ErrorBody) error {
	var errJSON any
	if errBody != nil {
		errJSON = mustJSON(errBody)
	}
	err := s.tx(ctx, "idempotency", func(tx txn) error {
		_, err := tx.exec(ctx, `UPDATE idempotency SET state=?, task_id=COALESCE(?, task_id), error=? WHERE key=?`,
			string(toolapi.IdemDone), nullStr(taskID), errJSON, s.d.key(key))
		return err
	})
	if err != nil {
		return fmt.Errorf("store: complete idempotency key: %w", err)
	}
	return nil
}

// Release implements toolapi.IdempotencyStore: a pending reservation that
// created no task is forgotten.
func (s *Store) Release(ctx context.Context, key string) error {
	err := s.tx(ctx, "idempotency", func(tx txn) error {
		_, err := tx.exec(ctx, `DELETE FROM idempotency WHERE key=? AND state=? AND task_id IS NULL`, s.d.key(key), string(toolapi.IdemPending))
		return err
	})
	if err != nil {
		return fmt.Errorf("store: release idempotency key: %w", err)
	}
	return nil
}

// Lookup implements toolapi.IdempotencyStore.
func (s *Store) Lookup(ctx context.Context, key string) (toolapi.IdemRecord, bool, error) {
	r, ok, err := lookupIdem(ctx, s.d, s, key)
	if err != nil {
		return toolapi.IdemRecord{}, false, fmt.Errorf("store: idempotency lookup: %w", s.classify(err))
	}
	if !ok || !s.live(r, s.clock.Now()) {
		return toolapi.IdemRecord{}, false, nil
	}
	return r, true, nil
}
