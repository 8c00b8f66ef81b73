#!/usr/bin/env python3
"""activity.py RUN.jsonl WORKLOAD RELAY.log ACTIVITY.tsv -- what each window
of a steady or held-xmin run was made of.

One Markdown row per window of WORKLOAD ("steady", "held-xmin"): its p99
and backlog (pgoutbox-bench's window lines, placed in time by their "at"),
the relay's slowest cycle that ended in it with its phases (the relay's
debug lines "slot N: cycle of ... claim C (sweep [of N pages]|from the floor), sink S,
settle T ms"; "probe P, " before the claim in logs of builds that probed
the claim floor in the claim's round), the relay's longest lease round, what its sessions
were doing when sampled (bench/activity.sh: pg_stat_activity, on CPU or the
wait event), how long the relay and its sessions were runnable but waited
for a CPU (the kernel's run delay, /proc/PID/schedstat: in all, and the
most one of them waited within one sampling interval: 0.1 s and the
sampling's own time, up to about 0.13 s) and the
share of the window in which some task on the host waited for a CPU
(/proc/pressure/cpu), whether autovacuum ran on the outbox, an ANALYZE of it
finished, or a checkpoint started or wrote meanwhile, and the WAL written.
"""
import collections
import datetime
import json
import re
import sys

CYCLE = re.compile(
    r"^(\S+) DEBUG .*slot (\d+): cycle of (\d+) events in ([\d.]+) ms: "
    r"(?:probe ([\d.]+), )?claim ([\d.]+) \(([^)]*)\), sink ([\d.]+), "
    r"settle ([\d.]+) ms")
LEASE = re.compile(r"^(\S+) DEBUG .*slot (\d+): lease round ([\d.]+) ms")


def unix(iso):
    return datetime.datetime.strptime(
        iso, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
            tzinfo=datetime.timezone.utc).timestamp()


def windows(path, workload):
    ws = {}
    for line in open(path):
        r = json.loads(line)
        if r["workload"] != workload + "-window" or "at" not in r["params"]:
            continue
        w = ws.setdefault(r["params"]["at"], {"t": r["params"]["t"]})
        w[r["metric"]] = r["value"]
    return [dict(w, at=at) for at, w in sorted(ws.items())]


def relay_log(path):
    cycles, leases = [], []
    for line in open(path, errors="replace"):
        m = CYCLE.match(line)
        if m:
            cycles.append({
                "end": unix(m.group(1)), "slot": int(m.group(2)),
                "n": int(m.group(3)), "total": float(m.group(4)),
                "probe": float(m.group(5) or 0), "claim": float(m.group(6)),
                "sweep": m.group(7).startswith("sweep"), "sink": float(m.group(8)),
                "settle": float(m.group(9))})
            continue
        m = LEASE.match(line)
        if m:
            leases.append((unix(m.group(1)), float(m.group(3))))
    return cycles, leases


def activity(path):
    rows = collections.defaultdict(list)
    for line in open(path, errors="replace"):
        f = line.rstrip("\n").split("\t")
        if len(f) >= 2:
            try:
                rows[f[1]].append((float(f[0]), f[2:]))
            except ValueError:
                pass
    return rows


def sched(path):
    """ACTIVITY.tsv.sched: per pid its (time, comm, run delay ms) samples;
    the host's (time, some_us) CPU pressure samples."""
    per, psi = collections.defaultdict(list), []
    try:
        f = open(path, errors="replace")
    except OSError:
        return per, psi
    for line in f:
        x = line.rstrip("\n").split("\t")
        try:
            if len(x) >= 6 and x[1] == "sched":
                per[int(x[2])].append((float(x[0]), x[3], int(x[5]) / 1e6))
            elif len(x) >= 3 and x[1] == "psi":
                psi.append((float(x[0]), int(x[2])))
        except ValueError:
            pass
    return per, psi


def cpu_wait(per, pids, lo, hi):
    """The run delay of pids in (lo, hi]: ms in all, and the most of one
    pid in one sampling interval."""
    total, worst = 0.0, 0.0
    for pid in pids:
        xs = per.get(pid, [])
        for (t0, _, d0), (t1, _, d1) in zip(xs, xs[1:]):
            if lo < t1 <= hi and t1 - t0 < 1.0:
                total += d1 - d0
                worst = max(worst, d1 - d0)
    return total, worst


def during(rows, lo, hi):
    return [f for t, f in rows if lo < t <= hi]


def main():
    run, workload, log, tsv = sys.argv[1:5]
    ws = windows(run, workload)
    cycles, leases = relay_log(log)
    act = activity(tsv)
    per, psi = sched(tsv + ".sched")
    # The relay's sessions (by application name) and the relay itself.
    relay = {int(f[0]) for t, f in act["act"]
             if len(f) > 2 and f[2].startswith("pgoutbox relay")
             and f[0].isdigit()}
    relay |= {pid for pid, xs in per.items() if xs and xs[0][1] == "pgoutbox"}
    out = ["| t (s) | p99 ms | backlog | slowest cycle: ms (probe / claim"
           " / sink / settle) | sweeps: claims, ms | longest lease round ms"
           " | relay sessions sampled (active) | relay waiting for a CPU:"
           " ms (most in one sample) | host CPU pressure"
           " | autovacuum of the outbox | checkpoint | WAL MB |",
           "|---:|---:|---:|---|---:|---:|---|---:|---:|---|---|---:|"]
    prev = None
    for w in ws:
        hi = w["at"]
        lo = prev if prev is not None else hi - 5
        prev = hi
        cs = [c for c in cycles if lo < c["end"] <= hi]
        worst = max(cs, key=lambda c: c["total"], default=None)
        sw = [c for c in cs if c["sweep"]]
        ls = [ms for t, ms in leases if lo < t <= hi]
        waits = collections.Counter()
        for f in during(act["act"], lo, hi):
            # pid backend_type application_name state type event ms query
            if len(f) >= 6 and f[2].startswith("pgoutbox relay") \
                    and f[3] == "active":
                waits[f[4] + ":" + f[5] if f[4] else "CPU"] += 1
        vac = sorted({f[2] for f in during(act["vac"], lo, hi)
                      if len(f) > 2 and f[1].endswith("outbox")})
        tab = during(act["tab"], lo - 0.5, hi)
        analyzed = len(tab) > 1 and tab[-1][3] != tab[0][3]
        bgw = during(act["bgw"], lo - 0.5, hi)
        ckpt, wal = [], ""
        if len(bgw) > 1:
            a, b = bgw[0], bgw[-1]
            n = int(b[0]) + int(b[1]) - int(a[0]) - int(a[1])
            if n:
                ckpt.append("%d started" % n)
            if int(b[4]) != int(a[4]):
                ckpt.append("%d buffers written" % (int(b[4]) - int(a[4])))
            if len(a) > 7 and len(b) > 7:
                wal = "%.0f" % ((float(b[7]) - float(a[7])) / 1e6)
        wait, most = cpu_wait(per, relay, lo, hi)
        ps = [(t, us) for t, us in psi if lo < t <= hi]
        pressure = ""
        if len(ps) > 1 and ps[-1][0] > ps[0][0]:
            pressure = "%.0f %%" % (100.0 * (ps[-1][1] - ps[0][1]) / 1e6
                                    / (ps[-1][0] - ps[0][0]))
        out.append("| %g | %s | %s | %s | %d, %.0f | %s | %s | %s | %s | %s | %s | %s |" % (
            w["t"],
            "%.1f" % w["p99_ms"] if w.get("p99_ms") is not None else "n/a",
            "{:,.0f}".format(w.get("backlog") or 0),
            "%.0f (%.1f / %.1f%s / %.1f / %.1f)" % (
                worst["total"], worst["probe"], worst["claim"],
                " sweep" if worst["sweep"] else "", worst["sink"],
                worst["settle"]) if worst else "none",
            len(sw), sum(c["claim"] for c in sw),
            "%.1f" % max(ls) if ls else "",
            ", ".join("%s %d" % kv for kv in waits.most_common(3)),
            "%.0f (%.1f)" % (wait, most) if per else "",
            pressure,
            " ".join(vac) + (" analyze" if analyzed else ""),
            ", ".join(ckpt), wal))
    print("\n".join(out))


if __name__ == "__main__":
    main()
