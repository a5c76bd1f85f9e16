#!/usr/bin/env bash
# Server CPU per GET of a large value (issue 5, item 4: values sent by
# reference instead of copied into the reply).
#
# For each binary in BINS (default: the release build) and each backend,
# ROUNDS times, alternating binaries: start the server pinned to core 0,
# SET one value of SIZE bytes with redis-benchmark, then GET it N times
# (redis-benchmark -t get -d SIZE -c CLIENTS, pinned to core 1) and record
#   ns/GET   Δ(utime+stime) of the server process ÷ N
#   rps      as reported by redis-benchmark --csv
# Prints one line per run and the medians per binary and backend.
#
# Usage: bench/large_get.sh [backend ...]     (default: io_uring epoll)
#        a backend may carry threads: io_uring/t2 runs --io-threads 2
# Env:   BINS ("target/release/ringkv-server"; space-separated, label=path
#        allowed)  SIZE (1000000)  N (4000)  CLIENTS (10)  ROUNDS (3)
#        PORT (17479)  SERVER_CPU (0)  CLIENT_CPU (1)
# Stops only the processes it started, by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
# stop_server, cpu_ticks
source bench/lib.sh

BACKENDS=("$@")
[ ${#BACKENDS[@]} -gt 0 ] || BACKENDS=(io_uring epoll)
BINS=${BINS:-target/release/ringkv-server}
SIZE=${SIZE:-1000000}
N=${N:-4000}
CLIENTS=${CLIENTS:-10}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-17479}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
CLK_TCK=$(getconf CLK_TCK)
SERVER_PID=""

trap stop_server EXIT


RESULTS=$(mktemp /tmp/ringkv-large-get.XXXXXX)
for round in $(seq 1 "$ROUNDS"); do
  for bin in $BINS; do
    label=${bin%%=*}
    path=${bin#*=}
    for backend in "${BACKENDS[@]}"; do
      loop=${backend%%/*}
      threads=1
      [[ "$backend" == */t* ]] && threads=${backend##*/t}
      uring=yes
      [ "$loop" = epoll ] && uring=no
      taskset -c "$SERVER_CPU" "$path" --port "$PORT" --io-uring "$uring" \
        --io-threads "$threads" --save "" --loglevel warning >"$RESULTS.log" 2>&1 &
      SERVER_PID=$!
      if ! wait_ready; then
        echo "large_get.sh: $label $backend did not start:" >&2
        cat "$RESULTS.log" >&2
        exit 1
      fi
      redis-benchmark -p "$PORT" -t set -n 1 -c 1 -d "$SIZE" -q >/dev/null
      t0=$(cpu_ticks "$SERVER_PID")
      rps=$(taskset -c "$CLIENT_CPU" redis-benchmark -p "$PORT" -t get -n "$N" \
        -c "$CLIENTS" -d "$SIZE" --csv | awk -F'"' '/GET/ {print $4}')
      t1=$(cpu_ticks "$SERVER_PID")
      stop_server
      ns=$(( (t1 - t0) * 1000000000 / CLK_TCK / N ))
      printf '%s\t%s\t%s\t%s\t%s\n' "$round" "$label" "$backend" "$ns" "$rps" | tee -a "$RESULTS"
    done
  done
done
echo "median ns/GET and rps per binary and backend (SIZE=$SIZE N=$N CLIENTS=$CLIENTS):"
python3 - "$RESULTS" <<'EOF'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
keys = []
for r in rows:
    if (r[1], r[2]) not in keys:
        keys.append((r[1], r[2]))
for label, backend in keys:
    ns = [int(r[3]) for r in rows if (r[1], r[2]) == (label, backend)]
    rps = [float(r[4]) for r in rows if (r[1], r[2]) == (label, backend)]
    print(f"{label:>10} {backend:>12}  {statistics.median(ns):>9,.0f} ns/GET  {statistics.median(rps):>9,.0f} rps")
EOF
rm -f "$RESULTS" "$RESULTS.log"
