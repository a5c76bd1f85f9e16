#!/usr/bin/env bash
# Per-thread CPU cost per request, and a multi-core throughput PROJECTION.
#
# The machines here have 2 cores, so multi-core throughput cannot be measured;
# it is projected on paper from measured per-thread costs (docs/DESIGN §7).
#
# For ROUNDS rounds, alternating variants (in reverse order every other
# round), each server is started pinned to core SERVER_CPU (all of its threads share that core) with the flags of
# bench/compare.sh, and redis-benchmark, pinned to CLIENT_CPU, runs
# -t set / -t get, -c 50 -d 100 -r 1000000 --csv at -P 1 (N_P1) and -P 16
# (N_P16), one invocation per test. Around each invocation the script reads,
# for every thread in /proc/PID/task/*: utime+stime (stat fields 14+15),
# sum_exec_runtime (schedstat, ns; kept in the raw rows as a cross-check) and
# syscr/syscw (the io file: read/write syscalls made by that thread); the
# process total from /proc/PID/stat (includes threads that exited); and
# total_commands_processed from INFO stats. ns/req = Δticks·1e9/CLK_TCK/Δcmds.
#
# Thread roles:  exec  = main thread (TID == PID)
#                io    = ringkv "io-thread-K" / redis "io_thd_K" (summed; also
#                        shown as a mean per IO thread)
#                other = total - exec - io (lazyfree, bio_*, jemalloc, exited)
#
# Projection at N IO threads: min(N / io_cost, 1 / exec_cost), per (test, -P):
#   ringkv (threads): from ringkv-t2 (else t4): exec = main thread ns/req (it
#           does no socket IO), io = all IO threads' ns/req summed.
#   redis:  Redis's IO threads busy-poll and its main thread busy-waits for
#           them, so redis-t2/t4's per-thread CPU is mostly spinning (measured:
#           ~300 us/req and ~25x fewer requests/s with both threads on one core)
#           and does not measure work. Instead, from redis-t1 (one thread, no
#           spinning), which also runs -t ping_mbulk: io_cost = total ns/req of
#           PING (socket read, parse, dispatch, reply, write: everything but the
#           keyspace work), E = total ns/req of SET/GET - io_cost. f = the IO
#           threads' share of read/write syscalls in redis-t2 (syscr+syscw from
#           /proc/PID/task/TID/io: spin-free; nominal 0.5 if missing).
#           (A) exec = E + (1-f)*io_cost: the main thread as in redis-t2, which
#           serves its own share of the clients. (B) Redis at io-threads N+1:
#           min((N+1)/io_cost, 1/(E + io_cost/(N+1))). Biases: dispatch and
#           epoll_wait stay on Redis's main thread (io_cost high, E low).
#           (utime/stime is not used for the split: the kernel scales both to
#           the whole life of the thread, so deltas of one run are unreliable.)
#   ringkv (t1, PING split): ringkv-t1 split the same way (like for like).
#   ringkv (awake): as ringkv (threads) but exec = the execution thread's CPU
#           while awake (INFO exec_thread_awake_cpu_us: its CPU less what its
#           sleeps and wake-ups cost; sampled, one awake interval in 8). A
#           saturated execution thread never sleeps, so this is its cost as
#           the bottleneck; the plain exec column charges it the sleep and
#           wake-up per batch of 2-3 requests that a shared core forces.
# redis-t2/t4 run N/REDIS_TN_DIV requests: only their syscall share is used.
#
# Usage: bench/threads.sh [variant ...]
#   variants: ringkv-t1 ringkv-t2 ringkv-t4 redis-t1 redis-t2 redis-t4 (default: all)
# Env:   N_P1 (300000)  N_P16 (2000000)  ROUNDS (3)  PORT (first port tried, 17391)
#        PIPES ("1 16": the pipelines run; "16" for -P 16 only)
#        BACKENDS (io_uring; or epoll, or "io_uring epoll": ringkv variants per backend)
#        NO_BUILD=1 (skip cargo build)  RINGKV_BIN  REDIS_BIN (/usr/bin/redis-server)
#        SERVER_CPU (0)  CLIENT_CPU (1)  RAW_OUT (TSV of per-round, per-thread rows)
#        REDIS_TN_DIV (10: redis-t2/t4 serve N/10 requests; they spin)
#        RINGKV_ARGS (extra ringkv arguments). For the projection inputs use
#        RINGKV_ARGS="--io-threads-idle-exec no": by default, when the
#        execution thread sleeps, an IO thread runs the execution step itself
#        (on one shared core it always does), so the main thread's cost would
#        not be the execution cost; with "no" every batch runs on the main thread.
# Stops only the servers it started, by PID (SHUTDOWN NOSAVE, then kill).
set -euo pipefail
cd "$(dirname "$0")/.."

VARIANTS=("$@")
[ ${#VARIANTS[@]} -gt 0 ] || VARIANTS=(ringkv-t1 ringkv-t2 ringkv-t4 redis-t1 redis-t2 redis-t4)
read -r -a BACKEND_LIST <<<"${BACKENDS:-io_uring}"
N_P1=${N_P1:-300000}
N_P16=${N_P16:-2000000}
PIPES=${PIPES:-1 16}
[ -n "${PIPES// /}" ] || { echo "threads.sh: PIPES is empty" >&2; exit 1; }
for p in $PIPES; do
  [ "$p" = 1 ] || [ "$p" = 16 ] || { echo "threads.sh: PIPES: $p is neither 1 nor 16" >&2; exit 1; }
done
ROUNDS=${ROUNDS:-3}
PORT0=${PORT:-17391}
REDIS_BIN=${REDIS_BIN:-/usr/bin/redis-server}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
REDIS_TN_DIV=${REDIS_TN_DIV:-10}
CLK_TCK=$(getconf CLK_TCK)

for tool in redis-benchmark redis-cli taskset timeout python3 "$REDIS_BIN"; do
  command -v "$tool" >/dev/null 2>&1 || { echo "threads.sh: $tool not found" >&2; exit 1; }
done
RINGKV_BIN=${RINGKV_BIN:-${CARGO_TARGET_DIR:-target}/release/ringkv-server}
if [[ " ${VARIANTS[*]}" == *" ringkv-"* ]]; then
  [ "${NO_BUILD:-0}" = 1 ] || cargo build --release -p ringkv-server >&2
  [ -x "$RINGKV_BIN" ] || { echo "threads.sh: $RINGKV_BIN is not executable" >&2; exit 1; }
fi

# Expand ringkv variants per backend: ringkv-t2 → ringkv-t2 (one backend) or
# ringkv-t2-io_uring, ringkv-t2-epoll (several).
RUN=()
for v in "${VARIANTS[@]}"; do
  case $v in
    ringkv-t[0-9]*) if [ ${#BACKEND_LIST[@]} -eq 1 ]; then RUN+=("$v")
                    else for b in "${BACKEND_LIST[@]}"; do RUN+=("$v-$b"); done; fi ;;
    redis-t[0-9]*) RUN+=("$v") ;;
    *) echo "threads.sh: unknown variant $v (ringkv-tN | redis-tN)" >&2; exit 1 ;;
  esac
done

WORK=$(mktemp -d /tmp/ringkv-threads.XXXXXX)
RAW=$WORK/raw.tsv
: >"$RAW"
SERVER_PID="" PORT="" FAILED="" BENCH_PID=""

stop_server() {
  [ -n "$SERVER_PID" ] || return 0
  if kill -0 "$SERVER_PID" 2>/dev/null; then
    timeout 5 redis-cli -p "$PORT" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
    for _ in $(seq 1 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.05; done
    if kill -0 "$SERVER_PID" 2>/dev/null; then
      kill -TERM "$SERVER_PID" 2>/dev/null || true
      for _ in $(seq 1 60); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.05; done
      kill -0 "$SERVER_PID" 2>/dev/null && kill -KILL "$SERVER_PID" 2>/dev/null || true
    fi
  fi
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
}
cleanup() {
  if [ -n "$BENCH_PID" ]; then kill -TERM "$BENCH_PID" 2>/dev/null || true; wait "$BENCH_PID" 2>/dev/null || true; fi
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
  echo "threads.sh: no free port in $PORT0..$((PORT0 + 200))" >&2; return 1
}

start_server() { # variant → 0 if it answers PING, 1 otherwise (logged)
  local v=$1 n args
  PORT=$(free_port)
  args=(--port "$PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$WORK")
  n=${v#*-t}; n=${n%%-*}
  case $v in
    redis-*) args+=(--io-threads "$n")
             [ "$n" -gt 1 ] && args+=(--io-threads-do-reads yes)
             taskset -c "$SERVER_CPU" "$REDIS_BIN" "${args[@]}" >"$WORK/$v.log" 2>&1 & ;;
    ringkv-*) local b=${v#ringkv-t"$n"}; b=${b#-}; b=${b:-${BACKEND_LIST[0]}}
             case $b in io_uring) args+=(--io-uring yes) ;; epoll) args+=(--io-uring no) ;;
               *) echo "threads.sh: unknown backend $b (io_uring|epoll)" >&2; exit 1 ;; esac
             read -r -a extra <<<"${RINGKV_ARGS:-}"
             taskset -c "$SERVER_CPU" "$RINGKV_BIN" "${args[@]}" --io-threads "$n" "${extra[@]}" >"$WORK/$v.log" 2>&1 & ;;
  esac
  SERVER_PID=$!
  for _ in $(seq 1 200); do
    redis-cli -p "$PORT" PING 2>/dev/null | grep -q PONG && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.05
  done
  echo "threads.sh: $v: variant failed to start; log:" >&2
  sed 's/^/    /' "$WORK/$v.log" | tail -n 20 >&2
  stop_server
  return 1
}

info_stat() { # field [section] → value from INFO stats (or the section)
  timeout 10 redis-cli -p "$PORT" INFO "${2:-stats}" | tr -d '\r' | awk -F: -v f="$1" '$1==f{print $2}'
}

# snapshot PID → one line per thread: tid comm ticks(utime+stime) sched_ns
# syscalls; then "total - ticks - -" for the process (includes exited threads).
snapshot() {
  local pid=$1 t rest comm ticks sched sc
  for t in /proc/"$pid"/task/*; do
    rest=$(cat "$t/stat" 2>/dev/null) || continue
    comm=${rest#*(}; comm=${comm%)*}; comm=${comm// /_}
    ticks=$(awk '{print $12 + $13}' <<<"${rest##*) }")
    sched=$(awk '{print $1}' "$t/schedstat" 2>/dev/null || echo -)
    sc=$(awk '$1=="syscr:"{r=$2} $1=="syscw:"{w=$2} END{if (r=="") print "-"; else print r + w}' \
      "$t/io" 2>/dev/null || echo -)
    echo "${t##*/} $comm $ticks ${sched:--} ${sc:--}"
  done
  rest=$(cat "/proc/$pid/stat")
  echo "total - $(awk '{print $12 + $13}' <<<"${rest##*) }") - -"
}

role_of() { # variant tid comm → exec|io|other|total
  if [ "$2" = total ]; then echo total
  elif [ "$2" = "$SERVER_PID" ]; then echo exec
  elif [[ $1 == ringkv-* && $3 == io-thread-* ]] || [[ $1 == redis-* && $3 == io_thd_* ]]; then echo io
  else echo other; fi
}

run_one() { # variant test pipeline n round → appends rows; 1 if the server died
  local v=$1 test=$2 pipe=$3 n=$4 round=$5 c0 c1 a0 a1 csv rc=0 rps tid comm tk sn sc role tk0 sn0 sc0
  c0=$(info_stat total_commands_processed) || return 1
  # ringkv in threaded mode: the execution thread's CPU while awake (µs).
  a0=$(info_stat exec_thread_awake_cpu_us threads)
  snapshot "$SERVER_PID" >"$WORK/s0"
  # In the background, so that a signal is handled at once (the trap stops it).
  taskset -c "$CLIENT_CPU" timeout 300 redis-benchmark -p "$PORT" -t "$test" -c 50 -d 100 \
    -r 1000000 -n "$n" -P "$pipe" --csv >"$WORK/csv" 2>/dev/null &
  BENCH_PID=$!
  wait "$BENCH_PID" || rc=$?
  BENCH_PID=""
  csv=$(cat "$WORK/csv")
  kill -0 "$SERVER_PID" 2>/dev/null || { echo "threads.sh: $v died during $test -P $pipe" >&2; return 1; }
  snapshot "$SERVER_PID" >"$WORK/s1"
  c1=$(info_stat total_commands_processed) || return 1
  a1=$(info_stat exec_thread_awake_cpu_us threads)
  [ -n "$c0" ] && [ -n "$c1" ] || { echo "threads.sh: $v: no INFO total_commands_processed" >&2; return 1; }
  rps=$(printf '%s\n' "$csv" | awk -F'","' 'NR==2{print $2}')
  # A timed-out run still counts: CPU and commands are both measured at its end.
  [ "$rc" = 0 ] && [ -n "$rps" ] || { echo "threads.sh: $v $test -P $pipe: redis-benchmark exit $rc (timed out?)" >&2; rps=-; }
  # Δ per thread; a thread absent from the first snapshot started during the run.
  while read -r tid comm tk sn sc; do
    tk0="" sn0="" sc0=""
    read -r _ _ tk0 sn0 sc0 < <(awk -v t="$tid" '$1==t' "$WORK/s0") || true
    role=$(role_of "$v" "$tid" "$comm")
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$v" "${test^^}" \
      "$pipe" "$rps" "$((c1 - c0))" "$CLK_TCK" "$role" "$tid" "$comm" "$((tk - ${tk0:-0}))" \
      "$([ "$sn" = - ] && echo - || echo $((sn - ${sn0:-0})))" \
      "$([ "$sc" = - ] && echo - || echo $((sc - ${sc0:-0})))" >>"$RAW"
  done <"$WORK/s1"
  # As a pseudo-thread row: role "awake", Δ in µs in the ticks column.
  if [ -n "$a0" ] && [ -n "$a1" ]; then
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$v" "${test^^}" \
      "$pipe" "$rps" "$((c1 - c0))" "$CLK_TCK" awake - exec_awake_us "$((a1 - a0))" - - >>"$RAW"
  fi
  printf '  round %s %-18s %-10s -P %-2s rps=%-10s cmds=%-8s ticks: %s\n' "$round" "$v" "${test^^}" \
    "$pipe" "$rps" "$((c1 - c0))" "$(awk -F'\t' -v r="$round" -v v="$v" -v t="${test^^}" -v p="$pipe" \
      '$1==r && $2==v && $3==t && $4==p {s[$8]+=$11} END{for (x in s) printf "%s=%s ", x, s[x]}' "$RAW")" >&2
}

for round in $(seq 1 "$ROUNDS"); do
  # Every other round runs the variants in reverse order, so that a drift
  # of the host over a round does not always favour the same variant.
  order=("${RUN[@]}")
  if [ $((round % 2)) = 0 ]; then
    order=(); for ((i = ${#RUN[@]} - 1; i >= 0; i--)); do order+=("${RUN[$i]}"); done
  fi
  for v in "${order[@]}"; do
    if ! start_server "$v"; then FAILED="$FAILED $v"; continue; fi
    d=1; [[ $v == redis-t[2-9]* ]] && d=$REDIS_TN_DIV
    specs=() pings=()
    for p in $PIPES; do
      n=$N_P1; [ "$p" = 16 ] && n=$N_P16
      specs+=("set $p $((n / d))" "get $p $((n / d))")
      # One-thread variants also serve PING: the IO-only cost that splits them.
      [[ $v =~ -t1(-|$) ]] && pings+=("ping_mbulk $p $n")
    done
    specs+=("${pings[@]}")
    for spec in "${specs[@]}"; do
      # shellcheck disable=SC2086
      run_one "$v" $spec "$round" || { FAILED="$FAILED $v"; break; }
    done
    stop_server
  done
done

echo
echo "ringkv threads vs redis-server $("$REDIS_BIN" --version | sed 's/.*v=\([^ ]*\).*/\1/'), $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), kernel $(uname -r)"
echo "server (all its threads) on core $SERVER_CPU, redis-benchmark on core $CLIENT_CPU; -c 50 -d 100 -r 1000000; N=$N_P1 at -P 1, N=$N_P16 at -P 16; median of $ROUNDS rounds; ringkv backend(s): ${BACKEND_LIST[*]}"
[ -z "$FAILED" ] || echo "variant failed to start or died (see stderr):$(tr ' ' '\n' <<<"$FAILED" | sort -u | tr '\n' ' ')"
echo
python3 bench/threads_table.py "$RAW"
