-- initial schema: tasks, transitions, approvals, grants, safety events, audit, idempotency
CREATE TABLE meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
);
CREATE TABLE tasks (
	id          TEXT PRIMARY KEY,
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
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL
);
CREATE INDEX tasks_status ON tasks(status);
CREATE TABLE transitions (
	seq         INTEGER PRIMARY KEY AUTOINCREMENT,
	task_id     TEXT NOT NULL,
	tool        TEXT NOT NULL,
	from_state  TEXT NOT NULL,
	to_state    TEXT NOT NULL,
	event       TEXT NOT NULL,
	at          INTEGER NOT NULL,
	by          TEXT NOT NULL DEFAULT '',
	reason      TEXT NOT NULL DEFAULT '',
	grant_id    TEXT,
	approval_id TEXT
);
CREATE INDEX transitions_task ON transitions(task_id, seq);
CREATE TABLE approvals (
	id         TEXT PRIMARY KEY,
	task_id    TEXT,
	tool       TEXT NOT NULL,
	status     TEXT NOT NULL,
	data       TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);
CREATE INDEX approvals_status ON approvals(status);
CREATE TABLE grants (
	id         TEXT PRIMARY KEY,
	kind       TEXT NOT NULL,
	tool       TEXT NOT NULL,
	status     TEXT NOT NULL,
	data       TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);
CREATE TABLE safety_events (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	kind       TEXT NOT NULL,
	at         INTEGER NOT NULL,
	task_id    TEXT,
	by         TEXT NOT NULL DEFAULT '',
	reason     TEXT NOT NULL DEFAULT '',
	monitor    TEXT NOT NULL DEFAULT '',
	latency_ns INTEGER NOT NULL DEFAULT 0,
	error      TEXT
);
CREATE TABLE audit (
	seq     INTEGER PRIMARY KEY AUTOINCREMENT,
	at      INTEGER NOT NULL,
	type    TEXT NOT NULL,
	actor   TEXT NOT NULL DEFAULT '',
	task_id TEXT,
	subject TEXT,
	summary TEXT NOT NULL DEFAULT '',
	reason  TEXT NOT NULL DEFAULT '',
	details TEXT
);
CREATE TABLE idempotency (
	key        TEXT PRIMARY KEY,
	tool       TEXT NOT NULL,
	args_hash  TEXT NOT NULL,
	state      TEXT NOT NULL,
	task_id    TEXT,
	error      TEXT,
	created_at INTEGER NOT NULL
);
