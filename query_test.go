package ax_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/store/memory"
)

// Paging with Next lists every selected task once, in order, and stops with an empty
// Next on the last page; a cursor is refused with another query, or when it is not
// a cursor at all.
func TestTasksPages(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, openSQLite(t), nil)
	ctx := context.Background()
	base := time.Now().Add(time.Hour)
	var specs []ax.TaskSpec
	for i := range 25 {
		name := "order.close"
		if i%5 == 0 {
			name = "invoice.send"
		}
		specs = append(specs, ax.TaskSpec{Name: name, Key: fmt.Sprintf("k-%02d", i), DueAt: base.Add(time.Duration(25-i) * time.Minute)})
	}
	if _, err := s.SubmitMany(ctx, specs); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		q    ax.TaskQuery
		want []string // keys, in order
	}{
		{ax.TaskQuery{Name: "order.close", Limit: 6}, newestKeys(specs, "order.close")},
		{ax.TaskQuery{Name: "order.close", Order: ax.SoonestFirst, Limit: 7}, newestKeys(specs, "order.close")}, // due falls as i grows
		{ax.TaskQuery{Limit: 25}, newestKeys(specs, "")},
		{ax.TaskQuery{Name: "invoice.send", Limit: 5}, newestKeys(specs, "invoice.send")},
	} {
		var got []string
		q := c.q
		for pages := 0; ; pages++ {
			page, err := s.Tasks(ctx, q)
			if err != nil {
				t.Fatalf("Tasks(%+v): %v", q, err)
			}
			if len(page.Tasks) > c.q.Limit {
				t.Fatalf("Tasks(limit %d) returned %d", c.q.Limit, len(page.Tasks))
			}
			for _, task := range page.Tasks {
				got = append(got, task.Key)
			}
			if page.Next == "" {
				break
			}
			if len(page.Tasks) != c.q.Limit || pages > 10 {
				t.Fatalf("a page of %d with a Next (limit %d, page %d)", len(page.Tasks), c.q.Limit, pages)
			}
			q.Cursor = page.Next
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("pages of %+v = %v, want %v", c.q, got, c.want)
		}
	}

	page, err := s.Tasks(ctx, ax.TaskQuery{Name: "order.close", Limit: 3})
	if err != nil || page.Next == "" {
		t.Fatalf("first page: %v, %v", page, err)
	}
	for name, q := range map[string]ax.TaskQuery{
		"another name":   {Name: "invoice.send", Limit: 3, Cursor: page.Next},
		"another order":  {Name: "order.close", Order: ax.SoonestFirst, Limit: 3, Cursor: page.Next},
		"a status added": {Name: "order.close", Statuses: []ax.Status{ax.Scheduled}, Limit: 3, Cursor: page.Next},
		"not base64":     {Name: "order.close", Limit: 3, Cursor: "%%%"},
		"garbage":        {Name: "order.close", Limit: 3, Cursor: "AAAA"},
		"truncated":      {Name: "order.close", Limit: 3, Cursor: page.Next[:len(page.Next)-2]},
		"page too large": {Limit: ax.MaxPageSize + 1},
		"negative limit": {Limit: -1},
		"unknown order":  {Order: "oldest"},
		"unknown status": {Statuses: []ax.Status{"DONE"}},
	} {
		if _, err := s.Tasks(ctx, q); !errors.Is(err, ax.ErrInvalid) {
			t.Errorf("Tasks with %s: error = %v, want ErrInvalid", name, err)
		}
	}
	// The page size changes nothing of the cursor's query: a larger page goes on.
	if next, err := s.Tasks(ctx, ax.TaskQuery{Name: "order.close", Limit: 100, Cursor: page.Next}); err != nil || len(next.Tasks) != 17 {
		t.Errorf("a larger page after the first 3 of 20: %d tasks, %v; want 17", len(next.Tasks), err)
	}
	def, err := s.Tasks(ctx, ax.TaskQuery{})
	if err != nil || len(def.Tasks) != 25 || def.Next != "" {
		t.Errorf("Tasks(zero query) = %d tasks, next %q, %v; want all 25, no next page", len(def.Tasks), def.Next, err)
	}
}

// newestKeys returns the keys of specs with name ("" for all), the last submitted
// first.
func newestKeys(specs []ax.TaskSpec, name string) []string {
	var out []string
	for _, sp := range specs {
		if name == "" || sp.Name == name {
			out = append(out, sp.Key)
		}
	}
	slices.Reverse(out)
	return out
}

// Counts reports every status, exact below CountCap and capped above it.
func TestCounts(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, memory.New(), nil)
	ctx := context.Background()
	due := time.Now().Add(time.Hour)
	specs := make([]ax.TaskSpec, ax.CountCap+1)
	for i := range specs {
		specs[i] = ax.TaskSpec{Name: "bulk", Key: fmt.Sprint(i), DueAt: due}
	}
	if _, err := s.SubmitMany(ctx, specs); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delay(ctx, "one", "x", time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.Cancel(ctx, "one", "x"); err != nil {
		t.Fatal(err)
	}
	counts, err := s.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := counts[ax.Scheduled]; c != (ax.Count{N: ax.CountCap, Capped: true}) || c.String() != "100,000+" {
		t.Errorf("SCHEDULED = %+v (%s), want capped at 100,000 (\"100,000+\")", c, c)
	}
	if c := counts[ax.Cancelled]; c != (ax.Count{N: 1}) || c.String() != "1" {
		t.Errorf("CANCELLED = %+v (%s), want exactly 1", c, c)
	}
	if len(counts) != 7 || counts[ax.Succeeded] != (ax.Count{}) {
		t.Errorf("Counts = %v, want all 7 statuses, SUCCEEDED zero", counts)
	}
}
