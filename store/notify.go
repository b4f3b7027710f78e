package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// NotifyChannel is the one PostgreSQL LISTEN/NOTIFY channel the bridges
// of a cluster announce their writes on.
const NotifyChannel = "robot_bridge"

// Kinds of Notice.
const (
	// NoticeResync: re-read everything. Listen delivers it first, after
	// every (re)connect, and after it had to drop notices.
	NoticeResync = "resync"
	// NoticeLatch: a robot's e-stop or fault latch changed (RobotID).
	NoticeLatch = "latch"
	// NoticeApproval: an approval request was saved (ID, RobotID).
	NoticeApproval = "approval"
	// NoticeGrant: a grant was saved (ID, RobotID).
	NoticeGrant = "grant"
	// NoticeLease: a robot's lease was acquired, taken over or released
	// (RobotID).
	NoticeLease = "lease"
	// NoticeMail: mail was posted to a bridge (Seq, RobotID; To is the
	// addressee, in ID).
	NoticeMail = "mail"
	// NoticeAnswer: mail was answered or abandoned (Seq, RobotID; ID is
	// the sender, who waits for it).
	NoticeAnswer = "answer"
	// NoticeTask: a task's transition was recorded (ID, RobotID).
	NoticeTask = "task"
)

// Notice is one announced write of a bridge of the cluster. It names
// what changed, never its content: the consumer re-reads the store.
type Notice struct {
	Kind    string `json:"k"`
	RobotID string `json:"r,omitempty"`
	ID      string `json:"id,omitempty"`
	// From is the bridge id of the writer (Conf.BridgeID); a consumer
	// may ignore its own notices.
	From string `json:"f,omitempty"`
	Seq  int64  `json:"s,omitempty"`
}

// maxNoticeField bounds each string of a notice's payload, so the
// payload stays far below PostgreSQL's 8000 bytes whatever an id holds.
const maxNoticeField = 512

// Listen's buffer and reconnect backoff.
const (
	listenBuffer     = 1024
	listenBackoffMin = 50 * time.Millisecond
	listenBackoffMax = time.Second
	// listenRetryFull is how often Listen tries again to hand over the
	// resync it owes a consumer whose channel was full.
	listenRetryFull = 20 * time.Millisecond
)

func truncField(s string) string {
	if len(s) <= maxNoticeField {
		return s
	}
	return s[:maxNoticeField]
}

// notify announces n on NotifyChannel inside the write transaction tx, so
// it is delivered when (and only if) the transaction commits. It does
// nothing outside cluster mode (and on SQLite, which has no cluster
// mode).
func notify(ctx context.Context, tx txn, n Notice) error {
	if tx.from == "" || tx.d.driver != DriverPostgres {
		return nil
	}
	n.From = tx.from
	n.Kind, n.RobotID, n.ID = truncField(n.Kind), truncField(n.RobotID), truncField(n.ID)
	b, err := json.Marshal(n)
	if err != nil {
		return err
	}
	_, err = tx.exec(ctx, `SELECT pg_notify(?, ?)`, NotifyChannel, string(b))
	return err
}

// Listen returns a channel of the cluster's notices, announced by every
// bridge's writes on this store's database (this bridge's own included:
// Notice.From says whose). It holds one dedicated connection (not one of
// the pool's) listening on NotifyChannel; on any error it reconnects with
// a backoff of 50 ms up to 1 s, and after every connect — the first one
// included — it delivers a NoticeResync first, so a consumer re-reads
// what it may have missed while no connection listened. The channel is
// buffered (1024); when the consumer falls behind and it is full, notices
// are dropped and a NoticeResync is delivered as soon as there is room,
// so nothing is lost that a re-read cannot find. The channel closes when
// ctx ends or the store closes. It needs the postgres store
// (ErrClusterNeedsPostgres) but not cluster mode.
func (s *Store) Listen(ctx context.Context) (<-chan Notice, error) {
	if s.d.driver != DriverPostgres {
		return nil, fmt.Errorf("store: listen: %w", ErrClusterNeedsPostgres)
	}
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	out := make(chan Notice, listenBuffer)
	s.listeners.Go(func() {
		defer close(out)
		defer cancel()
		go func() {
			select {
			case <-s.quit:
				cancel()
			case <-ctx.Done():
			}
		}()
		s.listen(ctx, out)
	})
	return out, nil
}

// listen is Listen's loop: connect, LISTEN, deliver, until ctx ends.
func (s *Store) listen(ctx context.Context, out chan<- Notice) {
	owed := false // a resync is owed to the consumer
	deliver := func(n Notice) {
		if owed {
			select {
			case out <- Notice{Kind: NoticeResync}:
				owed = false
			default:
				return // still full: n is dropped, the resync stays owed
			}
			if n.Kind == NoticeResync {
				return // the owed one was it
			}
		}
		select {
		case out <- n:
		default:
			owed = true
		}
	}
	backoff := listenBackoffMin
	failures := 0
	for ctx.Err() == nil {
		conn, err := s.listenConn(ctx)
		if err != nil {
			failures++
			if failures == 1 || failures%50 == 0 {
				s.log.Warn("cluster notifications: cannot listen; trying again", "attempts", failures, "err", s.classify(err))
			}
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, listenBackoffMax)
			continue
		}
		if failures > 0 {
			s.log.Info("cluster notifications: listening again", "after_attempts", failures)
		}
		failures, backoff = 0, listenBackoffMin
		// The resync replaces whatever was owed or queued before it.
		owed = false
		deliver(Notice{Kind: NoticeResync})
		err = s.waitNotices(ctx, conn, &owed, deliver)
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = conn.Close(closeCtx)
		cancel()
		if ctx.Err() == nil {
			s.log.Warn("cluster notifications: connection lost; reconnecting", "err", s.classify(err))
		}
	}
}

func (s *Store) listenConn(ctx context.Context) (*pgx.Conn, error) {
	if s.pgCfg == nil {
		return nil, errors.New("no PostgreSQL configuration")
	}
	conn, err := pgx.ConnectConfig(ctx, s.pgCfg.Copy())
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+NotifyChannel); err != nil {
		_ = conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// waitNotices delivers the connection's notifications until it fails or
// ctx ends. While a resync is owed it wakes up regularly to hand it over.
func (s *Store) waitNotices(ctx context.Context, conn *pgx.Conn, owed *bool, deliver func(Notice)) error {
	for {
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if *owed {
			wctx, cancel = context.WithTimeout(ctx, listenRetryFull)
		}
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil && *owed && errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
			// The wake-up to hand over the owed resync (deliver sends
			// the owed one and nothing more, or nothing while full).
			deliver(Notice{Kind: NoticeResync})
			continue
		case err != nil:
			return err
		}
		var nt Notice
		if json.Unmarshal([]byte(n.Payload), &nt) != nil || nt.Kind == "" {
			// Not ours or garbled: re-read everything rather than guess.
			nt = Notice{Kind: NoticeResync}
		}
		deliver(nt)
	}
}
