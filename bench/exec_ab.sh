#!/usr/bin/env bash
# The execution thread's cost per request at -P 1, two server binaries
# side by side (an A/B of a change to the threaded hand-off).
#
# For ROUNDS rounds, in alternating order (A B, then B A, ...), each binary
# runs with `--io-threads 2 --io-threads-idle-exec no` (one IO thread, and
# every batch on the execution thread), all of its threads pinned to core
# SERVER_CPU, and redis-benchmark on CLIENT_CPU runs TEST (set or get; get
# first loads the keys with a -P 16 SET run) at -P 1: -c 50 -d 100
# -r 1000000 -n N. Around that run it reads the execution (main) and IO
# thread's utime+stime (/proc/PID/task/TID/stat), the main thread's read
# syscalls and the IO thread's (/proc/PID/task/TID/io syscr: io_uring
# operations are not counted there), INFO exec_thread_awake_cpu_us and
# exec_thread_batches, and total_commands_processed. Prints one line per
# run: rps, ns per request of the execution thread (all of its CPU, and
# while awake), of the IO thread, read syscalls per request on each
# thread, and requests per batch.
#
# Usage: A_BIN=path B_BIN=path bench/exec_ab.sh [ROUNDS] [set|get] [N]
# Env:   SERVER_CPU (0) CLIENT_CPU (1) PORT (first port tried, 17600)
# Stops only the servers it started, by PID.
set -euo pipefail
ROUNDS=${1:-3}; TEST=${2:-set}; N=${3:-300000}
: "${A_BIN:?set A_BIN}" "${B_BIN:?set B_BIN}"
SERVER_CPU=${SERVER_CPU:-0}; CLIENT_CPU=${CLIENT_CPU:-1}
PORT=${PORT:-17600}
TCK=$(getconf CLK_TCK)
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill -TERM "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
}
trap cleanup EXIT

ticks() { awk '{print $14+$15}' "/proc/$1/task/$2/stat"; }
info() { redis-cli -p "$PORT" info "$1" | tr -d '\r' | awk -F: -v k="$2" '$1==k{print $2}'; }

run() { # binary label
  local bin=$1 label=$2 io e0 i0 r0 q0 a0 b0 c0 rps e1 i1 r1 q1 a1 b1 c1
  while (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; do PORT=$((PORT + 1)); done
  taskset -c "$SERVER_CPU" "$bin" --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no \
    --io-threads 2 --io-threads-idle-exec no >/dev/null 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.05; done
  if [ "$TEST" = get ]; then
    taskset -c "$CLIENT_CPU" redis-benchmark -p "$PORT" -t set -c 50 -d 100 -r 1000000 -n 300000 -P 16 -q >/dev/null
  fi
  io=$(ls "/proc/$SERVER_PID/task" | grep -v "^$SERVER_PID\$" | head -1)
  e0=$(ticks "$SERVER_PID" "$SERVER_PID"); i0=$(ticks "$SERVER_PID" "$io")
  r0=$(awk '/syscr/{print $2}' "/proc/$SERVER_PID/task/$SERVER_PID/io")
  q0=$(awk '/syscr/{print $2}' "/proc/$SERVER_PID/task/$io/io")
  a0=$(info threads exec_thread_awake_cpu_us); b0=$(info threads exec_thread_batches)
  c0=$(info stats total_commands_processed)
  rps=$(taskset -c "$CLIENT_CPU" timeout 120 redis-benchmark -p "$PORT" -t "$TEST" -c 50 -d 100 \
    -r 1000000 -n "$N" -P 1 --csv | tail -1 | cut -d, -f2 | tr -d '"')
  e1=$(ticks "$SERVER_PID" "$SERVER_PID"); i1=$(ticks "$SERVER_PID" "$io")
  r1=$(awk '/syscr/{print $2}' "/proc/$SERVER_PID/task/$SERVER_PID/io")
  q1=$(awk '/syscr/{print $2}' "/proc/$SERVER_PID/task/$io/io")
  a1=$(info threads exec_thread_awake_cpu_us); b1=$(info threads exec_thread_batches)
  c1=$(info stats total_commands_processed)
  redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
  # The INFO calls between the two reads of the counter are commands too.
  awk -v l="$label" -v t="$TEST" -v rps="$rps" -v de=$((e1 - e0)) -v di=$((i1 - i0)) \
    -v da=$((a1 - a0)) -v dr=$((r1 - r0)) -v dq=$((q1 - q0)) -v db=$((b1 - b0)) -v dc=$((c1 - c0 - 2)) -v tck="$TCK" \
    'BEGIN{printf "%s %s -P 1 rps=%s exec_all=%.0f exec_awake=%.0f io=%.0f exec_reads_per_req=%.3f io_reads_per_req=%.3f req_per_batch=%.2f\n",
      l, t, rps, de*1e9/tck/dc, da*1000/dc, di*1e9/tck/dc, dr/dc, dq/dc, dc/db}'
}
for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then run "$A_BIN" A; run "$B_BIN" B
  else run "$B_BIN" B; run "$A_BIN" A; fi
done
