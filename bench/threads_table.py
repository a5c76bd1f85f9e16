#!/usr/bin/env python3
"""Turns bench/threads.sh's per-thread TSV into Markdown: the measured inputs
(CPU ns per request by thread role) and a multi-core throughput PROJECTION.

Input columns (one row per thread per run, plus one "total" row per run):
  round, variant, test, pipeline, rps ("-" if redis-benchmark timed out),
  commands, clk_tck, role, tid, comm, dticks (utime+stime),
  dsched_ns (schedstat run time, a cross-check; "-" if unreadable),
  dsyscalls (syscr+syscw from the task's io file; "-" if unreadable)
ns/req = dticks * 1e9 / clk_tck / commands. other = total - exec - io.

Projection at N IO threads: throughput = min(N / io_cost, 1 / exec_cost).
  ringkv threads: exec = main thread, io = all IO threads summed (t2, else t4).
  redis: its threaded CPU is spinning, so from redis-t1: io_cost = ns/req of
     PING, E = ns/req of SET/GET - io_cost; f = IO threads' syscall share in
     redis-t2. (A) exec = E + (1-f)*io_cost (main thread as in redis-t2);
     (B) io-threads N+1: min((N+1)/io_cost, 1/(E + io_cost/(N+1))).
  ringkv t1 PING split: ringkv-t1 split like redis-t1; exec = E.
  ringkv awake: ringkv threads with exec = the execution thread's CPU while
     awake ("awake" rows: INFO exec_thread_awake_cpu_us deltas, in µs).
  redis (B16): (B) with E from the -P 16 run of the same test (a lower bound
     for E at -P 1, where E is the noisy difference of two ~10 µs costs).
io-threads 2 against 1: ratio of medians, median of per-round ratios, and a
sign-test 95% interval for that median.
"""
import math
import statistics
import sys
from collections import defaultdict

NS = [1, 2, 4, 8, 16]
NAN = float("nan")
PING = "PING_MBULK"


def med(xs):
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else NAN


def fmt(x):
    return "—" if x != x else f"{x:,.0f}"


def load(path):
    runs = defaultdict(lambda: {"threads": []})
    variants, tests = [], []
    with open(path) as f:
        for line in f:
            c = line.rstrip("\n").split("\t")
            if len(c) != 13:
                continue
            rnd, var, test, pipe, rps, cmds, tck, role, _tid, comm, dt, _dsn, dsc = c
            test = f"{test} -P {pipe}"
            variants += [var] if var not in variants else []
            tests += [test] if test not in tests else []
            r = runs[(rnd, var, test)]
            r.update(rps=NAN if rps == "-" else float(rps), cmds=int(cmds), tck=int(tck))
            if role == "total":
                r["total"] = int(dt)
            else:
                r["threads"].append((role, comm, int(dt), None if dsc == "-" else int(dsc)))
    return runs, variants, tests


def per_run(r):
    """ns/req by role for one run, plus the IO threads' read/write syscall share."""
    if r["cmds"] <= 0 or "total" not in r:
        return None
    k = 1e9 / r["tck"] / r["cmds"]
    ex = sum(t[2] for t in r["threads"] if t[0] == "exec")
    awake = [t[2] for t in r["threads"] if t[0] == "awake"]  # µs, not ticks
    r["threads"] = [t for t in r["threads"] if t[0] != "awake"]
    io = [t for t in r["threads"] if t[0] == "io"]
    io_sum = sum(t[2] for t in io)
    sc = [t[3] for t in r["threads"]]
    share = NAN
    if io and None not in sc and sum(sc) > 0:
        share = sum(t[3] for t in io) / sum(sc)
    return {"rps": r["rps"], "exec": ex * k, "io": io_sum * k,
            "io_mean": io_sum * k / len(io) if io else NAN, "n_io": len(io),
            "other": (r["total"] - ex - io_sum) * k, "total": r["total"] * k,
            "ticks": r["total"], "share": share,
            "awake": sum(awake) * 1000 / r["cmds"] if awake else NAN}


def proj(io, ex, n_io):
    """min(n_io / io, 1 / ex) in requests/s, and which term bounds it."""
    if not (io > 0 and ex > 0):
        return NAN, "—"
    a, b = n_io * 1e9 / io, 1e9 / ex
    return min(a, b), ("IO = exec" if abs(a - b) <= 1e-9 * b else "IO" if a < b else "exec")


def cell(p):
    return f" {fmt(p[0])} ({p[1]}) |"


def ratio(a, b):
    return " — |" if not (a == a and b == b) else f" {a / b:.2f}× |"


def paired_t2_t1(runs, variants, tests, m):
    """io-threads 2 against 1 per backend: the ratio of the medians, and the
    median of the per-round ratios (t1 and t2 run back to back in a round,
    so each pair shares the host's state of the moment)."""
    pairs = [(v, v.replace("-t1", "-t2", 1)) for v in variants
             if v.startswith("ringkv-t1") and v.replace("-t1", "-t2", 1) in variants]
    if not pairs:
        return
    print("### io-threads 2 against io-threads 1 (total CPU ns/req and rps; t2 ÷ t1)")
    print()
    print("| test | variants | ratio of medians (CPU) | paired median (CPU) "
          "| ratio of medians (rps) | paired median (rps) | 95% CI of the paired rps median "
          "| rounds t2 ≥ t1 (rps) | pairs |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    rounds = sorted({k[0] for k in runs}, key=int)
    for t in tests:
        if t.startswith(PING):
            continue
        for a, b in pairs:
            cpu, rps = [], []
            for rnd in rounds:
                ra, rb = runs.get((rnd, a, t)), runs.get((rnd, b, t))
                pa, pb = (per_run(ra) if ra else None), (per_run(rb) if rb else None)
                if pa and pb:
                    cpu.append(pb["total"] / pa["total"])
                    rps.append(pb["rps"] / pa["rps"])
            ma, mb = m.get((a, t)), m.get((b, t))
            if not (ma and mb and cpu):
                continue
            lo, hi = median_ci(rps)
            ci = "—" if lo != lo else f"{lo:.2f}–{hi:.2f}"
            print(f"| {t} | {b} ÷ {a} |{ratio(mb['total'], ma['total'])} {med(cpu):.2f}× "
                  f"|{ratio(mb['rps'], ma['rps'])} {med(rps):.2f}× | {ci} "
                  f"| {sum(x >= 1 for x in rps)} of {len(rps)} | {len(cpu)} |")
    print()
    print("The interval is distribution-free (order statistics of the per-round ratios, "
          "binomial at p = ½): it holds whatever the host's noise looks like, as long as the "
          "rounds are independent. Fewer than 6 pairs give no 95% interval (—).")
    print()


def median_ci(xs, level=0.95):
    """Distribution-free confidence interval for the median of xs (the
    sign-test interval): the k-th smallest and k-th largest values, with k
    the largest count such that P(Binomial(n, ½) ≤ k − 1) ≤ (1 − level)/2.
    NaN, NaN when n is too small for the level."""
    xs = sorted(x for x in xs if x == x)
    n = len(xs)
    tail = (1 - level) / 2
    k, cum = 0, 0.0
    while k < n:
        cum += math.comb(n, k) / 2 ** n
        if cum > tail:
            break
        k += 1
    if k == 0:
        return NAN, NAN
    return xs[k - 1], xs[n - k]


def main(path):
    runs, variants, tests = load(path)
    m = {}  # (variant, test) -> medians over rounds
    for v in variants:
        for t in tests:
            rs = [p for (_, vv, tt), r in runs.items() if vv == v and tt == t
                  for p in [per_run(r)] if p]
            if rs:
                m[(v, t)] = {key: med([x[key] for x in rs]) for key in rs[0]}
                m[(v, t)]["runs"] = len(rs)

    print("### Inputs: server CPU ns per request, by thread (measured)")
    print()
    print("exec = main thread; io = all IO threads summed (mean per IO thread in brackets); "
          "other = total − exec − io; ticks = the process's Δ(utime+stime) in clock ticks "
          "(resolution 1 tick); IO share = the IO threads' share of the process's read/write "
          "syscalls (/proc/PID/task/TID/io; io_uring operations are not counted there, "
          "eventfd wake-ups are). All server threads share one core. Medians; rps — = "
          "redis-benchmark timed out (CPU and commands are still measured).")
    print()
    print("| variant | test | rps | exec | io (per IO thread) | other | total | ticks "
          "| IO share | runs |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for t in tests:
        for v in variants:
            x = m.get((v, t))
            if x:
                io = "—" if not x["n_io"] else f"{x['io']:,.0f} ({x['io_mean']:,.0f})"
                share = "—" if x["share"] != x["share"] else f"{x['share']:.2f}"
                print(f"| {v} | {t} | {fmt(x['rps'])} | {x['exec']:,.0f} | {io} "
                      f"| {x['other']:,.0f} | {x['total']:,.0f} | {x['ticks']:.0f} | {share} "
                      f"| {x['runs']} |")
    print()

    paired_t2_t1(runs, variants, tests, m)

    def pick(prefix, suffix=""):
        for n in (2, 4):
            if any(k[0] == f"{prefix}-t{n}{suffix}" for k in m):
                return f"{prefix}-t{n}{suffix}", n
        return None, None

    def split(v, t):  # (io_cost, E) of a one-thread variant: PING = IO only
        x, p = m.get((v, t)), m.get((v, f"{PING} -P {t.split()[-1]}"))
        return (p["total"], x["total"] - p["total"]) if x and p else (NAN, NAN)

    def redis_split(t):  # redis-t1's (io_cost, E), a negative E (noise) taken as 0
        io, e = split("redis-t1", t)
        return io, (max(e, 0.0) if e == e else e)

    # One ringkv column set per backend suffix ("" with one backend, "-epoll", ...).
    sfx = sorted({v.split("-", 2)[2] if v.count("-") > 1 else "" for v in variants
                  if v.startswith("ringkv-")})
    rk = [(f"-{x}" if x else "", *pick("ringkv", f"-{x}" if x else "")) for x in sfx]
    rd, rd_n = pick("redis")
    kv_tests = [t for t in tests if not t.startswith(PING)]
    fs = {t: m[(rd, t)]["share"] if (rd, t) in m and m[(rd, t)]["share"] == m[(rd, t)]["share"]
          else 0.5 for t in kv_tests}

    print("### Projection — NOT a measurement: computed from the inputs above")
    print()
    print("Throughput at N IO threads = min(N ÷ io_cost, 1 ÷ exec_cost) requests/s; the "
          "bound says which term is smaller.")
    print()
    for s, v, n in rk:
        print(f"* ringkv{s} threads: " + (
            f"from **{v}**: exec_cost = main (execution) thread ns/req (it does no socket "
            f"IO), io_cost = its {n - 1} IO thread(s) summed (all IO work of one request)."
            if v else "no threaded variant (ringkv-t2/t4) measured (failed to start or not "
            "selected): no thread-measured projection."))
    print("* redis: Redis's IO threads busy-poll and its main thread busy-waits for them, so "
          "the CPU time of redis-t2/t4's threads is mostly spinning (see their rps and "
          "totals above) and does not measure work. Its inputs come from **redis-t1** "
          "(one thread, no spinning): io_cost = ns/req of PING (`-t ping_mbulk`: read, "
          "parse, dispatch, reply, write — everything but the keyspace), E = ns/req of the "
          "SET/GET − io_cost. Bias: dispatch and epoll_wait stay on Redis's main thread, so "
          "io_cost is high and E low (in redis's favour where exec bounds). At -P 1 E is "
          "small against the run-to-run noise: a negative E is taken as 0 for redis (in its "
          "favour) and leaves ringkv's t1 split without a projection (—).")
    print(f"* redis (A): exec_cost = E + (1−f)·io_cost: the main thread as in redis-t2, which "
          f"also serves its share of the clients; f = the IO share measured in "
          f"{rd or 'redis-t2 (not measured: nominal 0.5)'}.")
    print("* redis (B): Redis with `io-threads N+1`, whose main thread serves 1/(N+1) of the "
          "clients: min((N+1) ÷ io_cost, 1 ÷ (E + io_cost ÷ (N+1))).")
    if rk:
        print("* ringkv t1 PING split: ringkv-t1 split the same way as redis-t1 (like for "
              "like), with an execution thread free of socket IO: min(N ÷ io_cost, 1 ÷ E).")
    print()
    print("| test | redis io_cost | redis E | f |" + "".join(
        f" ringkv{s} t1 io_cost | t1 E | threads io_cost | threads exec_cost |"
        for s, _, _ in rk))
    print("|---|---:|---:|---:|" + "---:|" * 4 * len(rk))
    for t in kv_tests:
        row = f"| {t} |" + "".join(f" {fmt(y)} |" for y in split("redis-t1", t)) + f" {fs[t]:.2f} |"
        for s, v, _ in rk:
            x = m.get((v, t)) if v else None
            row += "".join(f" {fmt(y)} |" for y in split(f"ringkv-t1{s}", t))
            row += f" {fmt(x['io']) if x else '—'} | {fmt(x['exec']) if x else '—'} |"
        print(row)
    print()
    hdr = "| test | N IO threads |" + "".join(
        f" ringkv{s} threads | ringkv{s} t1 split |" for s, _, _ in rk)
    hdr += " redis (A) | redis (B) |" + "".join(
        f" ringkv{s} threads ÷ redis A | ÷ B | t1 split ÷ A | ÷ B |" for s, _, _ in rk)
    print("Projected requests/s (bounding term); ratios are ringkv ÷ redis:")
    print()
    print(hdr)
    print("|---|---:|" + "---:|" * (hdr.count("|") - 3))
    for t in kv_tests:
        rio, re_ = redis_split(t)
        for n in NS:
            row, ours = f"| {t} | {n} |", []
            for s, v, _ in rk:
                x = m.get((v, t)) if v else None
                a = proj(x["io"], x["exec"], n) if x else (NAN, "—")
                io1, e1 = split(f"ringkv-t1{s}", t)
                b = proj(io1, e1, n)
                ours.append((a[0], b[0]))
                row += cell(a) + cell(b)
            ra = proj(rio, re_ + (1 - fs[t]) * rio, n)
            rb = proj(rio, re_ + rio / (n + 1), n + 1)
            row += cell(ra) + cell(rb)
            row += "".join(ratio(a, ra[0]) + ratio(a, rb[0]) + ratio(b, ra[0]) + ratio(b, rb[0])
                           for a, b in ours)
            print(row)
    print()
    awake_rk = [(s, v) for s, v, _ in rk if v and any(
        m.get((v, t), {}).get("awake", NAN) == m.get((v, t), {}).get("awake", NAN)
        for t in kv_tests)]
    if awake_rk:
        print("ringkv with the execution thread's cost **while awake** (INFO "
              "exec_thread_awake_cpu_us: its CPU less what going to sleep and waking up cost "
              "it, sampled one awake interval in 8). A saturated execution thread does not "
              "sleep; on one shared core it sleeps and wakes for every batch of a few requests "
              "at -P 1, which the exec_cost above charges to it:")
        print()
        print("redis (B16) is redis (B) with E taken from the -P 16 runs of the same test. "
              "At -P 1, E is the difference of two ~10 µs measurements and mostly their noise; "
              "at -P 16 the IO cost it is taken from is ~0.8 µs. A command's execution costs "
              "no less at -P 1 (the kernel's work between two requests cools the caches), so "
              "E from -P 16 is a lower bound for E at -P 1: B16 over-states redis, and "
              "ringkv ÷ B16 under-states ringkv's lead. (At -P 16, B16 is B.)")
        print()
        print("| test | N IO threads | redis E used by B16 |" + "".join(
            f" ringkv{s} awake exec_cost | projected | ÷ redis A | ÷ redis B | ÷ redis B16 |"
            for s, _ in awake_rk))
        print("|---|---:|---:|" + "---:|---:|---:|---:|---:|" * len(awake_rk))
        for t in kv_tests:
            rio, re_ = redis_split(t)
            e16 = redis_split(t.rsplit(" -P ", 1)[0] + " -P 16")[1]
            for n in NS:
                ra = proj(rio, re_ + (1 - fs[t]) * rio, n)
                rb = proj(rio, re_ + rio / (n + 1), n + 1)
                rb16 = proj(rio, e16 + rio / (n + 1), n + 1)
                row = f"| {t} | {n} | {fmt(e16)} |"
                for s, v in awake_rk:
                    x = m.get((v, t))
                    p = proj(x["io"], x["awake"], n) if x else (NAN, "—")
                    row += f" {fmt(x['awake']) if x else '—'} |" + cell(p)
                    row += ratio(p[0], ra[0]) + ratio(p[0], rb[0]) + ratio(p[0], rb16[0])
                print(row)
        print()
    print("Left out of a projection: memory bandwidth and cache capacity shared by the cores, "
          "the NIC and the kernel's network stack across cores (softirq placement, RSS queues), "
          "cross-core cache-line traffic (rings, refcounts, frees), lock/ring contention and "
          "wake-up costs at high N, spinning, and the load generator's own limits. Every row "
          "assumes each request costs what it cost with all server threads on one core "
          "(where a hand-off between threads is a context switch, not a cross-core wake-up).")


if __name__ == "__main__":
    main(sys.argv[1])
