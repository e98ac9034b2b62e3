-- ax schema v21 for PostgreSQL: a key concurrency per task name. Like v1, nothing
-- names a schema. Adding a column with a constant default rewrites nothing.

-- How many of the name's tasks sharing a task key may be DISPATCHING or RUNNING at
-- once (store.NameKeeper.SetKeyConcurrency); 0: one, the rule of task keys.
ALTER TABLE ax_names ADD COLUMN key_concurrency integer NOT NULL DEFAULT 0;
