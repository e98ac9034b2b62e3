-- ax schema v18 for PostgreSQL: what operators set per task name. Like v1, nothing
-- names a schema.

-- One row per (namespace, name) an operator ever paused (store.NameKeeper). The claim
-- reads it once per statement when any name of the namespace is paused, and per row
-- then (by this primary key). Compared as bytes, as every name is (v10).
CREATE TABLE ax_names (
    namespace  text COLLATE "C" NOT NULL,
    name       text COLLATE "C" NOT NULL,
    paused     boolean     NOT NULL DEFAULT false,
    changed_by text        NOT NULL DEFAULT '',
    changed_at timestamptz NOT NULL,
    PRIMARY KEY (namespace, name)
);
