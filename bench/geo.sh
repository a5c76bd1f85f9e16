#!/usr/bin/env bash
# GEOSEARCH over 1,000,000 points, ringkv beside redis-server 7.0.
#
#   bench/geo.sh [ROUNDS]     (default 3 alternating rounds)
#
# Loads 1M points spread uniformly over longitude -180..180 and latitude
# -85..85 (awk, fixed seed: the same points every run) with GEOADD, 1000
# points a command, through redis-cli --pipe. Then redis-benchmark
# (-c 20, -P 1, -r 85) sends GEOSEARCH from a random whole-degree centre
# in 0..84 x 0..84 (two __rand_int__):
#   plain:  GEOSEARCH geo FROMLONLAT x y BYRADIUS 100 km
#   dist:   the same with WITHDIST WITHCOORD ASC COUNT 20
# and reports server CPU ns per query (Δ utime+stime of the whole process
# ÷ queries), the load's server CPU seconds, and the results of one query
# (the average size of a reply).
# Servers on core SERVER_CPU, clients on CLIENT_CPU.
# Env: N (100000) POINTS (1000000) PORT (17685) SERVER_CPU (0) CLIENT_CPU (1)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
need_tools bench/geo.sh redis-cli redis-server redis-benchmark taskset awk
ROUNDS=${1:-3}
N=${N:-100000}
POINTS=${POINTS:-1000000}
PORT=${PORT:-17685}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
ringkv_release_bin
DATA=$(mktemp /tmp/geo-bench.XXXXXX)
trap 'stop_server; rm -f "$DATA"' EXIT

# The points as RESP GEOADD commands.
awk -v n="$POINTS" 'BEGIN {
  srand(20261126);
  for (i = 0; i < n; i += 1000) {
    m = (n - i < 1000) ? n - i : 1000;
    printf "*%d\r\n$6\r\nGEOADD\r\n$3\r\ngeo\r\n", 2 + 3 * m;
    for (j = 0; j < m; j++) {
      x = sprintf("%.6f", rand() * 360 - 180);
      y = sprintf("%.6f", rand() * 170 - 85);
      id = "p" (i + j);
      printf "$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(x), x, length(y), y, length(id), id;
    }
  }
}' >"$DATA"

# load_s → server CPU seconds (2 decimals) to load the points
load_s() {
  local a b tck
  tck=$(getconf CLK_TCK)
  a=$(cpu_ticks "$SERVER_PID")
  taskset -c "$CLIENT_CPU" redis-cli -p "$PORT" --pipe <"$DATA" >/dev/null
  b=$(cpu_ticks "$SERVER_PID")
  [ "$(redis-cli -p "$PORT" ZCARD geo)" = "$POINTS" ] || { echo "load incomplete" >&2; exit 1; }
  echo "$(((b - a) * 100 / tck))" | awk '{printf "%.2f", $1 / 100}'
}

# search_ns ARGS... → server CPU ns per query
search_ns() {
  local a b tck
  tck=$(getconf CLK_TCK)
  a=$(cpu_ticks "$SERVER_PID")
  taskset -c "$CLIENT_CPU" redis-benchmark -p "$PORT" -c 20 -P 1 -r 85 -n "$N" -q \
    GEOSEARCH geo FROMLONLAT __rand_int__ __rand_int__ BYRADIUS 100 km "$@" >/dev/null 2>&1
  b=$(cpu_ticks "$SERVER_PID")
  echo $(((b - a) * 1000000000 / tck / N))
}

printf '%-7s %5s %10s %14s %14s %9s\n' server round "load cpu s" "plain ns/q" "dist ns/q" results
for r in $(seq 1 "$ROUNDS"); do
  for s in ringkv redis; do
    start_pinned "$s"
    ld=$(load_s)
    plain=$(search_ns)
    dist=$(search_ns WITHDIST WITHCOORD ASC COUNT 20)
    res=$(redis-cli -p "$PORT" GEOSEARCH geo FROMLONLAT 42 42 BYRADIUS 100 km | wc -l)
    printf '%-7s %5s %10s %14s %14s %9s\n' "$s" "$r" "$ld" "$plain" "$dist" "$res"
    stop_server
  done
done
