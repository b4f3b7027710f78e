package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Errors of cluster mode.
var (
	// ErrClusterNeedsPostgres: cluster mode (Conf.BridgeID), leases,
	// notifications and the mailbox need the postgres store.
	ErrClusterNeedsPostgres = errors.New("cluster mode needs the postgres store")
	// ErrNotCluster: a cluster call (leases, the mailbox) on a store
	// opened without Conf.BridgeID.
	ErrNotCluster = errors.New("cluster mode is off (the store was opened without a bridge id)")
)

// bridgeIDPattern is what a bridge id looks like.
var bridgeIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,31}$`)

// ValidateBridgeID checks a bridge id: 1 to 32 characters of a-z, 0-9,
// '.', '_', '-', starting with a letter or digit.
func ValidateBridgeID(id string) error {
	if !bridgeIDPattern.MatchString(id) {
		return fmt.Errorf("bridge id %q is not valid: want 1 to 32 characters of a-z, 0-9, '.', '_' and '-', starting with a letter or a digit", id)
	}
	return nil
}

// dbNow is the database's clock as Unix nanoseconds, in SQL
// (clock_timestamp(): the time of the statement, not of the
// transaction's start; extract gives numeric, exact to the microsecond,
// on PostgreSQL 14 and later).
const dbNow = `(extract(epoch from clock_timestamp()) * 1000000000)::bigint`

// cluster says whether the cluster calls work on this store.
func (s *Store) cluster() error {
	if s.d.driver != DriverPostgres {
		return ErrClusterNeedsPostgres
	}
	if s.conf.BridgeID == "" {
		return ErrNotCluster
	}
	return nil
}

// joinCluster records this bridge in the bridges table (cluster mode
// only), in Open's claim.
func (s *Store) joinCluster(ctx context.Context, tx txn) error {
	if s.conf.BridgeID == "" || s.d.driver != DriverPostgres {
		return nil
	}
	_, err := tx.exec(ctx, `INSERT INTO bridges(id, instance, url, started_at, seen_at) VALUES(?, ?, '', `+dbNow+`, `+dbNow+`)
		ON CONFLICT(id) DO UPDATE SET instance=excluded.instance, started_at=excluded.started_at, seen_at=excluded.seen_at`,
		s.conf.BridgeID, s.info.Instance)
	return err
}

// BridgeInfo is one bridge of the cluster as the bridges table knows it.
type BridgeInfo struct {
	ID string `json:"id"`
	// Instance is the bridge's current (or last) run (Info.Instance).
	Instance string `json:"instance"`
	// URL is what the bridge advertised (SetBridgeURL), "" if nothing.
	URL string `json:"url,omitempty"`
	// StartedAt is when that run opened the store, SeenAt when it last
	// renewed its leases (RenewLeases), both on the database's clock.
	StartedAt time.Time `json:"started_at"`
	SeenAt    time.Time `json:"seen_at"`
	// SeenAgo is the database's now at the read minus SeenAt.
	SeenAgo time.Duration `json:"seen_ago"`
	// Self is true for this store's own bridge.
	Self bool `json:"self"`
}

// Bridges returns every bridge that ever joined the cluster, by id.
func (s *Store) Bridges(ctx context.Context) ([]BridgeInfo, error) {
	if err := s.cluster(); err != nil {
		return nil, fmt.Errorf("store: bridges: %w", err)
	}
	rows, err := s.query(ctx, `SELECT id, instance, url, started_at, seen_at, `+dbNow+` FROM bridges ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("store: bridges: %w", err)
	}
	defer closeRead(rows)
	var out []BridgeInfo
	for rows.Next() {
		var b BridgeInfo
		var started, seen, now int64
		if err := rows.Scan(&b.ID, &b.Instance, &b.URL, &started, &seen, &now); err != nil {
			return nil, fmt.Errorf("store: bridges: %w", s.classify(err))
		}
		b.StartedAt, b.SeenAt, b.SeenAgo = fromNS(started), fromNS(seen), time.Duration(now-seen)
		b.Self = b.ID == s.conf.BridgeID
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: bridges: %w", s.classify(err))
	}
	return out, nil
}

// SetBridgeURL advertises the URL of this bridge's API to the cluster
// (Bridges), for the consoles of the other bridges.
func (s *Store) SetBridgeURL(ctx context.Context, url string) error {
	if err := s.cluster(); err != nil {
		return fmt.Errorf("store: set bridge url: %w", err)
	}
	err := s.tx(ctx, "cluster", func(tx txn) error {
		_, err := tx.exec(ctx, `UPDATE bridges SET url=? WHERE id=?`, url, s.conf.BridgeID)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: set bridge url: %w", err)
	}
	return nil
}
