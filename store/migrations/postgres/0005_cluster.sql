-- cluster: robot leases, the cross-bridge mailbox, bridge membership, the bridge of each idempotency reservation
-- Every time here is Unix nanoseconds of the DATABASE's clock
-- (clock_timestamp()), so the bridges of a cluster agree on when a
-- lease expires whatever their own clocks say. A lease row is never
-- deleted: its epoch only grows, across releases and owners.
CREATE TABLE leases (
	robot_id    TEXT COLLATE "C" PRIMARY KEY,
	owner       TEXT NOT NULL,
	instance    TEXT NOT NULL,
	epoch       BIGINT NOT NULL CHECK (epoch > 0),
	acquired_at BIGINT NOT NULL,
	expires_at  BIGINT NOT NULL,
	released    INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX leases_owner ON leases(owner, instance);
CREATE TABLE mailbox (
	seq           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	from_bridge   TEXT NOT NULL,
	to_bridge     TEXT NOT NULL,
	robot_id      TEXT NOT NULL DEFAULT '',
	kind          TEXT NOT NULL,
	body          BYTEA,
	state         TEXT NOT NULL CHECK (state IN ('pending', 'taken', 'answered', 'abandoned')),
	answer_status INTEGER NOT NULL DEFAULT 0,
	answer_body   BYTEA,
	created_at    BIGINT NOT NULL,
	answered_at   BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX mailbox_to ON mailbox(to_bridge, state, seq);
CREATE TABLE bridges (
	id         TEXT COLLATE "C" PRIMARY KEY,
	instance   TEXT NOT NULL,
	url        TEXT NOT NULL DEFAULT '',
	started_at BIGINT NOT NULL,
	seen_at    BIGINT NOT NULL
);
ALTER TABLE idempotency ADD COLUMN bridge_id TEXT NOT NULL DEFAULT '';
-- The robot of every approval and grant, as a column (it was only in
-- the JSON), so a bridge's recovery and a failover touch one robot's.
ALTER TABLE approvals ADD COLUMN robot_id TEXT NOT NULL DEFAULT '';
ALTER TABLE grants ADD COLUMN robot_id TEXT NOT NULL DEFAULT '';
UPDATE approvals SET robot_id = COALESCE(data::jsonb->>'robot_id', '');
UPDATE grants SET robot_id = COALESCE(data::jsonb->>'robot_id', '');
CREATE INDEX approvals_robot ON approvals(robot_id, status);
CREATE INDEX grants_robot ON grants(robot_id, status);
