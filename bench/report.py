#!/usr/bin/env python3
"""report.py RUN.jsonl [--chart-data DIR] -- the Markdown table of one run.

Reads the JSON lines pgoutbox-bench wrote during one run and prints one
row per metric: workload | parameters | metric | value | unit | ratio.
The ratio compares a figure with the PostgreSQL limit measured in the same
run, on the same machine:

  enqueue send / send-quiet   events/s over plain INSERT, same clients
  enqueue bulk                events/s over plain COPY of 100 (insert100)
  drain                       events/s over insert100, 1 client
  latency p50 / p99           over the NOTIFY round trip p50 / p99
  latency rate_achieved       over the rate offered (open loop)
  steady / held-xmin          delivered events/s over the rate offered;
                              held-xmin during and after over steady
  history                     drain after N events over a fresh table

The steady and held-xmin workloads also write one set of lines per time
window (workload "...-window"); they are printed as a second table,
"over time".  With --chart-data DIR, also writes the data files the
gnuplot charts (bench/charts.gp) read: relays.dat, steady.dat, held.dat.
"""
import json
import re
import statistics
import sys


def round_of(r):
    """The round of a --rounds run (the label ends in " #N"), else 0."""
    m = re.search(r" #(\d+)$", r["params"].get("variant", ""))
    return int(m.group(1)) if m else 0


def describe(workload, p):
    """The parameters column: what was run, in words."""
    relay = p.get("relay", "")
    if workload == "enqueue":
        clients = p["clients"]
        poll = re.search(r"--poll-interval (\S+)", relay)
        if "--listen off" in relay and poll:
            how = ", relay polling every %s (no LISTEN)" % poll.group(1)
        else:
            how = ", relay listening" if relay else ""
        return "%s, %d client%s, %g s%s" % (
            p["mode"], clients, "" if clients == 1 else "s", p["seconds"],
            how)
    flags = relay.split(" relay", 1)[1].strip() if " relay" in relay else relay
    if p.get("shards"):  # a fleet: its --db flags named as a count
        flags = re.sub(r" --db '[^']*'", "", flags) + \
            ", %d databases (%d events each)" % (
                p["shards"], p["events"] // p["shards"])
    if workload == "drain" and p.get("rss"):
        return "%d events, %d relay, %s; VmRSS idle 2 s, then sampled " \
            "every 5 ms while draining" % (p["events"], p["relays"], flags)
    if workload == "drain":
        return "%d events, %d relay%s, %s (median of %d)" % (
            p["events"], p["relays"], "" if p["relays"] == 1 else "s",
            flags, p.get("repeat", 1))
    if workload in ("steady", "held-xmin"):
        mode = "concurrent" if "--mode concurrent" in flags else "ordered"
        text = "%g/s offered, %d producers x %d events/tx (%s), " % (
            p["rate"], p["producers"], p["per_tx"],
            "INSERT" if p.get("producer") == "insert" else "send()")
        if workload == "held-xmin":
            text += "%g s snapshot held + %g s after" % (
                p["seconds"], p["after"])
        else:
            text += "%g s" % p["seconds"]
        return text + ", 1 relay " + mode
    if workload == "history":
        return "%s events through first, then drains of %d (median of " \
            "%d), %s" % ("{:,}".format(p["history"]), p["events"],
                         p["repeat"], flags)
    if workload == "latency":
        wake = "poll only" if "--listen off" in flags else "NOTIFY"
        extra = flags.replace("--sink stdout", "").strip()
        text = "%g/s for %g s, %s" % (p["rate"], p["seconds"], wake)
        if p.get("per_tx", 1) > 1:
            text += ", %d events/tx" % p["per_tx"]
        if p.get("producers", 1) > 1:
            text += ", %d producers" % p["producers"]
        if extra:
            text += " (%s)" % extra
        return text
    if workload == "notify-rtt":
        return "%d round trips" % p["count"]
    if workload == "fill":
        return "%d events" % p["events"]
    return ", ".join("%s=%s" % kv for kv in sorted(p.items()))


def fmt_value(v, unit):
    if v is None:
        return "n/a"
    if unit == "ms":
        return "%.3f" % v
    if unit == "s":
        return "%.3f" % v
    if unit == "ratio":
        return "%.3f" % v
    return "{:,.0f}".format(v)


def windows(rows, workload):
    """{t: {metric: value, "held": bool}} of one workload's windows."""
    out = {}
    for r in rows:
        if r["workload"] == workload + "-window":
            w = out.setdefault(r["params"]["t"], {})
            w[r["metric"]] = r["value"]
            w["held"] = r["params"]["held"]
    return out


def over_time(rows):
    """The second table: one row per window of steady and held-xmin."""
    out = []
    for workload in ("steady", "held-xmin"):
        ws = windows(rows, workload)
        if not ws:
            continue
        if not out:
            out += ["", "Over time (each window: events committed in it; "
                    "backlog and dead tuples at its end)", "",
                    "| workload | t (s) | snapshot held | p50 ms | p99 ms | "
                    "delivered/s | backlog | dead tuples |",
                    "|---|---:|---|---:|---:|---:|---:|---:|"]
        for t in sorted(ws):
            w = ws[t]
            out.append("| %s | %g | %s | %s | %s | %s | %s | %s |" % (
                workload, t, "yes" if w["held"] else "",
                fmt_value(w.get("p50_ms"), "ms"),
                fmt_value(w.get("p99_ms"), "ms"),
                fmt_value(w.get("delivered_per_s"), ""),
                fmt_value(w.get("backlog"), ""),
                fmt_value(w.get("dead_tuples"), "")))
    return out


def chart_data(rows, outdir):
    """The data files of bench/charts.gp."""
    import os
    rates = {}
    for r in rows:
        if r["workload"] == "drain" and r["metric"] == "events_per_s" \
                and not r["params"].get("rss") \
                and not r["params"].get("shards"):
            mode = "concurrent" if "--mode concurrent" in r["params"].get(
                "relay", "") else "ordered"
            rates.setdefault(r["params"]["relays"], {})[mode] = r["value"]
    with open(os.path.join(outdir, "relays.dat"), "w") as f:
        f.write("# relays ordered concurrent (events/s)\n")
        for n in sorted(rates):
            f.write("%d %s %s\n" % (n, rates[n].get("ordered", "NaN"),
                                    rates[n].get("concurrent", "NaN")))
    for workload, name in (("steady", "steady.dat"),
                           ("held-xmin", "held.dat")):
        ws = windows(rows, workload)
        with open(os.path.join(outdir, name), "w") as f:
            f.write("# t p50_ms p99_ms delivered_per_s backlog "
                    "dead_tuples held\n")
            for t in sorted(ws):
                w = ws[t]
                f.write("%g %s %s %s %s %s %d\n" % (
                    t, *[("NaN" if w.get(k) is None else w[k]) for k in (
                        "p50_ms", "p99_ms", "delivered_per_s", "backlog",
                        "dead_tuples")], 1 if w["held"] else 0))


def main():
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    if len(sys.argv) == 4 and sys.argv[2] == "--chart-data":
        chart_data(rows, sys.argv[3])

    def find(workload, metric, rnd=0, **params):
        """The first figure of the round (of any round when none has it):
        a limit measured without a relay is looked up without one."""
        for same in (True, False):
            for r in rows:
                if r["workload"] == workload and r["metric"] == metric and \
                        (round_of(r) == rnd or not same) and \
                        not r["params"].get("relay") and all(
                            r["params"].get(k) == v
                            for k, v in params.items()):
                    return r["value"]
        return None

    insert100 = find("enqueue", "events_per_s", mode="insert100", clients=1)
    out = ["| workload | parameters | metric | value | unit | ratio to limit |",
           "|---|---|---|---:|---|---:|"]
    steady_rate = find("steady", "delivered_per_s")
    fresh = find("history", "fresh_events_per_s")
    ratios = {}
    for r in rows:
        w, p, m, v = r["workload"], r["params"], r["metric"], r["value"]
        limit, ratio = None, ""
        rnd = round_of(r)
        if w.endswith("-window"):
            continue
        if w == "enqueue" and p["mode"] in ("insert", "insert100",
                                            "insert-outbox", "copy-outbox"):
            ratio = "limit"
        elif w == "notify-rtt":
            ratio = "limit"
        elif w == "enqueue" and p["mode"] in ("send", "send-quiet"):
            limit = find("enqueue", m, rnd, mode="insert",
                         clients=p["clients"])
        elif w == "enqueue" and p["mode"] == "batch":
            limit = find("enqueue", m, rnd, mode="insert-outbox",
                         clients=p["clients"])
        elif w == "enqueue" and p["mode"] == "bulk":
            # The bare COPY of the same rows; before it was measured,
            # a COPY into a two-column table.
            limit = find("enqueue", m, rnd, mode="copy-outbox",
                         clients=p["clients"]) or find(
                             "enqueue", m, rnd, mode="insert100",
                             clients=p["clients"])
        elif w == "drain" and m == "events_per_s":
            limit = insert100
        elif w in ("steady", "held-xmin") and m in (
                "delivered_per_s", "rate_achieved") and v is not None:
            ratio = "%.2f of offered" % (v / p["rate"])
        elif w == "held-xmin" and m.endswith("delivered_per_s"):
            limit = steady_rate
            if limit and v is not None:
                ratio = "%.2f of steady" % (v / limit)
                limit = None
        elif w == "history" and m == "after_events_per_s":
            limit = fresh
            if limit and v is not None:
                ratio = "%.2f of fresh" % (v / limit)
                limit = None
        elif w == "history" and m == "history_events_per_s":
            limit = insert100
        elif w in ("latency", "steady", "held-xmin") and m in (
                "p50_ms", "p99_ms"):
            limit = find("notify-rtt", m)
        elif w == "latency" and m == "rate_achieved" and v is not None:
            ratio = "%.2f of offered" % (v / p["rate"])
        if limit and v is not None:
            ratio = "%.2f" % (v / limit)
            if w == "enqueue":
                ratios.setdefault((describe(w, p), m), []).append(v / limit)
        desc = describe(w, p) + (" #%d" % rnd if rnd else "")
        out.append("| %s | %s | %s | %s | %s | %s |" % (
            w, desc, m, fmt_value(v, r["unit"]), r["unit"], ratio))
    if any(len(x) > 1 for x in ratios.values()):
        out += ["", "Producers against their limits, round by round",
                "", "| enqueue | ratios (each within its round) | median |",
                "|---|---|---:|"]
        for (desc, m), xs in ratios.items():
            out.append("| %s | %s | %.2f |" % (
                desc, " ".join("%.2f" % x for x in xs),
                statistics.median(xs)))
    print("\n".join(out + over_time(rows)))


if __name__ == "__main__":
    main()
