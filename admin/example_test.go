package admin_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/admin"
	"github.com/axsched/ax/store/memory"
)

// The admin API mounted under /ax/ of a service's own server, with one viewer token;
// a request without it is refused.
func ExampleNewHandler() {
	s, err := ax.New(ax.Config{Store: memory.New(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	if _, err := s.Delay(context.Background(), "order.close.timeout", "42", 30*time.Minute); err != nil {
		panic(err)
	}
	h, err := admin.NewHandler(s, admin.Config{Tokens: []admin.Token{
		{Actor: "dashboard", Role: admin.Viewer, Hash: admin.HashToken("s3cret-from-the-vault")},
	}})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ax/", http.StripPrefix("/ax", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for _, token := range []string{"", "s3cret-from-the-vault"} {
		req, _ := http.NewRequest("GET", srv.URL+"/ax/tasks/counts", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Println(resp.Status)
	}
	// Output:
	// 401 Unauthorized
	// 200 OK
}
