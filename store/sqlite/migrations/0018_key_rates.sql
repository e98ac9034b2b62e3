-- ax schema v18 for SQLite: a task name's rate limit per task key (store.NameKeeper.
-- SetKeyRate). Times in microseconds.
--
-- At most key_rate claims of the name's tasks sharing a task key (with Overlap skip or
-- queue) in any window of key_rate_per_us microseconds, for each key; 0, the default
-- of every row written before v18, is no limit. (ADD COLUMN with a constant default
-- changes only the schema; no row is rewritten.)
ALTER TABLE ax_names ADD COLUMN key_rate INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ax_names ADD COLUMN key_rate_per_us INTEGER NOT NULL DEFAULT 0;

-- One row per (namespace, name, task key) a claim of a name with a rate per key ever
-- claimed a task of: starts holds the times of the last claims of the name's tasks
-- with that key, at most key_rate of them, as driverkit.EncodeStarts writes them;
-- last_at the last of them. A claim reads and writes the rows of its keys by the
-- primary key, which holds the rows (WITHOUT ROWID), in its IMMEDIATE transaction;
-- PruneKeyStarts deletes those no window reaches any more, oldest first, by
-- ax_key_starts_last.
CREATE TABLE ax_key_starts (
    namespace TEXT    NOT NULL,
    name      TEXT    NOT NULL,
    task_key  TEXT    NOT NULL,
    starts    BLOB    NOT NULL,
    last_at   INTEGER NOT NULL,
    PRIMARY KEY (namespace, name, task_key)
) WITHOUT ROWID;
CREATE INDEX ax_key_starts_last ON ax_key_starts (namespace, last_at);
