#!/usr/bin/env bash
# Server CPU per request in inline mode (`--io-threads 1`), two server
# binaries side by side (an A/B of a change to the inline loop).
#
# For ROUNDS rounds, in alternating order (A B, then B A, ...), each binary
# runs pinned to core SERVER_CPU and redis-benchmark on CLIENT_CPU runs
# TEST (set or get) at -P PIPELINE (1): -c 50 -d 100 -r 1000000 -n N. Prints one line
# per run: round, binary, ns of server CPU per request (Δ(utime+stime) of
# /proc/PID/stat ÷ Δtotal_commands_processed) and the client's rps.
#
# Usage: A_BIN=path B_BIN=path bench/inline_ab.sh [ROUNDS] [set|get] [N]
# Env:   SERVER_CPU (0) CLIENT_CPU (1) PORT (17611) PIPELINE (1: -P)
#        EXTRA_ARGS (more server arguments, e.g. "--io-uring no")
#        CMD (a command to run instead of TEST, e.g. "LRANGE big 0 99";
#        -r and -d then do not apply) and PREFILL (shell code run against
#        each fresh server before the clock starts; $PORT is set)
# Stops only the servers it started, by PID.
set -euo pipefail
ROUNDS=${1:-5}; TEST=${2:-set}; N=${3:-400000}
: "${A_BIN:?set A_BIN}" "${B_BIN:?set B_BIN}"
SERVER_CPU=${SERVER_CPU:-0}; CLIENT_CPU=${CLIENT_CPU:-1}
PORT=${PORT:-17611}
PIPELINE=${PIPELINE:-1}
TCK=$(getconf CLK_TCK)
pid=""; dir=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  if [ -n "$dir" ]; then rm -rf "$dir"; fi
}
trap cleanup EXIT
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
cmds() { redis-cli -p "$PORT" info stats | awk -F: '/^total_commands_processed/{print $2 + 0}'; }
for round in $(seq "$ROUNDS"); do
  order="A B"; [ $((round % 2)) = 0 ] && order="B A"
  for which in $order; do
    bin=$A_BIN; [ "$which" = B ] && bin=$B_BIN
    dir=$(mktemp -d)
    taskset -c "$SERVER_CPU" "$bin" --port "$PORT" --dir "$dir" --save "" --io-threads 1 ${EXTRA_ARGS:-} >"$dir/log" 2>&1 &
    pid=$!
    for _ in $(seq 50); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
    if [ -n "${PREFILL:-}" ]; then eval "$PREFILL"; fi
    c0=$(cpu); n0=$(cmds)
    if [ -n "${CMD:-}" ]; then
      # shellcheck disable=SC2086 # CMD is a command line: split into words
      load=(-n "$N" -P "$PIPELINE" -q $CMD)
    else
      load=(-t "$TEST" -d 100 -r 1000000 -n "$N" -P "$PIPELINE" -q)
    fi
    rps=$(taskset -c "$CLIENT_CPU" redis-benchmark -p "$PORT" -c 50 "${load[@]}" 2>/dev/null |
      grep -o '[0-9.]* requests per second' | head -1)
    c1=$(cpu); n1=$(cmds)
    echo "$round $which ns/req=$(( (c1 - c0) * 1000000000 / TCK / (n1 - n0) )) $rps"
    cleanup; pid=""; dir=""
  done
done
