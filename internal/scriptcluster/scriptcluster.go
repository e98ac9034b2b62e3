// Package scriptcluster runs, for a test, a database cluster that a script of the
// repository's deploy/ starts and stops (deploy/patroni/cluster.sh,
// deploy/galera/cluster.sh): what the harnesses around those scripts
// (internal/pgcluster, internal/galeracluster) share.
//
// Start finds the script from the repository's root, tears down clusters a killed
// test process left behind, picks a port base for the cluster and runs `script up DIR`
// with it, and registers `script down DIR` for the test's end. The script's exit code 3
// means the machine cannot run it (not Linux, not root, packages not installable): the
// test is skipped, or fails under AX_REQUIRE_SERVICES=1, as a missing service is.
//
// Ports: each cluster takes a base in [PortFirst, PortLast), a multiple of PortSpan
// above PortFirst, chosen at random, and keeps it only while it holds an flock on a file
// named after it (in the temporary directory's PortLocks) and every port of the span is
// free, so two test processes never share one; the lock lasts while the process does.
// The environment variable PortEnv, when set, fixes the base.
//
// The cluster's directory lies in a fresh temporary directory beside an owner lock: a
// flock the test process holds while it lives. A later Start takes the lock of every
// such directory whose owner died (a test binary killed by its timeout) and runs the
// script's down on it.
//
// AX_SKIP_CLUSTERS=1 skips every test that would start a cluster (.ci/run sets it for
// the whole test run, and runs those tests in a step of their own).
//
// When a test fails, the last lines of each of the cluster's logs are logged, and with
// AX_CLUSTER_LOGS=DIR set, the logs are kept whole in DIR before down removes them.
package scriptcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Config says which script a harness runs and where its clusters go.
type Config struct {
	Name      string // the harness, prefixing its messages: "pgcluster"
	What      string // the cluster, in a skip's message: "the Patroni cluster"
	Script    string // from the repository's root: "deploy/patroni/cluster.sh"
	DirPrefix string // of the temporary directories: "axpg-"
	PortEnv   string // the script's port base variable, which also fixes the base
	PortLocks string // the directory, in the temporary one, of the port bases' locks

	PortFirst, PortLast, PortSpan int
	UpTimeout                     time.Duration // how long up may take
	Logs                          []string      // globs, under the cluster's directory, of the logs a failed test shows the end of
}

// Cluster is a cluster the script started.
type Cluster struct {
	Dir  string // the cluster's directory, given to the script
	Base int    // its port base

	cfg    Config
	script string
}

// Start starts a cluster with the script's up, and registers its down for the end of
// t, which, when t failed, first logs the last lines of each of cfg.Logs. It skips t
// when the machine cannot run the cluster, or fails it under AX_REQUIRE_SERVICES=1.
func Start(t testing.TB, cfg Config) *Cluster {
	t.Helper()
	if os.Getenv("AX_SKIP_CLUSTERS") == "1" {
		t.Skipf("%s: AX_SKIP_CLUSTERS=1 (.ci/run runs the cluster suites as a step of their own)", cfg.What)
	}
	if runtime.GOOS != "linux" {
		Unavailable(t, cfg.What, errors.New("needs Linux"))
	}
	root, err := repoRoot()
	if err != nil {
		t.Fatalf("%s: %v", cfg.Name, err)
	}
	script := filepath.Join(root, cfg.Script)
	reapStale(t, cfg, script)

	base, portLock, err := reservePorts(cfg)
	if err != nil {
		t.Fatal(err)
	}
	parent, owner, err := newParent(cfg.DirPrefix)
	if err != nil {
		portLock.Close()
		t.Fatal(err)
	}
	c := &Cluster{Dir: filepath.Join(parent, "c"), Base: base, cfg: cfg, script: script}
	t.Cleanup(func() {
		if t.Failed() {
			c.logTails(t)
			c.keepLogs(t)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if out, err := c.Run(ctx, nil, "down", c.Dir); err != nil {
			t.Errorf("%s: %s down %s: %v\n%s", cfg.Name, filepath.Base(script), c.Dir, err, out)
		} else if err := os.RemoveAll(parent); err != nil {
			t.Error(err)
		}
		owner.Close()
		portLock.Close()
	})

	ctx, cancel := context.WithTimeout(context.Background(), cfg.UpTimeout)
	defer cancel()
	out, err := c.Run(ctx, []string{cfg.PortEnv + "=" + strconv.Itoa(base)}, "up", c.Dir)
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 3 || errors.Is(err, exec.ErrNotFound) {
			Unavailable(t, cfg.What, fmt.Errorf("%s up: %s (%s, as root on Debian, installs what it needs: see %s)",
				filepath.Base(script), bytes.TrimSpace(out), cfg.Script, filepath.Join(filepath.Dir(cfg.Script), "README.md")))
		}
		t.Fatalf("%s: %s up %s: %v\n%s", cfg.Name, filepath.Base(script), c.Dir, err, out)
	}
	return c
}

// Run runs the script with args, extra in its environment, and returns its output.
func (c *Cluster) Run(ctx context.Context, extra []string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "bash", append([]string{c.script}, args...)...)
	cmd.Env = append(os.Environ(), extra...)
	cmd.WaitDelay = 5 * time.Second
	return cmd.CombinedOutput()
}

// Env reads the script's Dir/cluster.env: its shell assignments, quotes removed.
func (c *Cluster) Env() (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(c.Dir, "cluster.env"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.cfg.Name, err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			env[k] = strings.Trim(v, `"`)
		}
	}
	return env, nil
}

// Ports reads the n ports, separated by spaces, that env (Env) gives key.
func (c *Cluster) Ports(env map[string]string, key string, n int) ([]int, error) {
	f := strings.Fields(env[key])
	if len(f) != n {
		return nil, fmt.Errorf("%s: cluster.env: %s=%q, want %d ports", c.cfg.Name, key, env[key], n)
	}
	out := make([]int, n)
	for i, s := range f {
		var err error
		if out[i], err = strconv.Atoi(s); err != nil {
			return nil, fmt.Errorf("%s: cluster.env: %s: %w", c.cfg.Name, key, err)
		}
	}
	return out, nil
}

// keepLogs copies the cluster's logs whole into $AX_CLUSTER_LOGS/NAME-BASE, when that
// is set, before down removes them.
func (c *Cluster) keepLogs(t testing.TB) {
	root := os.Getenv("AX_CLUSTER_LOGS")
	if root == "" {
		return
	}
	dir := filepath.Join(root, fmt.Sprintf("%s-%d", c.cfg.Name, c.Base))
	for _, glob := range c.cfg.Logs {
		logs, _ := filepath.Glob(filepath.Join(c.Dir, glob))
		for _, l := range logs {
			rel, err := filepath.Rel(c.Dir, l)
			if err != nil {
				continue
			}
			b, err := os.ReadFile(l)
			if err != nil {
				continue
			}
			to := filepath.Join(dir, rel)
			if err := os.MkdirAll(filepath.Dir(to), 0o755); err == nil {
				err = os.WriteFile(to, b, 0o644)
			}
			if err != nil {
				t.Logf("%s: keeping %s: %v", c.cfg.Name, l, err)
			}
		}
	}
	t.Logf("%s: the cluster's logs kept in %s", c.cfg.Name, dir)
}

// logTails logs the last 40 lines of each of the cluster's logs.
func (c *Cluster) logTails(t testing.TB) {
	for _, glob := range c.cfg.Logs {
		logs, _ := filepath.Glob(filepath.Join(c.Dir, glob))
		for _, l := range logs {
			b, err := os.ReadFile(l)
			if err != nil {
				continue
			}
			lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
			if len(lines) > 40 {
				lines = lines[len(lines)-40:]
			}
			t.Logf("%s: %s (last %d lines):\n%s", c.cfg.Name, l, len(lines), strings.Join(lines, "\n"))
		}
	}
}

// Unavailable skips t because what cannot run here, or fails it when services are
// required (AX_REQUIRE_SERVICES=1).
func Unavailable(t testing.TB, what string, err error) {
	t.Helper()
	if os.Getenv("AX_REQUIRE_SERVICES") == "1" {
		t.Fatalf("%s is required (AX_REQUIRE_SERVICES=1) but cannot run: %v", what, err)
	}
	t.Skipf("%s cannot run, skipping (set AX_REQUIRE_SERVICES=1 to fail instead): %v", what, err)
}

// repoRoot walks up from the working directory (a test's is its package's) to go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = up
	}
}

// reservePorts picks a port base and locks it (see the package doc). The returned
// file holds the lock until closed.
func reservePorts(cfg Config) (int, *os.File, error) {
	lockDir := filepath.Join(os.TempDir(), cfg.PortLocks)
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		return 0, nil, err
	}
	try := func(base int) (*os.File, error) {
		f, err := LockFile(filepath.Join(lockDir, strconv.Itoa(base)+".lock"))
		if err != nil {
			return nil, err
		}
		for p := base; p < base+cfg.PortSpan; p++ {
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("port %d: %w", p, err)
			}
			ln.Close()
		}
		return f, nil
	}
	if s := os.Getenv(cfg.PortEnv); s != "" {
		base, err := strconv.Atoi(s)
		if err != nil {
			return 0, nil, fmt.Errorf("%s: %s=%q: %w", cfg.Name, cfg.PortEnv, s, err)
		}
		f, err := try(base)
		if err != nil {
			return 0, nil, fmt.Errorf("%s: %s=%d: %w", cfg.Name, cfg.PortEnv, base, err)
		}
		return base, f, nil
	}
	n := (cfg.PortLast - cfg.PortFirst) / cfg.PortSpan
	start := rand.IntN(n)
	var last error
	for k := range n {
		base := cfg.PortFirst + (start+k)%n*cfg.PortSpan
		f, err := try(base)
		if err == nil {
			return base, f, nil
		}
		last = err
	}
	return 0, nil, fmt.Errorf("%s: no free port range in [%d, %d): %w", cfg.Name, cfg.PortFirst, cfg.PortLast, last)
}

// newParent makes the temporary directory that holds the cluster's directory (c) and
// the owner lock: a flock held while this process lives, which tells reapStale, in a
// later test process, whether the cluster's owner is gone. The lock is taken on a
// temporary name and then renamed, so the lock file never exists unlocked.
func newParent(prefix string) (dir string, owner *os.File, err error) {
	dir, err = os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, err
	}
	// MkdirTemp makes it 0700 and root's: the database's user (postgres, mysql) must
	// pass through it.
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", nil, err
	}
	// The scripts and the harnesses match processes by this path in their command
	// lines: it must be the path the processes see.
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return "", nil, err
	}
	tmp := filepath.Join(dir, "owner.lock.new")
	owner, err = LockFile(tmp)
	if err != nil {
		return "", nil, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, "owner.lock")); err != nil {
		owner.Close()
		return "", nil, err
	}
	return dir, owner, nil
}

// reapStale tears down clusters whose owner died without cleaning up (a test binary
// killed by its timeout, say): they would hold ports and memory for good.
func reapStale(t testing.TB, cfg Config, script string) {
	locks, _ := filepath.Glob(filepath.Join(os.TempDir(), cfg.DirPrefix+"*", "owner.lock"))
	for _, l := range locks {
		f, err := LockFile(l)
		if err != nil {
			continue // its owner runs, or another process reaps it
		}
		parent := filepath.Dir(l)
		c := &Cluster{Dir: filepath.Join(parent, "c"), cfg: cfg, script: script}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := c.Run(ctx, nil, "down", c.Dir)
		cancel()
		if err != nil {
			t.Logf("%s: could not reap the stale cluster in %s: %v\n%s", cfg.Name, parent, err, out)
		} else {
			t.Logf("%s: reaped a stale cluster in %s", cfg.Name, parent)
			os.RemoveAll(parent)
		}
		f.Close()
	}
}
