#!/usr/bin/env bash
# Eviction quality: how close each server's maxmemory eviction comes to an
# exact LRU / LFU of the same capacity on the same requests
# (`ringkv-bench evict`, in the manner of `redis-cli --lru-test`).
#
# Per round, servers alternating (order reversed every other round), per
# policy and maxmemory-samples: start the server on core SERVER_CPU
# (`--save "" --appendonly no`, a free port), run `ringkv-bench evict` on
# core CLIENT_CPU (CONFIG SET maxmemory/policy/samples, FLUSHALL, fill
# until eviction starts, WARMUP + CYCLES cycles of CYCLE_REQUESTS GETs,
# SET on a miss, keys from DIST over KEYSPACE), stop the server by PID.
# Every server in a round gets the same trace (seed SEED + round - 1).
# Prints, per server, policy and samples, the medians over the rounds of
# the server's hit rate, the exact simulation's (LRU for *-lru and
# allkeys-random, LFU for *-lfu) and of the per-run ratio server ÷ exact.
# A server whose fill ends without an eviction (the keyspace written, or
# FILL_TIMEOUT) is shown as "no eviction" and not run again.
#
# Usage: bench/eviction.sh              (SERVERS="redis ringkv")
# Env:   ROUNDS (3)  POLICIES ("allkeys-lru allkeys-lfu")  SAMPLES ("5 10")
#        RANDOM_POLICY (1: also allkeys-random, once, as a floor)  KEYSPACE (500000)
#        MAXMEMORY (16mb)  DIST (powerlaw:6.2)  DATA_SIZE (64)  PIPELINE (250)
#        RATE (0 = no cap: GETs per second, the same for every server)
#        WARMUP (8)  CYCLES (10)  CYCLE_REQUESTS (50000)  CYCLE_TIME (5s)
#        FILL_TIMEOUT (30s)  SEED (1)  PORT (first port tried, 17800)
#        SERVER_CPU (0)  CLIENT_CPU (1)  NO_BUILD (1: use the release
#        binaries as built)  RINGKV_BIN  REDIS_BIN (/usr/bin/redis-server)
#        RAW_OUT (file to keep the per-run TSV)
# Stops only the servers it started, by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

read -r -a SERVER_LIST <<<"${SERVERS:-redis ringkv}"
read -r -a POLICY_LIST <<<"${POLICIES:-allkeys-lru allkeys-lfu}"
read -r -a SAMPLE_LIST <<<"${SAMPLES:-5 10}"
RANDOM_FLOOR=${RANDOM_POLICY:-1}
ROUNDS=${ROUNDS:-3}
KEYSPACE=${KEYSPACE:-500000}
MAXMEMORY=${MAXMEMORY:-16mb}
DIST=${DIST:-powerlaw:6.2}
DATA_SIZE=${DATA_SIZE:-64}
PIPELINE=${PIPELINE:-250}
RATE=${RATE:-0}
WARMUP=${WARMUP:-8}
CYCLES=${CYCLES:-10}
CYCLE_REQUESTS=${CYCLE_REQUESTS:-50000}
CYCLE_TIME=${CYCLE_TIME:-5s}
FILL_TIMEOUT=${FILL_TIMEOUT:-30s}
SEED=${SEED:-1}
PORT=${PORT:-17800}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
REDIS_BIN=${REDIS_BIN:-/usr/bin/redis-server}
TARGET=${CARGO_TARGET_DIR:-target}/release
RINGKV_BIN=${RINGKV_BIN:-$TARGET/ringkv-server}
BENCH_BIN=$TARGET/ringkv-bench

if [ "${NO_BUILD:-0}" != 1 ]; then
  cargo build --release -p ringkv-bench >&2
  case " ${SERVER_LIST[*]} " in
    *" ringkv "*) cargo build --release -p ringkv-server >&2 ;;
  esac
fi
for tool in "$BENCH_BIN" redis-cli taskset python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "eviction.sh: $tool not found" >&2; exit 1; }
done

WORK=$(mktemp -d /tmp/ringkv-eviction.XXXXXX)
RAW=$WORK/raw.tsv
printf 'round\tserver\tpolicy\tsamples\tstatus\thit_rate\tsim_hit_rate\tratio\tcapacity\tfill_keys\tgets_per_s\n' >"$RAW"
SERVER_PID=""
STATUS=""
cleanup() {
  stop_server
  [ -z "${RAW_OUT:-}" ] || cp "$RAW" "$RAW_OUT"
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start() { # server → running on $PORT, answering PING
  local bin
  case $1 in
    redis) bin=$REDIS_BIN ;;
    ringkv) bin=$RINGKV_BIN ;;
    *) echo "eviction.sh: unknown server $1 (redis|ringkv)" >&2; exit 1 ;;
  esac
  [ -x "$bin" ] || { echo "eviction.sh: $bin is not executable" >&2; exit 1; }
  while (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; do PORT=$((PORT + 1)); done
  taskset -c "$SERVER_CPU" "$bin" --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no \
    --dir "$WORK" >"$WORK/server.log" 2>&1 &
  SERVER_PID=$!
  wait_ready && return 0
  echo "eviction.sh: $1 did not start:" >&2
  tail -n 20 "$WORK/server.log" >&2
  exit 1
}

# run_one round server policy samples ("-": leave the server's) → one TSV
# row; STATUS is set to its status (ok, no_eviction, failed). Not run in a
# subshell, so the EXIT trap always knows the server's PID.
run_one() {
  local round=$1 server=$2 policy=$3 samples=$4 rc=0
  local extra=()
  [ "$samples" = - ] || extra=(--samples "$samples")
  start "$server"
  taskset -c "$CLIENT_CPU" timeout 600 "$BENCH_BIN" evict -p "$PORT" --policy "$policy" "${extra[@]}" \
    --maxmemory "$MAXMEMORY" --keyspace "$KEYSPACE" --key-dist "$DIST" -d "$DATA_SIZE" -P "$PIPELINE" \
    --rate "$RATE" --warmup "$WARMUP" --cycles "$CYCLES" --cycle-requests "$CYCLE_REQUESTS" \
    --cycle-time "$CYCLE_TIME" --fill-timeout "$FILL_TIMEOUT" --seed $((SEED + round - 1)) \
    --json >"$WORK/run.json" 2>"$WORK/run.err" || rc=$?
  stop_server
  if [ "$rc" != 0 ]; then
    echo "eviction.sh: round $round $server $policy samples $samples failed (exit $rc):" >&2
    tail -n 5 "$WORK/run.err" >&2
    printf '%s\t%s\t%s\t%s\tfailed\t\t\t\t\t\t\n' "$round" "$server" "$policy" "$samples" >>"$RAW"
    STATUS=failed
    return
  fi
  python3 - "$WORK/run.json" "$round" "$server" "$policy" "$samples" >>"$RAW" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
rnd, server, policy, samples = sys.argv[2:6]
f = j["fill"]
if j["status"] != "ok":
    print(f"{rnd}\t{server}\t{policy}\t{samples}\t{j['status']}\t\t\t\t\t{f['keys']}\t")
    sys.exit()
sim, srv = j["sim"], j["overall"]["server"]
ref = sim[sim["reference"]]
measured = [c for c in j["cycles"] if not c["warmup"]]
gets = sum(c["requests"] for c in measured) / sum(c["seconds"] for c in measured)
print(f"{rnd}\t{server}\t{policy}\t{samples}\tok\t{srv['hit_rate']}\t{ref['hit_rate']}\t"
      f"{sim['ratio']}\t{sim['capacity']}\t{f['keys']}\t{gets:.0f}")
EOF
  STATUS=$(tail -n 1 "$RAW" | cut -f5)
}

declare -A NO_EVICTION=()
t_start=$(date +%s)
started=$(date -u '+%Y-%m-%d %H:%M UTC')
for round in $(seq 1 "$ROUNDS"); do
  order=("${SERVER_LIST[@]}")
  if [ $((round % 2)) -eq 0 ]; then
    order=()
    for ((i = ${#SERVER_LIST[@]} - 1; i >= 0; i--)); do order+=("${SERVER_LIST[i]}"); done
  fi
  for server in "${order[@]}"; do
    [ -z "${NO_EVICTION[$server]:-}" ] || continue
    runs=()
    for policy in "${POLICY_LIST[@]}"; do
      for s in "${SAMPLE_LIST[@]}"; do runs+=("$policy $s"); done
    done
    [ "$RANDOM_FLOOR" = 1 ] && runs+=("allkeys-random -")
    for r in "${runs[@]}"; do
      read -r policy samples <<<"$r"
      run_one "$round" "$server" "$policy" "$samples"
      echo "  round $round $server $policy samples $samples: $(tail -n 1 "$RAW" | cut -f5-8)" >&2
      if [ "$STATUS" = no_eviction ]; then
        NO_EVICTION[$server]=1
        echo "  $server did not evict: not run again" >&2
        break
      fi
    done
  done
done

echo
echo "eviction quality, started $started, took $(($(date +%s) - t_start)) s; $("$REDIS_BIN" --version | sed 's/.*v=\([^ ]*\).*/redis-server \1/'); $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), kernel $(uname -r)"
echo "server on core $SERVER_CPU, ringkv-bench evict on core $CLIENT_CPU; maxmemory $MAXMEMORY, keyspace $KEYSPACE $DIST, $DATA_SIZE-byte values, pipeline $PIPELINE, $WARMUP warm-up + $CYCLES measured cycles of $CYCLE_REQUESTS GETs; medians of $ROUNDS rounds"
echo
python3 - "$RAW" <<'EOF'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
groups = {}
for r in rows:
    groups.setdefault((r[1], r[2], r[3]), []).append(r)
print("| server | policy | samples | runs | hit rate | exact sim hit rate | ratio | capacity (keys) | GETs/s |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for (server, policy, samples), rs in groups.items():
    ok = [r for r in rs if r[4] == "ok"]
    ref = "LFU" if policy.endswith("-lfu") else "LRU"
    if not ok:
        what = "no eviction" if any(r[4] == "no_eviction" for r in rs) else "failed"
        fill = [r[9] for r in rs if r[9]]
        note = f" (fill wrote {fill[0]} keys)" if fill and what == "no eviction" else ""
        print(f"| {server} | {policy} | {samples} | {len(rs)} | {what}{note} | | | | |")
        continue
    med = lambda i: statistics.median(float(r[i]) for r in ok)
    print(f"| {server} | {policy} | {samples} | {len(ok)} | {med(5):.4f} | {med(6):.4f} ({ref}) "
          f"| {med(7):.3f} | {med(8):.0f} | {med(10):,.0f} |")
EOF
