#!/usr/bin/env python3
"""A client library's own test suite, run against ringkv and against
Valkey 8.1, must fail in the same places.

valkey-py's tests (from its PyPI source release, pinned) exercise every
command it wraps, its RESP2 and RESP3 parsers, pipelines, pub/sub,
scripting and its error mapping (through DEBUG ERROR). Some of them fail
against Valkey 8.1 itself (they expect a newer server or a cluster);
those may fail against ringkv too. A test that fails only against ringkv
is run once more against it alone (some of the suite is timing-bound),
and a second failure fails this check.

usage: client_suite.py RINGKV_BIN VALKEY_BIN
"""

import os
import re
import socket
import subprocess
import sys
import tarfile
import tempfile
import time

RELEASE = "valkey==6.2.0"
TOOLS = ["packaging==26.4", "pytest==9.2.0", "pytest-asyncio==1.5.0", "pytest-timeout==2.4.0", "mock==5.2.0"]
FILES = [
    "tests/test_commands.py",
    "tests/test_pipeline.py",
    "tests/test_pubsub.py",
    "tests/test_scripting.py",
    "tests/test_function.py",
    "tests/test_lock.py",
    "tests/test_encoding.py",
    "tests/test_monitor.py",
    "tests/test_connection.py",
    "tests/test_connection_pool.py",
]
CACHE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target", "client-suites")


def pip(*args):
    subprocess.run([sys.executable, "-m", "pip", "-q", *args], check=True)


def sources():
    """The suite's directory, downloaded and unpacked once."""
    os.makedirs(CACHE, exist_ok=True)
    name = RELEASE.replace("==", "-")
    root = os.path.join(CACHE, name)
    if not os.path.isdir(os.path.join(root, "tests")):
        pip("download", "--no-deps", "--no-binary", ":all:", "-d", CACHE, RELEASE)
        with tarfile.open(os.path.join(CACHE, name + ".tar.gz")) as t:
            t.extractall(CACHE, filter="data")  # a release's files, nothing outside CACHE
    return root


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(binary, workdir):
    port = free_port()
    args = [binary, "--port", str(port), "--save", "", "--appendonly", "no",
            "--dir", workdir, "--enable-debug-command", "yes"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    sys.exit(f"{binary} did not listen on {port}")


def failures(root, port, protocol, tests):
    """The ids of the tests that failed or errored."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", *tests, f"--valkey-url=valkey://127.0.0.1:{port}/0",
         f"--protocol={protocol}", "-q", "-p", "no:cacheprovider", "--timeout", "60", "-rfE"],
        cwd=root, capture_output=True, text=True, timeout=1200,
    )
    tail = out.stdout.strip().splitlines()[-1:] if out.stdout.strip() else ["(no output)"]
    print(f"  RESP{protocol}, port {port}: {tail[0]}")
    if not re.search(r"\d+ (passed|failed)", out.stdout):
        sys.exit(out.stdout[-3000:] + out.stderr[-3000:])
    return {m.group(2) for m in re.finditer(r"^(FAILED|ERROR) (\S+)", out.stdout, re.M)}


def main():
    ringkv, valkey = sys.argv[1], sys.argv[2]
    pip("install", *TOOLS)
    root = sources()
    bad = []
    with tempfile.TemporaryDirectory() as work:
        servers = {}
        for name, binary in (("ringkv", ringkv), ("valkey", valkey)):
            d = os.path.join(work, name)
            os.mkdir(d)
            servers[name] = start(binary, d)
        try:
            for protocol in ("2", "3"):
                print(f"valkey-py {RELEASE}, RESP{protocol}:")
                theirs = failures(root, servers["valkey"][1], protocol, FILES)
                ours = failures(root, servers["ringkv"][1], protocol, FILES)
                only_ours = sorted(ours - theirs)
                if only_ours:
                    print(f"  again, alone: {' '.join(only_ours)}")
                    again = failures(root, servers["ringkv"][1], protocol, only_ours)
                    bad += [f"RESP{protocol} {t}" for t in sorted(again)]
        finally:
            for proc, _ in servers.values():
                proc.kill()
                proc.wait()
    if bad:
        sys.exit("failing against ringkv only:\n  " + "\n  ".join(bad))
    print("valkey-py: every test that fails against ringkv fails against Valkey 8.1 too")


if __name__ == "__main__":
    main()
