#!/usr/bin/env bash
# Client CPU per request, throughput and latency of ringkv-bench and
# redis-benchmark, same server, same settings, alternating runs.
#
#   crates/bench/scripts/vs-redis-benchmark.sh [OUT_DIR] [RUNS] [REQUESTS] [CONNECTIONS]
#
# redis-server (Debian's) is pinned to core 0, each client to core 1.
# ringkv-bench runs twice per round: io_uring and --io-uring no (epoll).
# Client CPU is the client process's utime+stime (GNU time) / requests.
# Server CPU is Δ(utime+stime) of redis-server from /proc/PID/stat.
# Needs: redis-server, redis-benchmark, /usr/bin/time, taskset, and a
# release build of ringkv-bench (BENCH=path to override).
set -euo pipefail

OUT=${1:-/tmp/ringkv-bench-vs}
RUNS=${2:-3}
N=${3:-200000}
C=${4:-50}
KEYS=100000
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
BENCH=${BENCH:-${CARGO_TARGET_DIR:-$ROOT/target}/release/ringkv-bench}
mkdir -p "$OUT"
[ -x "$BENCH" ] || { echo "build first: cargo build --release -p ringkv-bench ($BENCH)" >&2; exit 1; }

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
taskset -c 0 redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no >"$OUT/redis.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.05; done

# Both clients GET the same 100-byte keys: key:000000000000 .. key:000000099999.
taskset -c 1 "$BENCH" -p "$PORT" -t set -n $KEYS --keyspace $KEYS --key-pattern sequential -d 100 -q >/dev/null

ticks() { awk '{print $14 + $15}' "/proc/$SERVER/stat"; }
HZ=$(getconf CLK_TCK)

# One ringkv-bench run: rkb RUN LABEL FILE_PREFIX EXTRA_ARGS...
rkb() {
  local i=$1 label=$2 f=$3
  shift 3
  local s0 s1 j rps p50 p99 cpu
  s0=$(ticks)
  /usr/bin/time -f '%U %S' -o "$OUT/$f$i.time" taskset -c 1 \
    "$BENCH" -p "$PORT" -t get -c "$C" -d 100 -P 1 -n "$N" --threads 1 --keyspace $KEYS \
    --no-server-cpu --json --histogram-out "$OUT/$f$i.hgrm" "$@" >"$OUT/$f$i.json"
  s1=$(ticks)
  j=$(cat "$OUT/$f$i.json")
  rps=$(grep -o '"rps":[0-9.]*' <<<"$j" | cut -d: -f2)
  p50=$(grep -o '"p50_us":[0-9.]*' <<<"$j" | cut -d: -f2)
  p99=$(grep -o '"p99_us":[0-9.]*' <<<"$j" | cut -d: -f2)
  cpu=$(awk '{print $1 + $2}' "$OUT/$f$i.time")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$i" "$label" "$cpu" \
    "$(echo "$cpu $N" | awk '{printf "%.3f", $1*1e6/$2}')" \
    "$(echo "$s0 $s1 $HZ $N" | awk '{printf "%.3f", ($2-$1)/$3*1e6/$4}')" "$rps" "$p50" "$p99" >>"$OUT/runs.tsv"
}

printf 'run\tclient\tclient_cpu_s\tclient_us_per_req\tserver_us_per_req\trps\tp50_us\tp99_us\n' >"$OUT/runs.tsv"
for i in $(seq "$RUNS"); do
  s0=$(ticks)
  /usr/bin/time -f '%U %S' -o "$OUT/rb$i.time" taskset -c 1 \
    redis-benchmark -p "$PORT" -t get -c "$C" -d 100 -P 1 -n "$N" -r $KEYS --precision 3 >"$OUT/rb$i.txt" 2>&1
  s1=$(ticks)
  tr '\r' '\n' <"$OUT/rb$i.txt" >"$OUT/rb$i.clean"
  rps=$(awk '/throughput summary:/ {print $3}' "$OUT/rb$i.clean")
  # "avg min p50 p95 p99 max" in ms on the line after "latency summary".
  read -r p50 p99 < <(awk '/latency summary/ {getline; getline; print $3*1000, $5*1000}' "$OUT/rb$i.clean")
  cpu=$(awk '{print $1 + $2}' "$OUT/rb$i.time")
  printf '%s\tredis-benchmark\t%s\t%s\t%s\t%s\t%s\t%s\n' "$i" "$cpu" \
    "$(echo "$cpu $N" | awk '{printf "%.3f", $1*1e6/$2}')" \
    "$(echo "$s0 $s1 $HZ $N" | awk '{printf "%.3f", ($2-$1)/$3*1e6/$4}')" "$rps" "$p50" "$p99" >>"$OUT/runs.tsv"

  rkb "$i" ringkv-bench rkb --io-uring yes
  rkb "$i" ringkv-bench-epoll rke --io-uring no
done

# Medians per client.
python3 - "$OUT/runs.tsv" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
cols = ["client_us_per_req", "server_us_per_req", "rps", "p50_us", "p99_us"]
med = {}
print("| client | client CPU µs/req | server CPU µs/req | requests/s | p50 µs | p99 µs |")
print("|---|---|---|---|---|---|")
for client in ["redis-benchmark", "ringkv-bench", "ringkv-bench-epoll"]:
    rs = [r for r in rows if r["client"] == client]
    med[client] = {c: statistics.median(float(r[c]) for r in rs) for c in cols}
    m = med[client]
    print(f"| {client} (median of {len(rs)}) | {m['client_us_per_req']:.2f} | {m['server_us_per_req']:.2f} | {m['rps']:.0f} | {m['p50_us']:.0f} | {m['p99_us']:.0f} |")
ratio = med["ringkv-bench"]["client_us_per_req"] / med["redis-benchmark"]["client_us_per_req"]
print(f"\nclient CPU per request, ringkv-bench / redis-benchmark: {ratio:.2f}")
ratio = med["ringkv-bench-epoll"]["client_us_per_req"] / med["redis-benchmark"]["client_us_per_req"]
print(f"client CPU per request, ringkv-bench --io-uring no / redis-benchmark: {ratio:.2f}")
EOF
cp "$OUT/rb1.clean" "$OUT/redis-benchmark.txt"
cp "$OUT/rkb1.hgrm" "$OUT/ringkv-bench.hgrm"
"$BENCH" plot "$OUT/redis-benchmark.txt" "$OUT/ringkv-bench.hgrm" -o "$OUT/vs-redis-benchmark.svg" --log-y \
  --title "GET 100 B, $C connections, -P 1, redis-server on core 0, client on core 1"
echo "runs: $OUT/runs.tsv, plot: $OUT/vs-redis-benchmark.svg"
