-- ax schema v3 for SQLite: the leader lease of elect/sqllease.
-- Times are INTEGER microseconds since the Unix epoch, UTC.

-- One row per election namespace, written only by conditional statements in the
-- writer's transaction. epoch is the fencing token: each acquire raises it by one, a
-- release keeps it, so it never decreases and is never reused. A released or expired
-- lease has expires_at <= now.
CREATE TABLE ax_leader (
    namespace  TEXT    PRIMARY KEY,
    holder     TEXT    NOT NULL,
    epoch      INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
