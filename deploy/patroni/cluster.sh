#!/usr/bin/env bash
# cluster.sh: a throwaway PostgreSQL 15 cluster under Patroni, for ax's failover tests.
#
# One etcd (the DCS), three Patroni nodes each managing its own PostgreSQL 15 data
# directory, and HAProxy in front routing to whichever node Patroni says is the primary.
# Every process listens on 127.0.0.1 only, and every file, the logs included, lives in DIR.
#
#   cluster.sh up DIR            install what is missing, start everything in DIR (empty
#                                or absent), wait until the cluster is healthy
#   cluster.sh down DIR          stop everything started from DIR, then remove DIR
#   cluster.sh status DIR        Patroni's view of the cluster (patronictl list)
#   cluster.sh start-node DIR I  start node I's Patroni again (after it was killed)
#
# Ports, from the base B in AX_PGCLUSTER_PORT_BASE (default 15400), ten in all:
#   B+0 etcd client   B+1 etcd peer   B+2 HAProxy (the primary)
#   B+3..B+5 PostgreSQL of node0..node2   B+6..B+8 Patroni REST API of node0..node2
#   (B+9 is kept free for later use.)
# They are written to DIR/cluster.env as shell assignments.
#
# Must run as root: PostgreSQL (and so Patroni) runs as the postgres user, etcd and
# HAProxy as root. Exit codes: 0 ok, 1 the cluster failed, 2 usage, 3 the prerequisites
# are missing (not root, not Linux, no PostgreSQL 15, the packages cannot be installed).
set -euo pipefail

PG_BIN=/usr/lib/postgresql/15/bin
PACKAGES=(patroni python3-etcd etcd-server haproxy curl jq) # python3-etcd: Patroni's etcd v2 client
UP_TIMEOUT=${AX_PGCLUSTER_UP_TIMEOUT:-90} # seconds `up` waits for a healthy cluster
NODES=(0 1 2)
MARKER=.ax-pgcluster # DIR holds this file once `up` has claimed it; `down` refuses others

# The caller's libpq settings (PGHOST, PGPASSWORD, PGSERVICE, ...) must not leak into
# our psql calls.
for v in $(compgen -e); do
  [[ $v == PG* ]] && unset "$v"
done
export PGCONNECT_TIMEOUT=3

usage() {
  echo "usage: $0 up|down|status DIR | start-node DIR 0|1|2" >&2
  exit 2
}

log() { echo "cluster.sh: $*" >&2; }

# prereq MESSAGE: the machine cannot run the cluster; exit 3 so that the Go harness skips.
prereq() {
  log "$*"
  exit 3
}

# ---------------------------------------------------------------------------------
# Paths and ports
# ---------------------------------------------------------------------------------

# setup_paths DIR: the absolute DIR and the ports; reads DIR/cluster.env when present
# (so down/status/start-node use the ports up chose, whatever the environment says now).
setup_paths() {
  [[ -n $1 ]] || usage
  DIR=$(realpath -m -- "$1")
  [[ $DIR != / ]] || { log "refusing DIR=/"; exit 2; }
  PIDS=$DIR/pids
  LOGS=$DIR/log
  if [[ -f $DIR/cluster.env ]]; then
    # shellcheck disable=SC1091
    source "$DIR/cluster.env"
    # PG_PORTS and REST_PORTS come from cluster.env.
    # shellcheck disable=SC2153
    read -r -a PG_PORT <<<"$PG_PORTS"
    # shellcheck disable=SC2153
    read -r -a REST_PORT <<<"$REST_PORTS"
  else
    local base=${AX_PGCLUSTER_PORT_BASE:-15400}
    if ! [[ $base =~ ^[0-9]+$ ]] || ((base < 1024 || base + 9 > 65535)); then
      log "bad AX_PGCLUSTER_PORT_BASE=$base"
      exit 2
    fi
    ETCD_PORT=$base
    ETCD_PEER_PORT=$((base + 1))
    HAPROXY_PORT=$((base + 2))
    PG_PORT=($((base + 3)) $((base + 4)) $((base + 5)))
    REST_PORT=($((base + 6)) $((base + 7)) $((base + 8)))
  fi
}

node_dir() { echo "$DIR/node$1"; }

# ---------------------------------------------------------------------------------
# Processes. Everything `up` starts is started by spawn in a session of its own
# (setsid), so its pid is its process group; the pid is recorded in DIR/pids. A pid is
# only ever signalled after checking that its command line names DIR, so a recycled
# pid, or the shared PostgreSQL on 5432, is never touched.
# ---------------------------------------------------------------------------------

# proc_stat PID: sets STAT to (state ppid pgrp session) from /proc/PID/stat, without
# forking (down scans every process); fails when PID is gone.
proc_stat() {
  local s f
  { read -r s <"/proc/$1/stat"; } 2>/dev/null || return 1
  s=${s##*) } # the command name, in parentheses, may hold spaces
  read -r -a f <<<"$s"
  STAT=("${f[@]:0:4}")
}

# ours PID: the process runs (not a zombie) and its command line names DIR.
ours() {
  local args c
  proc_stat "$1" || return 1
  [[ ${STAT[0]} != Z && ${STAT[0]} != X ]] || return 1
  { mapfile -d '' -t args <"/proc/$1/cmdline"; } 2>/dev/null || return 1
  c="${args[*]}"
  [[ $c == *"$DIR/"* ]]
}

alive() {
  proc_stat "$1" || return 1
  [[ ${STAT[0]} != Z && ${STAT[0]} != X ]]
}

# children PID: the pids whose parent is PID (PostgreSQL's backends each run in a
# session of their own, so the postmaster's process group does not hold them).
children() {
  local p
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    proc_stat "$p" && [[ ${STAT[1]} == "$1" ]] && echo "$p"
  done
  return 0
}

# wait_gone SECONDS PID...: wait until none of the pids runs; fails on the deadline.
wait_gone() {
  local deadline=$((SECONDS + $1)) p left
  shift
  while :; do
    left=0
    for p in "$@"; do alive "$p" && left=1; done
    ((left)) || return 0
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}

# spawn NAME LOG CMD...: start CMD in a new session, in the background, output to LOG.
# The background child execs setsid, which (not being a group leader) execs CMD in the
# same process, so $! is CMD's pid.
spawn() {
  local name=$1 logf=$2
  shift 2
  setsid "$@" >>"$logf" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$PIDS/$name.pid"
  disown "$pid" # not this shell's job: no "Killed" notice when down kills it
  exec_wait "$pid"
}

# exec_wait PID: wait (up to 5 s) until the background child PID has exec'd its
# command, or ended. Until then its command line is this shell's, which ours does not
# count as started from DIR, so a liveness check right after a start would call a
# process that is only starting gone.
exec_wait() {
  local deadline=$((SECONDS + 5))
  while ! ours "$1" && [[ -e /proc/$1 ]] && ((SECONDS < deadline)); do sleep 0.01; done
}

# recorded NAME: the pid recorded for NAME, if that process still runs and is ours.
recorded() {
  local pid
  pid=$(cat "$PIDS/$1.pid" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] && ours "$pid" || return 1
  echo "$pid"
}

# kill_group PID SIGNAL: signal PID's whole process group when PID leads it (as
# everything spawn starts does), else PID alone.
kill_group() {
  local pid=$1 sig=$2
  if proc_stat "$pid" && [[ ${STAT[2]} == "$pid" ]]; then
    kill "-$sig" -- "-$pid" 2>/dev/null || true
  else
    kill "-$sig" "$pid" 2>/dev/null || true
  fi
}

# postmaster I: node I's postmaster pid (from postmaster.pid), if it runs and is ours.
postmaster() {
  local pid
  pid=$(head -n1 "$(node_dir "$1")/data/postmaster.pid" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] && ours "$pid" || return 1
  echo "$pid"
}

# ---------------------------------------------------------------------------------
# up
# ---------------------------------------------------------------------------------

install_missing() {
  local missing=() p
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  command -v apt-get >/dev/null || prereq "missing ${missing[*]} and no apt-get to install them"
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Another test process may be installing at the same time: wait for dpkg's lock.
  local apt=(apt-get -o DPkg::Lock::Timeout=300 -y -qq)
  "${apt[@]}" install "${missing[@]}" >/dev/null ||
    { "${apt[@]}" update && "${apt[@]}" install "${missing[@]}" >/dev/null; } ||
    prereq "could not install ${missing[*]}"
}

check_prereqs() {
  [[ $(uname -s) == Linux ]] || prereq "needs Linux"
  ((EUID == 0)) || prereq "needs root (PostgreSQL runs as the postgres user under setpriv)"
  [[ -x $PG_BIN/postgres ]] || prereq "PostgreSQL 15 is not installed ($PG_BIN/postgres)"
  id postgres >/dev/null 2>&1 || prereq "no postgres user"
  install_missing
  local b
  for b in /usr/bin/patroni /usr/bin/patronictl /usr/bin/etcd /usr/sbin/haproxy setpriv curl jq; do
    command -v "$b" >/dev/null || prereq "$b missing after the install"
  done
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

write_env() {
  cat >"$DIR/cluster.env" <<EOF
# Written by cluster.sh up: the ports of this cluster (all on 127.0.0.1).
DIR="$DIR"
ETCD_PORT=$ETCD_PORT
ETCD_PEER_PORT=$ETCD_PEER_PORT
HAPROXY_PORT=$HAPROXY_PORT
PG_PORTS="${PG_PORT[*]}"
REST_PORTS="${REST_PORT[*]}"
PG_BIN=$PG_BIN
EOF
}

# write_patroni I: node I's Patroni configuration. The bootstrap.dcs section is the
# cluster-wide configuration, written to etcd by the node that initialises the cluster.
write_patroni() {
  local i=$1 nd
  nd=$(node_dir "$i")
  cat >"$nd/patroni.yml" <<EOF
scope: ax-pgcluster
namespace: /ax-pgcluster/
name: node$i

log:
  level: INFO

restapi:
  listen: 127.0.0.1:${REST_PORT[$i]}
  connect_address: 127.0.0.1:${REST_PORT[$i]}

# etcd's v2 API, not etcd3: Patroni 3.0.2 (Debian 12's) renews the leader key through
# etcd3 with an unconditional put once its lease has lapsed, so a leader's Patroni paused
# past ttl and resumed overwrites the key of the node promoted meanwhile and stays
# primary — the promoted node is demoted and rewound, its acknowledged commits lost
# (seen in internal/clustertest's TestDatabaseZombiePrimaryMidDrain). Through v2 the
# renewal is a compare-and-swap on the holder's name, which then fails, and it demotes.
etcd:
  hosts: 127.0.0.1:$ETCD_PORT
  protocol: http

bootstrap:
  dcs:
    # A leader key lives ttl seconds; the leader renews it every loop_wait seconds;
    # Patroni requires loop_wait + 2 * retry_timeout <= ttl. Small, for quick failovers.
    ttl: 10
    loop_wait: 1
    retry_timeout: 4
    maximum_lag_on_failover: 1048576
    # A commit returns only once the synchronous standby has it, and with _strict a
    # primary left without a standby stops accepting commits instead of going on alone:
    # no acknowledged write can be lost in a failover.
    synchronous_mode: true
    synchronous_mode_strict: true
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        wal_level: replica
        hot_standby: "on"
        max_wal_senders: 10
        max_replication_slots: 10
        wal_log_hints: "on"
        wal_keep_size: 128MB
        max_connections: 100
  initdb:
    - encoding: UTF8
    - locale: C.UTF-8
  # Creates the database "test" the test DSNs name.
  post_bootstrap: $DIR/post_bootstrap.sh

postgresql:
  listen: 127.0.0.1:${PG_PORT[$i]}
  connect_address: 127.0.0.1:${PG_PORT[$i]}
  data_dir: $nd/data
  bin_dir: $PG_BIN
  pgpass: $nd/pgpass
  authentication:
    superuser:
      username: postgres
    replication:
      username: replicator
  parameters:
    unix_socket_directories: $nd
    logging_collector: "on"
    log_directory: $nd/pglog
    log_filename: postgresql.log
    log_line_prefix: "%m [%p] %q%u@%d "
  # The test DSNs carry no password: trust on loopback only.
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
  basebackup:
    - checkpoint: fast
  remove_data_directory_on_rewind_failure: true
  remove_data_directory_on_diverged_timelines: true

# Never arm a watchdog: on a developer's machine it would reboot the machine.
watchdog:
  mode: "off"

tags:
  nofailover: false
  noloadbalance: false
  clonefrom: false
  nosync: false
EOF
}

write_haproxy() {
  {
    cat <<EOF
global
  maxconn 1000
  log stderr format raw local0 info
  stats socket $DIR/haproxy.sock mode 600 level admin

defaults
  mode tcp
  log global
  option tcplog
  retries 2
  timeout connect 2s
  timeout check 2s
  # Long enough never to cut an idle pooled connection during a test.
  timeout client 30m
  timeout server 30m

# The primary: only the node whose Patroni answers 200 on GET /primary (the leader
# with a running PostgreSQL) is up. A node marked down has its sessions cut at once
# (on-marked-down shutdown-sessions), so no client stays on a demoted primary.
listen primary
  bind 127.0.0.1:$HAPROXY_PORT
  option httpchk
  http-check send meth GET uri /primary
  http-check expect status 200
  default-server inter 1s fall 2 rise 1 on-marked-down shutdown-sessions
EOF
    local i
    for i in "${NODES[@]}"; do
      echo "  server node$i 127.0.0.1:${PG_PORT[$i]} check port ${REST_PORT[$i]}"
    done
  } >"$DIR/haproxy.cfg"
}

# start_node I: start node I's Patroni as the postgres user, with a clean environment.
start_node() {
  local i=$1 nd
  nd=$(node_dir "$i")
  spawn "patroni$i" "$LOGS/patroni$i.log" \
    setpriv --reuid=postgres --regid=postgres --init-groups -- \
    env -i PATH="$PG_BIN:/usr/bin:/bin" HOME="$nd" LANG=C.UTF-8 LC_ALL=C.UTF-8 \
    /usr/bin/patroni "$nd/patroni.yml"
}

# cluster_json: Patroni's GET /cluster from the first node that answers.
cluster_json() {
  local r
  for r in "${REST_PORT[@]}"; do
    curl -fsS --max-time 2 "http://127.0.0.1:$r/cluster" 2>/dev/null && return 0
  done
  return 1
}

psql_at() { # PORT DB SQL
  timeout 10 "$PG_BIN/psql" -X -h 127.0.0.1 -p "$1" -U postgres -d "$2" -Atc "$3"
}

# healthy: a running leader, one sync_standby, both replicas running with a known lag
# and streaming from the leader, and HAProxy reaching a writable primary.
healthy() {
  local js leader_port
  js=$(cluster_json) || return 1
  jq -e '
    (.members | length) == 3 and
    ([.members[] | select(.role == "leader" and .state == "running")] | length) == 1 and
    ([.members[] | select(.role == "sync_standby")] | length) == 1 and
    ([.members[] | select(.role != "leader")
      | select((.state == "running" or .state == "streaming") and (.lag | type) == "number")]
     | length) == 2' <<<"$js" >/dev/null || return 1
  leader_port=$(jq -r '.members[] | select(.role == "leader") | .port' <<<"$js")
  [[ $(psql_at "$leader_port" postgres "select count(*) filter (where state = 'streaming') || '/' ||
        count(*) filter (where sync_state = 'sync') from pg_stat_replication" 2>/dev/null) == 2/1 ]] ||
    return 1
  [[ $(psql_at "$HAPROXY_PORT" test 'select pg_is_in_recovery()' 2>/dev/null) == f ]]
}

# show_logs: the tail of every component's log, for a failed start.
show_logs() {
  local f
  for f in "$LOGS"/*.log "$DIR"/node*/pglog/postgresql.log; do
    [[ -f $f ]] || continue
    echo "===== $f (last 40 lines)" >&2
    tail -n 40 "$f" >&2 || true
    echo >&2
  done
  echo "===== Patroni's view" >&2
  cluster_json >&2 || echo "(no Patroni REST API answers)" >&2
}

# up_exit: the EXIT trap of a failing up.
up_exit() {
  local rc=$?
  if ((rc)); then
    log "up failed"
    show_logs
    cmd_down_dir || true
  fi
  exit "$rc"
}

cmd_up() {
  setup_paths "$1"
  check_prereqs
  if [[ -e $DIR ]]; then
    [[ -d $DIR && -z $(ls -A "$DIR") ]] || { log "$DIR exists and is not empty"; exit 2; }
  fi
  local p
  for p in "$ETCD_PORT" "$ETCD_PEER_PORT" "$HAPROXY_PORT" "${PG_PORT[@]}" "${REST_PORT[@]}"; do
    port_free "$p" || { log "port $p on 127.0.0.1 is in use (set AX_PGCLUSTER_PORT_BASE)"; exit 1; }
  done

  mkdir -p "$DIR"
  touch "$DIR/$MARKER"
  # From here on a failure prints the logs and tears down what was started.
  trap up_exit EXIT
  # The postgres user must reach its node directories through DIR.
  chmod 0755 "$DIR"
  setpriv --reuid=postgres --regid=postgres --init-groups -- test -x "$DIR" ||
    { log "the postgres user cannot enter $DIR: make its parents world-searchable"; exit 1; }
  mkdir -p "$PIDS" "$LOGS" "$DIR/etcd"
  chmod 0700 "$DIR/etcd"
  write_env

  cat >"$DIR/post_bootstrap.sh" <<EOF
#!/bin/sh
# Run by Patroni once the cluster is initialised, with a connection URL as \$1.
exec $PG_BIN/psql -X -v ON_ERROR_STOP=1 -d "\$1" -c 'CREATE DATABASE test'
EOF
  chmod 0755 "$DIR/post_bootstrap.sh"
  local i
  for i in "${NODES[@]}"; do
    install -d -o postgres -g postgres -m 0700 "$(node_dir "$i")"
    write_patroni "$i"
    chown postgres:postgres "$(node_dir "$i")/patroni.yml"
  done
  write_haproxy

  echo "ports: etcd $ETCD_PORT (peer $ETCD_PEER_PORT), HAProxy $HAPROXY_PORT," \
    "PostgreSQL ${PG_PORT[*]}, Patroni REST ${REST_PORT[*]}"

  spawn etcd "$LOGS/etcd.log" env -i /usr/bin/etcd \
    --name etcd0 --data-dir "$DIR/etcd/data" --logger zap --log-outputs stderr \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "etcd0=http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster-state new --initial-cluster-token "ax-pgcluster-$ETCD_PORT" \
    --enable-v2=true
  local deadline=$((SECONDS + 20))
  until curl -fsS --max-time 1 "http://127.0.0.1:$ETCD_PORT/health" 2>/dev/null | grep -q '"health":"true"'; do
    ((SECONDS < deadline)) || { log "etcd did not become healthy"; exit 1; }
    sleep 0.2
  done

  for i in "${NODES[@]}"; do start_node "$i"; done
  spawn haproxy "$LOGS/haproxy.log" env -i /usr/sbin/haproxy -db -f "$DIR/haproxy.cfg"

  deadline=$((SECONDS + UP_TIMEOUT))
  until healthy; do
    ((SECONDS < deadline)) || { log "no healthy cluster after ${UP_TIMEOUT}s"; exit 1; }
    # Fail fast when a component died rather than waiting out the deadline.
    for p in etcd haproxy patroni0 patroni1 patroni2; do
      recorded "$p" >/dev/null || { log "$p exited"; exit 1; }
    done
    sleep 0.5
  done
  trap - EXIT
  echo "cluster up in ${SECONDS}s: psql -h 127.0.0.1 -p $HAPROXY_PORT -U postgres -d test"
  cat "$DIR/cluster.env"
}

# ---------------------------------------------------------------------------------
# down
# ---------------------------------------------------------------------------------

# stop_postmaster PID: immediate shutdown (SIGQUIT: it stops its backends and frees its
# shared memory), then SIGKILL for it and its backends if it lingers.
stop_postmaster() {
  local pm=$1 kids
  kids=$(children "$pm")
  kill -QUIT "$pm" 2>/dev/null || true
  if ! wait_gone 10 "$pm"; then
    # shellcheck disable=SC2086
    kill -KILL "$pm" $kids 2>/dev/null || true
  fi
}

# free_shm I: remove the System V shared memory segment of node I's postmaster if no
# process is attached any more (it leaks when a postmaster is killed with SIGKILL).
free_shm() {
  local pidfile id nattch
  pidfile=$(node_dir "$1")/data/postmaster.pid
  [[ -f $pidfile ]] || return 0
  read -r _ id < <(sed -n 7p "$pidfile") || return 0
  [[ $id =~ ^[0-9]+$ ]] || return 0
  # /proc/sysvipc/shm columns: key shmid perms size cpid lpid nattch ...
  nattch=$(awk -v id="$id" '$2 == id { print $7 }' /proc/sysvipc/shm)
  if [[ $nattch == 0 ]]; then
    ipcrm -m "$id" 2>/dev/null || true
  fi
}

# cmd_down_dir: stop everything started from DIR, then remove DIR.
cmd_down_dir() {
  local i p pm procs=() left
  if [[ -e $DIR && ! -f $DIR/$MARKER ]]; then
    if [[ -d $DIR && -z $(ls -A "$DIR") ]]; then
      rmdir "$DIR"
      return 0
    fi
    log "$DIR is not a cluster directory (no $MARKER): not touching it"
    return 1
  fi
  # Patroni first, so that none restarts a PostgreSQL or takes the leader key meanwhile.
  for i in "${NODES[@]}"; do
    p=$(recorded "patroni$i") && kill_group "$p" KILL
  done
  for i in "${NODES[@]}"; do
    pm=$(postmaster "$i") && stop_postmaster "$pm"
  done
  for p in haproxy etcd; do
    p=$(recorded "$p") && kill_group "$p" KILL
  done
  # Whatever is left that names DIR (a half-started node, a postmaster whose pid file
  # is gone, a pg_basebackup): killed too, with a postmaster's backends. Only
  # processes of other sessions: this script's own command line names DIR as well.
  local me
  proc_stat $$
  me=${STAT[3]}
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    ours "$p" && [[ ${STAT[3]} != "$me" ]] && procs+=("$p")
  done
  for p in "${procs[@]}"; do
    # shellcheck disable=SC2046
    kill -KILL "$p" $(children "$p") 2>/dev/null || true
  done
  wait_gone 10 "${procs[@]}" || log "still running after SIGKILL: ${procs[*]}"
  for i in "${NODES[@]}"; do free_shm "$i"; done
  if [[ -e $DIR ]]; then
    rm -rf -- "$DIR"
  fi
  # Check: nothing naming DIR survives.
  left=()
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    ours "$p" && [[ ${STAT[3]} != "$me" ]] && left+=("$p")
  done
  if ((${#left[@]})); then
    log "processes of $DIR survived: ${left[*]}"
    return 1
  fi
}

# ---------------------------------------------------------------------------------
# status, start-node
# ---------------------------------------------------------------------------------

cmd_status() {
  [[ -f $DIR/cluster.env ]] || { log "no cluster in $DIR"; exit 1; }
  /usr/bin/patronictl -c "$(node_dir 0)/patroni.yml" list
}

cmd_start_node() {
  local i=$1
  [[ $i =~ ^[0-2]$ ]] || usage
  [[ -f $DIR/$MARKER && -f $DIR/cluster.env ]] || { log "no cluster in $DIR"; exit 1; }
  if p=$(recorded "patroni$i"); then
    log "node$i's Patroni still runs (pid $p)"
    exit 1
  fi
  start_node "$i"
  echo "node$i: Patroni started, pid $(cat "$PIDS/patroni$i.pid")"
}

case ${1:-} in
up)
  [[ $# == 2 ]] || usage
  cmd_up "$2"
  ;;
down)
  [[ $# == 2 ]] || usage
  setup_paths "$2"
  cmd_down_dir
  ;;
status)
  [[ $# == 2 ]] || usage
  setup_paths "$2"
  cmd_status
  ;;
start-node)
  [[ $# == 3 ]] || usage
  setup_paths "$2"
  cmd_start_node "$3"
  ;;
*) usage ;;
esac
