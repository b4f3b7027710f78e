-- cluster: robot leases, the cross-bridge mailbox, bridge membership, the bridge of each idempotency reservation
-- A SQLite store is never shared by several bridges (cluster mode needs
-- PostgreSQL); the tables exist so both engines keep one schema.
CREATE TABLE leases (
	robot_id    TEXT PRIMARY KEY,
	owner       TEXT NOT NULL,
	instance    TEXT NOT NULL,
	epoch       INTEGER NOT NULL CHECK (epoch > 0),
	acquired_at INTEGER NOT NULL,
	expires_at  INTEGER NOT NULL,
	released    INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX leases_owner ON leases(owner, instance);
CREATE TABLE mailbox (
	seq           INTEGER PRIMARY KEY AUTOINCREMENT,
	from_bridge   TEXT NOT NULL,
	to_bridge     TEXT NOT NULL,
	robot_id      TEXT NOT NULL DEFAULT '',
	kind          TEXT NOT NULL,
	body          BLOB,
	state         TEXT NOT NULL CHECK (state IN ('pending', 'taken', 'answered', 'abandoned')),
	answer_status INTEGER NOT NULL DEFAULT 0,
	answer_body   BLOB,
	created_at    INTEGER NOT NULL,
	answered_at   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX mailbox_to ON mailbox(to_bridge, state, seq);
CREATE TABLE bridges (
	id         TEXT PRIMARY KEY,
	instance   TEXT NOT NULL,
	url        TEXT NOT NULL DEFAULT '',
	started_at INTEGER NOT NULL,
	seen_at    INTEGER NOT NULL
);
ALTER TABLE idempotency ADD COLUMN bridge_id TEXT NOT NULL DEFAULT '';
-- The robot of every approval and grant, as a column (it was only in
-- the JSON), so a bridge's recovery and a failover touch one robot's.
ALTER TABLE approvals ADD COLUMN robot_id TEXT NOT NULL DEFAULT '';
ALTER TABLE grants ADD COLUMN robot_id TEXT NOT NULL DEFAULT '';
UPDATE approvals SET robot_id = COALESCE(json_extract(data, '$.robot_id'), '');
UPDATE grants SET robot_id = COALESCE(json_extract(data, '$.robot_id'), '');
CREATE INDEX approvals_robot ON approvals(robot_id, status);
CREATE INDEX grants_robot ON grants(robot_id, status);
