-- ax schema v16 for SQLite: a task name's rate limit (store.NameKeeper.SetRate).
--
-- At most rate claims of the name in any window of rate_per_us microseconds; 0, the
-- default of every row written before v16, is no limit. rate_starts holds the times
-- of the name's last claims, at most rate of them, as driverkit.EncodeStarts writes
-- them (8 bytes each, big-endian microseconds): a claim of a rate-limited name reads
-- and writes it in its IMMEDIATE transaction. (ADD COLUMN with a constant default
-- changes only the schema; no row is rewritten.)
ALTER TABLE ax_names ADD COLUMN rate INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ax_names ADD COLUMN rate_per_us INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ax_names ADD COLUMN rate_starts BLOB NOT NULL DEFAULT x'';
