package postgres

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestWiden(t *testing.T) {
	const span = int64(1) << 31
	for _, c := range []struct{ full, ref int64 }{
		{0, 0}, {5, 9}, {100, 100}, {span - 1, span + 3}, {span + 2, span - 5},
		{7*span + 12345, 7*span + 99999}, {7*span - 3, 7*span + 1000}, {1 << 40, 1<<40 + 1<<29},
	} {
		if got := widen(c.full&(span-1), c.ref); got != c.full {
			t.Errorf("widen(%d mod 2^31, ref %d) = %d, want %d", c.full, c.ref, got, c.full)
		}
	}
}

func TestRetryable(t *testing.T) {
	for code, want := range map[string]bool{"40P01": true, "40001": true, "23505": false, "57014": false} {
		err := fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: code})
		if got := retryable(err); got != want {
			t.Errorf("retryable(%s) = %t, want %t", code, got, want)
		}
	}
	if retryable(errors.New("x")) {
		t.Error("retryable(plain error) = true")
	}
}

func TestChannelName(t *testing.T) {
	if got := channelName("ax_test_1"); got != "ax_ax_test_1" {
		t.Errorf("channelName = %q", got)
	}
	long := fmt.Sprintf("%063d", 0)
	if got := channelName(long); len(got) > 63 || got == channelName(long[1:]+"1") {
		t.Errorf("channelName(63 bytes) = %q: too long, or not distinct", got)
	}
}
