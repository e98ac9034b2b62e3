-- ax schema v8 for SQLite: the gaps of schedules (store.SlotHistory), so that every
-- slot of a schedule is accounted for: an occurrence (a task keyed by its slot) or a
-- gap. Times in microseconds.
--
-- One row per run of slots a schedule was advanced past without an occurrence: the
-- slots in [from_at, until_at). FireSchedule writes them with its compare-and-set on
-- next_fire_at (missed slots the misfire policy dropped), ResumeSchedule with the
-- resume (slots that passed while paused). Read per schedule, newest first, by
-- ax_slot_gaps_schedule; pruned by age, oldest first, by ax_slot_gaps_until.
CREATE TABLE ax_slot_gaps (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace  TEXT    NOT NULL,
    schedule   TEXT    NOT NULL,
    from_at    INTEGER NOT NULL,
    until_at   INTEGER NOT NULL,
    why        TEXT    NOT NULL,
    result     TEXT    NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX ax_slot_gaps_schedule ON ax_slot_gaps (namespace, schedule, until_at, id);
CREATE INDEX ax_slot_gaps_until ON ax_slot_gaps (namespace, until_at, id);
