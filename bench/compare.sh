#!/usr/bin/env bash
# Side-by-side benchmark: ringkv (each event loop) against Debian's redis-server.
#
# Builds ringkv-server in release, then for ROUNDS rounds, alternating servers,
# starts each server pinned to core 0 with the same flags, drives it with
# redis-benchmark pinned to core 1 (-t set / -t get, -c 50, -d 100, -r 1000000,
# at -P 1 and -P 16), and records
#   rps         as reported by redis-benchmark --csv
#   ns/request  Δ(utime+stime) of the server process (from /proc/PID/stat, in
#               clock ticks → ns via getconf CLK_TCK) ÷ Δtotal_commands_processed
# Prints a Markdown table of medians with the ringkv/redis ratio per test.
#
# Usage: bench/compare.sh [backend ...]      (default: io_uring epoll)
#        io_uring-bwN runs io_uring with --io-uring-batch-wait-us N
# Env:   N_P1 (300000)  N_P16 (2000000)  ROUNDS (3)  PORT (17379)
#        RINGKV_BIN (default: <target dir>/release/ringkv-server; skips the build)
#        REDIS_BIN (/usr/bin/redis-server)  SERVER_CPU (0)  CLIENT_CPU (1)
#        RAW_OUT (file to keep the per-run numbers; default: a temp file)
# Stops only the processes it started, by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
# stop_server, cpu_ticks, need_tools, ringkv_release_bin
source bench/lib.sh

BACKENDS=("$@")
[ ${#BACKENDS[@]} -gt 0 ] || BACKENDS=(io_uring epoll)
N_P1=${N_P1:-300000}
N_P16=${N_P16:-2000000}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-17379}
REDIS_BIN=${REDIS_BIN:-/usr/bin/redis-server}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
CLK_TCK=$(getconf CLK_TCK)

need_tools compare.sh redis-benchmark redis-cli taskset python3 "$REDIS_BIN"

ringkv_release_bin
[ -x "$RINGKV_BIN" ] || { echo "compare.sh: $RINGKV_BIN is not executable" >&2; exit 1; }

WORK=$(mktemp -d /tmp/ringkv-compare.XXXXXX)
RAW_OUT=${RAW_OUT:-$WORK/runs.tsv}
: >"$RAW_OUT"
SERVER_PID=""

cleanup() {
  stop_server
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM


commands_processed() {
  redis-cli -p "$PORT" INFO stats | tr -d '\r' | awk -F: '$1=="total_commands_processed"{print $2}'
}

start_server() { # name
  local name=$1
  if redis-cli -p "$PORT" PING >/dev/null 2>&1; then
    echo "compare.sh: something already listens on port $PORT" >&2
    exit 1
  fi
  local common=(--port "$PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$WORK")
  case $name in
    redis) taskset -c "$SERVER_CPU" "$REDIS_BIN" "${common[@]}" >"$WORK/$name.log" 2>&1 &
      ;;
    io_uring) taskset -c "$SERVER_CPU" "$RINGKV_BIN" "${common[@]}" --io-uring yes >"$WORK/$name.log" 2>&1 &
      ;;
    io_uring-bw*) taskset -c "$SERVER_CPU" "$RINGKV_BIN" "${common[@]}" --io-uring yes \
        --io-uring-batch-wait-us "${name#io_uring-bw}" >"$WORK/$name.log" 2>&1 &
      ;;
    epoll) taskset -c "$SERVER_CPU" "$RINGKV_BIN" "${common[@]}" --io-uring no >"$WORK/$name.log" 2>&1 &
      ;;
    *) echo "compare.sh: unknown backend $name (io_uring|io_uring-bwN|epoll)" >&2; exit 1 ;;
  esac
  SERVER_PID=$!
  wait_ready && return 0
  echo "compare.sh: $name did not start; log:" >&2
  cat "$WORK/$name.log" >&2
  exit 1
}

run_one() { # server test pipeline n round
  local server=$1 test=$2 pipe=$3 n=$4 round=$5
  local t0 c0 t1 c1 csv rps
  c0=$(commands_processed)
  t0=$(cpu_ticks "$SERVER_PID")
  csv=$(taskset -c "$CLIENT_CPU" timeout 600 redis-benchmark -p "$PORT" -t "$test" -c 50 -d 100 \
    -r 1000000 -n "$n" -P "$pipe" --csv 2>/dev/null)
  t1=$(cpu_ticks "$SERVER_PID")
  c1=$(commands_processed)
  rps=$(printf '%s\n' "$csv" | awk -F'","' 'NR==2{print $2}')
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$server" "${test^^} -P $pipe" "$rps" \
    "$((t1 - t0))" "$((c1 - c0))" "$CLK_TCK" >>"$RAW_OUT"
  printf '  round %s %-8s %-10s rps=%s cpu_ticks=%s cmds=%s\n' "$round" "$server" \
    "${test^^} -P $pipe" "$rps" "$((t1 - t0))" "$((c1 - c0))" >&2
}

for round in $(seq 1 "$ROUNDS"); do
  for server in "${BACKENDS[@]}" redis; do
    start_server "$server"
    run_one "$server" set 1 "$N_P1" "$round"
    run_one "$server" get 1 "$N_P1" "$round"
    run_one "$server" set 16 "$N_P16" "$round"
    run_one "$server" get 16 "$N_P16" "$round"
    stop_server
  done
done

echo
echo "ringkv vs redis-server $("$REDIS_BIN" --version | sed 's/.*v=\([^ ]*\).*/\1/'), $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), kernel $(uname -r)"
echo "server on core $SERVER_CPU, redis-benchmark on core $CLIENT_CPU; -c 50 -d 100 -r 1000000; N=$N_P1 at -P 1, N=$N_P16 at -P 16; median of $ROUNDS rounds"
echo
python3 bench/compare_table.py "$RAW_OUT"
