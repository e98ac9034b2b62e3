-- ax schema v17 for SQLite: a task name's key concurrency (store.NameKeeper.
-- SetKeyConcurrency).
--
-- How many of the name's tasks sharing a task key may be DISPATCHING or RUNNING at
-- once; 0, the default of every row written before v17, is one, the rule of task
-- keys (1 is stored as 0). A claim reads it with the name's other limits, by the
-- primary key, in its IMMEDIATE transaction. (ADD COLUMN with a constant default
-- changes only the schema; no row is rewritten.)
ALTER TABLE ax_names ADD COLUMN key_concurrency INTEGER NOT NULL DEFAULT 0;
