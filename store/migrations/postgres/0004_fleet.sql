-- fleet: the robot of every task, transition, safety event and audit record; latches per robot
-- Rows written before this migration keep robot_id '' ("legacy"): a
-- single-robot bridge wrote them. A legacy latch that is active applies
-- to every robot until Recover hands it to the robots of the bridge.
ALTER TABLE tasks ADD COLUMN robot_id TEXT NOT NULL DEFAULT '';
ALTER TABLE transitions ADD COLUMN robot_id TEXT NOT NULL DEFAULT '';
ALTER TABLE safety_events ADD COLUMN robot_id TEXT NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN robot_id TEXT NOT NULL DEFAULT '';
CREATE INDEX audit_robot ON audit(robot_id, seq);
ALTER TABLE latches ADD COLUMN robot_id TEXT NOT NULL DEFAULT '';
ALTER TABLE latches DROP CONSTRAINT latches_pkey;
ALTER TABLE latches ADD PRIMARY KEY (robot_id, name);
