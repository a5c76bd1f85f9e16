#!/usr/bin/env python3
"""What a storm of connects costs the clients already connected
(`max-new-connections-per-cycle`; docs/BENCHMARKS.md §35).

Against a server already listening on PORT: redis-benchmark runs GETs
(-c 50, -n REQUESTS, pinned to CLIENT_CPU) while this process, on the same
core, opens STORM connections at once from 4 threads (each sends a PING
and reads its reply), holds them for a moment, closes them, ROUNDS times.
Then the setting is changed with CONFIG SET and the same is done again,
for each value given. Prints, per value, the GET latencies redis-benchmark
saw (p50, p99, max) and how long the storms' connects took.

usage: bench/connect_storm.py PORT [VALUE...]   (default values: 1000 10)
env:   STORM (2000) ROUNDS (5) REQUESTS (400000) CLIENT_CPU (1)
"""
import os
import resource
import socket
import subprocess
import sys
import threading
import time

port = int(sys.argv[1])
values = sys.argv[2:] or ["1000", "10"]
storm = int(os.environ.get("STORM", "2000"))
rounds = int(os.environ.get("ROUNDS", "5"))
requests = os.environ.get("REQUESTS", "400000")
client_cpu = os.environ.get("CLIENT_CPU", "1")
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def config_set(value):
    s = socket.create_connection(("127.0.0.1", port))
    name = b"max-new-connections-per-cycle"
    v = value.encode()
    s.sendall(b"*4\r\n$6\r\nCONFIG\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(name), name, len(v), v))
    reply = s.recv(100)
    s.close()
    if not reply.startswith(b"+OK"):
        sys.exit(f"CONFIG SET: {reply!r}")


def one_storm(n):
    socks = [None] * n

    def worker(lo, hi):
        for i in range(lo, hi):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"PING\r\n")
            socks[i] = s
        for i in range(lo, hi):
            socks[i].recv(16)

    t0 = time.monotonic()
    ts = [threading.Thread(target=worker, args=(k * n // 4, (k + 1) * n // 4)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    took = time.monotonic() - t0
    time.sleep(0.2)
    for s in socks:
        s.close()
    return took


for value in values:
    config_set(value)
    bench = subprocess.Popen(
        ["taskset", "-c", client_cpu, "redis-benchmark", "-p", str(port), "-t", "get", "-c", "50",
         "-n", requests, "-r", "100000", "--csv"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    time.sleep(0.5)
    took = []
    for _ in range(rounds):
        took.append(one_storm(storm))
        time.sleep(0.3)
    out, _ = bench.communicate()
    row = out.strip().splitlines()[-1].replace('"', "").split(",")
    # test, rps, avg, min, p50, p95, p99, max
    print(f"max-new-connections-per-cycle {value:>5}: GET p50 {row[4]} ms, p99 {row[6]} ms, "
          f"max {row[7]} ms, {float(row[1]):.0f} rps; storms of {storm} took "
          + ", ".join(f"{t * 1000:.0f}" for t in took) + " ms")
