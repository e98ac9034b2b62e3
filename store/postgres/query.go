package postgres

import (
	"strconv"
	"time"

	"github.com/axsched/ax/store/internal/taskquery"
)

// dialect is how PostgreSQL writes a task query. A key prefix is starts_with(), and,
// when the column compared orders text by bytes (byteOrder; ax_tasks.key does since
// schema v10, COLLATE "C"), also the range it is then (taskquery.KeyRange), which
// ax_tasks_name_key serves after the namespace and the name. Text is valid UTF-8, so
// the range alone is exact; starts_with() stays beside it for the planner, which,
// estimating more rows without it, read the primary key backwards instead
// (TestExplain). Under another collation (en_US, ICU) the strings with a prefix need
// not be one range of an index, and the prefix only filters.
func dialect(byteOrder bool) taskquery.Dialect {
	return taskquery.Dialect{
		Placeholder: func(n int) string { return "$" + strconv.Itoa(n) },
		Time:        func(t time.Time) any { return t },
		Prefix: func(ph func(any) string, prefix string) string {
			match := "starts_with(key, " + ph(prefix) + ")"
			if !byteOrder {
				return match
			}
			return taskquery.KeyRange(ph, "key", prefix) + " AND " + match
		},
	}
}
