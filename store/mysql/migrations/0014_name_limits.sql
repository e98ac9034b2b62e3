-- ax schema v14 for MySQL / MariaDB: a concurrency limit per task name
-- (store.NameKeeper.SetConcurrency). Harmless to rerun when a migration resumes at it
-- (see 0004_namespaces.sql): the ADD COLUMN that took effect answers "duplicate
-- column" (1060).
--
-- concurrency is the most tasks of the name that may be DISPATCHING or RUNNING at once
-- in the namespace; 0, what every older row gets, is no limit. ax_names is small (one
-- row per name ever paused or limited) and has no virtual column: a column with a
-- constant default at the end of the table is added instantly.
ALTER TABLE ax_names
    ADD COLUMN concurrency INT NOT NULL DEFAULT 0;
