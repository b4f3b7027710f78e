-- initial schema: tasks, transitions, approvals, grants, safety events, audit, idempotency
-- Times are Unix nanoseconds (BIGINT), JSON is TEXT kept byte for byte,
-- and text that is ordered or compared by range is COLLATE "C", so the
-- audit API's type families sort as on SQLite whatever the database's
-- locale. Idempotency keys are BYTEA: a scoped key holds a NUL byte.
CREATE TABLE meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
);
CREATE TABLE tasks (
	id          TEXT COLLATE "C" PRIMARY KEY,
	tool        TEXT NOT NULL,
	arguments   TEXT NOT NULL DEFAULT '{}',
	status      TEXT NOT NULL,
	text        TEXT NOT NULL DEFAULT '',
	progress    TEXT,
	result      TEXT,
	error       TEXT,
	approval_id TEXT,
	grant_id    TEXT,
	session_id  TEXT,
	principal   TEXT,
	created_at  BIGINT NOT NULL,
	updated_at  BIGINT NOT NULL
);
CREATE INDEX tasks_status ON tasks(status);
CREATE TABLE transitions (
	seq         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	task_id     TEXT NOT NULL,
	tool        TEXT NOT NULL,
	from_state  TEXT NOT NULL,
	to_state    TEXT NOT NULL,
	event       TEXT NOT NULL,
	at          BIGINT NOT NULL,
	by          TEXT NOT NULL DEFAULT '',
	reason      TEXT NOT NULL DEFAULT '',
	grant_id    TEXT,
	approval_id TEXT
);
CREATE INDEX transitions_task ON transitions(task_id, seq);
CREATE TABLE approvals (
	id         TEXT COLLATE "C" PRIMARY KEY,
	task_id    TEXT,
	tool       TEXT NOT NULL,
	status     TEXT NOT NULL,
	data       TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL
);
CREATE INDEX approvals_status ON approvals(status);
CREATE TABLE grants (
	id         TEXT COLLATE "C" PRIMARY KEY,
	kind       TEXT NOT NULL,
	tool       TEXT NOT NULL,
	status     TEXT NOT NULL,
	data       TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	expires_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL
);
CREATE TABLE safety_events (
	seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	kind       TEXT NOT NULL,
	at         BIGINT NOT NULL,
	task_id    TEXT,
	by         TEXT NOT NULL DEFAULT '',
	reason     TEXT NOT NULL DEFAULT '',
	monitor    TEXT NOT NULL DEFAULT '',
	latency_ns BIGINT NOT NULL DEFAULT 0,
	error      TEXT
);
CREATE TABLE audit (
	seq     BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	at      BIGINT NOT NULL,
	type    TEXT COLLATE "C" NOT NULL,
	actor   TEXT NOT NULL DEFAULT '',
	task_id TEXT,
	subject TEXT,
	summary TEXT NOT NULL DEFAULT '',
	reason  TEXT NOT NULL DEFAULT '',
	details TEXT
);
CREATE TABLE idempotency (
	key        BYTEA PRIMARY KEY,
	tool       TEXT NOT NULL,
	args_hash  TEXT NOT NULL,
	state      TEXT NOT NULL,
	task_id    TEXT,
	error      TEXT,
	created_at BIGINT NOT NULL
);
