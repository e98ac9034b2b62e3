package servicetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/axsched/ax/internal/freshdb"
)

// PgBouncerBinary is where Debian's package pgbouncer installs PgBouncer.
const PgBouncerBinary = "/usr/sbin/pgbouncer"

// PgBouncer is a PgBouncer in transaction pooling mode in front of the test
// PostgreSQL server, run for one test (see StartPgBouncer).
type PgBouncer struct {
	addr   string         // 127.0.0.1:port
	server *pgconn.Config // the test server's DSN, parsed
	base   string         // the test server's DSN
}

// PooledSchema is a fresh schema on the test PostgreSQL server and two ways to it.
type PooledSchema struct {
	Name   string // the schema
	Direct string // a DSN straight to the server, whose search_path is Name
	// Pooled is a DSN through the PgBouncer, to the same database as the same user.
	// Its search_path, Name, is a startup parameter the PgBouncer ignores.
	Pooled string
}

// StartPgBouncer starts PgBouncer (Debian's, PgBouncerBinary) in front of the test
// PostgreSQL server (AX_TEST_POSTGRES_DSN) on a free port of 127.0.0.1, and stops it
// when the test ends. It pools in transaction mode, opens at most poolSize server
// connections for the server's database and user, trusts every client and ignores
// the startup parameters search_path and extra_float_digits. Run as root, it runs
// PgBouncer as the user postgres (-u postgres), which PgBouncer requires. A test
// whose PgBouncer cannot start is skipped, or fails under AX_REQUIRE_SERVICES=1.
func StartPgBouncer(t testing.TB, poolSize int) *PgBouncer {
	t.Helper()
	base := env("AX_TEST_POSTGRES_DSN", DefaultPostgresDSN)
	server, err := pgconn.ParseConfig(base)
	if err != nil {
		t.Fatalf("AX_TEST_POSTGRES_DSN: %v", err)
	}
	if _, err := os.Stat(PgBouncerBinary); err != nil {
		unavailable(t, "PgBouncer", fmt.Errorf("%w (Debian's package pgbouncer: apt-get install pgbouncer)", err))
	}
	b := &PgBouncer{server: server, base: base}
	// The port is free when chosen, but may be taken before PgBouncer binds it.
	var errs []error
	for range 3 {
		stop, err := b.start(poolSize)
		if err == nil {
			t.Cleanup(stop)
			return b
		}
		errs = append(errs, err)
	}
	unavailable(t, "PgBouncer", errors.Join(errs...))
	return nil
}

// Addr is the PgBouncer's address, "127.0.0.1:port".
func (b *PgBouncer) Addr() string { return b.addr }

// DSN returns a DSN through the PgBouncer to the test server's database as its user,
// with the URL query parameters params (search_path, say) added.
func (b *PgBouncer) DSN(params url.Values) string {
	u := &url.URL{Scheme: "postgres", Host: b.addr, Path: "/" + b.server.Database}
	if b.server.Password != "" {
		u.User = url.UserPassword(b.server.User, b.server.Password)
	} else {
		u.User = url.User(b.server.User)
	}
	q := url.Values{"sslmode": {"disable"}}
	for k, v := range params {
		q[k] = v
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// AdminDSN is a DSN to the PgBouncer's admin console (database pgbouncer), for SHOW
// commands; pgx must use the simple protocol there (default_query_exec_mode is set).
func (b *PgBouncer) AdminDSN() string {
	dsn := b.DSN(url.Values{"default_query_exec_mode": {"simple_protocol"}})
	u, _ := url.Parse(dsn)
	u.Path = "/pgbouncer"
	return u.String()
}

// Schema creates a new, empty schema on the test PostgreSQL server, straight, not
// through the PgBouncer, as PostgresDSN does, drops it when the test ends, and
// returns it with a DSN to it each way.
func (b *PgBouncer) Schema(t testing.TB) PooledSchema {
	t.Helper()
	name := Name()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	direct, drop, err := freshdb.CreatePostgresSchema(ctx, b.base, name)
	if err != nil {
		fail(t, "PostgreSQL ("+redact(b.base)+")", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := drop(ctx); err != nil {
			t.Error(err)
		}
	})
	return PooledSchema{Name: name, Direct: direct, Pooled: b.DSN(url.Values{"search_path": {name}})}
}

// start runs PgBouncer on a free port until it answers, and returns what stops it.
func (b *PgBouncer) start(poolSize int) (stop func(), err error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "ax-pgbouncer-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	// PgBouncer runs as postgres when we are root: it must read its files.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	quote := func(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` } // auth_file's quoting
	users := quote(b.server.User) + " " + quote(b.server.Password) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "userlist.txt"), []byte(users), 0o644); err != nil {
		return nil, err
	}
	ini := pgbouncerINI(b.server, dir, port, poolSize)
	if err := os.WriteFile(filepath.Join(dir, "pgbouncer.ini"), []byte(ini), 0o644); err != nil {
		return nil, err
	}

	args := []string{filepath.Join(dir, "pgbouncer.ini")}
	if os.Geteuid() == 0 {
		args = append([]string{"-u", "postgres"}, args...)
	}
	cmd := exec.Command(PgBouncerBinary, args...)
	log := new(lockedBuffer)
	cmd.Stdout, cmd.Stderr = log, log // PgBouncer logs to stderr when it has no logfile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", PgBouncerBinary, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop = func() {
		cmd.Process.Signal(syscall.SIGTERM) // immediate shutdown
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		os.RemoveAll(dir)
	}
	b.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := b.ready(exited); err != nil {
		stop()
		return nil, fmt.Errorf("%w; PgBouncer's log:\n%s", err, log.String())
	}
	return stop, nil
}

// ready waits, up to 10s, until a query through the PgBouncer reaches the server.
func (b *PgBouncer) ready(exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dsn := b.DSN(url.Values{"default_query_exec_mode": {"exec"}})
	for {
		err := func() error {
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				return err
			}
			defer conn.Close(context.Background())
			return conn.QueryRow(ctx, "SELECT 1").Scan(new(int))
		}()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("pgbouncer exited: %w", err)
		case <-ctx.Done():
			return fmt.Errorf("pgbouncer on %s not ready within 10s: %w", b.addr, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// pgbouncerINI is the configuration of a PgBouncer on 127.0.0.1:port in front of
// server, its files in dir.
func pgbouncerINI(server *pgconn.Config, dir string, port, poolSize int) string {
	return fmt.Sprintf(`[databases]
%s = host=%s port=%d dbname=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
admin_users = %s
pool_mode = transaction
default_pool_size = %d
max_client_conn = 1000
ignore_startup_parameters = extra_float_digits,search_path
log_connections = 0
log_disconnections = 0
`, server.Database, server.Host, server.Port, server.Database,
		port, filepath.Join(dir, "userlist.txt"), server.User, poolSize)
}

// freePort returns a TCP port of 127.0.0.1 free at the time of the call.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// lockedBuffer is a bytes.Buffer a process writes while a test may read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.TrimSpace(l.b.String())
}
