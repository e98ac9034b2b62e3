package admin

import "time"

// SetBulkBudget sets how long h's bulk calls change tasks, for tests.
func SetBulkBudget(h *Handler, d time.Duration) { h.bulkBudget = d }
