# A custom sink written against the sink interface v2 (examples/linger_sink.c)
# under a real relay: its linger timer and its stdout watcher both run in
# the relay's loop.  A slow reader fills the pipe, so the sink must wait for
# POLLOUT without blocking the relay; every event arrives once, per key in
# commit order, and SIGTERM drains what lingers.
. "$(dirname "$0")/../lib.sh"
t_db
EX=$(dirname "$PGO_BIN")/linger_sink
[ -x "$EX" ] || fail "$EX not built"
N=20000
q "SELECT pgoutbox.send('t', 'k' || (i % 50), 'x', jsonb_build_object('i', i, 'pad', repeat('p', 150)))
   FROM generate_series(1, $N) i" >/dev/null
mkfifo "$T_TMP/pipe"
# The reader takes 16 KiB every 5 ms (about 3 MB/s): far slower than the relay.
python3 -c '
import sys, time
f = open(sys.argv[1], "rb"); out = open(sys.argv[2], "wb")
while True:
    b = f.read1(16384)
    if not b: break
    out.write(b); time.sleep(0.005)
' "$T_TMP/pipe" "$T_TMP/out" &
READER=$!; PIDS+=("$READER")
PGOUTBOX_RELAY_STATS_INTERVAL=0 PGOUTBOX_RELAY_BATCH=200 "$EX" >"$T_TMP/pipe" 2>"$T_TMP/sink.log" &
R=$!; PIDS+=("$R")
wait_until 60 '[ "$(pending)" = 0 ]'
# Events sent while idle linger and are flushed by the timer alone.
q "SELECT pgoutbox.send('t', 'late', 'x', '{\"late\": true}')" >/dev/null
wait_until 20 '[ "$(pending)" = 0 ]'
stop_relay "$R"
wait "$READER"
got=$(ids_of "$T_TMP/out" | wc -l)
uniq=$(ids_of "$T_TMP/out" | sort -u | wc -l)
[ "$uniq" = $((N + 1)) ] || fail "$uniq distinct events arrived, want $((N + 1))"
[ "$got" = "$uniq" ] || fail "$((got - uniq)) duplicates without any crash"
# Per key, ids (= commit order here) ascend.
bad=$(sed -n 's/^{"id":\([0-9]*\),"topic":"t","key":"\([^"]*\)".*/\1 \2/p' "$T_TMP/out" |
	awk '{ if ($2 in last && $1 + 0 < last[$2]) bad++; last[$2] = $1 + 0; n++ } END { print (n == '"$((N + 1))"' ? bad + 0 : "unparsed") }')
[ "$bad" = 0 ] || fail "$bad per-key order violations"
line=$(grep 'timer flushes' "$T_TMP/sink.log") || fail "no stats line from the sink: $(cat "$T_TMP/sink.log")"
flushes=$(sed 's/.*: \([0-9]*\) timer flushes.*/\1/' <<<"$line")
waits=$(sed 's/.*, \([0-9]*\) waits.*/\1/' <<<"$line")
[ "$flushes" -gt 0 ] || fail "the linger timer never fired: $line"
[ "$waits" -gt 0 ] || fail "the sink never waited for POLLOUT (the reader was not slow?): $line"
note "$uniq events through a slow pipe: $flushes timer flushes, $waits waits for POLLOUT, 0 duplicates, 0 order violations"
