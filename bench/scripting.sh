#!/usr/bin/env bash
# Lua scripting's cost, ringkv beside redis-server 7.0.
#
#   bench/scripting.sh [ROUNDS]     (default 3 alternating rounds)
#
# 1. EVALSHA of a small script (GET then INCR of one key): server CPU ns
#    per request (Δ utime+stime of the whole process ÷ requests) at -P 1
#    and -P 16 (redis-benchmark -c 20).
# 2. One EVAL looping 1,000,000 redis.call('INCR', KEYS[1]): the server's
#    CPU time for it (ms; clock-tick resolution) and the wall time as
#    redis-cli sees it.
# Servers on core SERVER_CPU, clients on CLIENT_CPU.
# Env: N_P1 (200000) N_P16 (1000000) PORT (17683) SERVER_CPU (0)
#      CLIENT_CPU (1)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
need_tools bench/scripting.sh redis-cli redis-server redis-benchmark taskset
ROUNDS=${1:-3}
N_P1=${N_P1:-200000}
N_P16=${N_P16:-1000000}
PORT=${PORT:-17683}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
ringkv_release_bin
trap stop_server EXIT

SMALL='local v = redis.call("GET", KEYS[1]) return redis.call("INCR", KEYS[1])'
LOOP='for i = 1, 1000000 do redis.call("INCR", KEYS[1]) end return redis.call("GET", KEYS[1])'

# evalsha_ns P N → server CPU ns per EVALSHA
evalsha_ns() {
  local sha a b tck
  sha=$(redis-cli -p "$PORT" SCRIPT LOAD "$SMALL")
  a=$(cpu_ticks "$SERVER_PID")
  taskset -c "$CLIENT_CPU" redis-benchmark -p "$PORT" -c 20 -P "$1" -n "$2" -q \
    EVALSHA "$sha" 1 cnt >/dev/null 2>&1
  b=$(cpu_ticks "$SERVER_PID")
  tck=$(getconf CLK_TCK)
  echo $(((b - a) * 1000000000 / tck / $2))
}

# loop_ms → "CPU-ms wall-ms" of the 1M-call script
loop_ms() {
  local s e a b tck
  tck=$(getconf CLK_TCK)
  a=$(cpu_ticks "$SERVER_PID")
  s=$(date +%s%N)
  redis-cli -p "$PORT" EVAL "$LOOP" 1 "loop$RANDOM" >/dev/null
  e=$(date +%s%N)
  b=$(cpu_ticks "$SERVER_PID")
  echo "$(((b - a) * 1000 / tck)) $(((e - s) / 1000000))"
}

printf '%-7s %5s %12s %12s %12s %12s\n' server round "P1 ns/req" "P16 ns/req" "loop cpu ms" "loop wall ms"
for r in $(seq 1 "$ROUNDS"); do
  for s in ringkv redis; do
    start_pinned "$s"
    p1=$(evalsha_ns 1 "$N_P1")
    p16=$(evalsha_ns 16 "$N_P16")
    read -r lc lw < <(loop_ms)
    printf '%-7s %5s %12s %12s %12s %12s\n' "$s" "$r" "$p1" "$p16" "$lc" "$lw"
    stop_server
  done
done
