#!/usr/bin/env bash
# Memory per element of small collections: ringkv against Debian's redis-server.
#
# For each server and each shape, starts the server empty, reads INFO memory
# `used_memory` (bytes the allocator handed out; jemalloc in both), loads
# KEYS keys with redis-cli --pipe, reads `used_memory` again, and reports
#   bytes/element = Δused_memory ÷ (KEYS × 10)      (and Δ RSS the same way)
# Shapes (the issue's bar):
#   hash   KEYS hashes of 10 fields:      HSET h:<i> f0 v<i>0 … f9 v<i>9
#   set    KEYS sets of 10 integers:      SADD s:<i> <i*10+0> … <i*10+9>
#   zset   KEYS sorted sets of 10 members: ZADD z:<i> 0 m0 1 m1 … 9 m9
# The key itself and the per-key overhead are counted in: they are part of
# what a user pays per element of a small collection.
#
# Usage: bench/memory.sh [shape ...]              (default: hash set zset)
# Env:   KEYS (1000000)  PORT (17479)  RINGKV_BIN (default: build release)
#        REDIS_BIN (/usr/bin/redis-server)
# Stops only the processes it started, by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
# stop_server, cpu_ticks
source bench/lib.sh

SHAPES=("$@")
[ ${#SHAPES[@]} -gt 0 ] || SHAPES=(hash set zset)
KEYS=${KEYS:-1000000}
PORT=${PORT:-17479}
REDIS_BIN=${REDIS_BIN:-/usr/bin/redis-server}

for tool in redis-cli python3 "$REDIS_BIN"; do
  command -v "$tool" >/dev/null 2>&1 || { echo "memory.sh: $tool not found" >&2; exit 1; }
done
if [ -z "${RINGKV_BIN:-}" ]; then
  cargo build --release -p ringkv-server >&2
  RINGKV_BIN="${CARGO_TARGET_DIR:-target}/release/ringkv-server"
fi

WORK=$(mktemp -d /tmp/ringkv-memory.XXXXXX)
SERVER_PID=""
trap 'stop_server; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

start_server() { # name
  if redis-cli -p "$PORT" PING >/dev/null 2>&1; then
    echo "memory.sh: something already listens on port $PORT" >&2
    exit 1
  fi
  local common=(--port "$PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$WORK")
  case $1 in
    redis) "$REDIS_BIN" "${common[@]}" >"$WORK/$1.log" 2>&1 & ;;
    ringkv) "$RINGKV_BIN" "${common[@]}" >"$WORK/$1.log" 2>&1 & ;;
  esac
  SERVER_PID=$!
  wait_ready && return 0
  echo "memory.sh: $1 did not start" >&2
  cat "$WORK/$1.log" >&2
  exit 1
}

used_memory() {
  redis-cli -p "$PORT" INFO memory | tr -d '\r' | awk -F: '$1=="used_memory"{print $2}'
}
rss_bytes() {
  awk '/^VmRSS:/{print $2 * 1024}' "/proc/$SERVER_PID/status"
}

# The RESP input for one shape, generated once and reused for both servers.
gen() { # shape file
  python3 - "$1" "$KEYS" >"$2" <<'EOF'
import sys
shape, n = sys.argv[1], int(sys.argv[2])
out = sys.stdout.buffer
def cmd(args):
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(parts)
buf = []
for i in range(n):
    if shape == "hash":
        args = [b"HSET", b"h:%d" % i]
        for f in range(10):
            args += [b"f%d" % f, b"v%d%d" % (i, f)]
    elif shape == "set":
        args = [b"SADD", b"s:%d" % i] + [b"%d" % (i * 10 + f) for f in range(10)]
    else:
        args = [b"ZADD", b"z:%d" % i]
        for f in range(10):
            args += [b"%d" % f, b"m%d" % f]
    buf.append(cmd(args))
    if len(buf) == 10000:
        out.write(b"".join(buf))
        buf.clear()
out.write(b"".join(buf))
EOF
}

printf '| shape | server | used_memory Δ | bytes/element | RSS Δ | RSS bytes/element | encoding |\n'
printf '|---|---|---:|---:|---:|---:|---|\n'
for shape in "${SHAPES[@]}"; do
  gen "$shape" "$WORK/$shape.resp"
  for server in ringkv redis; do
    start_server "$server"
    m0=$(used_memory); r0=$(rss_bytes)
    redis-cli -p "$PORT" --pipe <"$WORK/$shape.resp" >"$WORK/pipe.out" 2>&1 || true
    grep -q 'errors: 0,' "$WORK/pipe.out" || { echo "memory.sh: $server: loading failed:" >&2; tail -3 "$WORK/pipe.out" >&2; exit 1; }
    m1=$(used_memory); r1=$(rss_bytes)
    n=$(redis-cli -p "$PORT" DBSIZE)
    [ "$n" = "$KEYS" ] || { echo "memory.sh: $server holds $n keys, expected $KEYS" >&2; exit 1; }
    first=$(case $shape in hash) echo h:0 ;; set) echo s:0 ;; zset) echo z:0 ;; esac)
    enc=$(redis-cli -p "$PORT" OBJECT ENCODING "$first")
    awk -v s="$shape" -v srv="$server" -v m=$((m1 - m0)) -v r=$((r1 - r0)) -v e=$((KEYS * 10)) -v enc="$enc" \
      'BEGIN{printf "| %s | %s | %d | %.1f | %d | %.1f | %s |\n", s, srv, m, m/e, r, r/e, enc}'
    stop_server
  done
done
echo
echo "KEYS=$KEYS keys of 10 elements each; $("$REDIS_BIN" --version | sed 's/.*v=\([^ ]*\).*/redis-server \1/'); $(date -u '+%Y-%m-%d %H:%M UTC')"
