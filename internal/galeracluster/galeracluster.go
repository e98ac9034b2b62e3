// Package galeracluster starts a throwaway three-node MariaDB Galera cluster for tests:
// Debian's mariadbd with the galera-4 provider, each node with its own data directory,
// all listening on 127.0.0.1 and living in one temporary directory, torn down when the
// test ends. Start runs deploy/galera/cluster.sh (deploy/galera/README.md describes the
// settings), which installs what is missing from Debian's packages.
//
// A test whose cluster cannot start (not Linux, no MariaDB or Galera that could be
// installed, a node that does not come up) is skipped with a message saying why,
// unless AX_REQUIRE_SERVICES=1 (CI sets it): then it fails.
//
// The nodes are numbered 0..Nodes-1 (node0 bootstraps the cluster). Kill, Stop, Cont and
// Restart are the faults: kill -9 of a node, SIGSTOP and SIGCONT of it, and starting it
// again so that it rejoins; Isolate cuts a node off the others' group communication
// (it loses quorum, and refuses statements with ERROR 1047) and joins it again.
//
// HAProxy runs in front (ProxyDSN): it sends every connection to node0 while node0 is
// Synced in a primary component, else to node1, else node2, and cuts the sessions of a
// node it marks down. deploy/galera/README.md describes its check.
//
// # Ports
//
// A cluster takes sixteen consecutive ports B..B+15 on 127.0.0.1: B..B+2 the nodes'
// MySQL, B+3..B+5 Galera's group communication, B+6..B+8 IST, B+9..B+11 SST (rsync),
// B+12 HAProxy, B+13 its stats socket, B+14..B+15 kept free. Start picks B, a multiple of 16 in [15504, 20000), at
// random, and keeps it only if it gets an exclusive flock on
// $TMPDIR/ax-galera-ports/B.lock and can bind all sixteen ports. It holds the lock until
// the cluster is down, so two test processes (go test runs packages in parallel) never
// share a B, and ports another program listens on are passed over. The range lies
// below internal/pgcluster's ([20000, 32760)) and Linux's ephemeral ports (32768 and
// up). AX_GALERA_PORT_BASE, when set, forces B.
package galeracluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/internal/freshdb"
	"github.com/axsched/ax/internal/scriptcluster"
)

// Nodes is the number of nodes; they are numbered 0..Nodes-1 and named node0..node2.
const Nodes = 3

// The port range Start picks from; see the package doc.
const (
	portSpan  = 16
	portFirst = 15504 // 969 * 16
	portLast  = 20000 // exclusive
)

// Cluster is a running cluster, started by Start.
type Cluster struct {
	// Dir is the cluster's directory: cluster.env, and per node DirI/nodeI its my.cnf,
	// error.log, started.pid (its mariadbd's pid) and data directory.
	Dir string
	// Ports are the nodes' MySQL ports, by node.
	Ports [Nodes]int
	// GaleraPorts are the nodes' Galera group communication ports, by node.
	GaleraPorts [Nodes]int
	// ProxyPort is HAProxy's port, which leads to one writer node (ProxyDSN).
	ProxyPort int

	sc *scriptcluster.Cluster
}

// Status is one node's view of the cluster: the wsrep status variables of the same
// names.
type Status struct {
	ClusterSize int    // wsrep_cluster_size
	State       string // wsrep_local_state_comment: "Synced", "Donor/Desynced", "Joining", …
	Cluster     string // wsrep_cluster_status: "Primary", "non-Primary", "Disconnected"
}

// Synced reports whether the node is Synced in a primary component of n nodes.
func (s Status) Synced(n int) bool {
	return s.State == "Synced" && s.Cluster == "Primary" && s.ClusterSize == n
}

// Start starts a cluster in a new temporary directory, waits until the three nodes are
// Synced, and tears it down when the test ends. It skips t when the machine cannot run
// the cluster, or fails it under AX_REQUIRE_SERVICES=1.
func Start(t testing.TB) *Cluster {
	t.Helper()
	c := &Cluster{}
	began := time.Now()
	c.sc = scriptcluster.Start(t, scriptcluster.Config{
		Name: "galeracluster", What: "the Galera cluster", Script: "deploy/galera/cluster.sh",
		DirPrefix: "axgalera-", PortEnv: "AX_GALERA_PORT_BASE", PortLocks: "ax-galera-ports",
		PortFirst: portFirst, PortLast: portLast, PortSpan: portSpan, UpTimeout: 4 * time.Minute,
		Logs: []string{"node*/error.log", "haproxy.log"},
	})
	c.Dir = c.sc.Dir
	if err := c.readEnv(); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(context.Background(), 0, probeTable); err != nil {
		t.Fatal(err)
	}
	t.Logf("galeracluster: up in %v in %s: MySQL %v, Galera %v, HAProxy %d",
		time.Since(began).Round(100*time.Millisecond), c.Dir, c.Ports, c.GaleraPorts, c.ProxyPort)
	return c
}

// run runs cluster.sh with args, extra in its environment, and returns its output.
func (c *Cluster) run(ctx context.Context, extra []string, args ...string) ([]byte, error) {
	return c.sc.Run(ctx, extra, args...)
}

// readEnv reads the ports from Dir/cluster.env.
func (c *Cluster) readEnv() error {
	env, err := c.sc.Env()
	if err != nil {
		return err
	}
	for key, dst := range map[string]*[Nodes]int{"MYSQL_PORTS": &c.Ports, "GALERA_PORTS": &c.GaleraPorts} {
		ports, err := c.sc.Ports(env, key, Nodes)
		if err != nil {
			return err
		}
		copy(dst[:], ports)
	}
	proxy, err := c.sc.Ports(env, "PROXY_PORT", 1)
	if err != nil {
		return err
	}
	c.ProxyPort = proxy[0]
	return nil
}

// DSN is a go-sql-driver/mysql DSN for database on node i, as root over TCP, with
// parseTime and loc=UTC (what internal/freshdb's DSNs set, and what the MySQL store
// reads times with).
func (c *Cluster) DSN(i int, database string) string {
	return dsn(c.Ports[i], database)
}

// ProxyDSN is DSN through HAProxy: it leads to node0 while node0 is Synced in a
// primary component, else to the first of node1 and node2 that is.
func (c *Cluster) ProxyDSN(database string) string {
	return dsn(c.ProxyPort, database)
}

func dsn(port int, database string) string {
	cfg := mysql.NewConfig()
	cfg.User = "root"
	cfg.Net = "tcp"
	cfg.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cfg.DBName = database
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	return cfg.FormatDSN()
}

// NodeDSN is the database test on node i (see DSN).
func (c *Cluster) NodeDSN(i int) string { return c.DSN(i, "test") }

// FreshDatabase creates a new, empty database on the cluster (through node0; Galera
// replicates the DDL to every node), waits until every running node has it, drops it
// when the test ends, and returns its name, for DSN.
func (c *Cluster) FreshDatabase(t testing.TB) string {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	name := "ax_test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, drop, err := freshdb.CreateMySQLDatabase(ctx, c.NodeDSN(0), name)
	if err != nil {
		t.Fatalf("galeracluster: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for i := range Nodes { // through a node that answers: node0 may be down
			if !c.running(i) {
				continue
			}
			if err := drop(ctx); err == nil {
				return
			}
		}
	})
	for i := range Nodes {
		if !c.running(i) {
			continue
		}
		err := c.waitQuery(ctx, i, func(db *sql.DB) (bool, error) {
			var n int
			err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?`, name).Scan(&n)
			return n == 1, err
		})
		if err != nil {
			t.Fatalf("galeracluster: database %s on node%d: %v", name, i, err)
		}
	}
	return name
}

// waitQuery opens a pool on node i and polls ok until it reports true or ctx ends.
func (c *Cluster) waitQuery(ctx context.Context, i int, ok func(db *sql.DB) (bool, error)) error {
	db, err := sql.Open("mysql", c.statusDSN(i))
	if err != nil {
		return err
	}
	defer db.Close()
	var last error
	for {
		done, err := ok(db)
		if done && err == nil {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// statusDSN is node i's test database with short timeouts, for the harness's own
// queries: a stopped node must not hold them up.
func (c *Cluster) statusDSN(i int) string {
	return shortTimeouts(c.NodeDSN(i))
}

func shortTimeouts(dsn string) string {
	cfg, _ := mysql.ParseDSN(dsn)
	cfg.Timeout = time.Second
	cfg.ReadTimeout = 2 * time.Second
	cfg.WriteTimeout = 2 * time.Second
	return cfg.FormatDSN()
}

// probeTable is where Writable writes, in the database test.
const probeTable = `CREATE TABLE IF NOT EXISTS ax_galeracluster_probe (
	id BIGINT AUTO_INCREMENT PRIMARY KEY, port INT NOT NULL, at DATETIME(6) NOT NULL)`

// Writable writes a row through HAProxy on a connection of its own and returns the
// node the write committed on; an error when HAProxy reaches no node, or the node
// refuses or fails the write.
func (c *Cluster) Writable(ctx context.Context) (int, error) {
	db, err := sql.Open("mysql", shortTimeouts(c.ProxyDSN("test")))
	if err != nil {
		return -1, err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return -1, fmt.Errorf("galeracluster: through HAProxy: %w", err)
	}
	defer conn.Close()
	var port int
	if err := conn.QueryRowContext(ctx, `SELECT @@port`).Scan(&port); err != nil {
		return -1, fmt.Errorf("galeracluster: through HAProxy: %w", err)
	}
	if _, err := conn.ExecContext(ctx, `INSERT INTO ax_galeracluster_probe (port, at) VALUES (?, UTC_TIMESTAMP(6))`, port); err != nil {
		return -1, fmt.Errorf("galeracluster: a write through HAProxy to port %d: %w", port, err)
	}
	for i, p := range c.Ports {
		if p == port {
			return i, nil
		}
	}
	return -1, fmt.Errorf("galeracluster: HAProxy leads to port %d, no node's", port)
}

// WaitWritable waits until a write through HAProxy commits on a node that want
// accepts, and returns that node; an error when ctx ends first. HAProxy may pass
// through other nodes on the way (a check timing out on a loaded machine sends it to
// the next backup for a while), so a caller says where it wants to end up.
func (c *Cluster) WaitWritable(ctx context.Context, want func(node int) bool) (int, error) {
	for {
		i, err := c.Writable(ctx)
		if err == nil && want(i) {
			return i, nil
		}
		if err == nil {
			err = fmt.Errorf("the write committed on node%d", i)
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("galeracluster: no write through HAProxy on the node wanted: %w (last: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Not returns a want for WaitWritable: any node but node.
func Not(node int) func(int) bool { return func(i int) bool { return i != node } }

// On returns a want for WaitWritable: node itself.
func On(node int) func(int) bool { return func(i int) bool { return i == node } }

// Status reads node i's wsrep status.
func (c *Cluster) Status(ctx context.Context, i int) (Status, error) {
	db, err := sql.Open("mysql", c.statusDSN(i))
	if err != nil {
		return Status{}, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	rows, err := db.QueryContext(ctx, `SHOW GLOBAL STATUS WHERE Variable_name IN
		('wsrep_cluster_size', 'wsrep_local_state_comment', 'wsrep_cluster_status')`)
	if err != nil {
		return Status{}, fmt.Errorf("galeracluster: node%d: %w", i, err)
	}
	defer rows.Close()
	var s Status
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return Status{}, fmt.Errorf("galeracluster: node%d: %w", i, err)
		}
		switch k {
		case "wsrep_cluster_size":
			s.ClusterSize, _ = strconv.Atoi(v)
		case "wsrep_local_state_comment":
			s.State = v
		case "wsrep_cluster_status":
			s.Cluster = v
		}
	}
	if err := rows.Err(); err != nil {
		return Status{}, fmt.Errorf("galeracluster: node%d: %w", i, err)
	}
	return s, nil
}

// WaitSynced waits until n nodes each report Synced in a primary component of n nodes,
// or ctx ends.
func (c *Cluster) WaitSynced(ctx context.Context, n int) error {
	var last []string
	for {
		synced := 0
		last = last[:0]
		for i := range Nodes {
			st, err := c.Status(ctx, i)
			if err == nil && st.Synced(n) {
				synced++
			} else {
				last = append(last, fmt.Sprintf("node%d: %+v %v", i, st, err))
			}
		}
		if synced == n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("galeracluster: %d nodes not Synced in a cluster of %d: %w (%s)", n, n, ctx.Err(), strings.Join(last, "; "))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// pid returns node i's mariadbd pid, if it runs and was started from Dir.
func (c *Cluster) pid(i int) (int, error) {
	b, err := os.ReadFile(filepath.Join(c.Dir, fmt.Sprintf("node%d", i), "started.pid"))
	if err != nil {
		return 0, fmt.Errorf("galeracluster: node%d: %w", i, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("galeracluster: node%d: pid file: %w", i, err)
	}
	if !cmdlineHas(pid, c.Dir+"/") {
		return 0, fmt.Errorf("galeracluster: node%d: pid %d is not its mariadbd (it exited)", i, pid)
	}
	return pid, nil
}

// running reports whether node i's mariadbd runs (stopped or not).
func (c *Cluster) running(i int) bool {
	_, err := c.pid(i)
	return err == nil
}

// Kill kills node i's mariadbd with SIGKILL, as a crash would, and waits until it is
// gone. The others see it leave after Galera's suspect timeout (3 s here).
func (c *Cluster) Kill(t testing.TB, i int) {
	t.Helper()
	pid, err := c.pid(i)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("galeracluster: kill node%d: %v", i, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("galeracluster: node%d (pid %d) still runs 30 s after SIGKILL", i, pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop stops node i's mariadbd with SIGSTOP, as a hung machine, and waits until every
// thread of it is stopped.
func (c *Cluster) Stop(t testing.TB, i int) {
	t.Helper()
	c.signal(t, i, syscall.SIGSTOP, true)
}

// Cont resumes node i's mariadbd after Stop (SIGCONT).
func (c *Cluster) Cont(t testing.TB, i int) {
	t.Helper()
	c.signal(t, i, syscall.SIGCONT, false)
}

func (c *Cluster) signal(t testing.TB, i int, sig syscall.Signal, stop bool) {
	t.Helper()
	pid, err := c.pid(i)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatalf("galeracluster: %v node%d: %v", sig, i, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for stopped(pid) != stop {
		if time.Now().After(deadline) {
			t.Fatalf("galeracluster: node%d (pid %d) not %s 10 s after %v", i, pid, map[bool]string{true: "stopped", false: "running"}[stop], sig)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Restart starts node i's mariadbd again (after Kill, or a clean shutdown) and waits
// until it has rejoined: Synced in a primary component with every node that runs. It
// catches up by IST from a donor's gcache, or by a full state transfer (rsync).
func (c *Cluster) Restart(t testing.TB, i int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := c.run(ctx, nil, "start", c.Dir, strconv.Itoa(i)); err != nil {
		t.Fatalf("galeracluster: cluster.sh start %s %d: %v\n%s", c.Dir, i, err, out)
	}
}

// Isolate cuts node i off the others' group communication (gmcast.isolate=1: Galera
// closes its connections to them and refuses theirs), or joins it again (on false).
// Isolated, the node is alone and without quorum: non-Primary, it refuses every
// statement but SET and SHOW with ERROR 1047, while the two others, a majority, go on
// as the primary component once they have evicted it (evs.suspect_timeout, 3 s here).
// Joined again, it catches up by IST and is Synced within seconds.
func (c *Cluster) Isolate(ctx context.Context, i int, on bool) error {
	v := 0
	if on {
		v = 1
	}
	return c.Exec(ctx, i, fmt.Sprintf(`SET GLOBAL wsrep_provider_options = 'gmcast.isolate=%d'`, v))
}

// Bootstrap makes node i's component primary (pc.bootstrap=YES), for a cluster left with
// no primary component, and waits until it is; see cluster.sh bootstrap.
func (c *Cluster) Bootstrap(ctx context.Context, i int) error {
	if out, err := c.run(ctx, nil, "bootstrap", c.Dir, strconv.Itoa(i)); err != nil {
		return fmt.Errorf("galeracluster: cluster.sh bootstrap %s %d: %v\n%s", c.Dir, i, err, out)
	}
	return nil
}

// Exec runs query on node i's database test, for a test's setup or faults (SET GLOBAL
// …), on a connection of its own.
func (c *Cluster) Exec(ctx context.Context, i int, query string, args ...any) error {
	db, err := sql.Open("mysql", c.NodeDSN(i))
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, query, args...); err != nil {
		return fmt.Errorf("galeracluster: node%d: %w", i, err)
	}
	return nil
}

// cmdlineHas reports whether pid runs and its command line contains s.
func cmdlineHas(pid int, s string) bool {
	if !alive(pid) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})), s)
}

// procState reads the state letter of /proc/pid/stat (or of a thread's stat file).
func procState(path string) (byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	// "pid (comm) S …": comm may hold spaces and parentheses; it ends at the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, fmt.Errorf("%s: malformed", path)
	}
	return b[i+2], nil
}

// alive reports whether pid runs (a zombie does not count).
func alive(pid int) bool {
	st, err := procState(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && st != 'Z' && st != 'X'
}

// stopped reports whether every thread of pid is stopped (state T or t).
func stopped(pid int) bool {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, p := range tasks {
		st, err := procState(p)
		if err != nil || (st != 'T' && st != 't') {
			return false
		}
	}
	return true
}
