#!/usr/bin/env python3
"""What an idle client costs a server (docs/BENCHMARKS.md §35).

For each kind of last request, opens N connections one after another;
each sends that request, reads its replies and stays open. Prints INFO
used_memory's growth per connection, and RSS's, once all N are idle.
The count is taken 2.5 s after the last connection went idle: ringkv's
loops give an idle client's emptied buffers back within two seconds (one
sweep a second), Valkey's cron shrinks them within a few. Kinds: ping (one PING), pipe500 / pipe2000 (a pipeline of that many
PINGs), big (a SET of a 100,000-byte value). The connections of one kind
are closed before the next kind.

usage: bench/idle_clients.py PORT [N]   (a server already listening)
"""
import socket
import sys
import time


def command(sock, *args):
    sock.sendall(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))


def read_reply(sock):
    data = b""
    while not data.endswith(b"\r\n") or data.startswith(b"$") and data.count(b"\r\n") < 2:
        data += sock.recv(1 << 20)
    if data.startswith(b"$"):
        n = int(data[1 : data.index(b"\r\n")])
        while len(data) < data.index(b"\r\n") + 2 + n + 2:
            data += sock.recv(1 << 20)
    return data


def memory(port):
    s = socket.create_connection(("127.0.0.1", port))
    command(s, b"INFO", b"all")
    info = read_reply(s).decode()
    s.close()
    fields = dict(l.split(":", 1) for l in info.splitlines() if ":" in l)
    pid = fields["process_id"].strip()
    rss = next(l for l in open(f"/proc/{pid}/status") if l.startswith("VmRSS")).split()[1]
    return int(fields["used_memory"]), int(rss) * 1024


def main():
    port = int(sys.argv[1])
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    big = b"x" * 100_000
    for kind in ["ping", "pipe500", "pipe2000", "big"]:
        used0, rss0 = memory(port)
        socks = []
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port))
            if kind.startswith("pipe"):
                m = int(kind[4:])
                s.sendall(b"PING\r\n" * m)
                want = 7 * m
            elif kind == "big":
                command(s, b"SET", b"big", big)
                want = 5
            else:
                s.sendall(b"PING\r\n")
                want = 7
            got = 0
            while got < want:
                got += len(s.recv(1 << 16))
            socks.append(s)
        time.sleep(2.5)
        used1, rss1 = memory(port)
        print(f"{kind:9} used_memory/client {(used1 - used0) / n:8.0f} B   rss/client {(rss1 - rss0) / n:8.0f} B")
        for s in socks:
            s.close()
        time.sleep(0.5)


main()
