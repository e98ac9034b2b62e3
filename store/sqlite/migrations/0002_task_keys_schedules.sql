-- ax schema v2 for SQLite: task keys with overlap policies, and durable schedules.
-- Times are INTEGER microseconds since the Unix epoch, UTC.

-- A task's mutual-exclusion key ('' for none) and its overlap policy ('skip', 'queue'
-- or 'allow' with a key, '' without). Rows written by v1 have neither.
ALTER TABLE ax_tasks ADD COLUMN task_key TEXT NOT NULL DEFAULT '';
ALTER TABLE ax_tasks ADD COLUMN overlap  TEXT NOT NULL DEFAULT '';
-- Claim and Trigger: "which task holds key k" looks only at in-flight rows with a key,
-- so the index stays as small as the number of keyed tasks running, and tasks without
-- a key never touch it.
CREATE INDEX ax_tasks_key_holder ON ax_tasks (task_key)
    WHERE status IN ('DISPATCHING', 'RUNNING') AND task_key <> '';

-- One row per periodic task; its name is its handler's name and its occurrences'
-- task_key. paused is 0 or 1; last_fire_at is NULL before the first occurrence.
CREATE TABLE ax_schedules (
    name         TEXT    PRIMARY KEY,
    spec         TEXT    NOT NULL,
    time_zone    TEXT    NOT NULL,
    overlap      TEXT    NOT NULL,
    misfire      TEXT    NOT NULL,
    payload      BLOB,
    paused       INTEGER NOT NULL DEFAULT 0,
    next_fire_at INTEGER NOT NULL,
    last_fire_at INTEGER,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);
