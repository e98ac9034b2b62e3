-- ax schema v6 for PostgreSQL: room on every page of ax_executions for one more
-- version of each of its rows. Like v1, nothing names a schema.

-- An execution row is written twice: inserted when its task starts, updated when it
-- finishes (and on each heartbeat in between). None of the updated columns is
-- indexed, so the update can be HOT — no new index entries, a smaller WAL record —
-- but only when the new version fits on the row's page. At fillfactor 90 about one
-- update in five did; at 50 every one does, which took about 10 µs of server CPU off
-- each finished task (48 → 34 µs for Finish), at the price of twice the pages.
-- Only pages written from now on are affected; taking the lock this needs (SHARE
-- UPDATE EXCLUSIVE) blocks neither reads nor writes.
ALTER TABLE ax_executions SET (fillfactor = 50);
