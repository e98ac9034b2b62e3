-- ax schema v16 for MySQL / MariaDB: a key concurrency per task name
-- (store.NameKeeper.SetKeyConcurrency). Harmless to rerun when a migration resumes at
-- it (see 0004_namespaces.sql): the ADD COLUMN that took effect answers "duplicate
-- column" (1060).
--
-- key_concurrency is how many tasks sharing a task key may be DISPATCHING or RUNNING
-- at once when the claim is one of the name's tasks; 0, what every older row gets, is
-- one: the rule of task keys (1 is stored as 0). A column with a constant default at
-- the end of ax_names, which has no virtual column, is added instantly.
ALTER TABLE ax_names
    ADD COLUMN key_concurrency INT NOT NULL DEFAULT 0;
