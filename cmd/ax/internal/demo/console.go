package demo

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/admin"
	"github.com/axsched/ax/console"
)

// consoleServer serves the web console and the admin API of the demo's scheduler
// (Config.Console): the console at /, the API at /api/, behind one token the demo
// generates at random, of the admin role.
type consoleServer struct {
	url   string // the sign-in link, with the token after "#token="
	base  string // http://HOST:PORT
	token string
	srv   *http.Server
	api   *admin.Handler
	done  chan error
}

// serveConsole starts serving s's console on addr (HOST:PORT; port 0 picks a free
// one).
func serveConsole(s *ax.Scheduler, addr string, log *slog.Logger) (*consoleServer, error) {
	var b [24]byte
	rand.Read(b[:])
	token := base64.RawURLEncoding.EncodeToString(b[:])
	api, err := admin.NewHandler(s, admin.Config{Tokens: []admin.Token{{Actor: "demo", Role: admin.Admin, Hash: admin.HashToken(token)}},
		Logger: log})
	if err != nil {
		return nil, err
	}
	pages, err := console.New(api, console.Config{Logger: log})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serve the console: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", http.StripPrefix("/api", api))
	mux.Handle("/", pages)
	base := "http://" + ln.Addr().String()
	c := &consoleServer{url: base + "/signin#token=" + token, base: base, token: token, api: api, done: make(chan error, 1),
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: time.Minute}}
	go func() { c.done <- c.srv.Serve(ln) }()
	return c, nil
}

// close stops serving, waiting a few seconds for requests in flight.
func (c *consoleServer) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), metricsShutdownTimeout)
	defer cancel()
	err := c.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, c.srv.Close())
	}
	if serr := <-c.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	err = errors.Join(err, c.api.Flush(ctx))
	if err != nil {
		return fmt.Errorf("stop serving the console: %w", err)
	}
	return nil
}
