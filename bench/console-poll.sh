#!/usr/bin/env bash
# console-poll.sh BUILD [N] [ROUNDS] — does a browser polling the console
# slow the relay?  One relay (ordered, stdout sink, metrics.listen on)
# drains N events (500,000) already in the outbox, ROUNDS times (3) as it
# is, and ROUNDS times with [console] enabled on its metrics address
# while headless Chromium shows the overview (which refreshes itself
# every 2 s) and fetches /api/overview once a second more, interleaved
# quiet, console, quiet ...  The browser is niced, as the scraper of
# metrics-flood.sh is: an operator's browser runs elsewhere, here it
# shares the two cores.  Prints each drain with the relay's CPU per
# event and the overview requests answered during it, the medians and
# the slowdown (target: none measurable, within the rounds' spread) and
# the relay's CPU per event, less sensitive to a busy host than the rate.
# Starts its own PostgreSQL, durable (fsync on).  Needs /usr/bin/chromium
# and tests/console's playwright-core (npm ci there).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${1:?usage: bench/console-poll.sh BUILD [N] [ROUNDS]}
N=${2:-500000}
ROUNDS=${3:-3}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
PGO=$BUILD/pgoutbox
BENCH=$BUILD/bench/pgoutbox-bench
for exe in "$PGO" "$BENCH"; do
	[ -x "$exe" ] || { echo "console-poll.sh: $exe not built" >&2; exit 2; }
done
[ -x /usr/bin/chromium ] || { echo "console-poll.sh: /usr/bin/chromium not installed (scripts/deps.sh)" >&2; exit 2; }
NODE_DIR=$ROOT/tests/console
if [ ! -f "$NODE_DIR/node_modules/playwright-core/package.json" ]; then
	(cd "$NODE_DIR" && flock "$NODE_DIR/package-lock.json" npm ci --no-audit --no-fund --loglevel=error) >&2
fi
TMP=$(mktemp -d /tmp/pgoutbox-console-poll.XXXXXX)
chmod 755 "$TMP"
. scripts/pg.sh
POLLER=
cleanup() { [ -n "$POLLER" ] && kill "$POLLER" 2>/dev/null; pg_stop; rm -rf "$TMP"; }
trap cleanup EXIT
pg_start "$TMP/pg" shared_buffers=256MB fsync=on synchronous_commit=on max_wal_size=4GB >/dev/null
psql -XAtq "$(pg_url postgres)" -c "CREATE DATABASE bench" >/dev/null
URL=$(pg_url bench)
"$PGO" migrate --db "$URL" >/dev/null 2>&1
PORT=$(pg_free_port)
RELAY="$PGO relay --sink stdout --batch 1000 --in-flight 2 --metrics-listen 127.0.0.1:$PORT"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $N events a drain, $ROUNDS rounds each"

# The browser: the overview open (its own 2 s refresh) and one more
# GET /api/overview a second; each answered one is a line "epoch_s" in
# polls.  It waits out the relay's restarts between drains.
cat >"$TMP/poll.js" <<'JS'
'use strict';
const { chromium } = require(process.env.NODE_DIR + '/node_modules/playwright-core');
const fs = require('fs');
const [url, out] = process.argv.slice(2);
(async () => {
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true,
    handleSIGTERM: false, handleSIGINT: false,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'] });
  process.on('SIGTERM', () => { browser.close().finally(() => process.exit(0)); });
  const page = await browser.newPage();
  page.on('response', r => {
    if (r.url().includes('/api/overview') && r.status() === 200) fs.appendFileSync(out, Date.now() / 1000 + '\n');
  });
  for (;;) {
    try {
      if (!page.url().startsWith(url)) await page.goto(url + '/#/', { timeout: 5000 });
      await page.evaluate(async () => { await fetch('/api/overview'); });
    } catch (e) { /* the relay is between drains */ }
    await new Promise(r => setTimeout(r, 1000));
  }
})().catch(e => { console.error(e); process.exit(1); });
JS

for r in $(seq "$ROUNDS"); do
	for mode in quiet console; do
		psql -XAtq "$URL" -c "TRUNCATE pgoutbox.outbox" -c "CHECKPOINT" >/dev/null
		cmd=$RELAY
		if [ $mode = console ]; then
			cmd="env PGOUTBOX_CONSOLE_ENABLED=true $RELAY"
			: >"$TMP/polls"
			NODE_DIR=$NODE_DIR nice -n "${POLL_NICE:-19}" node "$TMP/poll.js" "http://127.0.0.1:$PORT" "$TMP/polls" 2>"$TMP/poll.log" &
			POLLER=$!
		fi
		: >"$TMP/relay.log"
		"$BENCH" drain --db "$URL" --events "$N" --relays 1 --repeat 1 --timeout 300 --warm \
			--relay-cmd "$cmd" --json "$TMP/$mode.jsonl" --label "$mode" --relay-log "$TMP/relay.log" >"$TMP/drain.txt"
		d1=$(date +%s.%N)
		read -r rate cpu < <(python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
last = lambda m: [r["value"] for r in rows if r["metric"] == m][-1]
cpu = [r["value"] for r in rows if r["metric"] == "relay_cpu_us_per_event"]
print(last("events_per_s"), cpu[-1] if cpu else "nan")' "$TMP/$mode.jsonl")
		extra=
		if [ $mode = console ]; then
			kill "$POLLER" 2>/dev/null; wait "$POLLER" 2>/dev/null || true
			POLLER=
			polls=$(python3 -c "
import sys
d1, d = $d1, $N / $rate
print(sum(1 for l in open('$TMP/polls') if d1 - d - 0.2 <= float(l) <= d1))")
			extra=" | $polls overview requests answered during the drain"
			grep -q 'console on the metrics address' "$TMP/relay.log" ||
				{ echo "console-poll.sh: the relay served no console: $(tail -n 5 "$TMP/relay.log")" >&2; exit 1; }
		fi
		printf 'round %d %-8s: %8.0f events/s, %5.1f us of relay CPU an event%s\n' "$r" "$mode" "$rate" "$cpu" "$extra"
		echo "$rate" >>"$TMP/$mode.rates"
		echo "$cpu" >>"$TMP/$mode.cpu"
	done
done
python3 - "$TMP/quiet.rates" "$TMP/console.rates" "$TMP/quiet.cpu" "$TMP/console.cpu" <<'PY'
import statistics, sys
q, c, qc, cc = ([float(x) for x in open(a)] for a in sys.argv[1:5])
mq, mc = statistics.median(q), statistics.median(c)
spread = 100 * (max(q) - min(q)) / mq
print(f"median drain: without a console {mq:,.0f} events/s, with a browser polling it {mc:,.0f} events/s: "
      f"{100 * (mq - mc) / mq:+.1f} % slower (the quiet rounds spread {spread:.1f} %)")
print(f"median relay CPU: without a console {statistics.median(qc):.2f} us an event, "
      f"with a browser polling it {statistics.median(cc):.2f} us an event")
PY
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
