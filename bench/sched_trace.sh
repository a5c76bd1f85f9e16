#!/usr/bin/env bash
# Where a request waits inside the server at moderate load (issue 25):
# each variant gets the same open-loop GET load, and a 1 s scheduler and
# syscall trace of both cores is cut into the server thread's wake-ups
# (bench/sched_trace.py): wake latency, time on the CPU, time to the first
# send, syscalls per wake-up.
#
# Usage: bench/sched_trace.sh [VARIANT...]   (default: redis ringkv-t1 ringkv-t1-epoll)
#   VARIANT: redis | ringkv-t1[-epoll][-pollU] (bench/lib.sh start_variant;
#            inline mode only: the loop is the main thread)
# Env: RATE (30000)  DURATION (6s)  KEYS (1000000)  PORT (17611)
#      SERVER_CPU (0)  CLIENT_CPU (1)  NO_BUILD (1: use target/release)
# Needs perf and root. Stops only the servers it started, by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
VARIANTS=("$@")
[ ${#VARIANTS[@]} -gt 0 ] || VARIANTS=(redis ringkv-t1 ringkv-t1-epoll)
RATE=${RATE:-30000}
DURATION=${DURATION:-6s}
KEYS=${KEYS:-1000000}
PORT=${PORT:-17611}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
TARGET=${CARGO_TARGET_DIR:-target}/release
[ "${NO_BUILD:-0}" = 1 ] || cargo build --release -p ringkv-server -p ringkv-bench >&2
WORK=$(mktemp -d /tmp/ringkv-schedtrace.XXXXXX)
SERVER_PID=""
trap 'stop_server; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

for v in "${VARIANTS[@]}"; do
  start_variant "$v" "$WORK"
  bench() { taskset -c "$CLIENT_CPU" "$TARGET/ringkv-bench" -p "$PORT" -c 50 -d 100 --keyspace "$KEYS" "$@"; }
  bench -t set --key-pattern sequential -n "$KEYS" -P 16 -q >/dev/null
  bench -t get --rate "$RATE" --duration "$DURATION" -q >"$WORK/bench.txt" 2>&1 &
  bench_pid=$!
  sleep 2
  perf record -q -o "$WORK/perf.data" -a -e sched:sched_switch,sched:sched_waking,raw_syscalls:sys_enter,raw_syscalls:sys_exit -- sleep 1 >/dev/null 2>&1
  wait "$bench_pid"
  echo "== $v, GET at $RATE/s: $(tail -n 1 "$WORK/bench.txt")"
  perf script -i "$WORK/perf.data" -F comm,tid,cpu,time,event,trace 2>/dev/null |
    python3 bench/sched_trace.py "$SERVER_PID" "$RATE"
  stop_server
done
