-- ax schema v3: the leader lease of elect/sqllease. One statement, harmless to rerun.

-- One row per election namespace, written only by conditional statements in the
-- database's clock (UTC_TIMESTAMP(6)). epoch is the fencing token: each acquire raises
-- it by one in the transaction that changes the holder, with the row locked; a release
-- keeps it, so it never decreases and is never reused. A released or expired lease has
-- expires_at <= now.
CREATE TABLE IF NOT EXISTS ax_leader (
    namespace  VARCHAR(200) CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL,
    holder     VARCHAR(500) CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL,
    epoch      BIGINT       NOT NULL,
    expires_at DATETIME(6)  NOT NULL,
    updated_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (namespace)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = {{bin}} ROW_FORMAT = DYNAMIC;
