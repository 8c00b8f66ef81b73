# A held xmin does not slow the relay down (issue 7): while another
# session holds a snapshot open for 30 s (what an analytics query or an
# idle-in-transaction session does), producers commit a steady load; every
# event the relay deletes stays in the table and its index as a dead tuple
# that cannot be removed.  A claim that started at the lowest id walked all
# of them, and at higher rates fell minutes behind (run this test with
# T_CLAIM_FLOOR=off to see it fail: the index entries read per event); the claim floor
# (sql/006_claim_floor.sql) keeps the relay up with the load, and nothing
# is lost or left behind after the snapshot ends.
# serial: timing-sensitive, run alone (tests/run.sh)
. "$(dirname "$0")/../lib.sh"
t_db
BENCH=$(dirname "$PGO_BIN")/bench/pgoutbox-bench
[ -x "$BENCH" ] || fail "$BENCH is not built"
RATE=${T_RATE:-5000}
# Index entries read from the outbox's indexes (pg_stat_user_indexes,
# flushed when a session ends): without the floor every claim walks the
# entries of the rows deleted during the hold, which the snapshot keeps.
idx_read() { q "SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes WHERE schemaname = 'pgoutbox' AND relname = 'outbox'"; }
ids() { q "SELECT last_value FROM pgoutbox.outbox_id_seq"; }
read0=$(idx_read) id0=$(ids)
"$BENCH" latency --hold-xmin --seconds 30 --after 5 --rate "$RATE" \
	--producers 1 --per-tx 20 --insert --window 5 --warmup 1 --grace 30 \
	--relay-cmd "$PGO_BIN relay --sink stdout --batch 500 --claim-floor ${T_CLAIM_FLOOR:-on}" \
	--relay-log "$T_TMP/relay.log" --db "$DATABASE_URL" \
	--json "$T_TMP/run.jsonl" --label held >"$T_TMP/bench.log" 2>&1 ||
	{ tail -n 20 "$T_TMP/bench.log"; fail "the held-xmin workload failed"; }
read1=$(idx_read) id1=$(ids)
python3 - "$T_TMP/run.jsonl" "$RATE" "$((read1 - read0))" "$((id1 - id0))" <<'PY' || { tail -n 25 "$T_TMP/bench.log" >&2; grep -v DEBUG "$T_TMP/relay.log" | tail -n 20 >&2; cp "$T_TMP/relay.log" /tmp/t_held_xmin.relay.log 2>/dev/null || true; fail "the relay did not keep up under a held xmin"; }
import json, sys
m = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if not r["workload"].endswith("-window"):
        m[r["metric"]] = r["value"]
rate = float(sys.argv[2])
# Per event sent in the run (ids drawn from the outbox's sequence).
read_per_event = int(sys.argv[3]) / max(int(sys.argv[4]), 1)
checks = [
    # Claims from the floor read the few entries between the floor (a
    # probe a moment old) and the newest rows: about 50 per event here.
    # Claims from the lowest id walk every entry the hold keeps: about
    # 2,000 per event over the run (T_CLAIM_FLOOR=off).  This check
    # counts work, not time, so a loaded host does not move it.
    ("outbox index entries read per event", read_per_event < 300, round(read_per_event, 1)),
    ("events lost", m["lost"] == 0, m["lost"]),
    # The hold really pinned what the relay deleted: most events sent
    # during the 30 s stayed as dead tuples.
    ("dead tuples pinned by the snapshot", m["during_dead_tuples_max"] >= 0.5 * rate * 25,
     m["during_dead_tuples_max"]),
    ("delivered/s while held vs offered", m["during_delivered_per_s"] >= 0.9 * rate,
     m["during_delivered_per_s"]),
    # A claim that walks the dead rows takes longer with every second of
    # the hold (about 45 ms at p99 by the end here, T_CLAIM_FLOOR=off;
    # 2 ms with the floor).  The bound is a gross-stall alarm, not a
    # latency target (those are make bench's, issue 21): a clean-clone
    # CI run under ASan beside the parallel tests measured up to 67.8 ms
    # with the floor on, so the work count above is the check that tells
    # the floor from its absence.
    ("p99 ms while held", m["during_p99_ms"] < 250, m["during_p99_ms"]),
    ("backlog max while held", m["during_backlog_max"] < rate, m["during_backlog_max"]),
    ("p99 ms after", m["after_p99_ms"] < 250, m["after_p99_ms"]),
]
bad = [c for c in checks if not c[1]]
for name, ok, value in checks:
    print(f"  {'ok  ' if ok else 'FAIL'} {name}: {value}", file=sys.stderr)
sys.exit(1 if bad else 0)
PY
note "$(grep -E 'during_delivered_per_s|during_p99_ms ' "$T_TMP/bench.log" | tr -s ' ' | tr '\n' ';')"
