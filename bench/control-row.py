#!/usr/bin/env python3
"""control-row.py: bench/steady-control.sh's figures.

  control-row.py ONE.jsonl WORKLOAD LABEL ROUND OFFERED
      one run's pgoutbox-bench latency figures (its --json file) as one
      JSON line on stdout, and a line of text on stderr
  control-row.py --summary ALL.jsonl
      the table of all runs (Markdown): each round's worst 5-s window
      p99 and producers' achieved rate, and their medians
"""
import json
import statistics
import sys

KEYS = ("p99_ms_worst_window", "p50_ms", "p99_ms", "backlog_max",
        "rate_achieved", "lost")


def row(path, workload, label, rnd, offered):
    m = {}
    for line in open(path):
        r = json.loads(line)
        if not r["workload"].endswith("-window"):
            m.setdefault(r["metric"], r["value"])
    missing = [k for k in KEYS if k not in m]
    if missing:
        sys.exit(f"control-row.py: {path} has no {', '.join(missing)}")
    out = {"workload": workload, "label": label, "round": int(rnd),
           "offered": int(offered), **{k: m[k] for k in KEYS}}
    print(json.dumps(out))
    print("round %d, %-6s %-11s worst 5-s p99 %7.1f ms, p50 %6.1f ms, "
          "backlog max %7.0f, producers achieved %6.0f/s, lost %d"
          % (out["round"], workload, label, m["p99_ms_worst_window"],
             m["p50_ms"], m["backlog_max"], m["rate_achieved"], m["lost"]),
          file=sys.stderr)


def summary(path):
    runs = {}
    for line in open(path):
        r = json.loads(line)
        runs.setdefault((r["workload"], r["label"]), []).append(r)
    if not runs:
        sys.exit(f"control-row.py: {path} holds no run")
    offered = next(iter(runs.values()))[0]["offered"]
    print(f"{offered:,} events/s offered; the worst 5-s window's p99 and "
          "the producers' achieved rate, each round:")
    print()
    print("| workload | relay | worst 5-s p99 (ms) | median | p50, median "
          "(ms) | producers achieved (/s) | median | lost |")
    print("|---|---|---|---:|---:|---|---:|---:|")
    for (workload, label), rs in runs.items():
        worst = [r["p99_ms_worst_window"] for r in rs]
        got = [r["rate_achieved"] for r in rs]
        print(f"| {workload} | {label} | "
              f"{', '.join(f'{x:.1f}' for x in worst)} | "
              f"{statistics.median(worst):.1f} | "
              f"{statistics.median(r['p50_ms'] for r in rs):.2f} | "
              f"{', '.join(f'{x:,.0f}' for x in got)} | "
              f"{statistics.median(got):,.0f} | "
              f"{sum(r['lost'] for r in rs):.0f} |")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--summary":
        summary(sys.argv[2])
    elif len(sys.argv) == 6:
        row(*sys.argv[1:])
    else:
        sys.exit(__doc__)
