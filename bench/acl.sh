#!/usr/bin/env bash
# What an ACL user costs per request: one ringkv server pinned to core 0,
# redis-benchmark on core 1 (SET and GET, -c 50 -d 100 -r 1000000 -P 16),
# as `default` (never checked), as `cmds` (+@all -flushall ~*: the command
# is checked, keys are not) and as `keys` (+@all -flushall ~key:*: every
# key is matched), ROUNDS rounds in that order. Prints one line per run:
#   round user test ns-of-server-CPU-per-request
# (Δ(utime+stime) of the server from /proc/PID/stat ÷ Δtotal_commands_processed).
# Env: RINGKV_BIN (target/release/ringkv-server), ROUNDS (3), PORT (17601),
#      N (2000000). Stops only the server it started, by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
RK=${RINGKV_BIN:-target/release/ringkv-server}
PORT=${PORT:-17601}
ROUNDS=${ROUNDS:-3}
N=${N:-2000000}
dir=$(mktemp -d)
taskset -c 0 "$RK" --port "$PORT" --dir "$dir" --save "" >"$dir/log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 50); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$PORT" ACL SETUSER keys on '>pw' '+@all' '-flushall' '~key:*' >/dev/null
redis-cli -p "$PORT" ACL SETUSER cmds on '>pw' '+@all' '-flushall' '~*' >/dev/null
tck=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
cmds() { redis-cli -p "$PORT" info stats | awk -F: '/^total_commands_processed/{print $2 + 0}'; }
for round in $(seq "$ROUNDS"); do
  for who in default cmds keys; do
    auth=()
    [ "$who" != default ] && auth=(--user "$who" -a pw)
    for t in set get; do
      c0=$(cpu); n0=$(cmds)
      taskset -c 1 redis-benchmark -p "$PORT" "${auth[@]}" -t "$t" -c 50 -d 100 \
        -r 1000000 -n "$N" -P 16 -q >/dev/null 2>&1
      c1=$(cpu); n1=$(cmds)
      echo "$round $who $t $(( (c1 - c0) * 1000000000 / tck / (n1 - n0) ))"
    done
  done
done
