package store

import (
	"context"
	"time"
)

// SlotHistory is implemented by stores that account for every slot of a schedule, for
// the console's schedule page: the gaps FireSchedule and ResumeSchedule record, and
// the reads of occurrences by their business keys. Every driver of this module
// implements it.
//
// A slot of a schedule is either an occurrence (a task named after the schedule, keyed
// by the slot) or inside a gap: a run of slots the schedule was advanced past without
// writing an occurrence. FireSchedule records the gaps of FireParams.Gaps with the
// compare-and-set that advances the schedule, and ResumeSchedule the gap of the slots
// that passed while the schedule was paused, in the transaction that resumes it: a
// schedule never moves past a slot without either.
type SlotHistory interface {
	// SlotGaps returns the gaps of schedule name, in the view's namespace, that
	// overlap [from, to]: From <= to and Until > from. The newest come first (by
	// Until, then ID, descending), at most limit of them. A limit outside [1,
	// MaxQueryLimit], or from after to, is ErrInvalid. It only reads.
	SlotGaps(ctx context.Context, name string, from, to time.Time, limit int) ([]SlotGap, error)

	// TasksByKeys returns the tasks named name whose Key is one of keys (at most
	// MaxKeys of them), in the view's namespace, by ID. A key can have several
	// tasks (a task that gave its key up, and the one that took it: see KeyHold);
	// all are returned. It reads through the business key's index: one lookup per
	// key. More than MaxKeys keys, or a key that is not valid UTF-8 or holds a NUL,
	// is ErrInvalid.
	TasksByKeys(ctx context.Context, name string, keys []string) ([]Task, error)

	// TasksByKeyRange returns up to limit tasks named name whose Key k has from <= k
	// < before (byte-wise), in the view's namespace, the greatest keys first (then
	// ID descending): a range scan of the business key's index. An empty range, a
	// bound that is not valid UTF-8 or holds a NUL, or a limit outside [1,
	// MaxQueryLimit] is ErrInvalid.
	TasksByKeyRange(ctx context.Context, name, from, before string, limit int) ([]Task, error)

	// PruneSlotGaps deletes up to limit gaps (in [1, MaxPrune]) of the view's
	// namespace whose Until is at or before before, oldest Until first, and returns
	// how many. A zero before is ErrInvalid.
	PruneSlotGaps(ctx context.Context, before time.Time, limit int) (int, error)
}

// SlotGap is a run of a schedule's slots for which no occurrence was written: the
// slots t with From <= t < Until. From is the first slot skipped and Until the slot
// the schedule went on from (its new NextFireAt, or the missed slot the misfire
// policy fired), so a gap says which slots it covers without the spec.
type SlotGap struct {
	ID       int64     // set by the store
	Schedule string    // the schedule's name; FireSchedule takes FireParams.Name
	From     time.Time // the first slot skipped
	Until    time.Time // after the last slot skipped: the next slot the schedule went on from
	Why      string    // GapMissed or GapPaused
	// Result says what was done instead, in words, e.g. "skipped", "fired the last
	// one", "caught up 100"; at most MaxGapText bytes.
	Result    string
	CreatedAt time.Time // the store's clock when it was recorded
}

// Why a gap's slots were not fired (SlotGap.Why).
const (
	// GapMissed: no scheduler fired the slots in time (the schedulers were down),
	// and the schedule's misfire policy dropped them.
	GapMissed = "missed"
	// GapPaused: the slots passed while the schedule was paused.
	GapPaused = "paused"
)

// PausedResult is the Result of the gap ResumeSchedule records.
const PausedResult = "not fired: paused"

// MaxKeys is the most keys one TasksByKeys reads.
const MaxKeys = 1000

// MaxGapText is the longest SlotGap.Why and Result, in bytes.
const MaxGapText = 200
