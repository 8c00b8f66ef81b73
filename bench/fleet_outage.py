#!/usr/bin/env python3
"""fleet_outage.py — the reader and the report of bench/fleet_outage.sh.

  fleet_outage.py read OUT       stamps each line of the relay's stdout
                                 (stdin) with its arrival time into OUT
  fleet_outage.py report OUT T_OUT T_BACK WARM_START END [--json F ...]
                                 latency per database and phase

Each event's payload carries t, the producer's clock_timestamp() in the
statement that sent it (just before its COMMIT), and v, its key's
version (tests/order_check.py's rule).  Latency is arrival - t.  Phases
by t: "up" [WARM_START, T_OUT), "down" [T_OUT, T_BACK), "after"
[T_BACK, END).  The third database is the one that goes down: its
figures are "up", how long after T_BACK its first delivery came and
when every event it had committed before T_BACK had arrived.
"""
import json
import sys
import time


def read(out):
    with open(out, "w", buffering=1 << 16) as f:
        for line in sys.stdin.buffer:
            f.write("%.6f %s" % (time.time(), line.decode("utf-8", "replace")))


def pct(xs, q):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def report(args):
    out, t_out, t_back, warm, end = args[0], *map(float, args[1:5])
    opts = dict(zip(args[5::2], args[6::2]))
    phases = {"up": (warm, t_out), "down": (t_out, t_back),
              "after": (t_back, end)}
    lat = {}       # (db, phase) -> [ms]
    first = {}     # db -> (key, v) seen
    expected = {}  # db -> {key: next version}
    violations = {}
    first_back = {}    # db -> first arrival after t_back
    backlog_done = {}  # db -> last arrival of an event committed < t_back
    dbs = set()
    with open(out, encoding="utf-8") as f:
        for line in f:
            at, _, js = line.partition(" ")
            try:
                ev = json.loads(js)
            except ValueError:
                continue
            at = float(at)
            db = ev.get("headers", {}).get("pgoutbox-source", "?")
            p = ev.get("payload", {})
            if "t" not in p:
                continue
            dbs.add(db)
            t = float(p["t"])
            for name, (a, b) in phases.items():
                if a <= t < b:
                    lat.setdefault((db, name), []).append((at - t) * 1000)
            if at >= t_back and db not in first_back:
                first_back[db] = at - t_back
            if t < t_back:
                backlog_done[db] = max(backlog_done.get(db, 0), at - t_back)
            e = expected.setdefault(db, {})
            nxt = e.get(ev["key"], 1)
            if p["v"] == nxt:
                e[ev["key"]] = nxt + 1
            elif p["v"] > nxt:
                violations[db] = violations.get(db, 0) + 1
                e[ev["key"]] = p["v"] + 1
    rows = []
    for db in sorted(dbs):
        for name in ("up", "down", "after"):
            xs = lat.get((db, name), [])
            if not xs:
                continue
            rows.append((db, name, len(xs), pct(xs, 0.5), pct(xs, 0.99),
                         max(xs)))
    print("| database | phase (by commit time) | events | p50 ms | p99 ms "
          "| max ms |")
    print("|---|---|---:|---:|---:|---:|")
    for db, name, n, p50, p99, mx in rows:
        print("| %s | %s | %d | %.1f | %.1f | %.1f |" %
              (db, name, n, p50, p99, mx))
    last = sorted(dbs)[-1] if dbs else "db3"
    print("%s: first delivery %.2f s after it came back; every event "
          "committed before then delivered %.2f s after; order violations "
          "%s" % (last, first_back.get(last, -1), backlog_done.get(last, -1),
                  {d: violations.get(d, 0) for d in sorted(dbs)}))
    if "--json" in opts:
        base = {"system": "pgoutbox", "run": opts.get("--run-id", ""),
                "workload": "fleet-outage",
                "params": json.loads(opts.get("--params", "{}")),
                "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "machine": opts.get("--machine", "")}
        with open(opts["--json"], "a") as f:
            def put(metric, value, unit):
                r = dict(base, metric=metric, value=value, unit=unit)
                f.write(json.dumps(r) + "\n")
            for db, name, n, p50, p99, mx in rows:
                put("%s_%s_p50_ms" % (db, name), round(p50, 3), "ms")
                put("%s_%s_p99_ms" % (db, name), round(p99, 3), "ms")
            put("%s_first_delivery_s" % last,
                round(first_back.get(last, -1), 3), "s")
            put("%s_caught_up_s" % last,
                round(backlog_done.get(last, -1), 3), "s")
            put("order_violations", sum(violations.values()), "events")
    return 1 if violations else 0


if __name__ == "__main__":
    if sys.argv[1] == "read":
        read(sys.argv[2])
    else:
        sys.exit(report(sys.argv[2:]))
