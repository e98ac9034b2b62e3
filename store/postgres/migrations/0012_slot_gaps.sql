-- ax schema v12 for PostgreSQL: the gaps of schedules (store.SlotHistory), so that
-- every slot of a schedule is accounted for: an occurrence (a task keyed by its slot)
-- or a gap. Like v1, nothing names a schema.
--
-- One row per run of slots a schedule was advanced past without an occurrence: the
-- slots in [from_at, until_at). FireSchedule writes them with its compare-and-set on
-- next_fire_at (missed slots the misfire policy dropped), ResumeSchedule with the
-- resume (slots that passed while paused). Read per schedule, newest first, by
-- ax_slot_gaps_schedule; pruned by age, oldest first, by ax_slot_gaps_until.
CREATE TABLE ax_slot_gaps (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    namespace  text COLLATE "C" NOT NULL,
    schedule   text COLLATE "C" NOT NULL,
    from_at    timestamptz NOT NULL,
    until_at   timestamptz NOT NULL,
    why        text        NOT NULL,
    result     text        NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX ax_slot_gaps_schedule ON ax_slot_gaps (namespace, schedule, until_at, id);
CREATE INDEX ax_slot_gaps_until ON ax_slot_gaps (namespace, until_at, id);
