-- ax schema v22 for PostgreSQL: a rate limit per task key of a task name. Like v1,
-- nothing names a schema. Adding columns with constant defaults rewrites nothing.

-- At most key_rate claims of the name's tasks sharing a task key (Overlap skip or
-- queue) in any window of key_rate_per_us microseconds, for each key
-- (store.NameKeeper.SetKeyRate); 0: no limit.
ALTER TABLE ax_names ADD COLUMN key_rate integer NOT NULL DEFAULT 0,
    ADD COLUMN key_rate_per_us bigint NOT NULL DEFAULT 0;

-- One row per (namespace, name, task key) claimed under the name's rate per key:
-- starts holds the times of its last claims, at most key_rate of them, as
-- driverkit.EncodeStarts writes them, and last_at the last of them. The claims read
-- and write a key's row under the key's advisory lock, through the primary key;
-- PruneKeyStarts deletes the rows no window reaches, oldest first, through
-- ax_key_starts_last. Compared as bytes, as every name and key is (v10).
CREATE TABLE ax_key_starts (
    namespace text COLLATE "C" NOT NULL,
    name      text COLLATE "C" NOT NULL,
    task_key  text COLLATE "C" NOT NULL,
    starts    bytea       NOT NULL,
    last_at   timestamptz NOT NULL,
    PRIMARY KEY (namespace, name, task_key)
);
CREATE INDEX ax_key_starts_last ON ax_key_starts (namespace, last_at);
