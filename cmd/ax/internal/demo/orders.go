package demo

import (
	"sync"
	"time"
)

// OrderStatus is an order's state in the business table.
type OrderStatus string

// The states of an order.
const (
	Unpaid OrderStatus = "unpaid"
	Paid   OrderStatus = "paid"
	Closed OrderStatus = "closed"
)

// order is one row of the demo's business table.
type order struct {
	ID       string
	AmountCt int64 // amount in cents
	Status   OrderStatus
	Reason   string // why it was closed: "timeout" or "cancelled by user"
	Updated  time.Time
}

// orders stands in for the service's own database table: the scheduler never sees it,
// the handler reads and changes it like any business code would.
type orders struct {
	mu   sync.Mutex
	rows map[string]order
}

func newOrders() *orders { return &orders{rows: make(map[string]order)} }

// insert adds a new unpaid order.
func (o *orders) insert(id string, amountCt int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.rows[id] = order{ID: id, AmountCt: amountCt, Status: Unpaid, Updated: time.Now()}
}

// get returns the order (SELECT … WHERE id = ?).
func (o *orders) get(id string) (order, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	r, ok := o.rows[id]
	return r, ok
}

// transition is the conditional write
//
//	UPDATE orders SET status = to, reason = reason WHERE id = ? AND status = from
//
// and reports whether it changed the row (one row affected).
func (o *orders) transition(id string, from, to OrderStatus, reason string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	r, ok := o.rows[id]
	if !ok || r.Status != from {
		return false
	}
	r.Status, r.Reason, r.Updated = to, reason, time.Now()
	o.rows[id] = r
	return true
}
