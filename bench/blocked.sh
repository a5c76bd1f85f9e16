#!/usr/bin/env bash
# Idle cost of many blocked clients: ringkv against Debian's redis-server.
#
# For each server: start it, open CLIENTS connections that each send one
# blocking pop on their own key (`BZPOPMIN bk:<i> 0` by default; CMD=blpop
# uses `BLPOP bk:<i> 0`), wait until INFO reports them all blocked, then
# read the server's utime+stime (/proc/PID/stat) over IDLE seconds:
#   idle CPU % = Δ(utime+stime) ÷ IDLE
# Then wake every client with one write per key (pipelined from one extra
# connection) and check every blocked client got its reply, timing it.
#
# Usage: bench/blocked.sh            Env: CLIENTS (10000) IDLE (10) PORT (17489)
#        CMD (bzpopmin|blpop)  RINGKV_BIN (default: build release)
#        REDIS_BIN (/usr/bin/redis-server)
# Stops only the processes it started, by PID.
set -euo pipefail
cd "$(dirname "$0")/.."

CLIENTS=${CLIENTS:-10000}
IDLE=${IDLE:-10}
PORT=${PORT:-17489}
CMD=${CMD:-bzpopmin}
REDIS_BIN=${REDIS_BIN:-/usr/bin/redis-server}

if [ -z "${RINGKV_BIN:-}" ]; then
  cargo build --release -q -p ringkv-server
  RINGKV_BIN=target/release/ringkv-server
fi
ulimit -n "$(ulimit -Hn)"
need=$((CLIENTS + 64))
if [ "$(ulimit -n)" -lt "$need" ]; then
  echo "blocked.sh: open-file limit $(ulimit -n) < $need (lower CLIENTS)" >&2
  exit 1
fi

PID=""
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null || true; }
trap cleanup EXIT

run() {
  local name=$1 bin=$2
  "$bin" --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no \
    --maxclients $((CLIENTS + 32)) >/dev/null 2>&1 &
  PID=$!
  python3 - "$name" "$PID" "$PORT" "$CLIENTS" "$IDLE" "$CMD" <<'EOF'
import os, socket, sys, time
name, pid, port, n, idle, cmd = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
tick = os.sysconf("SC_CLK_TCK")

def cpu():
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tick

def enc(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)

def connect():
    for _ in range(200):
        try:
            return socket.create_connection(("127.0.0.1", port))
        except OSError:
            time.sleep(0.05)
    sys.exit(f"{name}: server did not start")

def info_field(s, field):
    s.sendall(enc("INFO", "clients"))
    data = b""
    while data.count(b"\r\n") < 2 or not data.endswith(b"\r\n"):
        data += s.recv(65536)
    for line in data.decode().splitlines():
        if line.startswith(field + ":"):
            return int(line.split(":")[1])
    return -1

ctl = connect()
socks = []
for i in range(n):
    s = connect()
    if cmd == "blpop":
        s.sendall(enc("BLPOP", f"bk:{i}", "0"))
    else:
        s.sendall(enc("BZPOPMIN", f"bk:{i}", "0"))
    socks.append(s)
deadline = time.time() + 60
while info_field(ctl, "blocked_clients") != n:
    if time.time() > deadline:
        sys.exit(f"{name}: only {info_field(ctl, 'blocked_clients')} of {n} blocked")
    time.sleep(0.1)
c0, t0 = cpu(), time.time()
time.sleep(idle)
c1, t1 = cpu(), time.time()
pct = 100.0 * (c1 - c0) / (t1 - t0)

wake = b"".join(
    enc("RPUSH", f"bk:{i}", "v") if cmd == "blpop" else enc("ZADD", f"bk:{i}", "1", "v")
    for i in range(n))
w0 = time.time()
ctl.sendall(wake)
got = 0
for s in socks:
    s.settimeout(30)
    data = b""
    while not data.endswith(b"\r\n") or data.count(b"\r\n") < (5 if cmd == "blpop" else 7):
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    if data.startswith(b"*"):
        got += 1
w1 = time.time()
print(f"{name:8s} clients={n} blocked idle {idle:.0f}s: server CPU {pct:.2f}% "
      f"({(c1 - c0) * 1000:.0f} ms)  woken {got}/{n} in {(w1 - w0) * 1000:.0f} ms")
for s in socks:
    s.close()
if got != n:
    sys.exit(1)
EOF
  kill "$PID"
  wait "$PID" 2>/dev/null || true
  PID=""
}

run ringkv "$RINGKV_BIN"
run redis "$REDIS_BIN"
