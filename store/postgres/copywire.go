package postgres

import (
	"encoding/binary"
	"io"
	"strings"
	"time"

	"github.com/axsched/ax/store"
)

// The rows of a bulk insert are sent in COPY's binary format, encoded here (copyReader)
// and streamed through pgconn, rather than through pgx's CopyFrom, which encodes each
// value through its type map from an []any per row: that cost about a quarter of the
// client's time in a bulk insert, the boxing and the garbage it leaves included, and
// the client's time is the server's wait. Bulk inserts of 1,000 tasks a call ran 1.10
// to 1.16 times as fast, of 5,000 as fast as before (BENCHMARKS.md, "The rows of a
// COPY encoded by the store").
//
// The format (PostgreSQL's documentation, COPY, "Binary Format"): a header; per row
// the number of fields (int16) and each field as its length in bytes (int32, -1 for
// NULL) followed by the type's binary representation (its typsend); then -1 (int16).
// The columns' types are those of the migrations (0001_init.sql and later). The
// server refuses most wrong encodings ("incorrect binary data format", a length it
// does not expect), but not one of another type with the same representation (bigint
// for timestamptz, text for bytea): TestCopyRoundTrip checks the columns' types in
// the catalog against copyColumns and reads every column back.

// copyColumns are the columns a COPY writes, in the order fill encodes them, each
// with its type as format_type names it.
var copyColumns = []struct{ name, typ string }{
	{"id", "bigint"}, {"namespace", "text"}, {"name", "text"}, {"key", "text"}, {"payload", "bytea"},
	{"status", "text"}, {"due_at", "timestamp with time zone"}, {"max_retry", "integer"}, {"owner_service", "text"},
	{"timeout_us", "bigint"}, {"backoff_us", "bigint[]"}, {"task_key", "text"}, {"overlap", "text"},
	{"key_hold", "text"}, {"key_until", "timestamp with time zone"}, {"trace", "text"}, {"seq", "bigint"},
	{"created_at", "timestamp with time zone"}, {"updated_at", "timestamp with time zone"},
}

// copySQL is the COPY the encoded rows go to.
var copySQL = func() string {
	names := make([]string, len(copyColumns))
	for i, c := range copyColumns {
		names[i] = c.name
	}
	return "COPY ax_tasks (" + strings.Join(names, ", ") + ") FROM STDIN (FORMAT binary)"
}()

const (
	// pgEpoch is the origin of PostgreSQL's timestamps, 2000-01-01 00:00 UTC, in Unix
	// seconds.
	pgEpoch = 946684800
	// oidInt8 is the type oid of bigint, the element type of backoff_us.
	oidInt8 = 20
	// copyChunk is about how much a copyReader encodes ahead of what it was asked for.
	copyChunk = 64 << 10
)

// copyHeader is the signature, the flags (none) and the length of the header
// extension (none).
const copyHeader = "PGCOPY\n\377\r\n\000" + "\000\000\000\000" + "\000\000\000\000"

// wire appends fields in COPY's binary format.
type wire []byte

func (w wire) int16(v int16) wire { return binary.BigEndian.AppendUint16(w, uint16(v)) }
func (w wire) int32(v int32) wire { return binary.BigEndian.AppendUint32(w, uint32(v)) }

// null appends a NULL field.
func (w wire) null() wire { return w.int32(-1) }

// int8 appends a bigint field.
func (w wire) int8(v int64) wire { return binary.BigEndian.AppendUint64(w.int32(8), uint64(v)) }

// int4 appends an integer field; newInsertion has checked that the value fits.
func (w wire) int4(v int) wire { return binary.BigEndian.AppendUint32(w.int32(4), uint32(int32(v))) }

// text appends a text field: its UTF-8 bytes (the connection's client encoding).
func (w wire) text(s string) wire { return append(w.int32(int32(len(s))), s...) }

// bytea appends a payload: NULL for nil, empty for an empty one, as the other
// inserts bind it (payloadArg).
func (w wire) bytea(b []byte) wire {
	if b == nil {
		return w.null()
	}
	return append(w.int32(int32(len(b))), b...)
}

// timestamptz appends a timestamptz field: microseconds since pgEpoch, of a time
// truncated to the microsecond as every insert binds it (dueArg).
func (w wire) timestamptz(t time.Time) wire {
	t = dueArg(t)
	return w.int8((t.Unix()-pgEpoch)*1_000_000 + int64(t.Nanosecond()/1000))
}

// backoff appends a task's retry delays as a bigint[] of microseconds: a
// one-dimensional array without NULLs, indexed from 1, or the empty array (no
// dimensions), which is how the column's default '{}' is stored.
func (w wire) backoff(delays []time.Duration) wire {
	if len(delays) == 0 {
		return w.int32(12).int32(0).int32(0).int32(oidInt8) // dimensions, has-NULLs flag, element type
	}
	w = w.int32(int32(20 + 12*len(delays))).int32(1).int32(0).int32(oidInt8).int32(int32(len(delays))).int32(1)
	for _, d := range delays {
		w = w.int8(d.Microseconds())
	}
	return w
}

// copyReader streams an insertion's tasks, in its order, as COPY's binary rows, with
// the values of ax_seq drawn for them as their ids and refill stamps, and now as their
// creation time: it encodes about copyChunk bytes at a time, so that the server
// starts on the first rows while the rest are encoded, and memory does not grow with
// the insertion.
type copyReader struct {
	in   *insertion
	ids  []int64 // each row's id and refill stamp
	now  time.Time
	next int // the position in in.order of the next row to encode
	buf  wire
	off  int // what of buf has been read
}

func newCopyReader(in *insertion, ids []int64, now time.Time) *copyReader {
	r := &copyReader{in: in, ids: ids, now: now, buf: make(wire, 0, copyChunk+1024)}
	r.buf = append(r.buf, copyHeader...)
	return r
}

// Read implements io.Reader.
func (r *copyReader) Read(p []byte) (int, error) {
	if r.off == len(r.buf) {
		if r.next > len(r.in.order) {
			return 0, io.EOF
		}
		r.buf, r.off = r.fill(r.buf[:0]), 0
	}
	n := copy(p, r.buf[r.off:])
	r.off += n
	return n, nil
}

// fill appends rows to w until it holds copyChunk bytes, and the trailer after the
// last row.
func (r *copyReader) fill(w wire) wire {
	in := r.in
	for ; r.next < len(in.order) && len(w) < copyChunk; r.next++ {
		nt := &in.tasks[in.order[r.next]]
		w = w.int16(int16(len(copyColumns)))
		w = w.int8(r.ids[r.next]).text(in.ns).text(nt.Name).text(nt.Key).bytea(nt.Payload)
		w = w.text(string(store.Scheduled)).timestamptz(nt.DueAt).int4(nt.MaxRetry).text(nt.OwnerService)
		w = w.int8(nt.Timeout.Microseconds()).backoff(nt.Backoff)
		w = w.text(nt.TaskKey).text(string(nt.Overlap)).text(string(nt.KeyHold))
		if nt.KeyUntil.IsZero() {
			w = w.null()
		} else {
			w = w.timestamptz(nt.KeyUntil)
		}
		if nt.Trace == "" {
			w = w.null()
		} else {
			w = w.text(nt.Trace)
		}
		w = w.int8(r.ids[r.next]).timestamptz(r.now).timestamptz(r.now)
	}
	if r.next == len(in.order) {
		w = w.int16(-1)
		r.next++ // the trailer is out: EOF once it is read
	}
	return w
}
