#!/usr/bin/env python3
"""Per-wake-up anatomy of a server's event-loop thread, from `perf script`.

Input: `perf script -F comm,tid,cpu,time,event,trace` of a recording with
sched:sched_waking, sched:sched_switch, raw_syscalls:sys_enter and
raw_syscalls:sys_exit (bench/sched_trace.sh makes one). Argument: the TID
of the thread to follow, and the requests/s the load sent.

A wake-up ("episode") starts when the thread is woken from sleep
(sched_waking) and ends when it switches out to sleep again. For each one:
the wake latency (woken -> on the CPU), the time on the CPU, the time from
getting the CPU to the first syscall that sends replies (write/writev/
sendmsg/sendto, or for io_uring the next io_uring_enter, which submits the
queued sends), and the syscalls made. Prints medians and means.
"""
import collections
import re
import statistics
import sys

SEND = {1: "write", 20: "writev", 44: "sendto", 46: "sendmsg", 426: "io_uring_enter"}
NAMES = {0: "read", 1: "write", 20: "writev", 44: "sendto", 45: "recvfrom", 46: "sendmsg",
         47: "recvmsg", 232: "epoll_wait", 281: "epoll_pwait", 426: "io_uring_enter",
         202: "futex", 7: "poll", 230: "clock_nanosleep", 233: "epoll_ctl", 28: "madvise",
         288: "accept4", 441: "epoll_pwait2"}

line_re = re.compile(r"^\s*(.*?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s*(.*)$")


def main():
    tid = int(sys.argv[1])
    rate = float(sys.argv[2])
    woken = None        # time of the waking while asleep
    on_since = None     # time it got the CPU
    first_send = None
    ep = None
    episodes = []
    t_first = t_last = None
    for line in sys.stdin:
        m = line_re.match(line)
        if not m:
            continue
        _comm, ltid, _cpu, ts, ev, rest = m.groups()
        ts = float(ts)
        ltid = int(ltid)
        t_first = t_first if t_first is not None else ts
        t_last = ts
        if ev == "sched:sched_waking":
            pm = re.search(r"pid=(\d+)", rest)
            if pm and int(pm.group(1)) == tid and on_since is None and woken is None:
                woken = ts
        elif ev == "sched:sched_switch":
            nm = re.search(r"next_pid=(\d+)", rest)
            pm = re.search(r"prev_pid=(\d+).*prev_state=(\S+)", rest)
            if nm and int(nm.group(1)) == tid:
                on_since = ts
                if ep is None:
                    ep = {"woken": woken, "on": ts, "cpu": 0.0, "sys": collections.Counter(),
                          "first_send": None}
                woken = None
                ep["_in"] = ts
            if pm and int(pm.group(1)) == tid and ep is not None:
                ep["cpu"] += ts - ep.get("_in", ts)
                on_since = None
                if pm.group(2).startswith("S") or pm.group(2).startswith("D"):
                    ep["off"] = ts
                    episodes.append(ep)
                    ep = None
        elif ev == "raw_syscalls:sys_enter" and ltid == tid and ep is not None:
            nr = int(rest.split()[1])
            ep["sys"][nr] += 1
            if nr in SEND and ep["first_send"] is None:
                ep["first_send"] = ts
    # The first episode may have started before the recording.
    episodes = [e for e in episodes if e["woken"] is not None]
    span = t_last - t_first
    n = len(episodes)
    if n == 0:
        print("no episodes")
        return
    us = lambda xs: [x * 1e6 for x in xs]
    lat = us([e["on"] - e["woken"] for e in episodes])
    cpu = us([e["cpu"] for e in episodes])
    send = us([e["first_send"] - e["on"] for e in episodes if e["first_send"] is not None])
    reqs = rate * span / n
    print(f"span {span:.3f} s, {n} wake-ups ({n / span:,.0f}/s), {reqs:.2f} requests per wake-up")
    q = lambda xs: f"p50 {statistics.median(xs):6.1f}  mean {statistics.mean(xs):6.1f}  p90 {sorted(xs)[int(len(xs) * .9)]:6.1f}"
    print(f"  woken -> on CPU, µs:        {q(lat)}")
    print(f"  on CPU per wake-up, µs:     {q(cpu)}")
    if send:
        print(f"  on CPU -> first send, µs:   {q(send)}")
    tot = collections.Counter()
    for e in episodes:
        tot.update(e["sys"])
    print("  syscalls per wake-up:", ", ".join(f"{NAMES.get(k, k)} {v / n:.2f}" for k, v in tot.most_common(8)))


main()
