package demo

import (
	"crypto/rand"
	"encoding/base64"
	"log/slog"
	"net/http"

	"github.com/axsched/ax"
	"github.com/axsched/ax/admin"
	"github.com/axsched/ax/console"
)

// consoleServer serves the web console and the admin API of the demo's scheduler
// (Config.Console): the console at /, the API at /api/, behind one token the demo
// generates at random, of the admin role.
type consoleServer struct {
	*localServer
	url  string // the sign-in link, with the token after "#token="
	base string // http://HOST:PORT
	api  *admin.Handler
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
	mux := http.NewServeMux()
	mux.Handle("/api/", http.StripPrefix("/api", api))
	mux.Handle("/", pages)
	l, err := listenAndServe(addr, mux, "the console")
	if err != nil {
		return nil, err
	}
	base := "http://" + l.addr
	return &consoleServer{localServer: l, url: base + "/signin#token=" + token, base: base, api: api}, nil
}

// close stops serving, waiting a little for requests in flight, and writes the audit
// summaries the API still counts (admin.Handler.Flush).
func (c *consoleServer) close() error { return c.stop("the console", c.api.Flush) }
