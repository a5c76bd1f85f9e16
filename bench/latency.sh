#!/usr/bin/env bash
# Latency as a distribution, under the same open-loop load, for several
# servers side by side: redis-server 7, and ringkv inline (io-threads 1) or
# threaded (io-threads N, default settings).
#
# Usage: bench/latency.sh [VARIANT...]   (default: redis ringkv-t1 ringkv-t2)
#   VARIANT: redis | ringkv-tN[-epoll][-pollU]   (ringkv: io_uring unless -epoll;
#            -pollU: io-busy-poll-us U)
#
# Per round, per variant (order reversed every other round): the server
# starts on core SERVER_CPU, its keyspace is filled (KEYS keys of 100
# bytes, sequential SETs), then ringkv-bench on core CLIENT_CPU sends
# `mixed` SET:GET 1:10 over 50 connections at RATE requests/s (open
# loop: latency from each request's intended send time) for DURATION.
# Prints, per rate and variant, the medians over the rounds of p50, p90,
# p99, p99.9 and max (µs, all commands) and of the server's CPU per request.
#
# Env:   RATES ("40000 80000")  ROUNDS (3)  DURATION (20s)  KEYS (1000000)
#        TEST (mixed: SET:GET 1:10; or get, set, ...)
#        PORT (17601)  SERVER_CPU (0)  CLIENT_CPU (1)  NO_BUILD (1: use the
#        release binaries as built)  RAW_OUT (TSV of every run)
# Stops only the servers it started, by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

VARIANTS=("$@")
[ ${#VARIANTS[@]} -gt 0 ] || VARIANTS=(redis ringkv-t1 ringkv-t2)
read -r -a RATE_LIST <<<"${RATES:-40000 80000}"
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-20s}
KEYS=${KEYS:-1000000}
PORT=${PORT:-17601}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
REDIS_BIN=${REDIS_BIN:-/usr/bin/redis-server}
TARGET=${CARGO_TARGET_DIR:-target}/release
[ "${NO_BUILD:-0}" = 1 ] || cargo build --release -p ringkv-server -p ringkv-bench >&2
for tool in "$TARGET/ringkv-server" "$TARGET/ringkv-bench" "$REDIS_BIN" redis-cli taskset python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "latency.sh: $tool not found" >&2; exit 1; }
done

WORK=$(mktemp -d /tmp/ringkv-latency.XXXXXX)
RAW=$WORK/raw.tsv
TEST=${TEST:-mixed}
echo -e "rate\tround\tvariant\tp50\tp90\tp99\tp999\tmax\tserver_us\trps\tclient_us" >"$RAW"
SERVER_PID=""
cleanup() {
  stop_server
  [ -z "${RAW_OUT:-}" ] || cp "$RAW" "$RAW_OUT"
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start() { start_variant "$1" "$WORK"; }

bench() { taskset -c "$CLIENT_CPU" "$TARGET/ringkv-bench" -p "$PORT" -c 50 -d 100 --keyspace "$KEYS" "$@"; }

for rate in "${RATE_LIST[@]}"; do
  for round in $(seq 1 "$ROUNDS"); do
    order=("${VARIANTS[@]}")
    if [ $((round % 2)) -eq 0 ]; then
      order=()
      for ((i = ${#VARIANTS[@]} - 1; i >= 0; i--)); do order+=("${VARIANTS[i]}"); done
    fi
    for v in "${order[@]}"; do
      start "$v"
      bench -t set --key-pattern sequential -n "$KEYS" -P 16 -q >/dev/null
      bench -t "$TEST" --ratio 1:10 --rate "$rate" --duration "$DURATION" --json >"$WORK/run.json"
      stop_server
      python3 - "$WORK/run.json" "$rate" "$round" "$v" >>"$RAW" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))["tests"][0]
# "all" for a mix, the command's name for a single command.
l = t["latency_us"].get("all") or next(iter(t["latency_us"].values()))
print("\t".join(sys.argv[2:5] + [str(l[k]) for k in ("p50_us", "p90_us", "p99_us", "p99.9_us", "max_us")]
                + [str(t["server_cpu_us_per_request"]), str(t["rps"]), str(t["client_cpu_us_per_request"])]))
EOF
      tail -n 1 "$RAW" >&2
    done
  done
done

python3 - "$RAW" "$ROUNDS" "$DURATION" "$KEYS" "$TEST" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
mix = "mixed SET:GET 1:10" if sys.argv[5] == "mixed" else sys.argv[5].upper()
print(f"open loop, {mix}, 50 connections, 100-byte values, {sys.argv[4]} keys, "
      f"{sys.argv[3]} per run; medians of {sys.argv[2]} rounds; latency in µs from the intended send time")
print()
print("| rate | server | p50 | p90 | p99 | p99.9 | max | server CPU µs/req | requests/s | ringkv-bench CPU µs/req |")
print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
seen = []
for r in rows:
    if (r["rate"], r["variant"]) not in seen:
        seen.append((r["rate"], r["variant"]))
for rate, v in seen:
    sel = [r for r in rows if r["rate"] == rate and r["variant"] == v]
    med = lambda k: statistics.median(float(r[k]) for r in sel)
    print(f"| {int(rate):,} | {v} | {med('p50'):.0f} | {med('p90'):.0f} | {med('p99'):.0f} | "
          f"{med('p999'):.0f} | {med('max'):.0f} | {med('server_us'):.2f} | {med('rps'):,.0f} | {med('client_us'):.2f} |")
EOF
