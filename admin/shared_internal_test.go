package admin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
)

// A shared read runs for every caller of its view: the first caller leaving does not
// fail the others, a failed read is not handed to them (each reads for itself), and
// a read that panics leaves no one waiting.
func TestSharedReadSurvivesItsFirstCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSharedReads(0)
		release := make(chan struct{})
		var mu sync.Mutex
		reads := 0
		read := func(status int, panics bool) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				reads++
				mu.Unlock()
				<-release
				if panics {
					panic("read failed")
				}
				if r.Context().Err() != nil {
					status = http.StatusInternalServerError
				}
				w.WriteHeader(status)
				w.Write([]byte("answer"))
			}
		}
		do := func(ctx context.Context, h http.HandlerFunc) *httptest.ResponseRecorder {
			rec := httptest.NewRecorder()
			func() {
				defer func() { recover() }()
				s.serve(rec, httptest.NewRequest("GET", "/v", nil).WithContext(ctx), "v", h)
			}()
			return rec
		}

		// The first caller leaves while its read runs: the second still gets it.
		ctx, cancel := context.WithCancel(context.Background())
		var first, second *httptest.ResponseRecorder
		var wg sync.WaitGroup
		wg.Go(func() { first = do(ctx, read(http.StatusOK, false)) })
		synctest.Wait()
		wg.Go(func() { second = do(context.Background(), read(http.StatusOK, false)) })
		synctest.Wait()
		cancel()
		close(release)
		wg.Wait()
		if second.Code != http.StatusOK || second.Body.String() != "answer" || reads != 1 {
			t.Errorf("the second caller: %d %q after %d reads, want the one shared answer", second.Code, second.Body, reads)
		}
		_ = first

		// A failed read is not handed on: the waiter reads for itself.
		s.forget()
		release = make(chan struct{})
		reads = 0
		wg.Go(func() { first = do(context.Background(), read(http.StatusInternalServerError, false)) })
		synctest.Wait()
		wg.Go(func() { second = do(context.Background(), read(http.StatusOK, false)) })
		synctest.Wait()
		close(release)
		wg.Wait()
		if first.Code != http.StatusInternalServerError || second.Code != http.StatusOK || reads != 2 {
			t.Errorf("after a failed read: first %d, second %d, %d reads; want 500, 200, 2", first.Code, second.Code, reads)
		}

		// A read that panics releases its waiters, and leaves nothing behind.
		s.forget()
		release = make(chan struct{})
		reads = 0
		wg.Go(func() { first = do(context.Background(), read(http.StatusOK, true)) })
		synctest.Wait()
		wg.Go(func() { second = do(context.Background(), read(http.StatusOK, false)) })
		synctest.Wait()
		close(release)
		wg.Wait()
		if second.Code != http.StatusOK || reads != 2 || len(s.by) != 0 {
			t.Errorf("after a panicking read: second %d, %d reads, %d views kept; want 200, 2, 0", second.Code, reads, len(s.by))
		}
	})
}
