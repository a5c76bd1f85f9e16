#!/usr/bin/env bash
# Runs every check and test ringkv has, installing what they need first.
# This is the command README.md names and .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."

# External tools the tests use: Debian's redis-server 7 (the oracle for the
# differential tests), redis-cli and redis-benchmark, and iproute2 (network
# namespaces for the protected-mode test).
need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  echo "installing: ${need[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The end-to-end tests start the real binary; build it first.
cargo build --workspace --bins --locked
cargo test --workspace --locked
