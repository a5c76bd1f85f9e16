#!/usr/bin/env python3
"""The round trip of `SET big x` when `big` is a set of 1,000,000 integers
(built by SADD just before), ROUNDS times on one fresh server per binary.

Usage: bench/lazy_overwrite.py NAME=BINARY [NAME=BINARY ...]
Env:   ROUNDS (3), PORT (first port, 17701), MEMBERS (1000000).
Needs redis-py. Stops only the servers it started.
"""
import os
import subprocess
import sys
import tempfile
import time

import redis

ROUNDS = int(os.environ.get("ROUNDS", "3"))
PORT = int(os.environ.get("PORT", "17701"))
MEMBERS = int(os.environ.get("MEMBERS", "1000000"))


def run(binary, port):
    d = tempfile.mkdtemp()
    p = subprocess.Popen([binary, "--port", str(port), "--dir", d, "--save", ""],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        r = redis.Redis(port=port)
        for _ in range(100):
            try:
                r.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        out = []
        for _ in range(ROUNDS):
            r.delete("big")
            time.sleep(0.3)
            pipe = r.pipeline(transaction=False)
            for i in range(0, MEMBERS, 10000):
                pipe.sadd("big", *range(i, min(i + 10000, MEMBERS)))
            pipe.execute()
            t = time.perf_counter()
            r.set("big", "x")
            out.append(round((time.perf_counter() - t) * 1000, 2))
        return out
    finally:
        p.kill()
        p.wait()


for n, arg in enumerate(sys.argv[1:]):
    name, binary = arg.split("=", 1)
    print(f"{name}: SET big x, ms: {run(binary, PORT + n)}")
