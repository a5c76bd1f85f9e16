#!/usr/bin/env python3
"""Turns bench/compare.sh's per-run TSV into a Markdown table of medians.

Input columns: round, server, test, rps, cpu_ticks, commands, clk_tck.
CPU ns per request = cpu_ticks * 1e9 / clk_tck / commands.
"""
import statistics
import sys
from collections import defaultdict


def main(path):
    rps = defaultdict(list)
    ns = defaultdict(list)
    servers, tests = [], []
    with open(path) as f:
        for line in f:
            rnd, server, test, r, ticks, cmds, tck = line.rstrip("\n").split("\t")
            if server not in servers:
                servers.append(server)
            if test not in tests:
                tests.append(test)
            rps[(server, test)].append(float(r))
            cmds = int(cmds)
            if cmds > 0:
                ns[(server, test)].append(int(ticks) * 1e9 / int(tck) / cmds)

    def med(d, key):
        return statistics.median(d[key]) if d[key] else float("nan")

    print("| test | server | rps | CPU ns/req | ns/req ÷ redis | rps ÷ redis | runs |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for test in tests:
        base_rps = med(rps, ("redis", test))
        base_ns = med(ns, ("redis", test))
        for server in servers:
            r = med(rps, (server, test))
            n = med(ns, (server, test))
            ratio_ns = "—" if server == "redis" else f"{n / base_ns:.2f}×"
            ratio_rps = "—" if server == "redis" else f"{r / base_rps:.2f}×"
            name = server if server == "redis" else f"ringkv {server}"
            print(
                f"| {test} | {name} | {r:,.0f} | {n:,.0f} | {ratio_ns} | {ratio_rps} "
                f"| {len(rps[(server, test)])} |"
            )


if __name__ == "__main__":
    main(sys.argv[1])
