package sqlite

import (
	"time"

	"github.com/axsched/ax/store/internal/taskquery"
)

// dialect is how SQLite writes a task query: times in microseconds, and a key prefix
// as the byte-wise range it is under the BINARY collation (taskquery.KeyRange), which
// the business-key index serves after the namespace and the name.
var dialect = taskquery.Dialect{
	Placeholder: func(int) string { return "?" },
	Time:        func(t time.Time) any { return micros(t) },
	Prefix:      func(ph func(any) string, prefix string) string { return taskquery.KeyRange(ph, "key", prefix) },
}
