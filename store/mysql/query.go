package mysql

import (
	"time"

	"github.com/axsched/ax/store/internal/taskquery"
)

// dialect is how MySQL writes a task query. A key prefix is the range it is under the
// key's binary collation, which orders by code point (byte order in UTF-8):
// taskquery.KeyRange, a range of ax_tasks_name_key after the namespace and the name.
//
// Not LIKE 'prefix%': on MariaDB 10.11 the index range the optimizer derives from it
// ends below every key whose character after the prefix lies beyond U+FFFF, and the
// rows past its end are never read. Through an index on the key, LIKE 'a¿%' missed
// 'a¿😀' and 'a¿\U0010FFFF', and LIKE 'a😀%' missed 'a😀\U0010FFFF' (storetest's
// EveryKeyPrefix); a scan of the table found them.
var dialect = taskquery.Dialect{
	Placeholder: func(int) string { return "?" },
	Time:        func(t time.Time) any { return dt(t) },
	Prefix:      func(ph func(any) string, prefix string) string { return taskquery.KeyRange(ph, "`key`", prefix) },
}
