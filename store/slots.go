package store

import (
	"time"
)

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
