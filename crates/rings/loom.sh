#!/usr/bin/env bash
# Model-checks the ring and the doorbell protocol with loom (tests/loom.rs and
# any cfg(loom) unit tests). Separate target dir: `--cfg loom` changes
# RUSTFLAGS, which would otherwise invalidate the normal build's cache.
set -euo pipefail
cd "$(dirname "$0")/../.."
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR="$PWD/target/loom" \
    cargo test -p ringkv-rings --release --lib --tests "$@"
