-- ax schema v5: a business key can be used again once its task has finished
-- (store.KeyHold), and an index of the finished tasks for retention. Every statement is harmless to rerun when a migration resumes at it
-- (see 0004_namespaces.sql).
--
-- key_slot is 0 for the task holding its key (at most one per key: the unique index)
-- and the task's own id once a newer task of the key took it over. key_hold and
-- key_until are the task's store.KeyHold and KeyUntil. The business key grows by 8
-- bytes, to 3,014 of InnoDB's 3,072.
--
-- As in v4, the indexed virtual column's index is dropped first, so that MariaDB adds
-- the columns instantly, and rebuilt with the business key in one ALTER that changes
-- only secondary indexes (online, no table rebuild).
ALTER TABLE ax_tasks
    DROP KEY ax_tasks_held_key;

ALTER TABLE ax_tasks
    ADD COLUMN key_slot  BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN key_hold  VARCHAR(8) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    ADD COLUMN key_until DATETIME(6) NULL;

-- Periodic occurrences (their task key is their name, the schedule's) keep their keys
-- for good, as every task did before v5; every other finished task gives its key up
-- when the key is submitted again.
UPDATE ax_tasks SET key_hold = 'forever' WHERE task_key = name AND key_hold = '';

-- ax_tasks_status_finished serves retention (Prune: the oldest finished tasks of an
-- outcome) and the task queries by a finished range. MySQL has no partial indexes:
-- every row is in it, as in the other status indexes.
ALTER TABLE ax_tasks
    DROP KEY ax_tasks_name_key, ADD UNIQUE KEY ax_tasks_name_key (namespace, name, `key`, key_slot),
    ADD KEY ax_tasks_held_key (namespace, held_key),
    ADD KEY ax_tasks_status_finished (namespace, status, finished_at, id);

-- The audit log of the operations API (store.Auditor): one row per mutating call,
-- allowed or refused. Read newest first by id, pruned by age (ax_audit_at). Every
-- text column takes store.MaxAuditText characters (the reason MaxAuditReason bytes).
CREATE TABLE IF NOT EXISTS ax_audit (
    id            BIGINT       NOT NULL AUTO_INCREMENT,
    namespace     VARBINARY(200) NOT NULL,
    at            DATETIME(6)  NOT NULL,
    actor         VARCHAR(1000) CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL,
    role          VARCHAR(1000) CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL,
    action        VARCHAR(1000) CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL,
    target        VARCHAR(1000) CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL,
    reason        TEXT          CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL,
    result        VARCHAR(1000) CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL,
    status_before VARCHAR(16)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    status_after  VARCHAR(16)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    execution_id  VARCHAR(1000) CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL,
    PRIMARY KEY (id),
    KEY ax_audit_at (namespace, at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = {{bin}} ROW_FORMAT = DYNAMIC;
