-- ax schema v14 for SQLite: what operators set per task name. Times in microseconds.

-- One row per (namespace, name) an operator ever paused (store.NameKeeper); the claim
-- reads it by this primary key for each task it would claim.
CREATE TABLE ax_names (
    namespace  TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    paused     INTEGER NOT NULL DEFAULT 0,
    changed_by TEXT    NOT NULL DEFAULT '',
    changed_at INTEGER NOT NULL,
    PRIMARY KEY (namespace, name)
);
