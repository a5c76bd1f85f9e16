#!/usr/bin/env bash
# maxmemory under a write load: does used_memory stay at the limit, and what
# does eviction cost per SET?
#
# For ROUNDS rounds, alternating servers, starts each server pinned to core 0
# twice: once with `maxmemory MAXMEMORY` and `allkeys-lru`, once without a
# limit. Each time redis-benchmark (core 1) runs SET with 100-byte values
# over a key range large enough that the bytes written are about 3× the
# limit (-r KEYRANGE -n N -P 16 -c 50), while a sampler reads INFO memory
# `used_memory` every 100 ms. Records per run
#   max_over    the highest used_memory sampled, as % over maxmemory
#   ns/request  Δ(utime+stime) of the server ÷ Δtotal_commands_processed
#   errors      Δtotal_error_replies (OOM or anything else)
#   evicted     evicted_keys at the end
# and prints medians, with the eviction run's ns/request ÷ the unlimited run's.
#
# Usage: bench/eviction_load.sh [server ...]   (default: ringkv redis)
# Env:   MAXMEMORY (200mb)  N (6000000)  KEYRANGE (20000000)  ROUNDS (3)
#        PORT (17389)  RINGKV_BIN (default: build release)  REDIS_BIN
#        SERVER_CPU (0)  CLIENT_CPU (1)
# Stops only the processes it started, by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
# stop_server, wait_ready, cpu_ticks, need_tools, ringkv_release_bin
source bench/lib.sh

SERVERS=("$@")
[ ${#SERVERS[@]} -gt 0 ] || SERVERS=(ringkv redis)
MAXMEMORY=${MAXMEMORY:-200mb}
N=${N:-6000000}
KEYRANGE=${KEYRANGE:-20000000}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-17389}
REDIS_BIN=${REDIS_BIN:-/usr/bin/redis-server}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
CLK_TCK=$(getconf CLK_TCK)

need_tools eviction_load.sh redis-benchmark redis-cli taskset python3 "$REDIS_BIN"
ringkv_release_bin

WORK=$(mktemp -d /tmp/ringkv-evload.XXXXXX)
RAW=$WORK/raw.tsv
printf 'round\tserver\tmode\tmax_over_pct\tns_per_req\terrors\tevicted\n' >"$RAW"
SERVER_PID=""
SAMPLER_PID=""
cleanup() {
  [ -z "$SAMPLER_PID" ] || kill "$SAMPLER_PID" 2>/dev/null || true
  stop_server
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

info_field() { # section field
  redis-cli -p "$PORT" INFO "$1" | tr -d '\r' | awk -F: -v f="$2" '$1==f{print $2}'
}

start() { # server mode
  local bin args=(--port "$PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$WORK")
  case $1 in
    redis) bin=$REDIS_BIN ;;
    ringkv) bin=$RINGKV_BIN ;;
    *) echo "eviction_load.sh: unknown server $1" >&2; exit 1 ;;
  esac
  [ "$2" = unlimited ] || args+=(--maxmemory "$MAXMEMORY" --maxmemory-policy allkeys-lru)
  taskset -c "$SERVER_CPU" "$bin" "${args[@]}" >"$WORK/$1.log" 2>&1 &
  SERVER_PID=$!
  wait_ready || { echo "eviction_load.sh: $1 did not start" >&2; cat "$WORK/$1.log" >&2; exit 1; }
}

# Samples used_memory every 100 ms into $1 until killed (bounded: 30 min).
sample() {
  for _ in $(seq 1 18000); do
    info_field memory used_memory >>"$1" 2>/dev/null || true
    sleep 0.1
  done
}

run() { # round server mode
  local round=$1 server=$2 mode=$3 samples=$WORK/samples
  start "$server" "$mode"
  local limit c0 t0 e0
  limit=$(redis-cli -p "$PORT" CONFIG GET maxmemory | tail -1)
  : >"$samples"
  sample "$samples" &
  SAMPLER_PID=$!
  c0=$(info_field stats total_commands_processed)
  e0=$(info_field stats total_error_replies)
  t0=$(cpu_ticks "$SERVER_PID")
  taskset -c "$CLIENT_CPU" timeout 900 redis-benchmark -p "$PORT" -t set -c 50 -d 100 \
    -r "$KEYRANGE" -n "$N" -P 16 -q >/dev/null 2>&1 || true
  local t1 c1 e1 evicted
  t1=$(cpu_ticks "$SERVER_PID")
  c1=$(info_field stats total_commands_processed)
  e1=$(info_field stats total_error_replies)
  evicted=$(info_field stats evicted_keys)
  kill "$SAMPLER_PID" 2>/dev/null || true
  wait "$SAMPLER_PID" 2>/dev/null || true
  SAMPLER_PID=""
  stop_server
  python3 - "$samples" "$limit" "$round" "$server" "$mode" "$((t1 - t0))" "$((c1 - c0))" \
    "$((e1 - e0))" "$evicted" "$CLK_TCK" >>"$RAW" <<'PY'
import sys
path, limit, rnd, server, mode, ticks, cmds, errors, evicted, tck = sys.argv[1:]
used = [int(x) for x in open(path).read().split() if x.isdigit()]
limit = int(limit)
over = (max(used) - limit) * 100 / limit if limit and used else float("nan")
ns = int(ticks) * 1e9 / int(tck) / max(int(cmds), 1)
print(f"{rnd}\t{server}\t{mode}\t{over:.2f}\t{ns:.0f}\t{errors}\t{evicted}")
PY
  tail -1 "$RAW" | sed 's/^/  /' >&2
}

for round in $(seq 1 "$ROUNDS"); do
  for server in "${SERVERS[@]}"; do
    run "$round" "$server" lru
    run "$round" "$server" unlimited
  done
done

echo
echo "maxmemory $MAXMEMORY allkeys-lru vs no limit; redis-benchmark -t set -d 100 -c 50 -P 16 -r $KEYRANGE -n $N; $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, median of $ROUNDS rounds"
python3 - "$RAW" <<'PY'
import sys, statistics as st
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
med = lambda xs: st.median(xs) if xs else float("nan")
print("| server | max used over maxmemory | SET ns/request evicting | without limit | ratio | errors | evicted keys |")
print("|---|---:|---:|---:|---:|---:|---:|")
for s in dict.fromkeys(r[1] for r in rows):
    lru = [r for r in rows if r[1] == s and r[2] == "lru"]
    unl = [r for r in rows if r[1] == s and r[2] == "unlimited"]
    over = max(float(r[3]) for r in lru)
    a, b = med([float(r[4]) for r in lru]), med([float(r[4]) for r in unl])
    errs = sum(int(r[5]) for r in lru)
    ev = med([int(r[6]) for r in lru])
    print(f"| {s} | {over:+.2f}% (worst run) | {a:,.0f} | {b:,.0f} | {a/b:.2f}× | {errs} | {ev:,.0f} |")
PY
