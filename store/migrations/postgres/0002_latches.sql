-- latches; audit indexes for the audit API's filters
CREATE TABLE latches (
	name       TEXT PRIMARY KEY CHECK (name IN ('estop', 'fault')),
	active     INTEGER NOT NULL,
	by         TEXT NOT NULL DEFAULT '',
	reason     TEXT NOT NULL DEFAULT '',
	task_id    TEXT,
	since      BIGINT NOT NULL DEFAULT 0,
	updated_at BIGINT NOT NULL
);
CREATE INDEX audit_task ON audit(task_id, seq);
CREATE INDEX audit_type ON audit(type, seq);
CREATE INDEX audit_at ON audit(at);
CREATE INDEX idempotency_pending ON idempotency(state, tool, args_hash);
