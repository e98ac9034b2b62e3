-- ax schema v19 for PostgreSQL: a concurrency limit per task name. Like v1, nothing
-- names a schema. Adding a column with a constant default rewrites nothing.

-- The most tasks of the name DISPATCHING or RUNNING at once (store.NameKeeper); 0: no
-- limit. A claim reads it, as it reads paused, once per statement when any name of
-- the namespace is paused or limited.
ALTER TABLE ax_names ADD COLUMN concurrency integer NOT NULL DEFAULT 0;
