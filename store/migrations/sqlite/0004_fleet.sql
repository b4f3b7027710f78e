-- fleet: the robot of every task, transition, safety event and audit record; latches per robot
-- Rows written before this migration keep robot_id '' ("legacy"): a
-- single-robot bridge wrote them. A legacy latch that is active applies
-- to every robot until Recover hands it to the robots of the bridge.
ALTER TABLE tasks ADD COLUMN robot_id TEXT NOT NULL DEFAULT '';
ALTER TABLE transitions ADD COLUMN robot_id TEXT NOT NULL DEFAULT '';
ALTER TABLE safety_events ADD COLUMN robot_id TEXT NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN robot_id TEXT NOT NULL DEFAULT '';
CREATE INDEX audit_robot ON audit(robot_id, seq);
-- SQLite cannot change a primary key in place: the latches move to a new
-- table keyed by (robot_id, name), inside this migration's transaction,
-- so a failure leaves the old table as it was.
CREATE TABLE latches_new (
	robot_id   TEXT NOT NULL DEFAULT '',
	name       TEXT NOT NULL CHECK (name IN ('estop', 'fault')),
	active     INTEGER NOT NULL,
	by         TEXT NOT NULL DEFAULT '',
	reason     TEXT NOT NULL DEFAULT '',
	task_id    TEXT,
	since      INTEGER NOT NULL DEFAULT 0,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (robot_id, name)
);
INSERT INTO latches_new(robot_id, name, active, by, reason, task_id, since, updated_at)
	SELECT '', name, active, by, reason, task_id, since, updated_at FROM latches;
DROP TABLE latches;
ALTER TABLE latches_new RENAME TO latches;
