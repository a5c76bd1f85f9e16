#!/usr/bin/env python3
"""How long an append write(2) takes while another thread fdatasyncs the
same file back to back, against the same writes with no fsync running.

The AOF's execution-thread write does not wait out a background fsync
(crates/persist/src/aof/log.rs `write`); this measures what that costs
on the filesystem of DIR. Usage: write_during_fsync.py DIR [SECONDS] [BYTES]
"""
import os
import sys
import threading
import time


def pct(xs, p):
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def run(path, seconds, size, fsyncing):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o644)
    stop = threading.Event()
    fsyncs = []

    def syncer():
        fd2 = os.dup(fd)
        while not stop.is_set():
            t = time.perf_counter()
            os.fdatasync(fd2)
            fsyncs.append(time.perf_counter() - t)
        os.close(fd2)

    th = threading.Thread(target=syncer)
    if fsyncing:
        th.start()
    lat, buf = [], b"x" * size
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t = time.perf_counter()
        os.write(fd, buf)
        lat.append(time.perf_counter() - t)
    stop.set()
    if fsyncing:
        th.join()
    os.close(fd)
    os.unlink(path)
    lat.sort()
    line = "%-13s writes %8d  p50 %6.1f us  p99 %6.1f us  p99.9 %7.1f us  max %6.2f ms" % (
        "fsyncing" if fsyncing else "no fsync", len(lat), pct(lat, .5) * 1e6,
        pct(lat, .99) * 1e6, pct(lat, .999) * 1e6, lat[-1] * 1e3)
    if fsyncs:
        fsyncs.sort()
        line += "  | fsyncs %d, p50 %.2f ms, max %.2f ms" % (
            len(fsyncs), pct(fsyncs, .5) * 1e3, fsyncs[-1] * 1e3)
    print(line, flush=True)


def main():
    d = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 5
    size = int(sys.argv[3]) if len(sys.argv) > 3 else 4000
    path = os.path.join(d, "write_during_fsync.%d" % os.getpid())
    for _ in range(3):
        run(path, seconds, size, False)
        run(path, seconds, size, True)


main()
