package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"
)

// MailMaxAge is how long posted mail may wait for its addressee: TakeMail
// abandons pending mail older than this (on the database's clock) instead
// of running it late.
const MailMaxAge = time.Minute

// States of mail.
const (
	MailPending   = "pending"
	MailTaken     = "taken"
	MailAnswered  = "answered"
	MailAbandoned = "abandoned"
)

// Mail is one message of the cross-bridge mailbox: an operator action
// forwarded to the bridge that owns the robot.
type Mail struct {
	Seq     int64  `json:"seq"`
	From    string `json:"from"`
	To      string `json:"to"`
	RobotID string `json:"robot_id,omitempty"`
	Kind    string `json:"kind"`
	Body    []byte `json:"body,omitempty"`
	// CreatedAt is the database's clock.
	CreatedAt time.Time `json:"created_at"`
}

// MailAnswer is mail's outcome: State answered (Status and Body are the
// answer), abandoned (the sender gave up or it waited too long: it never
// ran), or, from AbandonMail and MailAnswerOf, pending or taken (not
// settled yet).
type MailAnswer struct {
	Status int    `json:"status"`
	Body   []byte `json:"body,omitempty"`
	State  string `json:"state"`
}

// ErrMailState says mail is not in the state the call needs (answering mail
// that is not taken, or not addressed to this bridge).
var ErrMailState = errors.New("mail is not in that state")

// PostMail posts mail to bridge to about robotID and announces it
// (NoticeMail, Seq, ID = to). It returns the mail's seq.
func (s *Store) PostMail(ctx context.Context, to, robotID, kind string, body []byte) (int64, error) {
	if err := s.cluster(); err != nil {
		return 0, fmt.Errorf("store: post mail: %w", err)
	}
	if err := ValidateBridgeID(to); err != nil {
		return 0, fmt.Errorf("store: post mail: %w", err)
	}
	if kind == "" {
		return 0, errors.New("store: post mail: a kind is required")
	}
	var seq int64
	err := s.tx(ctx, "mail", func(tx txn) error {
		var err error
		seq, err = insertReturningSeq(ctx, tx, `INSERT INTO mailbox(from_bridge, to_bridge, robot_id, kind, body, state, created_at)
			VALUES(?, ?, ?, ?, ?, 'pending', `+dbNow+`)`, s.conf.BridgeID, to, robotID, kind, body)
		if err != nil {
			return err
		}
		return notify(ctx, tx, Notice{Kind: NoticeMail, RobotID: robotID, ID: to, Seq: seq})
	})
	if err != nil {
		return 0, fmt.Errorf("store: post mail: %w", err)
	}
	return seq, nil
}

// TakeMail takes the mail waiting for this bridge, oldest first: pending
// becomes taken (a compare-and-set: mail abandoned meanwhile is not
// taken), and this bridge must then answer each (AnswerMail). Pending mail
// older than MailMaxAge is abandoned instead, never run late (its sender
// learns it through a NoticeAnswer).
func (s *Store) TakeMail(ctx context.Context) ([]Mail, error) {
	if err := s.cluster(); err != nil {
		return nil, fmt.Errorf("store: take mail: %w", err)
	}
	var out []Mail
	err := s.tx(ctx, "mail", func(tx txn) error {
		out = nil
		rows, err := tx.query(ctx, `UPDATE mailbox SET state='abandoned', answered_at=`+dbNow+`
			WHERE to_bridge=? AND state='pending' AND created_at < `+dbNow+` - ?
			RETURNING seq, from_bridge, robot_id`, s.conf.BridgeID, int64(MailMaxAge))
		if err != nil {
			return err
		}
		var late []Mail
		for rows.Next() {
			var m Mail
			if err := rows.Scan(&m.Seq, &m.From, &m.RobotID); err != nil {
				closeRead(rows)
				return err
			}
			late = append(late, m)
		}
		closeRead(rows)
		if err := rows.Err(); err != nil {
			return err
		}
		for _, m := range late {
			if err := notify(ctx, tx, Notice{Kind: NoticeAnswer, RobotID: m.RobotID, ID: m.From, Seq: m.Seq}); err != nil {
				return err
			}
		}
		if len(late) > 0 {
			s.log.Warn("mail abandoned: it waited too long", "mails", len(late), "max_age", MailMaxAge)
		}
		rows, err = tx.query(ctx, `UPDATE mailbox SET state='taken' WHERE seq IN (
				SELECT seq FROM mailbox WHERE to_bridge=? AND state='pending' ORDER BY seq FOR UPDATE SKIP LOCKED)
			AND state='pending'
			RETURNING seq, from_bridge, to_bridge, robot_id, kind, body, created_at`, s.conf.BridgeID)
		if err != nil {
			return err
		}
		defer closeRead(rows)
		for rows.Next() {
			var m Mail
			var created int64
			if err := rows.Scan(&m.Seq, &m.From, &m.To, &m.RobotID, &m.Kind, &m.Body, &created); err != nil {
				return err
			}
			m.CreatedAt = fromNS(created)
			out = append(out, m)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("store: take mail: %w", err)
	}
	slices.SortFunc(out, func(a, b Mail) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

// AnswerMail answers mail this bridge took: taken becomes answered (a
// compare-and-set), announced to the sender (NoticeAnswer, Seq, ID = the
// sender). Mail that is not taken, or not this bridge's, is ErrMailState;
// unknown mail ErrNotFound.
func (s *Store) AnswerMail(ctx context.Context, seq int64, status int, body []byte) error {
	if err := s.cluster(); err != nil {
		return fmt.Errorf("store: answer mail: %w", err)
	}
	err := s.tx(ctx, "mail", func(tx txn) error {
		var from, robot string
		err := tx.queryRow(ctx, `UPDATE mailbox SET state='answered', answer_status=?, answer_body=?, answered_at=`+dbNow+`
			WHERE seq=? AND to_bridge=? AND state='taken' RETURNING from_bridge, robot_id`,
			status, body, seq, s.conf.BridgeID).Scan(&from, &robot)
		if errors.Is(err, sql.ErrNoRows) {
			st, to, err := mailState(ctx, tx, seq)
			if err != nil {
				return err
			}
			return fmt.Errorf("mail %d to bridge %s is %s, not taken by this bridge (%s): %w", seq, to, st, s.conf.BridgeID, ErrMailState)
		}
		if err != nil {
			return err
		}
		return notify(ctx, tx, Notice{Kind: NoticeAnswer, RobotID: robot, ID: from, Seq: seq})
	})
	if err != nil {
		return fmt.Errorf("store: answer mail: %w", err)
	}
	return nil
}

// mailState reads mail's state and addressee; ErrNotFound without it.
func mailState(ctx context.Context, q rowQuerier, seq int64) (state, to string, err error) {
	err = q.queryRow(ctx, `SELECT state, to_bridge FROM mailbox WHERE seq=?`, seq).Scan(&state, &to)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", fmt.Errorf("mail %d: %w", seq, ErrNotFound)
	}
	return state, to, err
}

// AbandonMail is the sender giving up on its mail: pending becomes
// abandoned (a compare-and-set), and the answer says State abandoned.
// When the addressee was quicker, nothing changes and the answer says
// what happened: State answered with the answer, or State taken (the
// owner is executing it: the sender should keep waiting a little).
// Mail of another sender is ErrMailState; unknown mail ErrNotFound.
func (s *Store) AbandonMail(ctx context.Context, seq int64) (MailAnswer, error) {
	if err := s.cluster(); err != nil {
		return MailAnswer{}, fmt.Errorf("store: abandon mail: %w", err)
	}
	var ans MailAnswer
	err := s.tx(ctx, "mail", func(tx txn) error {
		ans = MailAnswer{}
		var from string
		if err := tx.queryRow(ctx, `SELECT from_bridge FROM mailbox WHERE seq=?`, seq).Scan(&from); errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("mail %d: %w", seq, ErrNotFound)
		} else if err != nil {
			return err
		}
		if from != s.conf.BridgeID {
			return fmt.Errorf("mail %d is bridge %s's, not this bridge's (%s): %w", seq, from, s.conf.BridgeID, ErrMailState)
		}
		res, err := tx.exec(ctx, `UPDATE mailbox SET state='abandoned', answered_at=`+dbNow+` WHERE seq=? AND state='pending'`, seq)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 1 {
			ans.State = MailAbandoned
			return nil
		}
		a, _, err := mailAnswer(ctx, tx, seq)
		ans = a
		return err
	})
	if err != nil {
		return MailAnswer{}, fmt.Errorf("store: abandon mail: %w", err)
	}
	return ans, nil
}

func mailAnswer(ctx context.Context, q rowQuerier, seq int64) (MailAnswer, bool, error) {
	var a MailAnswer
	err := q.queryRow(ctx, `SELECT state, answer_status, answer_body FROM mailbox WHERE seq=?`, seq).Scan(&a.State, &a.Status, &a.Body)
	if errors.Is(err, sql.ErrNoRows) {
		return MailAnswer{}, false, fmt.Errorf("mail %d: %w", seq, ErrNotFound)
	}
	if err != nil {
		return MailAnswer{}, false, err
	}
	return a, a.State == MailAnswered || a.State == MailAbandoned, nil
}

// MailAnswerOf reads mail's outcome; settled is true once it is answered
// or abandoned (State says which). Unknown mail is ErrNotFound.
func (s *Store) MailAnswerOf(ctx context.Context, seq int64) (a MailAnswer, settled bool, err error) {
	if err := s.cluster(); err != nil {
		return MailAnswer{}, false, fmt.Errorf("store: mail answer: %w", err)
	}
	a, settled, err = mailAnswer(ctx, s, seq)
	if err != nil {
		return MailAnswer{}, false, fmt.Errorf("store: mail answer: %w", s.classify(err))
	}
	return a, settled, nil
}
