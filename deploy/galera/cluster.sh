#!/usr/bin/env bash
# cluster.sh: a throwaway three-node MariaDB Galera cluster on loopback, for ax's tests
# of the MySQL store on Galera (internal/galeracluster).
#
# Three mariadbd of Debian's MariaDB with the galera-4 provider, each with its own data
# directory, configuration file and logs in DIR; node0 bootstraps the cluster, node1
# and node2 join it by state transfer (rsync). Every process listens on 127.0.0.1 only
# and is started with --defaults-file=DIR/nodeI/my.cnf, so nothing of the machine's own
# MariaDB configuration (/etc/mysql) is read, and the machine's MariaDB is never touched.
# HAProxy in front sends every connection to one writer: node0 while it is Synced in a
# primary component, else node1, else node2 (an external check asks each node's wsrep
# status every second; see write_haproxy).
#
#   cluster.sh up DIR          install what is missing, start the cluster in DIR (empty or
#                              absent), wait until the three nodes are Synced
#   cluster.sh down DIR        stop everything started from DIR, then remove DIR
#   cluster.sh status DIR      each node's wsrep_cluster_size, wsrep_local_state_comment,
#                              wsrep_cluster_status
#   cluster.sh start DIR I     start node I again (after a kill or a stop) and wait until
#                              it is Synced; it rejoins by IST or SST
#   cluster.sh stop DIR I      stop node I cleanly (SIGTERM; it leaves the cluster)
#   cluster.sh bootstrap DIR I make node I's component primary (pc.bootstrap=YES): for a
#                              cluster left with no primary component; pick the node with
#                              the highest wsrep_last_committed
#
# Ports, from the base B in AX_GALERA_PORT_BASE (default 15500), sixteen in all:
#   B+0..B+2   MySQL of node0..node2        B+3..B+5   Galera group communication
#   B+6..B+8   IST receive                  B+9..B+11  SST receive (rsync)
#   B+12       HAProxy (the writer)         B+13       HAProxy's stats socket (admin)
#   B+14..B+15 kept free for later use
# They are written to DIR/cluster.env as shell assignments, and printed.
#
# Root connects with no password over TCP from 127.0.0.1: root@tcp(127.0.0.1:PORT)/test.
#
# Exit codes: 0 ok, 1 the cluster failed, 2 usage, 3 the prerequisites are missing (not
# Linux, no MariaDB server or Galera provider and it cannot be installed), so that the Go
# harness skips.
set -euo pipefail

MARIADBD=/usr/sbin/mariadbd
PROVIDER=/usr/lib/galera/libgalera_smm.so
HAPROXY=/usr/sbin/haproxy
PACKAGES=(mariadb-server galera-4 rsync haproxy)
UP_TIMEOUT=${AX_GALERA_UP_TIMEOUT:-120} # seconds `up` may take in all
NODES=(0 1 2)
MARKER=.ax-galera # DIR holds this file once `up` has claimed it; `down` refuses others

usage() {
  echo "usage: $0 up|down|status DIR | start|stop|bootstrap DIR 0|1|2" >&2
  exit 2
}

log() { echo "cluster.sh: $*" >&2; }

prereq() {
  log "$*"
  exit 3
}

# ---------------------------------------------------------------------------------
# Paths and ports
# ---------------------------------------------------------------------------------

# setup_paths DIR: the absolute DIR and the ports; reads DIR/cluster.env when present
# (so that down, status, start and stop use the ports up chose).
setup_paths() {
  [[ -n $1 ]] || usage
  DIR=$(realpath -m -- "$1")
  [[ $DIR != / ]] || { log "refusing DIR=/"; exit 2; }
  if [[ -f $DIR/cluster.env ]]; then
    # shellcheck disable=SC1091
    source "$DIR/cluster.env"
    read -r -a MYSQL_PORT <<<"$MYSQL_PORTS"
    read -r -a GALERA_PORT <<<"$GALERA_PORTS"
    read -r -a IST_PORT <<<"$IST_PORTS"
    read -r -a SST_PORT <<<"$SST_PORTS"
  else
    local base=${AX_GALERA_PORT_BASE:-15500}
    [[ $base =~ ^[0-9]+$ ]] && ((base >= 1024 && base + 15 <= 65535)) ||
      { log "bad AX_GALERA_PORT_BASE=$base"; exit 2; }
    PORT_BASE=$base
    MYSQL_PORT=($base $((base + 1)) $((base + 2)))
    GALERA_PORT=($((base + 3)) $((base + 4)) $((base + 5)))
    IST_PORT=($((base + 6)) $((base + 7)) $((base + 8)))
    SST_PORT=($((base + 9)) $((base + 10)) $((base + 11)))
    PROXY_PORT=$((base + 12))
    STATS_PORT=$((base + 13))
  fi
  RUN_USER=mysql
  ((EUID == 0)) || RUN_USER=$(id -un)
}

node_dir() { echo "$DIR/node$1"; }

# ---------------------------------------------------------------------------------
# Processes. A pid is only ever signalled after checking that its command line names
# DIR, so that a recycled pid, or the machine's own mariadbd, is never touched.
# ---------------------------------------------------------------------------------

cmdline() {
  local c
  c=$(tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline") || return 1
  [[ -n $c ]] || return 1 # a zombie or a kernel thread
  printf '%s' "$c"
}

# ours PID: the process runs and was started from DIR.
ours() {
  local c
  c=$(cmdline "$1") || return 1
  [[ $c == *"$DIR/"* ]]
}

# exec_wait PID: wait (up to 5 s) until the background child PID has exec'd its
# command, or ended. Until then its command line is this shell's, which ours does not
# count as started from DIR, so a liveness check right after a start would call a
# process that is only starting gone.
exec_wait() {
  local deadline=$((SECONDS + 5))
  while ! ours "$1" && [[ -e /proc/$1 ]] && ((SECONDS < deadline)); do sleep 0.01; done
}

# stat_field PID N: field N of /proc/PID/stat counted after the command name:
# 1 state, 2 ppid, 3 pgrp, 4 session.
stat_field() {
  local s
  s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  s=${s##*) }
  local -a f
  read -r -a f <<<"$s"
  echo "${f[$2 - 1]}"
}

alive() {
  local st
  st=$(stat_field "$1" 1) || return 1
  [[ $st != Z && $st != X ]]
}

wait_gone() { # SECONDS PID...
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

# node_pid I: node I's mariadbd pid, if it runs and is ours: the pid start_node
# recorded (mariadbd's own pid file may be half written while it starts).
node_pid() {
  local pid
  pid=$(cat "$(node_dir "$1")/started.pid" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] && ours "$pid" || return 1
  echo "$pid"
}

# our_procs: every process naming DIR, except this script's session (its own command
# line names DIR as well).
our_procs() {
  local p me
  me=$(stat_field $$ 4)
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [[ $p != "$$" ]] && ours "$p" && [[ $(stat_field "$p" 4) != "$me" ]] && echo "$p"
  done
  return 0
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
  ((EUID == 0)) || prereq "missing ${missing[*]}, and not root to install them"
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
  if ! [[ -x $MARIADBD && -f $PROVIDER && -x $HAPROXY ]] || ! command -v rsync >/dev/null; then
    command -v dpkg-query >/dev/null || prereq "no $MARIADBD, $PROVIDER, $HAPROXY or rsync, and no dpkg"
    install_missing
  fi
  local b
  for b in $MARIADBD /usr/bin/mariadb /usr/bin/mariadb-install-db /usr/bin/wsrep_sst_rsync rsync $HAPROXY; do
    command -v "$b" >/dev/null || prereq "$b missing"
  done
  [[ -f $PROVIDER ]] || prereq "$PROVIDER missing"
  if ((EUID == 0)); then
    id mysql >/dev/null 2>&1 || prereq "no mysql user to run mariadbd as"
  fi
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

write_env() {
  cat >"$DIR/cluster.env" <<EOF
# Written by cluster.sh up: the ports of this cluster (all on 127.0.0.1).
DIR="$DIR"
PORT_BASE=$PORT_BASE
MYSQL_PORTS="${MYSQL_PORT[*]}"
GALERA_PORTS="${GALERA_PORT[*]}"
IST_PORTS="${IST_PORT[*]}"
SST_PORTS="${SST_PORT[*]}"
PROXY_PORT=$PROXY_PORT
STATS_PORT=$STATS_PORT
EOF
}

# write_cnf I: node I's configuration, the only one its mariadbd reads.
write_cnf() {
  local i=$1 nd peers=() j
  nd=$(node_dir "$i")
  for j in "${NODES[@]}"; do peers+=("127.0.0.1:${GALERA_PORT[$j]}"); done
  cat >"$nd/my.cnf" <<EOF
# node$i of the ax Galera test cluster in $DIR (written by cluster.sh).
[mariadbd]
user                       = $RUN_USER
datadir                    = $nd/data
tmpdir                     = $nd/tmp
socket                     = $nd/mariadbd.sock
pid-file                   = $nd/mariadbd.pid
log-error                  = $nd/error.log
port                       = ${MYSQL_PORT[$i]}
bind-address               = 127.0.0.1
skip-name-resolve
max_connections            = 300
performance_schema         = OFF
character-set-server       = utf8mb4
collation-server           = utf8mb4_general_ci

# What Galera requires: row-based write-sets, InnoDB only, interleaved auto-increment
# locks (no table-level AUTO-INC lock that an applier could wait on).
binlog_format              = ROW
default_storage_engine     = InnoDB
innodb_autoinc_lock_mode   = 2
# Small: three of these run on a test machine. Durability comes from replication; a
# node that crashes rejoins by state transfer.
innodb_buffer_pool_size    = 64M
innodb_log_file_size       = 32M
innodb_flush_log_at_trx_commit = 2
innodb_use_native_aio      = OFF

wsrep_on                   = ON
wsrep_provider             = $PROVIDER
wsrep_cluster_name         = ax_galera_$PORT_BASE
wsrep_cluster_address      = gcomm://$(IFS=,; echo "${peers[*]}")
wsrep_node_name            = node$i
wsrep_node_address         = 127.0.0.1:${GALERA_PORT[$i]}
wsrep_node_incoming_address = 127.0.0.1:${MYSQL_PORT[$i]}
wsrep_sst_method           = rsync
wsrep_sst_receive_address  = 127.0.0.1:${SST_PORT[$i]}
wsrep_slave_threads        = 1
wsrep_provider_options     = "base_host=127.0.0.1;base_port=${GALERA_PORT[$i]};gmcast.listen_addr=tcp://127.0.0.1:${GALERA_PORT[$i]};ist.recv_addr=127.0.0.1:${IST_PORT[$i]};gcache.size=32M;gcache.page_size=32M;evs.suspect_timeout=PT3S;evs.inactive_timeout=PT6S;evs.install_timeout=PT6S;pc.wait_prim_timeout=PT10S"
EOF
  [[ $RUN_USER == "$(id -un)" ]] || chown "$RUN_USER:" "$nd/my.cnf"
}

# sql I STATEMENT: run STATEMENT on node I as root over its socket, tab-separated output.
sql() {
  timeout 10 /usr/bin/mariadb --no-defaults --protocol=socket -S "$(node_dir "$1")/mariadbd.sock" \
    -u root -N -B -e "$2"
}

# wsrep I VARIABLE: a wsrep status variable of node I.
wsrep() {
  sql "$1" "SHOW GLOBAL STATUS LIKE '$2'" 2>/dev/null | cut -f2
}

synced() { # I SIZE: node I is Synced in a primary component of SIZE nodes
  [[ $(wsrep "$1" wsrep_local_state_comment) == Synced &&
    $(wsrep "$1" wsrep_cluster_size) == "$2" &&
    $(wsrep "$1" wsrep_cluster_status) == Primary ]]
}

# start_node I [ARG...]: start node I's mariadbd in a session of its own. The
# background child execs setsid, which (not being a group leader) execs mariadbd in the
# same process, so $! is mariadbd's pid.
start_node() {
  local i=$1 nd
  shift
  nd=$(node_dir "$i")
  rm -f "$nd/mariadbd.pid"
  setsid "$MARIADBD" --defaults-file="$nd/my.cnf" "$@" >>"$nd/stdout.log" 2>&1 </dev/null &
  echo $! >"$nd/started.pid"
  exec_wait $!
}

# wait_synced DEADLINE SIZE I...: wait until each node I is Synced in a cluster of SIZE.
wait_synced() {
  local deadline=$1 size=$2 i
  shift 2
  for i in "$@"; do
    until synced "$i" "$size"; do
      ((SECONDS < deadline)) || { log "node$i is not Synced in a cluster of $size"; return 1; }
      # A node that exited will not become Synced: fail at once.
      node_pid "$i" >/dev/null || { log "node$i's mariadbd exited"; return 1; }
      sleep 0.2
    done
  done
}

show_logs() {
  local i f
  for i in "${NODES[@]}"; do
    for f in "$(node_dir "$i")/error.log" "$(node_dir "$i")/stdout.log"; do
      [[ -s $f ]] || continue
      echo "===== $f (last 40 lines)" >&2
      tail -n 40 "$f" >&2 || true
    done
  done
  if [[ -s $DIR/haproxy.log ]]; then
    echo "===== $DIR/haproxy.log (last 40 lines)" >&2
    tail -n 40 "$DIR/haproxy.log" >&2 || true
  fi
}

# ---------------------------------------------------------------------------------
# HAProxy: one writer at a time
# ---------------------------------------------------------------------------------

# The user HAProxy's check connects as: no password, no privilege (SHOW STATUS needs
# none), from 127.0.0.1 only.
CHECK_USER=axcheck

# write_check: the external check HAProxy runs for each node every second, with the
# node's address and port as its third and fourth arguments. It passes only a node
# that is Synced in a primary component: a node that lost quorum (non-Primary) still
# accepts connections and logins, and would answer every statement with ERROR 1047;
# a joiner or a donor (rsync SST blocks writes on the donor) is not Synced either.
write_check() {
  cat >"$DIR/check.sh" <<EOF
#!/bin/sh
# HAProxy's external check of one Galera node (written by cluster.sh): exit 0 only when
# the node at \$3:\$4 is Synced in a primary component.
out=\$(timeout 4 /usr/bin/mariadb --no-defaults --protocol=tcp -h "\$3" -P "\$4" -u $CHECK_USER \\
  --connect-timeout=3 -N -B -e "SHOW GLOBAL STATUS WHERE Variable_name IN
    ('wsrep_local_state_comment', 'wsrep_cluster_status')" 2>/dev/null) || exit 1
tab=\$(printf '\\t')
case "\$out" in *"wsrep_local_state_comment\${tab}Synced"*) ;; *) exit 1 ;; esac
# "non-Primary" ends with "Primary": match the whole line.
printf '%s\\n' "\$out" | grep -qx "wsrep_cluster_status\${tab}Primary"
EOF
  chmod 0755 "$DIR/check.sh"
}

# write_haproxy: one listener, B+12, in front of the three nodes. node0 is the only
# active server, node1 and node2 are backups: HAProxy sends every connection to node0
# while its check passes, else to the first backup whose check passes (without
# allbackups, one at a time). So ax always writes through one node, as a single-writer
# Galera deployment does. A node marked down has its sessions cut at once
# (on-marked-down shutdown-sessions): no client stays on a node that lost quorum, or
# died without closing its sockets. node0 marked up again cuts the backups' sessions
# (on-marked-up shutdown-backup-sessions): the clients return to one writer.
write_haproxy() {
  {
    cat <<EOF
global
  maxconn 1000
  log stderr format raw local0 info
  stats socket ipv4@127.0.0.1:$STATS_PORT level admin
  # The check is an external program: HAProxy forks it.
  insecure-fork-wanted
  external-check

defaults
  mode tcp
  log global
  option tcplog
  retries 2
  timeout connect 2s
  # Generous: on a loaded machine forking the check's client can take seconds, and a
  # check that times out twice would cut node0's sessions for nothing. A failed node
  # fails its check at once (connection refused, or not Synced and Primary).
  timeout check 5s
  # Long enough never to cut an idle pooled connection during a test.
  timeout client 30m
  timeout server 30m

listen writer
  bind 127.0.0.1:$PROXY_PORT
  option external-check
  external-check path "/usr/bin:/bin"
  external-check command $DIR/check.sh
  default-server inter 1s fall 2 rise 1 on-marked-down shutdown-sessions on-marked-up shutdown-backup-sessions
EOF
    local i backup=""
    for i in "${NODES[@]}"; do
      echo "  server node$i 127.0.0.1:${MYSQL_PORT[$i]} check$backup"
      backup=" backup"
    done
  } >"$DIR/haproxy.cfg"
}

# haproxy_pid: HAProxy's pid, if it runs and is ours.
haproxy_pid() {
  local pid
  pid=$(cat "$DIR/haproxy.pid" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] && ours "$pid" || return 1
  echo "$pid"
}

start_haproxy() {
  write_check
  write_haproxy
  "$HAPROXY" -c -q -f "$DIR/haproxy.cfg" || { log "haproxy.cfg does not parse"; return 1; }
  setsid "$HAPROXY" -db -f "$DIR/haproxy.cfg" >>"$DIR/haproxy.log" 2>&1 </dev/null &
  echo $! >"$DIR/haproxy.pid"
  exec_wait $!
}

# proxy_port_of: the MySQL port of the node behind HAProxy now (SELECT @@port through it).
proxy_port_of() {
  timeout 5 /usr/bin/mariadb --no-defaults --protocol=tcp -h 127.0.0.1 -P "$PROXY_PORT" -u root \
    --connect-timeout=2 -N -B -e 'SELECT @@port' 2>/dev/null
}

# proxy_view: HAProxy's state of each server (show stat over its stats socket).
proxy_view() {
  local line
  exec 3<>"/dev/tcp/127.0.0.1/$STATS_PORT" || return 1
  echo "show stat" >&3
  while IFS=, read -r -a line; do
    # pxname, svname, …, scur (5th), …, status (18th)
    [[ ${line[0]:-} == writer && ${line[1]:-} == node* ]] &&
      echo "${line[1]}=${line[17]} sessions=${line[4]}"
  done <&3
  exec 3>&-
}

cmd_up() {
  setup_paths "$1"
  check_prereqs
  if [[ -e $DIR ]]; then
    [[ -d $DIR && -z $(ls -A "$DIR") ]] || { log "$DIR exists and is not empty"; exit 2; }
  fi
  local p i
  for p in "${MYSQL_PORT[@]}" "${GALERA_PORT[@]}" "${IST_PORT[@]}" "${SST_PORT[@]}" "$PROXY_PORT" "$STATS_PORT"; do
    port_free "$p" || { log "port $p on 127.0.0.1 is in use (set AX_GALERA_PORT_BASE)"; exit 1; }
  done
  mkdir -p "$DIR"
  touch "$DIR/$MARKER"
  trap 'rc=$?; if ((rc)); then log "up failed"; show_logs; cmd_down_dir || true; fi' EXIT
  chmod 0755 "$DIR"
  if [[ $RUN_USER != "$(id -un)" ]]; then
    runuser -u "$RUN_USER" -- test -x "$DIR" ||
      { log "the $RUN_USER user cannot enter $DIR: make its parents world-searchable"; exit 1; }
  fi
  write_env
  echo "ports: MySQL ${MYSQL_PORT[*]}, Galera ${GALERA_PORT[*]}, IST ${IST_PORT[*]}, SST ${SST_PORT[*]}"

  for i in "${NODES[@]}"; do
    install -d -m 0750 "$(node_dir "$i")" "$(node_dir "$i")/tmp"
    [[ $RUN_USER == "$(id -un)" ]] || chown "$RUN_USER:" "$(node_dir "$i")" "$(node_dir "$i")/tmp"
    write_cnf "$i"
  done
  # Only node0 is initialised: the others receive its data by state transfer.
  /usr/bin/mariadb-install-db --no-defaults --user="$RUN_USER" --datadir="$(node_dir 0)/data" \
    --auth-root-authentication-method=normal --skip-test-db --skip-name-resolve \
    >"$(node_dir 0)/install.log" 2>&1 ||
    { log "mariadb-install-db failed"; cat "$(node_dir 0)/install.log" >&2; exit 1; }
  for i in 1 2; do
    install -d -m 0750 "$(node_dir "$i")/data"
    [[ $RUN_USER == "$(id -un)" ]] || chown "$RUN_USER:" "$(node_dir "$i")/data"
  done

  local deadline=$((SECONDS + UP_TIMEOUT))
  start_node 0 --wsrep-new-cluster
  wait_synced "$deadline" 1 0
  # Root over TCP from 127.0.0.1 with no password, HAProxy's check user, and the
  # database the DSNs name. Users and DDL replicate to the joiners (and the joiners copy
  # them by SST anyway).
  sql 0 "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
    GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
    CREATE USER IF NOT EXISTS '$CHECK_USER'@'127.0.0.1' IDENTIFIED BY '';
    CREATE DATABASE IF NOT EXISTS test" || { log "could not create the users or test"; exit 1; }
  # The joiners one after the other: a donor serves one state transfer at a time.
  start_node 1
  wait_synced "$deadline" 2 0 1
  start_node 2
  wait_synced "$deadline" 3 0 1 2
  start_haproxy
  until [[ $(proxy_port_of) == "${MYSQL_PORT[0]}" ]]; do
    ((SECONDS < deadline)) || { log "HAProxy does not lead to node0"; exit 1; }
    haproxy_pid >/dev/null || { log "HAProxy exited"; exit 1; }
    sleep 0.2
  done
  trap - EXIT
  echo "cluster up in ${SECONDS}s: mariadb -h 127.0.0.1 -P ${MYSQL_PORT[0]} -u root test;" \
    "through HAProxy: -P $PROXY_PORT"
  cat "$DIR/cluster.env"
}

# ---------------------------------------------------------------------------------
# down
# ---------------------------------------------------------------------------------

cmd_down_dir() {
  local p procs left
  if [[ -e $DIR && ! -f $DIR/$MARKER ]]; then
    if [[ -d $DIR && -z $(ls -A "$DIR") ]]; then
      rmdir "$DIR"
      return 0
    fi
    log "$DIR is not a cluster directory (no $MARKER): not touching it"
    return 1
  fi
  # The data is thrown away: SIGKILL, no shutdown. Every mariadbd, and whatever else
  # names DIR (an rsync of a state transfer, a wsrep_sst_rsync script).
  mapfile -t procs < <(our_procs)
  if ((${#procs[@]})); then
    kill -KILL "${procs[@]}" 2>/dev/null || true
    wait_gone 10 "${procs[@]}" || log "still running after SIGKILL: ${procs[*]}"
  fi
  [[ -e $DIR ]] && rm -rf -- "$DIR"
  mapfile -t left < <(our_procs)
  if ((${#left[@]})); then
    log "processes of $DIR survived: ${left[*]}"
    return 1
  fi
}

# ---------------------------------------------------------------------------------
# status, start, stop
# ---------------------------------------------------------------------------------

cmd_status() {
  [[ -f $DIR/cluster.env ]] || { log "no cluster in $DIR"; exit 1; }
  local i out
  for i in "${NODES[@]}"; do
    if ! node_pid "$i" >/dev/null; then
      echo "node$i  port ${MYSQL_PORT[$i]}  not running"
      continue
    fi
    out=$(sql "$i" "SHOW GLOBAL STATUS WHERE Variable_name IN
      ('wsrep_cluster_size', 'wsrep_local_state_comment', 'wsrep_cluster_status')" 2>&1 | tr '\t\n' '= ') ||
      out="does not answer"
    echo "node$i  port ${MYSQL_PORT[$i]}  $out"
  done
  if haproxy_pid >/dev/null; then
    echo "HAProxy port $PROXY_PORT leads to port $(proxy_port_of || echo none):" $(proxy_view || echo "no stats")
  else
    echo "HAProxy port $PROXY_PORT  not running"
  fi
}

running_count() {
  local i n=0
  for i in "${NODES[@]}"; do node_pid "$i" >/dev/null && n=$((n + 1)); done
  echo "$n"
}

cmd_start() {
  local i=$1 pid
  [[ $i =~ ^[0-2]$ ]] || usage
  [[ -f $DIR/$MARKER && -f $DIR/cluster.env ]] || { log "no cluster in $DIR"; exit 1; }
  if pid=$(node_pid "$i"); then
    log "node$i still runs (pid $pid)"
    exit 1
  fi
  local size
  size=$(($(running_count) + 1))
  start_node "$i"
  trap 'rc=$?; if ((rc)); then show_logs; fi' EXIT
  wait_synced $((SECONDS + UP_TIMEOUT)) "$size" "$i"
  trap - EXIT
  echo "node$i Synced in a cluster of $size"
}

cmd_stop() {
  local i=$1 pid
  [[ $i =~ ^[0-2]$ ]] || usage
  pid=$(node_pid "$i") || { log "node$i does not run"; exit 1; }
  kill -TERM "$pid"
  wait_gone 60 "$pid" || { log "node$i did not stop within 60s"; exit 1; }
  echo "node$i stopped"
}

# cmd_bootstrap I: make node I's component primary, for a cluster where no component is
# (every node non-Primary, after a partition or the loss of a majority). Only on the
# node with the highest wsrep_last_committed: the others rejoin it and may lose what
# they committed after the split.
cmd_bootstrap() {
  local i=$1
  [[ $i =~ ^[0-2]$ ]] || usage
  node_pid "$i" >/dev/null || { log "node$i does not run"; exit 1; }
  sql "$i" "SET GLOBAL wsrep_provider_options = 'pc.bootstrap=YES'" ||
    { log "node$i refused pc.bootstrap"; exit 1; }
  local deadline=$((SECONDS + 30))
  until [[ $(wsrep "$i" wsrep_cluster_status) == Primary ]]; do
    ((SECONDS < deadline)) || { log "node$i is not Primary 30s after pc.bootstrap"; exit 1; }
    sleep 0.2
  done
  echo "node$i Primary in a cluster of $(wsrep "$i" wsrep_cluster_size)"
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
start | stop | bootstrap)
  [[ $# == 3 ]] || usage
  setup_paths "$2"
  "cmd_$1" "$3"
  ;;
*) usage ;;
esac
