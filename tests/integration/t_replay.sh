# Replay (issue 39): 10,000 events of 40 keys relayed under retention
# archive, then `pgoutbox queue replay --topic` of their time range
# queues them again: each is delivered once more, marked with the header
# pgoutbox-replay-of (its original id), in original order per key, and
# events of another topic in that range are not replayed.  A key and an
# id range replay just those; a replay with no range, of a queue without
# an archive, or of a work queue without one is refused.
. "$(dirname "$0")/../lib.sh"
t_db
rc=0; "$PGO_BIN" queue replay outbox --from-id 0 2>"$T_TMP/err" || rc=$?
[ "$rc" = 1 ] && grep -q 'keeps no archive: its retention is delete' "$T_TMP/err" || fail "replay without an archive: exit $rc: $(cat "$T_TMP/err")"
"$PGO_BIN" maintain --queue outbox --retention archive --days 3 >/dev/null || fail "maintain --retention archive"
from=$(q "SELECT now()")
# Per key k0..k39 a sequence number n, in id order.
q "INSERT INTO pgoutbox.outbox (topic, key, type, payload)
   SELECT 'orders', 'k' || (i % 40), 'order.placed', jsonb_build_object('n', i / 40) FROM generate_series(0, 9999) i" >/dev/null
q "SELECT pgoutbox.send('audit', 'k1', 'seen', '{}') FROM generate_series(1, 50)" >/dev/null
start_relay "$T_TMP/first.out" --poll-interval 200ms
R=$RELAY_PID
wait_until 60 '[ "$(pending)" = 0 ]'
stop_relay "$R"
[ "$(q "SELECT count(*) FROM pgoutbox.outbox_archive WHERE topic = 'orders'")" = 10000 ] || fail "archived $(q "SELECT count(*) FROM pgoutbox.outbox_archive")"
to=$(q "SELECT now()")
max_orig=$(q "SELECT max(id) FROM pgoutbox.outbox_archive")
# Live events of another key, queued before the replay: not disturbed.
q "SELECT pgoutbox.send('live', 'other', 'x', jsonb_build_object('n', i)) FROM generate_series(1, 100) i" >/dev/null

rc=0; "$PGO_BIN" queue replay outbox --topic orders 2>"$T_TMP/err" || rc=$?
[ "$rc" = 2 ] && grep -q 'give --from/--to' "$T_TMP/err" || fail "replay without a range: exit $rc: $(cat "$T_TMP/err")"
"$PGO_BIN" queue replay outbox --from "$from" --to "$to" --topic orders >"$T_TMP/replay.out" || fail "queue replay: $(cat "$T_TMP/replay.out")"
grep -qx 'queued 10000 archived event(s) of outbox again (header pgoutbox-replay-of)' "$T_TMP/replay.out" || fail "replay said: $(cat "$T_TMP/replay.out")"
start_relay "$T_TMP/second.out" --poll-interval 200ms
R=$RELAY_PID
wait_until 60 '[ "$(pending)" = 0 ]'
stop_relay "$R"
q "CREATE TABLE got (seq bigserial, line jsonb)" >/dev/null
psql -XAtq "$DATABASE_URL" -c "\\copy got (line) FROM '$T_TMP/second.out' WITH (FORMAT text)" || fail "loading what arrived"
replays=$(q "SELECT count(*) FROM got WHERE line->'headers' ? 'pgoutbox-replay-of'")
distinct=$(q "SELECT count(DISTINCT line->'headers'->>'pgoutbox-replay-of') FROM got")
[ "$replays" = 10000 ] && [ "$distinct" = 10000 ] || fail "replays delivered: $replays lines, $distinct originals; want 10000 each"
# Each replay carries its original's topic, key and payload.
bad=$(q "SELECT count(*) FROM got g JOIN pgoutbox.outbox_archive a ON a.id = (g.line->'headers'->>'pgoutbox-replay-of')::bigint
          WHERE a.topic <> g.line->>'topic' OR a.key <> g.line->>'key' OR a.payload <> g.line->'payload'")
[ "$bad" = 0 ] || fail "$bad replays differ from their originals"
[ "$(q "SELECT count(*) FROM got WHERE line->>'topic' = 'audit'")" = 0 ] || fail "another topic was replayed"
# Per key, the replays arrived in original id order (and n order).
disorder=$(q "SELECT count(*) FROM (SELECT line->>'key' AS k, (line->'headers'->>'pgoutbox-replay-of')::bigint AS orig,
                   lag((line->'headers'->>'pgoutbox-replay-of')::bigint) OVER (PARTITION BY line->>'key' ORDER BY seq) AS prev
              FROM got WHERE line->'headers' ? 'pgoutbox-replay-of') x WHERE prev > orig")
[ "$disorder" = 0 ] || fail "$disorder replays arrived before an earlier event of their key"
[ "$(q "SELECT count(*) FROM got WHERE line->>'key' = 'other'")" = 100 ] || fail "the live events were not all delivered"
note "replay: 10,000 archived events delivered once each, in order per key, 100 live events beside them"

# A key, and an id range, replay only those (and only originals: the
# archive now holds the replays too, with ids above max_orig).
n=$("$PGO_BIN" queue replay outbox --key k7 --from-id 0 --to-id "$max_orig" | awk '{ print $2 }')
[ "$n" = 250 ] || fail "replay --key k7 queued $n, want 250"
n=$(q "SELECT pgoutbox.replay('outbox', from_id => 1, to_id => 100)")
[ "$n" = 100 ] || fail "replay of ids 1..100 queued $n"
[ "$(q "SELECT count(*) FROM pgoutbox.outbox WHERE key = 'k7' AND headers ? 'pgoutbox-replay-of'")" = 253 ] ||
	fail "queued replays of k7: $(q "SELECT count(*) FROM pgoutbox.outbox WHERE key = 'k7'")"
"$PGO_BIN" queue create jobs >/dev/null || fail "queue create jobs"
rc=0; q "SELECT pgoutbox.replay('jobs', from_id => 0)" 2>"$T_TMP/err" >/dev/null || rc=$?
[ "$rc" != 0 ] && grep -q 'keeps no archive' "$T_TMP/err" || fail "replay of a work queue without an archive: $(cat "$T_TMP/err")"
