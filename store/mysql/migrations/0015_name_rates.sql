-- ax schema v15 for MySQL / MariaDB: a rate limit per task name
-- (store.NameKeeper.SetRate). Harmless to rerun when a migration resumes at it (see
-- 0004_namespaces.sql): the ALTER, one statement that takes effect whole or not at
-- all, answers "duplicate column" (1060) once it took effect.
--
-- At most rate claims of the name in any window of rate_per_us microseconds; 0, what
-- every older row gets, is no limit (and rate_per_us is then 0 too). rate_starts holds
-- the times of the name's last claims, at most rate of them, as
-- driverkit.EncodeStarts writes them (8 bytes each: up to 80,000 bytes at
-- store.MaxRate, past a BLOB's 65,535, hence MEDIUMBLOB); NULL, on every older row
-- too, is none. The claims of a rate-limited name read and write it under the name's
-- row lock. Columns NULL or with a constant default at the end of a table without an
-- indexed virtual column are added instantly.
ALTER TABLE ax_names
    ADD COLUMN rate        INT        NOT NULL DEFAULT 0,
    ADD COLUMN rate_per_us BIGINT     NOT NULL DEFAULT 0,
    ADD COLUMN rate_starts MEDIUMBLOB NULL;
