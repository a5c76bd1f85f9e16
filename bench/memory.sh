#!/usr/bin/env bash
# Memory per key (strings) and per element (collections): ringkv against
# Debian's redis-server and, when it is there, valkey-server.
#
# Every measurement starts its server fresh and empty (`--save ""
# --appendonly no`, on a free port, pinned to SERVER_CPU; the loader,
# redis-cli --pipe, is pinned to CLIENT_CPU), reads INFO memory `used_memory`
# (bytes the server's allocator handed out: jemalloc in redis-server,
# ringkv's counting allocator over jemalloc in ringkv, malloc_usable_size in
# a libc-malloc valkey-server), loads, reads it again, and stops the server
# by PID.
#
# Part "strings" (exactly what /work/shared/tools/mem-per-key.sh does):
# FLUSHALL SYNC, 0.5 s, used_memory, then STR_KEYS keys "key:<i>" set to a
# value of SIZE bytes ("x" × SIZE) through redis-cli --pipe, 0.5 s,
# used_memory and used_memory_rss again:
#   bytes/key     = Δused_memory ÷ STR_KEYS
#   RSS/key       = used_memory_rss (the whole process, as mem-per-key.sh) ÷ STR_KEYS
#   Δ RSS/key     = Δused_memory_rss ÷ STR_KEYS      (the load alone)
# for every SIZE in STR_SIZES and every server in STR_SERVERS
# (ringkv-t1 / ringkv-t4 = ringkv with --io-threads 1 / 4).
#
# Collection parts: for every E in ELEMS, KEYS keys of E elements each, KEYS
# = TOTAL_ELEMENTS ÷ E unless KEYS is set (then KEYS for every E), sent in
# commands of at most 1000 elements:
#   hash    HSET h:<i> f0 v<i>0 … f<E-1> v<i><E-1>
#   set     SADD s:<i> m0 … m<E-1>                  (string members)
#   intset  SADD n:<i> <i*E+0> … <i*E+E-1>          (integer members)
#   zset    ZADD z:<i> 0 m0 1 m1 … <E-1> m<E-1>
#   list    RPUSH l:<i> v0 … v<E-1>
#   bytes/element = Δused_memory ÷ (KEYS × E)       (and Δ RSS, from /proc, the same way)
# The key itself and the per-key overhead are counted in: they are part of
# what a user pays per element of a collection.
#
# The RESP input of each part is generated once and replayed to every
# server. Every load is bounded by LOAD_TIMEOUT, every INFO by 10 s.
#
# Usage: bench/memory.sh [part ...]   (default: strings hash set intset zset list)
# Env:   STR_SIZES ("16 100")  STR_KEYS (1000000)
#        STR_SERVERS ("ringkv-t1 ringkv-t4 redis valkey")
#        ELEMS ("10 100 10000")  TOTAL_ELEMENTS (1000000)  KEYS (unset)
#        COLL_SERVERS ("ringkv-t1 redis valkey")
#        PORT (17479, first port tried)  SERVER_CPU (0)  CLIENT_CPU (1)
#        LOAD_TIMEOUT (600 s)  RAW_OUT (file: keep the raw TSV rows)
#        RINGKV_BIN (default: build release; NO_BUILD=1 uses target/release)
#        REDIS_BIN (/usr/bin/redis-server)
#        VALKEY_BIN (valkey-server on PATH; if none, valkey is left out)
# Stops only the processes it started, by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
# stop_server, wait_ready
source bench/lib.sh

PARTS=("$@")
[ ${#PARTS[@]} -gt 0 ] || PARTS=(strings hash set intset zset list)
STR_SIZES=${STR_SIZES:-"16 100"}
STR_KEYS=${STR_KEYS:-1000000}
STR_SERVERS=${STR_SERVERS:-"ringkv-t1 ringkv-t4 redis valkey"}
ELEMS=${ELEMS:-"10 100 10000"}
TOTAL_ELEMENTS=${TOTAL_ELEMENTS:-1000000}
COLL_SERVERS=${COLL_SERVERS:-"ringkv-t1 redis valkey"}
PORT0=${PORT:-17479}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
LOAD_TIMEOUT=${LOAD_TIMEOUT:-600}
REDIS_BIN=${REDIS_BIN:-/usr/bin/redis-server}
VALKEY_BIN=${VALKEY_BIN:-$(command -v valkey-server || true)}

for part in "${PARTS[@]}"; do
  case $part in strings|hash|set|intset|zset|list) ;;
    *) echo "memory.sh: unknown part $part (strings hash set intset zset list)" >&2; exit 1 ;; esac
done
for tool in redis-cli python3 taskset timeout "$REDIS_BIN"; do
  command -v "$tool" >/dev/null 2>&1 || { echo "memory.sh: $tool not found" >&2; exit 1; }
done
if [ -z "$VALKEY_BIN" ] || ! command -v "$VALKEY_BIN" >/dev/null 2>&1; then
  echo "memory.sh: no valkey-server (set VALKEY_BIN); leaving valkey out" >&2
  STR_SERVERS=$(tr ' ' '\n' <<<"$STR_SERVERS" | grep -vx valkey | tr '\n' ' ' || true)
  COLL_SERVERS=$(tr ' ' '\n' <<<"$COLL_SERVERS" | grep -vx valkey | tr '\n' ' ' || true)
  VALKEY_BIN=""
fi
if [ -z "${RINGKV_BIN:-}" ]; then
  [ "${NO_BUILD:-0}" = 1 ] || cargo build --release -p ringkv-server >&2
  RINGKV_BIN="${CARGO_TARGET_DIR:-target}/release/ringkv-server"
fi
[ -x "$RINGKV_BIN" ] || { echo "memory.sh: $RINGKV_BIN not found" >&2; exit 1; }

WORK=$(mktemp -d /tmp/ringkv-memory.XXXXXX)
RAW="$WORK/raw.tsv"
SERVER_PID=""
cleanup() {
  stop_server
  [ -z "${RAW_OUT:-}" ] || cp "$RAW" "$RAW_OUT" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { # first port from PORT0 that nothing on 127.0.0.1 accepts on
  local p
  for p in $(seq "$PORT0" $((PORT0 + 200))); do
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return 0; }
  done
  echo "memory.sh: no free port in $PORT0..$((PORT0 + 200))" >&2; return 1
}

start_server() { # name: ringkv-t<N> | redis | valkey
  PORT=$(free_port)
  local common=(--port "$PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$WORK")
  case $1 in
    redis) taskset -c "$SERVER_CPU" "$REDIS_BIN" "${common[@]}" >"$WORK/$1.log" 2>&1 & ;;
    valkey) taskset -c "$SERVER_CPU" "$VALKEY_BIN" "${common[@]}" >"$WORK/$1.log" 2>&1 & ;;
    ringkv-t*) taskset -c "$SERVER_CPU" "$RINGKV_BIN" "${common[@]}" --io-threads "${1#ringkv-t}" \
                 >"$WORK/$1.log" 2>&1 & ;;
    *) echo "memory.sh: unknown server $1 (ringkv-t<N> redis valkey)" >&2; exit 1 ;;
  esac
  SERVER_PID=$!
  wait_ready && return 0
  echo "memory.sh: $1 did not start" >&2
  tail -20 "$WORK/$1.log" >&2
  exit 1
}

cli() { timeout 10 redis-cli -p "$PORT" "$@"; }
info_mem() { # field → value from INFO memory
  cli INFO memory | tr -d '\r' | awk -F: -v f="$1" '$1==f{print $2}'
}
# RSS once the allocator has handed its free pages back (MEMORY PURGE, then
# 0.5 s): jemalloc keeps freed pages (old bucket arrays after a resize, read
# buffers) for dirty_decay_ms, and only purges them on later allocator
# activity unless a background thread does it (redis-server runs one).
# purged_rss info → INFO used_memory_rss; purged_rss → VmRSS from /proc.
purged_rss() {
  cli MEMORY PURGE >/dev/null 2>&1 || true
  sleep 0.5
  if [ "${1:-}" = info ]; then info_mem used_memory_rss; else rss_bytes; fi
}
rss_bytes() {
  awk '/^VmRSS:/{print $2 * 1024}' "/proc/$SERVER_PID/status"
}
load() { # server file → loads it with redis-cli --pipe, fails on any error
  taskset -c "$CLIENT_CPU" timeout "$LOAD_TIMEOUT" redis-cli -p "$PORT" --pipe <"$2" >"$WORK/pipe.out" 2>&1 || true
  grep -q 'errors: 0,' "$WORK/pipe.out" || {
    echo "memory.sh: $1: loading $(basename "$2") failed or timed out (${LOAD_TIMEOUT}s):" >&2
    tail -3 "$WORK/pipe.out" >&2; exit 1; }
}
version() { # server → version string
  case $1 in
    redis) "$REDIS_BIN" --version | sed 's/.*v=\([^ ]*\).*malloc=\([^ ]*\).*/redis-server \1 (\2)/' ;;
    valkey) "$VALKEY_BIN" --version | sed 's/.*v=\([^ ]*\).*malloc=\([^ ]*\).*/valkey-server \1 (\2)/' ;;
    ringkv*) "$RINGKV_BIN" --version | sed 's/.*v=\([^ ]*\).*/ringkv-server \1/' ;;
  esac
}

# The RESP input of one part, generated once and reused for every server.
gen() { # part elements|size keys file
  python3 - "$1" "$2" "$3" >"$4" <<'EOF'
import sys
shape, e, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
out = sys.stdout.buffer
def cmd(args):
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(parts)
CHUNK = 1000  # elements per command at most
buf = []
for i in range(n):
    if shape == "strings":
        k = b"key:%d" % i
        buf.append(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, e, b"x" * e))
    for lo in (range(0, e, CHUNK) if shape != "strings" else ()):
        hi = min(e, lo + CHUNK)
        if shape == "hash":
            args = [b"HSET", b"h:%d" % i]
            for f in range(lo, hi):
                args += [b"f%d" % f, b"v%d%d" % (i, f)]
        elif shape == "set":
            args = [b"SADD", b"s:%d" % i] + [b"m%d" % f for f in range(lo, hi)]
        elif shape == "intset":
            args = [b"SADD", b"n:%d" % i] + [b"%d" % (i * e + f) for f in range(lo, hi)]
        elif shape == "zset":
            args = [b"ZADD", b"z:%d" % i]
            for f in range(lo, hi):
                args += [b"%d" % f, b"m%d" % f]
        else:
            args = [b"RPUSH", b"l:%d" % i] + [b"v%d" % f for f in range(lo, hi)]
        buf.append(cmd(args))
    if len(buf) >= 10000:
        out.write(b"".join(buf))
        buf.clear()
out.write(b"".join(buf))
EOF
}

# Raw rows: part elements|size keys server used_delta rss_delta rss_after
# rss_after_purge encoding (strings: INFO used_memory_rss; collections: VmRSS)
: >"$RAW"

measure_strings() { # size
  local size=$1 server m0 m1 r0 r1 rp n enc
  gen strings "$size" "$STR_KEYS" "$WORK/strings.resp"
  for server in $STR_SERVERS; do
    start_server "$server"
    cli FLUSHALL SYNC >/dev/null
    sleep 0.5
    m0=$(info_mem used_memory); r0=$(info_mem used_memory_rss)
    load "$server" "$WORK/strings.resp"
    sleep 0.5
    m1=$(info_mem used_memory); r1=$(info_mem used_memory_rss)
    rp=$(purged_rss info)
    n=$(cli DBSIZE)
    [ "$n" = "$STR_KEYS" ] || { echo "memory.sh: $server holds $n keys, expected $STR_KEYS" >&2; exit 1; }
    enc=$(cli OBJECT ENCODING key:0)
    printf 'strings\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$size" "$STR_KEYS" "$server" \
      $((m1 - m0)) $((r1 - r0)) "$r1" "$rp" "$enc" >>"$RAW"
    awk -v sz="$size" -v srv="$server" -v m=$((m1 - m0)) -v r=$((r1 - r0)) -v rt="$r1" -v rp="$rp" -v k="$STR_KEYS" -v enc="$enc" \
      'BEGIN{printf "| %d | %s | %d | %.1f | %.1f | %.2f | %.1f | %.1f | %.2f | %s |\n", sz, srv, m, m/k, rt/k, rt/m, r/k, rp/k, rp/m, enc}'
    stop_server
  done
}

measure_collection() { # shape elements
  local shape=$1 e=$2 keys server m0 m1 r0 r1 rp n first len enc
  keys=${KEYS:-$((TOTAL_ELEMENTS / e))}
  gen "$shape" "$e" "$keys" "$WORK/$shape.resp"
  case $shape in
    hash) first=h:0 len=HLEN ;; set) first=s:0 len=SCARD ;; intset) first=n:0 len=SCARD ;;
    zset) first=z:0 len=ZCARD ;; list) first=l:0 len=LLEN ;;
  esac
  for server in $COLL_SERVERS; do
    start_server "$server"
    m0=$(info_mem used_memory); r0=$(rss_bytes)
    load "$server" "$WORK/$shape.resp"
    m1=$(info_mem used_memory); r1=$(rss_bytes)
    rp=$(purged_rss)
    n=$(cli DBSIZE)
    [ "$n" = "$keys" ] || { echo "memory.sh: $server holds $n keys, expected $keys" >&2; exit 1; }
    [ "$(cli "$len" "$first")" = "$e" ] || { echo "memory.sh: $server: $first does not hold $e elements" >&2; exit 1; }
    enc=$(cli OBJECT ENCODING "$first")
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$shape" "$e" "$keys" "$server" \
      $((m1 - m0)) $((r1 - r0)) "$r1" "$rp" "$enc" >>"$RAW"
    awk -v s="$shape" -v e="$e" -v k="$keys" -v srv="$server" -v m=$((m1 - m0)) -v r=$((r1 - r0)) -v rp=$((rp - r0)) -v enc="$enc" \
      'BEGIN{printf "| %s | %d | %d | %s | %d | %.1f | %d | %.1f | %.1f | %s |\n", s, e, k, srv, m, m/(k*e), r, r/(k*e), rp/(k*e), enc}'
    stop_server
  done
}

did_strings=0 did_coll=0
for part in "${PARTS[@]}"; do
  [ "$part" = strings ] || continue
  did_strings=1
  printf '| value bytes | server | used_memory Δ | bytes/key | RSS/key | RSS ÷ used | Δ RSS/key | RSS/key after MEMORY PURGE | purged RSS ÷ used | encoding |\n'
  printf '|---:|---|---:|---:|---:|---:|---:|---:|---:|---|\n'
  for size in $STR_SIZES; do measure_strings "$size"; done
  echo
done
for part in "${PARTS[@]}"; do
  [ "$part" != strings ] || continue
  if [ $did_coll = 0 ]; then
    did_coll=1
    printf '| shape | elements/key | keys | server | used_memory Δ | bytes/element | RSS Δ | RSS bytes/element | RSS bytes/element after MEMORY PURGE | encoding |\n'
    printf '|---|---:|---:|---|---:|---:|---:|---:|---:|---|\n'
  fi
  for e in $ELEMS; do measure_collection "$part" "$e"; done
done
[ $did_coll = 0 ] || echo

# Side by side: bytes per key (strings) / per element (collections), and the
# ratio of ringkv (the first ringkv variant listed) to each peer.
python3 - "$RAW" <<'EOF'
import sys
from collections import OrderedDict
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
def table(part_filter, unit):
    groups = OrderedDict()
    servers = []
    for part, x, keys, srv, m, r, rt, rp, enc in rows:
        if not part_filter(part):
            continue
        div = int(keys) * (1 if part == "strings" else int(x))
        groups.setdefault((part, x), {})[srv] = (int(m) / div, enc)
        if srv not in servers:
            servers.append(srv)
    if not groups:
        return
    rk = next((s for s in servers if s.startswith("ringkv")), None)
    peers = [s for s in servers if not s.startswith("ringkv")]
    head = ["part", "size"] + [f"{s} {unit}" for s in servers] + [f"{rk} ÷ {p}" for p in peers if rk]
    print("| " + " | ".join(head) + " |")
    print("|---|---:|" + "---:|" * (len(head) - 2))
    for (part, x), d in groups.items():
        cells = [part, x]
        cells += [f"{d[s][0]:.1f} ({d[s][1]})" if s in d else "–" for s in servers]
        for p in peers:
            if rk in d and p in d and d[p][0] > 0:
                cells.append(f"{d[rk][0] / d[p][0]:.2f}×")
            elif rk:
                cells.append("–")
        print("| " + " | ".join(cells) + " |")
    print()
table(lambda p: p == "strings", "B/key")
table(lambda p: p != "strings", "B/elem")
EOF

servers_used=$(printf '%s\n' $STR_SERVERS $COLL_SERVERS | sed 's/^ringkv-t.*/ringkv/' | awk '!seen[$0]++')
vers=$(for s in $servers_used; do version "$s"; done | paste -sd ';' | sed 's/;/; /g')
echo "$vers; server on core $SERVER_CPU, loader on core $CLIENT_CPU; $(date -u '+%Y-%m-%d %H:%M UTC')"
