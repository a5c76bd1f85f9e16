#!/usr/bin/env bash
# The append-only file's cost, ringkv beside redis-server 7.0.
#
#   bench/aof.sh [ROUNDS]        (default 3 alternating rounds)
#
# 1. SET cost: server CPU ns per SET (Δ utime+stime of the whole process,
#    AOF thread included, ÷ Δ total_commands_processed) at -P 1 and -P 16
#    (redis-benchmark -c 50 -d 100 -r 1000000), with no AOF and with
#    appendfsync everysec.
# 2. appendfsync always: SET requests/s at -c 50 -P 1 beside everysec (group
#    commit: one fdatasync per batch) and beside redis-server's always.
# 3. BGREWRITEAOF of KEYS keys (100 bytes) while ringkv-bench overwrites
#    random keys (-P 16): wall time of the rewrite and peak RSS over RSS
#    before (for redis-server the forked child's Private_Dirty is added).
# Automatic rewrites are off (see start()). Servers on core SERVER_CPU
# (their threads too), clients on CLIENT_CPU;
# the AOF directory is on the same disk as everything else ($OUT).
# Env: N_P1 (300000) N_P16 (2000000) N_ALWAYS (100000) KEYS (5000000)
#      PORT (17640) SERVER_CPU (0) CLIENT_CPU (1) OUT (/tmp/ringkv-aof-bench)
#      SKIP (comma list of parts to skip: cost,always,rewrite)
#      RINGKV_BIN (a ringkv-server binary to measure instead of the build)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
need_tools bench/aof.sh redis-cli redis-server redis-benchmark taskset python3
ROUNDS=${1:-3}
N_P1=${N_P1:-300000}
N_P16=${N_P16:-2000000}
N_ALWAYS=${N_ALWAYS:-100000}
KEYS=${KEYS:-5000000}
PORT=${PORT:-17640}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
OUT=${OUT:-/tmp/ringkv-aof-bench}
SKIP=${SKIP:-}
TARGET=${CARGO_TARGET_DIR:-target}/release
[ "${NO_BUILD:-0}" = 1 ] || cargo build --release -p ringkv-server -p ringkv-bench >&2
BENCH=$TARGET/ringkv-bench
mkdir -p "$OUT"
RAW=$OUT/results.txt
: >"$RAW"
trap stop_server EXIT

start() { # NAME FSYNC(none|everysec|always) DIR
  local bin=${RINGKV_BIN:-$TARGET/ringkv-server} aof=(--appendonly no)
  [ "$1" = redis ] && bin=redis-server
  # No automatic rewrite in the SET parts: redis-server's runs in a forked
  # child whose CPU /proc/PID/stat of the parent does not count, ringkv's
  # in the process; part 3 measures rewrites on their own.
  [ "$2" != none ] && aof=(--appendonly yes --appendfsync "$2" --auto-aof-rewrite-percentage 0)
  taskset -c "$SERVER_CPU" "$bin" --port "$PORT" --bind 127.0.0.1 --dir "$3" --save "" \
    "${aof[@]}" >"$3/log" 2>&1 &
  SERVER_PID=$!
  wait_ready || { cat "$3/log" >&2; exit 1; }
}

info() { redis-cli -p "$PORT" INFO "$1" | tr -d '\r' | awk -F: -v k="$2" '$1==k{print $2}'; }

skipped() { [[ ",$SKIP," == *",$1,"* ]]; }

cost() { # NAME FSYNC ROUND
  local dir p n t0 c0 t1 c1 csv rps
  dir=$(mktemp -d "$OUT/cost-XXXX")
  start "$1" "$2" "$dir"
  for p in 1 16; do
    n=$N_P1; [ "$p" = 16 ] && n=$N_P16
    c0=$(info stats total_commands_processed); t0=$(cpu_ticks "$SERVER_PID")
    csv=$(taskset -c "$CLIENT_CPU" redis-benchmark -p "$PORT" -t set -c 50 -d 100 -r 1000000 \
      -n "$n" -P "$p" --csv 2>/dev/null)
    t1=$(cpu_ticks "$SERVER_PID"); c1=$(info stats total_commands_processed)
    rps=$(printf '%s\n' "$csv" | awk -F'","' 'NR==2{print $2}')
    echo "cost $1 $2 P$p $3 $rps $(python3 -c "print(round(($t1-$t0)*1e9/$(getconf CLK_TCK)/max(1,$c1-$c0)))")" |
      tee -a "$RAW"
  done
  stop_server
  rm -rf "$dir"
}

always() { # NAME FSYNC ROUND
  local dir csv rps
  dir=$(mktemp -d "$OUT/always-XXXX")
  start "$1" "$2" "$dir"
  csv=$(taskset -c "$CLIENT_CPU" redis-benchmark -p "$PORT" -t set -c 50 -d 100 -r 1000000 \
    -n "$N_ALWAYS" -P 1 --csv 2>/dev/null)
  rps=$(printf '%s\n' "$csv" | awk -F'","' 'NR==2{print $2}')
  echo "always $1 $2 P1 $3 $rps 0" | tee -a "$RAW"
  stop_server
  rm -rf "$dir"
}


rewrite() { # NAME ROUND
  local dir base peak rss extra bench_pid t0 t1
  dir=$(mktemp -d "$OUT/rewrite-XXXX")
  start "$1" everysec "$dir"
  taskset -c "$CLIENT_CPU" "$BENCH" -p "$PORT" -t set -n "$KEYS" -r "$KEYS" \
    --key-pattern sequential -d 100 -P 32 -q --no-server-cpu >/dev/null
  # Start from a compact AOF, so the measured rewrite is the one under load.
  redis-cli -p "$PORT" BGREWRITEAOF >/dev/null
  until [ "$(info persistence aof_rewrite_in_progress)" = 0 ]; do sleep 0.05; done
  sleep 1
  base=$(rss_kib "$SERVER_PID")
  taskset -c "$CLIENT_CPU" "$BENCH" -p "$PORT" -t set -r "$KEYS" -d 100 -P 16 \
    --duration 120s -q --no-server-cpu >/dev/null 2>&1 &
  bench_pid=$!
  sleep 1
  t0=$(date +%s.%N)
  redis-cli -p "$PORT" BGREWRITEAOF >/dev/null
  peak=$base
  sleep 0.02
  while [ "$(info persistence aof_rewrite_in_progress)" = 1 ]; do
    rss=$(rss_kib "$SERVER_PID")
    extra=0
    [ "$1" = redis ] && extra=$(child_dirty_kib "$SERVER_PID")
    [ $((rss + extra)) -gt "$peak" ] && peak=$((rss + extra))
    sleep 0.02
  done
  t1=$(date +%s.%N)
  kill "$bench_pid" 2>/dev/null || true
  wait "$bench_pid" 2>/dev/null || true
  echo "rewrite $1 everysec - $2 $(python3 -c "print(f'{$t1-$t0:.2f} {$peak/$base:.3f}')")" | tee -a "$RAW"
  stop_server
  rm -rf "$dir"
}

for round in $(seq 1 "$ROUNDS"); do
  order=(ringkv redis)
  [ $((round % 2)) = 0 ] && order=(redis ringkv)
  for name in "${order[@]}"; do
    if ! skipped cost; then
      cost "$name" none "$round"
      cost "$name" everysec "$round"
    fi
    if ! skipped always; then
      always "$name" always "$round"
      [ "$name" = ringkv ] && always "$name" everysec "$round"
    fi
    skipped rewrite || rewrite "$name" "$round"
  done
done

python3 - "$RAW" <<'PY'
import sys, statistics, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    part, name, fsync, p, _round, a, b = line.split()
    rows[(part, name, fsync, p)].append((float(a), float(b)))
med = lambda v, i: statistics.median(x[i] for x in v)
print("part server appendfsync pipeline | median: rps or seconds | ns/SET or RSS peak ratio")
for k in sorted(rows):
    v = rows[k]
    print(*k, "|", f"{med(v, 0):g}", "|", f"{med(v, 1):g}")
PY
