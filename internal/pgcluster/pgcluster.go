// Package pgcluster starts a throwaway, highly available PostgreSQL for failover
// tests: one etcd, three Patroni nodes each managing its own PostgreSQL 15, and HAProxy
// in front routing to whichever node is the primary. Everything listens on 127.0.0.1
// and lives in one temporary directory; the cluster is torn down when the test ends.
// The settings (synchronous_mode_strict, HAProxy's health check on Patroni's
// GET /primary, on-marked-down shutdown-sessions) are described in
// deploy/patroni/README.md.
//
// Start runs deploy/patroni/cluster.sh, which installs Patroni, etcd and HAProxy from
// Debian's packages when they are missing. It needs Linux and root (PostgreSQL runs as
// the postgres user). A test whose cluster cannot start for want of those is skipped
// with a message saying so, unless AX_REQUIRE_SERVICES=1 (CI sets it): then it fails.
//
// # Ports
//
// A cluster takes ten consecutive ports B..B+9 on 127.0.0.1: B etcd, B+1 etcd's peer
// port, B+2 HAProxy, B+3..B+5 the nodes' PostgreSQL, B+6..B+8 their Patroni REST API.
// Start picks B, a multiple of 10 in [20000, 32760), at random, and keeps it only if it
// gets an exclusive flock on $TMPDIR/ax-pgcluster-ports/B.lock and can bind all ten
// ports. It holds the lock until the cluster is down, so two test processes (go test
// runs packages in parallel) never share a B, and ports that another program listens on
// are passed over. The range ends below Linux's ephemeral ports (32768 and up), so no
// outgoing connection takes one of them meanwhile. AX_PGCLUSTER_PORT_BASE, when set,
// forces B.
package pgcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax/internal/scriptcluster"
)

// Nodes is the number of Patroni/PostgreSQL nodes; they are numbered 0..Nodes-1 and
// named node0, node1, node2.
const Nodes = 3

// Patroni's roles, as Member.Role reports them.
const (
	RoleLeader      = "leader"
	RoleSyncStandby = "sync_standby"
	RoleReplica     = "replica"
)

// ErrNoLeader is returned by Primary when the cluster has no leader at the moment (a
// failover under way).
var ErrNoLeader = errors.New("pgcluster: no leader")

// The port range Start picks from; see the package doc.
const (
	portSpan  = 10
	portFirst = 20000
	portLast  = 32760 // exclusive
)

// Cluster is a running cluster, started by Start.
type Cluster struct {
	// Dir is the cluster's directory: cluster.env, the configurations, the logs of
	// every component (Dir/log, and PostgreSQL's in Dir/nodeN/pglog), the pids
	// (Dir/pids) and the data directories (Dir/nodeN/data).
	Dir string
	// HAProxyPort is HAProxy's port, which leads to the primary.
	HAProxyPort int
	// PGPorts are the nodes' PostgreSQL ports, by node.
	PGPorts [Nodes]int
	// RESTPorts are the nodes' Patroni REST API ports, by node.
	RESTPorts [Nodes]int
	// EtcdPort is etcd's client port.
	EtcdPort int

	sc   *scriptcluster.Cluster
	http *http.Client
}

// Member is one node as Patroni's GET /cluster describes it.
type Member struct {
	Node     int    // the node's index, 0..Nodes-1
	Name     string // "node0", "node1", "node2"
	Role     string // RoleLeader, RoleSyncStandby or RoleReplica
	State    string // Patroni's state of its PostgreSQL: "running", "streaming", "stopped", "starting", …
	Lag      int64  // bytes of WAL behind the leader; 0 for the leader, -1 when unknown
	Timeline int    // the node's timeline; 0 when unknown
	Port     int    // the node's PostgreSQL port
}

// Start starts a cluster in a new temporary directory, waits until it is healthy (a
// leader, a synchronous standby, both replicas streaming, HAProxy reaching a writable
// primary), and tears it down when the test ends. It skips t when the machine cannot
// run the cluster, or fails it under AX_REQUIRE_SERVICES=1.
func Start(t testing.TB) *Cluster {
	t.Helper()
	if os.Geteuid() != 0 {
		scriptcluster.Unavailable(t, "the Patroni cluster", errors.New("needs root (PostgreSQL runs as the postgres user)"))
	}
	c := &Cluster{http: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
	began := time.Now()
	c.sc = scriptcluster.Start(t, scriptcluster.Config{
		Name: "pgcluster", What: "the Patroni cluster", Script: "deploy/patroni/cluster.sh",
		DirPrefix: "axpg-", PortEnv: "AX_PGCLUSTER_PORT_BASE", PortLocks: "ax-pgcluster-ports",
		PortFirst: portFirst, PortLast: portLast, PortSpan: portSpan, UpTimeout: 5 * time.Minute,
		Logs: []string{"log/*.log", "node*/pglog/postgresql.log"},
	})
	c.Dir = c.sc.Dir
	if err := c.readEnv(); err != nil {
		t.Fatal(err)
	}
	t.Logf("pgcluster: up in %v in %s: HAProxy %d, PostgreSQL %v, Patroni REST %v, etcd %d",
		time.Since(began).Round(100*time.Millisecond), c.Dir, c.HAProxyPort, c.PGPorts, c.RESTPorts, c.EtcdPort)
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
	var ps [4][]int
	for k, key := range []string{"HAPROXY_PORT", "ETCD_PORT", "PG_PORTS", "REST_PORTS"} {
		n := 1
		if k >= 2 {
			n = Nodes
		}
		if ps[k], err = c.sc.Ports(env, key, n); err != nil {
			return err
		}
	}
	c.HAProxyPort, c.EtcdPort = ps[0][0], ps[1][0]
	copy(c.PGPorts[:], ps[2])
	copy(c.RESTPorts[:], ps[3])
	return nil
}

// DSN is the test database through HAProxy, which leads to the primary.
func (c *Cluster) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/test?sslmode=disable", c.HAProxyPort)
}

// MultiHostDSN is the test database on the three nodes at once, in pgx's (and libpq's)
// multi-host form: the client tries each and keeps the one that accepts writes.
func (c *Cluster) MultiHostDSN() string {
	hosts := make([]string, Nodes)
	for i, p := range c.PGPorts {
		hosts[i] = "127.0.0.1:" + strconv.Itoa(p)
	}
	return "postgres://postgres@" + strings.Join(hosts, ",") +
		"/test?sslmode=disable&target_session_attrs=read-write"
}

// NodeDSN is the test database on node i's PostgreSQL directly, whatever its role.
func (c *Cluster) NodeDSN(i int) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/test?sslmode=disable", c.PGPorts[i])
}

// Members returns the nodes as Patroni sees them (GET /cluster, which reads etcd),
// asking each node's REST API in turn until one answers, so a stopped or paused
// Patroni is passed over.
func (c *Cluster) Members(ctx context.Context) ([]Member, error) {
	var errs []error
	for i := range Nodes {
		ms, err := c.members(ctx, i)
		if err == nil {
			return ms, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("pgcluster: no Patroni answered GET /cluster: %w", errors.Join(errs...))
}

func (c *Cluster) members(ctx context.Context, i int) ([]Member, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	body, status, err := c.request(ctx, http.MethodGet, i, "/cluster", nil)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("node%d: GET /cluster: %d %s", i, status, body)
	}
	var doc struct {
		Members []struct {
			Name     string          `json:"name"`
			Role     string          `json:"role"`
			State    string          `json:"state"`
			Port     int             `json:"port"`
			Timeline int             `json:"timeline"`
			Lag      json.RawMessage `json:"lag"`
		} `json:"members"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("node%d: GET /cluster: %w", i, err)
	}
	ms := make([]Member, 0, len(doc.Members))
	for _, m := range doc.Members {
		node, err := strconv.Atoi(strings.TrimPrefix(m.Name, "node"))
		if err != nil || node < 0 || node >= Nodes {
			return nil, fmt.Errorf("node%d: GET /cluster: unknown member %q", i, m.Name)
		}
		lag := int64(-1)
		if m.Role == RoleLeader {
			lag = 0
		} else if n, err := strconv.ParseInt(string(m.Lag), 10, 64); err == nil {
			lag = n // else "unknown"
		}
		ms = append(ms, Member{Node: node, Name: m.Name, Role: m.Role, State: m.State,
			Lag: lag, Timeline: m.Timeline, Port: m.Port})
	}
	return ms, nil
}

// request sends a request to node i's Patroni REST API.
func (c *Cluster) request(ctx context.Context, method string, i int, path string, body any) ([]byte, int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method,
		fmt.Sprintf("http://127.0.0.1:%d%s", c.RESTPorts[i], path), rd)
	if err != nil {
		return nil, 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("node%d: %w", i, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, 0, fmt.Errorf("node%d: %s %s: %w", i, method, path, err)
	}
	return bytes.TrimSpace(b), resp.StatusCode, nil
}

// Primary returns the index of the node that holds Patroni's leader key, or
// ErrNoLeader. The leader's PostgreSQL may not yet accept writes: see WaitPrimary.
func (c *Cluster) Primary(ctx context.Context) (int, error) {
	ms, err := c.Members(ctx)
	if err != nil {
		return -1, err
	}
	for _, m := range ms {
		if m.Role == RoleLeader {
			return m.Node, nil
		}
	}
	return -1, ErrNoLeader
}

// Switchover asks Patroni for a planned switchover from the current leader to node
// to, and returns once Patroni reports that to holds the leader key (Patroni waits up to
// about 20 s). In synchronous mode Patroni switches over only to the synchronous
// standby. Wait for the new primary to accept writes with WaitPrimary.
func (c *Cluster) Switchover(ctx context.Context, to int) error {
	if to < 0 || to >= Nodes {
		return fmt.Errorf("pgcluster: switchover to node%d: no such node", to)
	}
	leader, err := c.Primary(ctx)
	if err != nil {
		return fmt.Errorf("pgcluster: switchover to node%d: %w", to, err)
	}
	if leader == to {
		return fmt.Errorf("pgcluster: switchover to node%d: it is the leader already", to)
	}
	req := map[string]string{"leader": fmt.Sprintf("node%d", leader), "candidate": fmt.Sprintf("node%d", to)}
	body, status, err := c.request(ctx, http.MethodPost, leader, "/switchover", req)
	if err != nil {
		return fmt.Errorf("pgcluster: switchover node%d → node%d: %w", leader, to, err)
	}
	if want := fmt.Sprintf(`Successfully switched over to "node%d"`, to); status != http.StatusOK || string(body) != want {
		return fmt.Errorf("pgcluster: switchover node%d → node%d: Patroni answered %d %s", leader, to, status, body)
	}
	return nil
}

// SetSynchronous turns synchronous replication on or off for the whole cluster
// (synchronous_mode and synchronous_mode_strict, through Patroni's PATCH /config), and
// waits until the leader's PostgreSQL has the setting: synchronous_standby_names set,
// or empty. Off, a commit returns once the primary has it, and a failover can lose it.
func (c *Cluster) SetSynchronous(ctx context.Context, on bool) error {
	leader, err := c.Primary(ctx)
	if err != nil {
		return fmt.Errorf("pgcluster: synchronous mode: %w", err)
	}
	req := map[string]bool{"synchronous_mode": on, "synchronous_mode_strict": on}
	body, status, err := c.request(ctx, http.MethodPatch, leader, "/config", req)
	if err != nil {
		return fmt.Errorf("pgcluster: synchronous mode: %w", err)
	}
	if status != http.StatusOK {
		return fmt.Errorf("pgcluster: synchronous mode: PATCH /config answered %d %s", status, body)
	}
	for {
		names, err := c.standbyNames(ctx, leader)
		if err == nil && (names != "") == on {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgcluster: synchronous mode %v not in effect on node%d in time (synchronous_standby_names %q, %v)", on, leader, names, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// standbyNames returns node i's synchronous_standby_names.
func (c *Cluster) standbyNames(ctx context.Context, i int) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.NodeDSN(i))
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	var names string
	err = conn.QueryRow(ctx, "SHOW synchronous_standby_names").Scan(&names)
	return names, err
}

// WaitPrimary waits until a node other than node not (-1 for any) holds the leader
// key and a new connection through HAProxy reaches that node's PostgreSQL out of
// recovery and commits a transaction that has a transaction id, which with
// synchronous_mode_strict means a synchronous standby has it too. It returns the
// node's index, or the last obstacle when ctx ends first.
func (c *Cluster) WaitPrimary(ctx context.Context, not int) (int, error) {
	for {
		i, err := c.probePrimary(ctx, not)
		if err == nil {
			return i, nil
		}
		select {
		case <-ctx.Done():
			what := "a writable primary"
			if not >= 0 {
				what = fmt.Sprintf("a writable primary other than node%d", not)
			}
			return -1, fmt.Errorf("pgcluster: no %s in time: %w", what, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// probePrimary makes one attempt of WaitPrimary.
func (c *Cluster) probePrimary(ctx context.Context, not int) (int, error) {
	i, err := c.Primary(ctx)
	if err != nil {
		return -1, err
	}
	if i == not {
		return -1, fmt.Errorf("node%d still holds the leader key", i)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN())
	if err != nil {
		return -1, fmt.Errorf("through HAProxy: %w", err)
	}
	defer conn.Close(context.Background())
	var inRecovery bool
	var port int
	if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery(), inet_server_port()").Scan(&inRecovery, &port); err != nil {
		return -1, fmt.Errorf("through HAProxy: %w", err)
	}
	if inRecovery || port != c.PGPorts[i] {
		return -1, fmt.Errorf("HAProxy leads to port %d (in recovery: %v), the leader node%d is on %d",
			port, inRecovery, i, c.PGPorts[i])
	}
	if _, err := conn.Exec(ctx, "SELECT txid_current()"); err != nil {
		return -1, fmt.Errorf("a write through HAProxy on node%d: %w", i, err)
	}
	return i, nil
}

// WaitHealthy waits until the cluster is whole again: three members, a running leader
// that HAProxy leads to and that commits writes, a synchronous standby, and both
// replicas running with a known lag and streaming from the leader. It returns the last
// obstacle when ctx ends first.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	for {
		err := c.probeHealthy(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgcluster: not healthy in time: %w", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *Cluster) probeHealthy(ctx context.Context) error {
	ms, err := c.Members(ctx)
	if err != nil {
		return err
	}
	if len(ms) != Nodes {
		return fmt.Errorf("%d members: %+v", len(ms), ms)
	}
	leader, syncs := -1, 0
	for _, m := range ms {
		switch {
		case m.Role == RoleLeader && m.State == "running":
			leader = m.Node
		case m.Role == RoleLeader:
			return fmt.Errorf("the leader is %s: %+v", m.State, ms)
		case m.State != "running" && m.State != "streaming" || m.Lag < 0:
			return fmt.Errorf("node%d is %s, lag %d: %+v", m.Node, m.State, m.Lag, ms)
		}
		if m.Role == RoleSyncStandby {
			syncs++
		}
	}
	if leader < 0 || syncs != 1 {
		return fmt.Errorf("want a leader and a sync_standby: %+v", ms)
	}
	if _, err := c.probePrimary(ctx, -1); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.NodeDSN(leader))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var streaming, sync int
	if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'streaming'),
		count(*) FILTER (WHERE sync_state = 'sync') FROM pg_stat_replication`).Scan(&streaming, &sync); err != nil {
		return fmt.Errorf("node%d: pg_stat_replication: %w", leader, err)
	}
	if streaming != Nodes-1 || sync != 1 {
		return fmt.Errorf("node%d streams to %d replicas, %d synchronous", leader, streaming, sync)
	}
	return nil
}

// KillPrimary kills the leader's node as a crash would: SIGKILL to its Patroni, then
// to its postmaster and every backend of it (so that no orphaned backend keeps serving
// a client); the postmaster is stopped (SIGSTOP) while its backends are listed. It waits until they are gone and returns the node's index. Patroni
// is gone too, so the node stays down until Restart; the others elect a new leader once
// the leader key expires (ttl, 10 s).
func (c *Cluster) KillPrimary(ctx context.Context) (int, error) {
	i, err := c.Primary(ctx)
	if err != nil {
		return -1, fmt.Errorf("pgcluster: kill the primary: %w", err)
	}
	patroni, err := c.patroniPID(i)
	if err != nil {
		return -1, fmt.Errorf("pgcluster: kill the primary: %w", err)
	}
	pm, err := c.postmasterPID(i)
	if err != nil {
		return -1, fmt.Errorf("pgcluster: kill the primary: %w", err)
	}
	if err := sigkill(patroni); err != nil {
		return -1, fmt.Errorf("pgcluster: kill node%d's Patroni (pid %d): %w", i, patroni, err)
	}
	// Frozen, the postmaster forks no backend between the listing and the kill.
	if err := sigstop(pm); err != nil {
		return -1, fmt.Errorf("pgcluster: stop node%d's postmaster (pid %d): %w", i, pm, err)
	}
	victims := append([]int{pm}, children(pm)...)
	for _, p := range victims {
		if err := sigkill(p); err != nil && p == pm {
			return -1, fmt.Errorf("pgcluster: kill node%d's postmaster (pid %d): %w", i, pm, err)
		}
	}
	if err := waitGone(ctx, append(victims, patroni)...); err != nil {
		return -1, fmt.Errorf("pgcluster: kill node%d: %w", i, err)
	}
	return i, nil
}

// PausePatroni stops node i's Patroni with SIGSTOP, and waits until all its threads
// are stopped; its PostgreSQL keeps running. A paused leader can no longer renew its
// leader key, nor answer HAProxy's health check.
func (c *Cluster) PausePatroni(i int) error {
	pid, err := c.patroniPID(i)
	if err != nil {
		return fmt.Errorf("pgcluster: pause: %w", err)
	}
	if err := sigstop(pid); err != nil {
		return fmt.Errorf("pgcluster: SIGSTOP node%d's Patroni (pid %d): %w", i, pid, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !stopped(pid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("pgcluster: node%d's Patroni (pid %d) not stopped 5s after SIGSTOP", i, pid)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// ResumePatroni lets node i's Patroni, paused by PausePatroni, run again (SIGCONT).
func (c *Cluster) ResumePatroni(i int) error {
	pid, err := c.patroniPID(i)
	if err != nil {
		return fmt.Errorf("pgcluster: resume: %w", err)
	}
	if err := sigcont(pid); err != nil {
		return fmt.Errorf("pgcluster: SIGCONT node%d's Patroni (pid %d): %w", i, pid, err)
	}
	return nil
}

// PauseReceiving stops (SIGSTOP) node i's WAL receiver: the standby acknowledges no
// more WAL, as one cut off from the primary would, while its PostgreSQL and its
// Patroni go on. A commit waiting for it as the synchronous standby waits until
// ResumeReceiving — for seconds: past wal_sender_timeout (60 s) the primary gives the
// receiver up, and Patroni may pick another synchronous standby.
func (c *Cluster) PauseReceiving(i int) error {
	pid, err := c.walReceiver(i)
	if err != nil {
		return fmt.Errorf("pgcluster: pause receiving: %w", err)
	}
	if err := sigstop(pid); err != nil {
		return fmt.Errorf("pgcluster: SIGSTOP node%d's WAL receiver (pid %d): %w", i, pid, err)
	}
	return nil
}

// ResumeReceiving lets node i's WAL receiver, stopped by PauseReceiving, run again
// (SIGCONT).
func (c *Cluster) ResumeReceiving(i int) error {
	pid, err := c.walReceiver(i)
	if err != nil {
		return fmt.Errorf("pgcluster: resume receiving: %w", err)
	}
	if err := sigcont(pid); err != nil {
		return fmt.Errorf("pgcluster: SIGCONT node%d's WAL receiver (pid %d): %w", i, pid, err)
	}
	return nil
}

// walReceiver returns the pid of node i's WAL receiver, a child of its postmaster.
func (c *Cluster) walReceiver(i int) (int, error) {
	pm, err := c.postmasterPID(i)
	if err != nil {
		return 0, err
	}
	for _, p := range children(pm) {
		if cmdlineHas(p, "walreceiver") {
			return p, nil
		}
	}
	return 0, fmt.Errorf("node%d has no WAL receiver: not a streaming standby", i)
}

// Restart starts node i's Patroni again, after KillPrimary say; a Patroni still
// running (or paused) is killed first. The new Patroni starts the node's PostgreSQL
// (or adopts one still running), and rejoins the cluster as a replica, rewinding it
// with pg_rewind if it diverged. Restart does not wait for that: see WaitHealthy.
func (c *Cluster) Restart(i int) error {
	if i < 0 || i >= Nodes {
		return fmt.Errorf("pgcluster: restart node%d: no such node", i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if pid, err := c.patroniPID(i); err == nil {
		if err := sigkill(pid); err != nil {
			return fmt.Errorf("pgcluster: restart node%d: kill its Patroni (pid %d): %w", i, pid, err)
		}
		if err := waitGone(ctx, pid); err != nil {
			return fmt.Errorf("pgcluster: restart node%d: %w", i, err)
		}
	}
	if out, err := c.run(ctx, nil, "start-node", c.Dir, strconv.Itoa(i)); err != nil {
		return fmt.Errorf("pgcluster: restart node%d: cluster.sh start-node: %w\n%s", i, err, out)
	}
	return nil
}

// patroniPID returns node i's Patroni pid, from Dir/pids, if that process runs and was
// started from Dir.
func (c *Cluster) patroniPID(i int) (int, error) {
	if i < 0 || i >= Nodes {
		return 0, fmt.Errorf("node%d: no such node", i)
	}
	return c.pidFrom(filepath.Join(c.Dir, "pids", fmt.Sprintf("patroni%d.pid", i)), fmt.Sprintf("node%d's Patroni", i))
}

// postmasterPID returns node i's postmaster pid, from the first line of its
// postmaster.pid, if that process runs and was started from Dir.
func (c *Cluster) postmasterPID(i int) (int, error) {
	return c.pidFrom(filepath.Join(c.Dir, fmt.Sprintf("node%d", i), "data", "postmaster.pid"),
		fmt.Sprintf("node%d's postmaster", i))
}

// pidFrom reads the pid on the first line of file and checks that it is one of ours:
// running, with Dir in its command line (a recycled pid is not).
func (c *Cluster) pidFrom(file, what string) (int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0, fmt.Errorf("%s: %s: %w", what, file, err)
	}
	if !cmdlineHas(pid, c.Dir+"/") {
		return 0, fmt.Errorf("%s (pid %d) is not running", what, pid)
	}
	return pid, nil
}

// waitGone waits until none of pids runs.
func waitGone(ctx context.Context, pids ...int) error {
	for {
		var left []int
		for _, p := range pids {
			if alive(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pids %v still running: %w", left, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
