package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/axsched/ax"
	"github.com/axsched/ax/admin"
	"github.com/axsched/ax/console"
	"github.com/axsched/ax/internal/clientaddr"
	"github.com/axsched/ax/internal/lograte"
	"github.com/axsched/ax/metrics"
)

// runServe is `ax serve`: an operations node. It opens the store, builds a scheduler
// with no handlers that it never starts — so it claims nothing: it reads, cancels,
// retries and reschedules, and hands a triggered task to the scheduler that runs its
// handler (ax.Scheduler.Trigger) — and serves the admin API, and /metrics behind the
// same tokens, until it is interrupted.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	storeName := fs.String("store", envOr("AX_STORE", "sqlite"), "store `KIND`: "+storeNames()+" (env AX_STORE; default: the DSN's kind)")
	dsn := fs.String("dsn", os.Getenv("AX_DSN"), "the store's `DSN` (env AX_DSN; required)")
	namespace := fs.String("namespace", envOr("AX_NAMESPACE", ax.DefaultNamespace), "the `NAMESPACE` served (env AX_NAMESPACE)")
	listen := fs.String("listen", envOr("AX_LISTEN", "127.0.0.1:8080"), "the `ADDRESS` to listen on (env AX_LISTEN)")
	tokens := fs.String("tokens", os.Getenv("AX_ADMIN_TOKENS"),
		"the accepted tokens, `LIST` of actor:role:sha256:<hex of the token's SHA-256>, comma-separated (env AX_ADMIN_TOKENS)")
	readOnly := fs.Bool("read-only", os.Getenv("AX_READ_ONLY") == "1", "refuse every mutating route (env AX_READ_ONLY=1)")
	hidePayloads := fs.Bool("hide-payloads", os.Getenv("AX_HIDE_PAYLOADS") == "1", "show tasks' payloads to nobody, operators and admins included (env AX_HIDE_PAYLOADS=1)")
	tlsCert := fs.String("tls-cert", os.Getenv("AX_TLS_CERT"), "serve HTTPS with the certificate chain (PEM) in `FILE`; needs --tls-key (env AX_TLS_CERT)")
	tlsKey := fs.String("tls-key", os.Getenv("AX_TLS_KEY"), "the private key (PEM) in `FILE` of --tls-cert (env AX_TLS_KEY)")
	statsEvery := fs.Duration("stats-interval", ax.DefaultStatsInterval, "how often the task counts of /metrics are read (`D`)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: ax serve --dsn DSN [flags]

Serves the admin API (package admin) and /metrics for the store's namespace: an
operations node, which runs no handlers and claims no task. Every route but /health
needs a bearer token of --tokens; /metrics a viewer's. A token's hash is
sha256:<hex>: the hex of the SHA-256 of the token (sha256sum of it without a newline).
With --tls-cert and --tls-key it serves HTTPS (TLS 1.2 or later); without them,
listening beyond loopback is warned about: tokens would cross the network in the
clear (put a TLS-terminating proxy in front, or give both flags).

flags:
`)
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if *dsn == "" {
		fmt.Fprintf(stderr, "ax serve: --dsn (or AX_DSN) is required\n\n")
		fs.Usage()
		return exitUsage
	}
	toks, err := admin.ParseTokens(*tokens)
	if err != nil {
		fmt.Fprintf(stderr, "ax serve: --tokens: %v\n", err)
		return exitUsage
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		fmt.Fprintf(stderr, "ax serve: --tls-cert and --tls-key go together: give both, or neither\n")
		return exitUsage
	}
	var cert *tls.Certificate
	if *tlsCert != "" {
		c, err := tls.LoadX509KeyPair(*tlsCert, *tlsKey)
		if err != nil {
			fmt.Fprintf(stderr, "ax serve: --tls-cert, --tls-key: %v\n", err)
			return exitFail
		}
		cert = &c
	}
	kindName, kind, storeDSN, err := storeFor(fs, *storeName, *dsn)
	if err != nil {
		fmt.Fprintf(stderr, "ax serve: %v\n", err)
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	st, err := kind.open(ctx, storeDSN)
	if err != nil {
		fmt.Fprintf(stderr, "ax serve: open %s store: %v\n", kindName, err)
		return exitFail
	}
	defer st.Close()
	s, err := ax.New(ax.Config{Store: st, Namespace: *namespace, Logger: log, OwnerService: "ax-serve"})
	if err != nil {
		fmt.Fprintf(stderr, "ax serve: %v\n", err)
		return exitFail
	}
	h, err := admin.NewHandler(s, admin.Config{Tokens: toks, ReadOnly: *readOnly, HidePayloads: *hidePayloads, Logger: log})
	if err != nil {
		fmt.Fprintf(stderr, "ax serve: %v\n", err)
		return exitUsage
	}
	if len(toks) == 0 {
		log.Warn("ax serve: no tokens configured: every request but /health is refused (--tokens, AX_ADMIN_TOKENS)")
	}
	reg := prometheus.NewRegistry()
	obs, err := metrics.New(reg)
	if err != nil {
		fmt.Fprintf(stderr, "ax serve: %v\n", err)
		return exitFail
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", h.Require(admin.Viewer, promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	pages, err := console.New(h, console.Config{Logger: log})
	if err != nil {
		fmt.Fprintf(stderr, "ax serve: %v\n", err)
		return exitFail
	}
	mux.Handle("/console/", http.StripPrefix("/console", pages))
	mux.Handle("/", h)
	// A browser at the root is shown the console; a client of the API gets its answer.
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Accept"), "text/html") {
			http.Redirect(w, r, "/console/", http.StatusSeeOther)
			return
		}
		h.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "ax serve: %v\n", err)
		return exitFail
	}
	srv := newServer(mux, cert, log)
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	view, err := st.InNamespace(*namespace) // the namespace's, as the scheduler reads it
	if err != nil {
		ln.Close()
		fmt.Fprintf(stderr, "ax serve: %v\n", err)
		return exitUsage
	}
	go reportCounts(ctx, view, obs, *statsEvery, log)
	shutDown := make(chan struct{})
	go func() {
		defer close(shutDown)
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	scheme := "http"
	if cert != nil {
		scheme = "https"
	} else if !isLoopback(ln.Addr()) {
		log.Warn("ax serve: listening beyond loopback without TLS: bearer tokens cross the network in the clear; "+
			"give --tls-cert and --tls-key, or put a TLS-terminating proxy in front", "listen", ln.Addr().String())
	}
	fmt.Fprintf(stdout, "ax serve: %s store, namespace %s, listening on %s://%s (the console at %[3]s://%[4]s/console/)\n",
		kindName, *namespace, scheme, ln.Addr())
	if cert != nil {
		err = srv.ServeTLS(ln, "", "")
	} else {
		err = srv.Serve(ln)
	}
	stop()
	<-shutDown // the requests in flight are done: their counts are final
	flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	h.Flush(flush) // what it cannot write it logs
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "ax serve: %v\n", err)
		return exitFail
	}
	return exitOK
}

// newServer returns ax serve's server of h: every phase of a request bounded in time,
// headers (the query string with them) to 64 KiB, TLS 1.2 or later with cert when
// there is one, and the server's own errors (a failed TLS handshake) logged to log
// at WARN, at most one line a minute per client address.
func newServer(h http.Handler, cert *tls.Certificate, log *slog.Logger) *http.Server {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		WriteTimeout:      time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          stdlog.New(serverErrors{log: log, limit: lograte.New(time.Minute, admin.MaxTrackedAddresses, nil)}, "", 0),
	}
	if cert != nil {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12}
	}
	return srv
}

// serverErrors is an http.Server's ErrorLog: each line (a failed TLS handshake, say,
// "http: TLS handshake error from 192.0.2.1:5678: EOF") goes to log at WARN, at most
// one a minute per client address, with the count of lines not logged since the line
// before. A port scan cannot flood the log.
type serverErrors struct {
	log   *slog.Logger
	limit *lograte.Limiter
}

func (w serverErrors) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	key := "" // a line that names no client
	if _, rest, ok := strings.Cut(msg, " from "); ok {
		addr, _, _ := strings.Cut(rest, ": ")
		key = clientaddr.Key(addr)
	}
	if ok, held := w.limit.Allow(key); ok {
		attrs := []slog.Attr{}
		if held > 0 {
			attrs = append(attrs, slog.Int("lines_not_logged", held))
		}
		w.log.LogAttrs(context.Background(), slog.LevelWarn, msg, attrs...)
	}
	return len(p), nil
}

// isLoopback reports whether addr, a listener's, takes connections from this machine
// only: not an unspecified address (0.0.0.0, ::), which takes them from everywhere.
func isLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// reportCounts gives obs the task counts and the queue lag every interval, from the
// one store query a leading scheduler's EventTaskCounts comes from (TaskStats): this
// node never schedules. "Now" is this machine's clock.
func reportCounts(ctx context.Context, st ax.Store, obs *metrics.Observer, every time.Duration, log *slog.Logger) {
	for {
		now := time.Now()
		if stats, err := st.TaskStats(ctx, now); err == nil {
			e := ax.Event{Kind: ax.EventTaskCounts, At: now, Counts: stats.Counts}
			if !stats.OldestDue.IsZero() {
				e.Lag = max(now.Sub(stats.OldestDue), 0)
			}
			obs.Observe(e)
		} else if ctx.Err() == nil {
			log.Warn("ax serve: read the task counts", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}
