#!/usr/bin/env python3
"""Cross-check ringkv-rdb's save side against a real Valkey.

1. Start Valkey:  valkey-server --save '' --port 7391 --daemonize no --dir /tmp/rdbcheck/vk
2. python3 valkey_dataset.py gen      writes a seeded dataset into it and
   /tmp/rdbcheck/data.bin (each key's elements in write order, Valkey's
   OBJECT ENCODING and DUMP).
3. RINGKV_RDB_VALKEY_DATA=/tmp/rdbcheck/data.bin RINGKV_RDB_OUT=/tmp/rdbcheck/ours/dump.rdb \
   cargo test -p ringkv-rdb -- --ignored valkey_dataset --nocapture
   compares every DUMP and writes our RDB file.
4. Start a second Valkey on it (--port 7392 --dir /tmp/rdbcheck/ours), then
   python3 valkey_dataset.py compare  checks both servers hold the same data
   and prints both RDB file sizes (after SAVE on the first).
"""
import os, random, socket, struct, sys

class C:
    def __init__(s, port):
        s.s = socket.create_connection(("127.0.0.1", port)); s.f = s.s.makefile("rb")
    def cmd(s, *a):
        a = [x if isinstance(x, bytes) else str(x).encode() for x in a]
        s.s.sendall(b"*%d\r\n" % len(a) + b"".join(b"$%d\r\n%s\r\n" % (len(x), x) for x in a))
        return s.read()
    def read(s):
        l = s.f.readline(); t, r = l[:1], l[1:-2]
        if t == b"+": return r.decode()
        if t == b"-": raise Exception(r.decode())
        if t == b":": return int(r)
        if t == b"$":
            n = int(r)
            return None if n < 0 else s.f.read(n + 2)[:-2]
        if t == b"*": return [s.read() for _ in range(int(r))]
        raise Exception(l)

DIR = "/tmp/rdbcheck"

def gen():
    random.seed(7)
    c = C(7391); c.cmd("FLUSHALL")
    os.makedirs(DIR + "/ours", exist_ok=True)
    out = open(DIR + "/data.bin", "wb")
    def s(b):
        b = b if isinstance(b, bytes) else str(b).encode()
        out.write(struct.pack("<I", len(b))); out.write(b)
    words = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor".split()
    text = lambda n: " ".join(random.choice(words) for _ in range(n))
    noise = lambda n: bytes(random.randrange(33, 127) for _ in range(n))
    keys = []
    for i in range(300):
        k = f"str:{i}"; kind = i % 6
        v = [lambda: text(random.randrange(1, 400)), lambda: noise(random.randrange(1, 300)),
             lambda: str(random.randrange(-10**12, 10**12)), lambda: f"user:{i}:" * random.randrange(1, 50),
             lambda: text(3), lambda: noise(5) * random.randrange(1, 60)][kind]()
        c.cmd("SET", k, v); keys.append(("s", k, [v]))
    for i in range(24):
        k = f"list:{i}"; n = [3, 50, 300, 3000][i % 4]
        items = [random.choice([f"item-{j}", str(j * 7 - 100), text(2), noise(random.randrange(1, 80))]) for j in range(n)]
        for a in range(0, n, 500): c.cmd("RPUSH", k, *items[a:a + 500])
        keys.append(("l", k, items))
    for i in range(20):
        k = f"hash:{i}"; n = [5, 60, 600, 10][i % 4]; items = []
        for j in range(n):
            items += [f"field{j}", random.choice([str(j), text(2), noise(random.randrange(1, 100))])]
        for a in range(0, len(items), 400): c.cmd("HSET", k, *items[a:a + 400])
        keys.append(("h", k, items))
    for i in range(20):
        k = f"set:{i}"; kind = i % 4
        if kind == 0: items = [str(random.randrange(-100000, 100000)) for _ in range(50)]
        elif kind == 1: items = [f"m{j}" for j in range(60)]
        elif kind == 2: items = [f"member-{j}" for j in range(300)]
        else: items = [str(random.randrange(-2**40, 2**40)) for _ in range(20)]
        items = list(dict.fromkeys(items))
        c.cmd("SADD", k, *items); keys.append(("S", k, items))
    for i in range(20):
        k = f"zset:{i}"; n = [5, 100, 400, 20][i % 4]; items = []
        for j in range(n):
            sc = random.choice([str(random.randrange(-1000, 1000)), repr(random.uniform(-1e6, 1e6)), repr(random.random()), "1e+40"])
            items += [sc, f"zm{j}-{text(1)}"]
        c.cmd("ZADD", k, *items); keys.append(("z", k, items))
    for i in range(0, 300, 37):
        c.cmd("PEXPIREAT", f"str:{i}", 4102444800000 + i)
    for t, k, items in keys:
        out.write(t.encode()); s(k)
        out.write(struct.pack("<q", c.cmd("PEXPIRETIME", k)))
        out.write(struct.pack("<I", len(items)))
        for x in items: s(x)
        s(c.cmd("OBJECT", "ENCODING", k)); s(c.cmd("DUMP", k))
    print("keys", len(keys))

def compare():
    a, b = C(7391), C(7392)
    a.cmd("SAVE")
    print("Valkey's RDB", os.path.getsize(DIR + "/vk/dump.rdb"), "ours", os.path.getsize(DIR + "/ours/dump.rdb"))
    keys = sorted(a.cmd("KEYS", "*")); assert keys == sorted(b.cmd("KEYS", "*"))
    bad = 0
    for k in keys:
        t = a.cmd("TYPE", k)
        def read(c):
            return {"string": lambda: c.cmd("GET", k), "list": lambda: c.cmd("LRANGE", k, 0, -1),
                    "hash": lambda: sorted(c.cmd("HGETALL", k)), "set": lambda: sorted(c.cmd("SMEMBERS", k)),
                    "zset": lambda: c.cmd("ZRANGE", k, 0, -1, "WITHSCORES")}[t](), \
                c.cmd("PEXPIRETIME", k), c.cmd("OBJECT", "ENCODING", k)
        if read(a) != read(b):
            bad += 1; print("DIFF", k)
    print("keys", len(keys), "differing", bad)

{"gen": gen, "compare": compare}[sys.argv[1]]()
