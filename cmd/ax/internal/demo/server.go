package demo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// serverShutdownTimeout bounds the wait for requests in flight when the demo ends.
const serverShutdownTimeout = 2 * time.Second

// localServer is one of the demo's own HTTP servers (the metrics, the console).
type localServer struct {
	srv  *http.Server
	addr string     // HOST:PORT, with the port actually bound
	done chan error // Serve's result
}

// listenAndServe serves h on addr (HOST:PORT; port 0 picks a free one); what names it
// in errors.
func listenAndServe(addr string, h http.Handler, what string) (*localServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serve %s: %w", what, err)
	}
	l := &localServer{addr: ln.Addr().String(), done: make(chan error, 1),
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: time.Minute}}
	go func() { l.done <- l.srv.Serve(ln) }()
	return l, nil
}

// stop stops serving: it waits up to serverShutdownTimeout for requests in flight,
// then closes their connections; after, when given, runs once the server is down.
func (l *localServer) stop(what string, after func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), serverShutdownTimeout)
	defer cancel()
	err := l.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, l.srv.Close())
	}
	if serr := <-l.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if after != nil {
		err = errors.Join(err, after(ctx))
	}
	if err != nil {
		return fmt.Errorf("stop serving %s: %w", what, err)
	}
	return nil
}
