#!/usr/bin/env bash
# How long a start on an AOF keeps clients waiting, build A against build B.
#
#   bench/aof_load.sh BIN_A BIN_B [ROUNDS]     (default 3 alternating rounds)
#
# Writes one AOF of N (1M) SETs of 16-byte values over random keys with
# BIN_A (redis-benchmark -P 16), then starts each build on it, pinned to
# core 0, ROUNDS times alternating, and prints per start:
#   first_reply_ms  from spawn to the first reply to PING (-LOADING counts)
#   loaded_ms       from spawn to the first PONG (the load is over)
#   log_s           "DB loaded from append only file: X seconds" (the replay)
# Each server is stopped by the PID it reports in INFO. Env: N, PORT (7311).
set -euo pipefail
a=$1 b=$2 rounds=${3:-3}
n=${N:-1000000} port=${PORT:-7311}
dir=$(mktemp -d /tmp/aof-load.XXXXXX)
trap 'rm -rf "$dir"' EXIT

stop() {
  local pid
  pid=$(redis-cli -p "$port" info server | awk -F: '/^process_id:/{print $2+0}')
  kill "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
}

(cd "$dir" && setsid "$a" --port "$port" --dir "$dir" --save "" --appendonly yes >"$dir/gen.log" 2>&1 &)
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done
redis-benchmark -p "$port" -t set -n "$n" -r 100000000 -d 16 -P 16 -q >/dev/null
stop

one() {
  local bin=$1 t0 first="" r loaded secs
  t0=$(date +%s%N)
  (cd "$dir" && setsid taskset -c 0 "$bin" --port "$port" --dir "$dir" --save "" --appendonly yes >"$dir/run.log" 2>&1 &)
  while :; do
    r=$(timeout 1 redis-cli -p "$port" ping 2>/dev/null || true)
    if [ -n "$r" ] && [ -z "$first" ]; then first=$((($(date +%s%N) - t0) / 1000000)); fi
    [ "$r" = PONG ] && break
    sleep 0.005
  done
  loaded=$((($(date +%s%N) - t0) / 1000000))
  secs=$(grep -o 'DB loaded from append only file: [0-9.]*' "$dir/run.log" | awk '{print $NF}')
  echo "$bin first_reply_ms=$first loaded_ms=$loaded log_s=$secs keys=$(redis-cli -p "$port" dbsize)"
  stop
}

for ((i = 1; i <= rounds; i++)); do
  one "$a"
  one "$b"
done
