-- ax schema v18 for MySQL / MariaDB: what a fenced write writes on Galera. Harmless to
-- rerun when a migration resumes at it: the ALTER that took effect answers "duplicate
-- column" (1060), taken as done (see 0004_namespaces.sql). A column with a constant
-- default at the end of ax_leader, which has no virtual column: added instantly.

-- fence_writes counts the fenced writes made on Galera, each of which adds one in its
-- transaction (see fence.go): a change to the namespace's ax_leader row, so that the
-- write's write-set carries the row's key and Galera's certification refuses it when
-- a raise of the fence, which writes the same row, committed on another node first. On
-- a server without Galera nothing writes it and it stays 0.
ALTER TABLE ax_leader
    ADD COLUMN fence_writes BIGINT NOT NULL DEFAULT 0;
