#!/usr/bin/env bash
# Streams, ringkv beside redis-server 7.0.
#
#   bench/streams.sh [ROUNDS]     (default 3 alternating rounds)
#
# 1. XADD s * f1 <v> f2 <v> f3 <v> (values: redis-benchmark's 12-digit
#    __rand_int__): server CPU ns per request (Δ utime+stime of the whole
#    process ÷ requests) at -P 1 and -P 16 (redis-benchmark -c 20), each on
#    a fresh server.
# 2. XREADGROUP GROUP g c COUNT 1 STREAMS q > over a stream of N_GROUP
#    entries (IDs 1-0 .. N-0), then XACK q g <random id of those>: ns per
#    request of each, at -P 16 (and at -P 1 over a stream of N_GROUP_P1);
#    their sum is the cost of one read-and-ack.
# 3. Memory per entry: used_memory growth over 1,000,000 XADDs of 3
#    fields (the same command as 1), divided by the entries.
# 4. The same with small canonical integers for values (a sensor reading:
#    temp -500..500, hum 0..100, pres 90000..110000; 300,000 entries fed
#    by redis-cli --pipe), where a listpack stores integers compactly.
# Servers on core SERVER_CPU, clients on CLIENT_CPU.
# Env: N_P1 (200000) N_P16 (1000000) N_GROUP (500000) N_GROUP_P1 (100000)
#      PORT (17684)
#      SERVER_CPU (0) CLIENT_CPU (1)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
need_tools bench/streams.sh redis-cli redis-server redis-benchmark taskset
ROUNDS=${1:-3}
N_P1=${N_P1:-200000}
N_P16=${N_P16:-1000000}
N_GROUP=${N_GROUP:-500000}
N_GROUP_P1=${N_GROUP_P1:-100000}
PORT=${PORT:-17684}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
ringkv_release_bin
trap stop_server EXIT

# ns P N R CMD... → server CPU ns per request of CMD (-c 20, -P P, N
# requests, __rand_int__ below R)
ns() {
  local p=$1 n=$2 range=$3 a b tck
  shift 3
  a=$(cpu_ticks "$SERVER_PID")
  taskset -c "$CLIENT_CPU" redis-benchmark -p "$PORT" -c 20 -P "$p" -n "$n" -r "$range" -q \
    "$@" >/dev/null 2>&1
  b=$(cpu_ticks "$SERVER_PID")
  tck=$(getconf CLK_TCK)
  echo $(((b - a) * 1000000000 / tck / n))
}

used_memory() { redis-cli -p "$PORT" INFO memory | awk -F: '/^used_memory:/ {print $2+0}'; }

XADD=(XADD s '*' f1 __rand_int__ f2 __rand_int__ f3 __rand_int__)

# int_entries → 300,000 XADDs of three small integers (a fixed LCG)
int_entries() {
  awk 'BEGIN { x = 1; for (i = 0; i < 300000; i++) {
    x = (x * 1103515245 + 12345) % 2147483648; t = x % 1001 - 500
    x = (x * 1103515245 + 12345) % 2147483648; h = x % 101
    x = (x * 1103515245 + 12345) % 2147483648; p = 90000 + x % 20001
    printf "XADD m * temp %d hum %d pres %d\n", t, h, p } }'
}

# group_stream KEY N → KEY holds entries 1-0 .. N-0 and a group g at 0
group_stream() {
  for i in $(seq 1 "$2"); do printf 'XADD %s %d-0 f %d\n' "$1" "$i" "$i"; done |
    redis-cli -p "$PORT" --pipe >/dev/null
  redis-cli -p "$PORT" XGROUP CREATE "$1" g 0 >/dev/null
}

printf '%-7s %5s %10s %10s %12s %10s %10s %10s %10s %12s\n' server round "XADD P1" "XADD P16" "bytes/entry" "XRG P1" "XACK P1" "XRG P16" "XACK P16" "int B/entry"
for r in $(seq 1 "$ROUNDS"); do
  for s in ringkv redis; do
    start_pinned "$s"
    p1=$(ns 1 "$N_P1" 1000000000 "${XADD[@]}")
    stop_server
    start_pinned "$s"
    before=$(used_memory)
    p16=$(ns 16 "$N_P16" 1000000000 "${XADD[@]}")
    after=$(used_memory)
    len=$(redis-cli -p "$PORT" XLEN s)
    per=$(((after - before) / len))
    # The group streams: IDs 1-0 .. N-0, one field each.
    group_stream q1 "$N_GROUP_P1"
    rg1=$(ns 1 "$N_GROUP_P1" 1 XREADGROUP GROUP g c COUNT 1 STREAMS q1 '>')
    ack1=$(ns 1 "$N_GROUP_P1" "$N_GROUP_P1" XACK q1 g "__rand_int__-0")
    group_stream q "$N_GROUP"
    rg=$(ns 16 "$N_GROUP" 1 XREADGROUP GROUP g c COUNT 1 STREAMS q '>')
    ack=$(ns 16 "$N_GROUP" "$N_GROUP" XACK q g "__rand_int__-0")
    before=$(used_memory)
    int_entries | redis-cli -p "$PORT" --pipe >/dev/null
    after=$(used_memory)
    iper=$(((after - before) / $(redis-cli -p "$PORT" XLEN m)))
    printf '%-7s %5s %10s %10s %12s %10s %10s %10s %10s %12s\n' "$s" "$r" "$p1" "$p16" "$per" "$rg1" "$ack1" "$rg" "$ack" "$iper"
    stop_server
  done
done
