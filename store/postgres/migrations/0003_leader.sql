-- ax schema v3 for PostgreSQL: the leader lease of elect/sqllease. Like v1, nothing
-- names a schema.

-- One row per election namespace, written only by conditional statements in the
-- database's clock (clock_timestamp()). epoch is the fencing token: each acquire
-- raises it by one in the same UPSERT that changes the holder, a release keeps it, so
-- it never decreases and is never reused. A released or expired lease has
-- expires_at <= now.
CREATE TABLE IF NOT EXISTS ax_leader (
    namespace  text        PRIMARY KEY,
    holder     text        NOT NULL,
    epoch      bigint      NOT NULL,
    expires_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
