-- ax schema v7: the gaps of schedules (store.SlotHistory), so that every slot of a
-- schedule is accounted for: an occurrence (a task keyed by its slot) or a gap. The
-- statement is harmless to rerun when a migration resumes at it (see
-- 0004_namespaces.sql).
--
-- One row per run of slots a schedule was advanced past without an occurrence: the
-- slots in [from_at, until_at). FireSchedule writes them with its compare-and-set on
-- next_fire_at (missed slots the misfire policy dropped), ResumeSchedule with the
-- resume (slots that passed while paused). Read per schedule, newest first, by
-- ax_slot_gaps_schedule; pruned by age, oldest first, by ax_slot_gaps_until. Times
-- are DATETIME(6) UTC, like every other time.
CREATE TABLE IF NOT EXISTS ax_slot_gaps (
    id         BIGINT       NOT NULL AUTO_INCREMENT,
    namespace  VARBINARY(200) NOT NULL,
    schedule   VARCHAR(200) CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL,
    from_at    DATETIME(6)  NOT NULL,
    until_at   DATETIME(6)  NOT NULL,
    why        VARCHAR(16)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    result     VARCHAR(200) CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL,
    created_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    KEY ax_slot_gaps_schedule (namespace, schedule, until_at, id),
    KEY ax_slot_gaps_until (namespace, until_at, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = {{bin}} ROW_FORMAT = DYNAMIC;
