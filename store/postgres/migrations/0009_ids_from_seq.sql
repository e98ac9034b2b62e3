-- ax schema v9 for PostgreSQL: task ids come from ax_seq, the refill sequence, so that
-- a bulk insert draws one value a task, its id and its refill stamp at once (copy.go),
-- rather than one from each of two sequences. Like v1, nothing names a schema.

-- Hold off every writer of either sequence until this commits: ALTER SEQUENCE waits
-- for the transactions that drew a value from it (nextval locks the sequence until
-- the transaction ends) and blocks new draws. So the values read below are the last
-- any transaction drew, and their rows are in the table or never will be. (Older ax
-- processes should be stopped before a migration; this only keeps one that was not
-- from being handed an id or a stamp twice.)
ALTER SEQUENCE ax_seq NO CYCLE;
ALTER SEQUENCE ax_tasks_id_seq NO CYCLE;

-- ax_seq continues above every value either sequence handed out and every id in the
-- table (it never moves back: its own last value is among them), so no id is drawn
-- twice and a newer task of a key still gets a larger id.
SELECT setval('ax_seq', GREATEST(
    (SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM ax_seq),
    (SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM ax_tasks_id_seq),
    (SELECT COALESCE(max(id), 0) FROM ax_tasks)) + 1, false);

-- Dropping the identity drops its sequence, ax_tasks_id_seq: an older ax still
-- running that draws ids from it for a COPY fails (nothing written) rather than
-- drawing ids that ax_seq hands out too. Its other inserts take the new default.
-- (ALTER TABLE holds off writers of ax_tasks for a moment; the table is not rewritten.)
ALTER TABLE ax_tasks ALTER COLUMN id DROP IDENTITY;
ALTER TABLE ax_tasks ALTER COLUMN id SET DEFAULT nextval('ax_seq');
