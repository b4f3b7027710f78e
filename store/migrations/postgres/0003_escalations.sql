-- escalations: the operator hand-off's requests for help and their answers
CREATE TABLE escalations (
	id         TEXT COLLATE "C" PRIMARY KEY,
	agent      TEXT NOT NULL,
	session_id TEXT NOT NULL DEFAULT '',
	task_id    TEXT,
	source     TEXT NOT NULL CHECK (source IN ('agent', 'fault', 'loop_detected')),
	status     TEXT NOT NULL CHECK (status IN ('open', 'answered', 'closed')),
	data       TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL
);
CREATE INDEX escalations_status ON escalations(status);
