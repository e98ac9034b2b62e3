-- ax schema v15 for SQLite: a task name's concurrency limit (store.NameKeeper.
-- SetConcurrency).
--
-- 0, the default of every row written before v15, is no limit. A name is stored
-- once it is paused or limited; the claim reads its row by the primary key, as for
-- the pause. (ADD COLUMN with a constant default changes only the schema; no row is
-- rewritten.)
ALTER TABLE ax_names ADD COLUMN concurrency INTEGER NOT NULL DEFAULT 0;
