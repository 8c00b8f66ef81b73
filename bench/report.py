#!/usr/bin/env python3
"""report.py RUN.jsonl [--chart-data DIR] -- the Markdown table of one run.

Reads the JSON lines pgoutbox-bench wrote during one run and prints one
row per metric: workload | parameters | metric | value | unit | ratio.
The ratio compares a figure with the PostgreSQL limit measured in the same
run, on the same machine:

  enqueue send / send-quiet   events/s over plain INSERT, same clients
  enqueue bulk                events/s over plain COPY of 100 (insert100)
  drain                       events/s over insert100, 1 client
  work                        jobs/s over insert100, 1 client; with
                              groups: over the plain queue's jobs/s
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


def wal(p):
    """The capture of a workload that named a queue (--queue): WAL."""
    return " (WAL capture, queue %s)" % p["queue"] if p.get("queue") else ""


def held(p):
    """enqueue, drain --hold-xmin: a snapshot held through the run."""
    return ", snapshot held" if p.get("hold_xmin") else ""


def describe(workload, p):
    """The parameters column: what was run, in words."""
    relay = p.get("relay", "")
    if workload == "fleet-outage":
        how = "db3 stopped (pg_ctl stop -m immediate)" \
            if p["how"] == "stop" else "db3's host hung (SIGSTOP on a " \
            "TCP proxy)"
        return "%d clusters, 1 relay process (ordered), %g/s per shard; " \
            "%g s all up, then %s for %g s, then %g s (phases by " \
            "commit time)" % (p["shards"], p["rate"], p["up"], how,
                              p["down"], p["after"])
    if workload == "work":
        worker = p.get("worker", "")
        flags = worker.split(" worker", 1)[1] if " worker" in worker \
            else worker
        flags = " ".join(flags.replace("--queue %s" % p["work_queue"],
                                       "").split())
        groups = ", %d groups, %s" % (p["groups"], (
            "group_concurrency %d" % p["group_concurrency"]
            if p["group_concurrency"] else "fair")) if p.get("groups") \
            else ", no groups or controls"
        return "%d jobs%s, %d worker%s, %s (median of %d)" % (
            p["jobs"], groups, p["workers"],
            "" if p["workers"] == 1 else "s", flags, p.get("repeat", 1))
    if workload == "enqueue":
        clients = p["clients"]
        poll = re.search(r"--poll-interval (\S+)", relay)
        if "--listen off" in relay and poll:
            how = ", relay polling every %s (no LISTEN)" % poll.group(1)
        elif p.get("queue"):
            how = ", relay streaming" if relay else ", no relay"
        else:
            how = ", relay listening" if relay else ""
        return "%s%s, %d client%s, %g s%s%s" % (
            p["mode"], wal(p), clients, "" if clients == 1 else "s",
            p["seconds"], how, held(p))
    flags = relay.split(" relay", 1)[1].strip() if " relay" in relay else relay
    if p.get("queue"):
        flags = " ".join(flags.replace("--queue %s" % p["queue"],
                                       "").split())
    if p.get("shards"):  # a fleet: its --db flags named as a count
        flags = re.sub(r" --db '[^']*'", "", flags) + \
            ", %d databases (%d events each)" % (
                p["shards"], p["events"] // p["shards"])
    if workload == "drain" and p.get("rss"):
        return "%d events, %d relay, %s; VmRSS idle 2 s, then sampled " \
            "every 5 ms while draining" % (p["events"], p["relays"], flags)
    if workload == "drain":
        return "%d events%s, %d relay%s, %s (median of %d)%s" % (
            p["events"], wal(p), p["relays"],
            "" if p["relays"] == 1 else "s", flags, p.get("repeat", 1),
            held(p))
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
        if p.get("queue"):
            wake = "WAL stream" + wal(p)
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
    if unit == "us":
        return "%.1f" % v
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


def beside(rows):
    """WAL capture beside table capture, from the same run: the producers'
    ratios to a plain INSERT (and WAL's over table's), commit-to-sink
    latency at 500/s, the drain of one relay; a --rounds run: each round's
    rows, the ratios taken within the round."""
    out, held = [], []
    for rnd in sorted(set(round_of(r) for r in rows)):
        these = [r for r in rows if round_of(r) == rnd]
        tag = " #%d" % rnd if rnd else ""
        out += beside_round(these, tag)
        held += tagged(held_rows(these), tag)
    if out:
        out = ["", "WAL capture beside table capture (same run; "
               "producers: events/s and the ratio to a plain INSERT, same "
               "clients)", "",
               "| figure | INSERT limit | table | WAL | WAL / table |",
               "|---|---:|---:|---:|---:|"] + out
    if held:
        out += ["", "WAL capture under a held snapshot (REPEATABLE READ "
                "and an xid, held through the workload)", "",
                "| figure | none held | snapshot held | held / none |",
                "|---|---:|---:|---:|"] + held
    return out


def beside_round(rows, tag):
    """beside() of one round's rows; tag names the round."""
    def get(workload, metric, queue, **want):
        for r in rows:
            p = r["params"]
            if r["workload"] == workload and r["metric"] == metric and \
                    bool(p.get("queue")) == queue and \
                    all(p.get(k) == v for k, v in want.items()):
                return r["value"], p
        return None, None

    def relay_kind(p, queue):
        relay = p.get("relay", "")
        if not relay:
            return "none"
        if queue:
            return "streaming"
        if "--listen off" in relay:
            return None
        return "listening"

    def ratio(queue, clients, with_relay):
        for r in rows:
            p = r["params"]
            if r["workload"] != "enqueue" or p.get("mode") != "send" or \
                    r["metric"] != "events_per_s" or p.get("hold_xmin") or \
                    bool(p.get("queue")) != queue or \
                    p["clients"] != clients:
                continue
            kind = relay_kind(p, queue)
            if kind is None or (kind != "none") != with_relay:
                continue
            limit, _ = get("enqueue", "events_per_s", False, mode="insert",
                           clients=clients)
            return r["value"], limit
        return None, None

    out = []
    for clients in (1, 8):
        for with_relay in (False, True):
            tv, tl = ratio(False, clients, with_relay)
            wv, wl = ratio(True, clients, with_relay)
            if wv is None:
                continue
            tr = tv / tl if tv and tl else None
            wr = wv / wl if wv and wl else None
            out.append("| send(), %d client%s, %s | %s | %s | %s | %s |" % (
                clients, "" if clients == 1 else "s",
                "relay streaming / listening" if with_relay else "no relay",
                fmt_value(wl, ""),
                "%s (%s)" % (fmt_value(tv, ""), "%.2f" % tr if tr else "n/a"),
                "%s (%s)" % (fmt_value(wv, ""), "%.2f" % wr if wr else "n/a"),
                "%.2f" % (wr / tr) if wr and tr else "n/a"))

    def lat(queue):
        for r in rows:
            p = r["params"]
            relay = p.get("relay", "")
            if r["workload"] == "latency" and p.get("rate") == 500 and \
                    bool(p.get("queue")) == queue and \
                    "--mode" not in relay and "--listen off" not in relay \
                    and r["metric"] == "p50_ms":
                p99, _ = get("latency", "p99_ms", queue, **{
                    k: p[k] for k in ("rate", "seconds", "relay")})
                return r["value"], p99
        return None, None

    tl50, tl99 = lat(False)
    wl50, wl99 = lat(True)
    if wl50 is not None:
        out.append("| commit to sink at 500/s, p50 / p99 ms | | %s / %s | "
                   "%s / %s | %s |" % (
                       fmt_value(tl50, "ms"), fmt_value(tl99, "ms"),
                       fmt_value(wl50, "ms"), fmt_value(wl99, "ms"),
                       "%.2f" % (wl50 / tl50) if tl50 else "n/a"))

    def drain(queue):
        for r in rows:
            p = r["params"]
            if r["workload"] == "drain" and r["metric"] == "events_per_s" \
                    and p["relays"] == 1 and not p.get("rss") and \
                    not p.get("hold_xmin") and \
                    bool(p.get("queue")) == queue and \
                    "--mode" not in p.get("relay", ""):
                return r["value"], p["events"]
        return None, None

    td, _ = drain(False)
    wd, n = drain(True)
    if wd is not None:
        out.append("| drain of %s events, 1 relay, events/s | | %s | %s | "
                   "%s |" % ("{:,}".format(n), fmt_value(td, ""),
                             fmt_value(wd, ""),
                             "%.2f" % (wd / td) if td else "n/a"))
    return tagged(out, tag)


def tagged(lines, tag):
    """Table rows with the round's tag after their first cell."""
    return [re.sub(r"^\| ([^|]*?) \|", lambda m: "| %s%s |" % (
        m.group(1), tag), line) for line in lines]


def held_rows(rows):
    """WAL capture under a held snapshot: the producers (8 clients, relay
    streaming, the same seconds) and the drain, held over none held."""
    def one(workload, held, **want):
        for r in rows:
            p = r["params"]
            if r["workload"] == workload and \
                    r["metric"] == "events_per_s" and p.get("queue") and \
                    bool(p.get("hold_xmin")) == held and \
                    p.get("relay") and all(p.get(k) == v
                                           for k, v in want.items()):
                return r["value"], p
        return None, None

    out = []
    hv, hp = one("enqueue", True, clients=8)
    if hv is not None:
        nv, _ = one("enqueue", False, clients=8, seconds=hp["seconds"])
        out.append("| send(), 8 clients, relay streaming, %g s, "
                   "events/s | %s | %s | %s |" % (
                       hp["seconds"], fmt_value(nv, ""), fmt_value(hv, ""),
                       "%.2f" % (hv / nv) if nv else "n/a"))
    hv, hp = one("drain", True, relays=1)
    if hv is not None:
        nv, _ = one("drain", False, relays=1, events=hp["events"])
        out.append("| drain of %s events, 1 relay, events/s | %s | %s | "
                   "%s |" % (
                       "{:,}".format(hp["events"]), fmt_value(nv, ""),
                       fmt_value(hv, ""),
                       "%.2f" % (hv / nv) if nv else "n/a"))
    return out


def chart_data(rows, outdir):
    """The data files of bench/charts.gp."""
    import os
    rates = {}
    for r in rows:
        if r["workload"] == "drain" and r["metric"] == "events_per_s" \
                and not r["params"].get("rss") \
                and not r["params"].get("queue") \
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


def plain_work(rows, rnd, p):
    """The plain queue's jobs/s beside a groups run: the same jobs,
    workers and worker flags (the queue aside), same round."""
    def flags(q):
        return q["worker"].replace("--queue %s" % q["work_queue"], "")
    for r in rows:
        q = r["params"]
        if r["workload"] == "work" and r["metric"] == "jobs_per_s" and \
                not q.get("groups") and round_of(r) == rnd and \
                q["jobs"] == p["jobs"] and q["workers"] == p["workers"] \
                and flags(q) == flags(p):
            return r["value"]
    return None


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
        elif w == "work" and m == "jobs_per_s" and p.get("groups"):
            limit = plain_work(rows, rnd, p)
            if limit and v is not None:
                ratio = "%.2f of plain" % (v / limit)
                limit = None
        elif w == "work" and m == "jobs_per_s":
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
    print("\n".join(out + beside(rows) + over_time(rows)))


if __name__ == "__main__":
    main()
