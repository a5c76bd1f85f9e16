#!/usr/bin/env bash
# BGSAVE under load, ringkv beside redis-server 7.0 (fork + copy-on-write).
#
#   bench/bgsave_load.sh [RUNS]      (default 3 alternating runs)
#
# Per run and server: KEYS keys of 100 bytes (ringkv-bench sequential SETs),
# then two phases.
#  1. Memory: ringkv-bench overwrites uniformly random keys at full speed
#     (SET, 50 clients, -P 16) while a BGSAVE runs. RSS of the server is
#     sampled every 20 ms from before the BGSAVE until it ends; for
#     redis-server the forked child's private dirty pages (the copy-on-write
#     the kernel made, Private_Dirty of /proc/CHILD/smaps_rollup) are added
#     to the parent's RSS at each sample, so both columns are memory the
#     machine had to find. Reported: peak / RSS before.
#  2. Latency: GET at RATE requests/s (open loop, 50 clients) for DURATION,
#     once without a save and once with a BGSAVE started 1 s in (with
#     rdb-key-save-delay 0 the save lasts as long as it lasts; the window
#     covers it). Reported: p99.9 of both.
# The server runs on core SERVER_CPU, ringkv-bench on CLIENT_CPU; ringkv's
# writer thread and redis's child may run anywhere (they are the cost of
# the save, on the machine's other core).
# Env: KEYS (5000000) RATE (40000) DURATION (10s) PORT (17630)
#      SERVER_CPU (0) CLIENT_CPU (1) OUT (/tmp/ringkv-bgsave-bench)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
need_tools bench/bgsave_load.sh redis-cli redis-server taskset python3
RUNS=${1:-3}
KEYS=${KEYS:-5000000}
RATE=${RATE:-40000}
DURATION=${DURATION:-10s}
PORT=${PORT:-17630}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
OUT=${OUT:-/tmp/ringkv-bgsave-bench}
TARGET=${CARGO_TARGET_DIR:-target}/release
[ "${NO_BUILD:-0}" = 1 ] || cargo build --release -p ringkv-server -p ringkv-bench >&2
BENCH=$TARGET/ringkv-bench
mkdir -p "$OUT"
trap stop_server EXIT


start() { # NAME DIR
  local bin=$TARGET/ringkv-server
  [ "$1" = redis ] && bin=redis-server
  taskset -c "$SERVER_CPU" "$bin" --port "$PORT" --bind 127.0.0.1 --dir "$2" --save "" \
    --appendonly no >"$2/log" 2>&1 &
  SERVER_PID=$!
  wait_ready
}

# p999 < ringkv-bench --json → the p99.9 latency in µs of its only test.
p999() {
  python3 -c 'import json, sys
l = json.load(sys.stdin)["tests"][0]["latency_us"]
print((l.get("all") or next(iter(l.values())))["p99.9_us"])'
}

bgsave_wait() {
  until redis-cli -p "$PORT" INFO persistence | grep -q '^rdb_bgsave_in_progress:0'; do
    sleep 0.02
  done
}

one() { # NAME → "peak_ratio p999_idle_us p999_save_us"
  local name=$1 dir base peak rss extra bench_pid
  dir=$(mktemp -d "$OUT/$name-XXXX")
  start "$name" "$dir"
  taskset -c "$CLIENT_CPU" "$BENCH" -p "$PORT" -t set -n "$KEYS" -r "$KEYS" \
    --key-pattern sequential -d 100 -P 32 -q --no-server-cpu >/dev/null
  sleep 1
  base=$(rss_kib "$SERVER_PID")
  taskset -c "$CLIENT_CPU" "$BENCH" -p "$PORT" -t set -r "$KEYS" -d 100 -P 16 \
    --duration 60s -q --no-server-cpu >/dev/null 2>&1 &
  bench_pid=$!
  sleep 1
  redis-cli -p "$PORT" BGSAVE >/dev/null
  peak=$base
  while redis-cli -p "$PORT" INFO persistence | grep -q '^rdb_bgsave_in_progress:1'; do
    rss=$(rss_kib "$SERVER_PID")
    extra=0
    [ "$name" = redis ] && extra=$(child_dirty_kib "$SERVER_PID")
    [ $((rss + extra)) -gt "$peak" ] && peak=$((rss + extra))
    sleep 0.02
  done
  kill "$bench_pid" 2>/dev/null || true
  wait "$bench_pid" 2>/dev/null || true
  local ratio idle save
  ratio=$(python3 -c "print(f'{$peak/$base:.3f}')")
  sleep 1
  idle=$(taskset -c "$CLIENT_CPU" "$BENCH" -p "$PORT" -t get -r "$KEYS" --rate "$RATE" \
    --duration "$DURATION" --json --no-server-cpu 2>/dev/null |
    p999)
  (sleep 1; redis-cli -p "$PORT" BGSAVE >/dev/null) &
  local trigger=$!
  save=$(taskset -c "$CLIENT_CPU" "$BENCH" -p "$PORT" -t get -r "$KEYS" --rate "$RATE" \
    --duration "$DURATION" --json --no-server-cpu 2>/dev/null |
    p999)
  wait "$trigger"
  bgsave_wait
  stop_server
  rm -rf "$dir"
  echo "$ratio $idle $save"
}

for run in $(seq 1 "$RUNS"); do
  order=(ringkv redis)
  [ $((run % 2)) = 0 ] && order=(redis ringkv)
  for name in "${order[@]}"; do
    echo "$name run$run $(one "$name")" | tee -a "$OUT/results.txt"
  done
done
echo "server rss_peak/before(median) get_p99.9_us_no_save get_p99.9_us_during_save"
python3 - "$OUT/results.txt" <<'EOF'
import sys, statistics, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    name, _, ratio, idle, save = line.split()
    rows[name].append((float(ratio), float(idle), float(save)))
for name, v in rows.items():
    print(name, *(f"{statistics.median(x[i] for x in v):g}" for i in range(3)))
EOF
