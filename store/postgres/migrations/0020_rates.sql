-- ax schema v20 for PostgreSQL: a rate limit per task name. Like v1, nothing names a
-- schema. Adding columns with constant defaults rewrites nothing.

-- At most rate claims of the name in any window of rate_per_us microseconds
-- (store.NameKeeper.SetRate); 0: no limit. rate_starts holds the times of the
-- name's last claims, at most rate of them, as driverkit.EncodeStarts writes them:
-- the claims of a rate-limited name read and write it under the name's lock.
ALTER TABLE ax_names ADD COLUMN rate integer NOT NULL DEFAULT 0,
    ADD COLUMN rate_per_us bigint NOT NULL DEFAULT 0,
    ADD COLUMN rate_starts bytea NOT NULL DEFAULT '';
