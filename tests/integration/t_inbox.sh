# pgoutbox.inbox_claim and the partition maintenance: a duplicate is seen
# within the window across day partitions and under concurrency (the
# second claim waits for the first to commit or roll back), REPEATABLE
# READ is refused, a missing partition gets a clear error, and old
# partitions are dropped rather than deleted from.
. "$(dirname "$0")/../lib.sh"
t_db
claim() { q "SELECT pgoutbox.inbox_claim('$1', '$2')"; }

[ "$(claim c1 m1)" = t ] || fail "first claim is not fresh"
[ "$(claim c1 m1)" = f ] || fail "second claim is not a duplicate"
[ "$(claim c2 m1)" = t ] || fail "another consumer's claim of the same message is not fresh"
# A rolled-back claim leaves nothing behind.
q "BEGIN; SELECT pgoutbox.inbox_claim('c1', 'm2'); ROLLBACK" >/dev/null
[ "$(claim c1 m2)" = t ] || fail "a rolled-back claim still counts"

# Concurrent claims: the second waits for the first transaction's end.
# The first transaction has claimed when its sleep runs.
sleeping() { wait_until 10 "[ \"\$(q \"SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query = 'SELECT pg_sleep($1)'\")\" = 1 ]"; }
psql -XAtq "$DATABASE_URL" -c "BEGIN" -c "SELECT pgoutbox.inbox_claim('c1', 'm3')" \
	-c "SELECT pg_sleep(3)" -c "COMMIT" >/dev/null &
sleeping 3
start=$(date +%s%N)
[ "$(claim c1 m3)" = f ] || fail "a concurrent duplicate was claimed as fresh"
waited=$((($(date +%s%N) - start) / 1000000))
wait
[ "$waited" -ge 400 ] || fail "the concurrent claim did not wait for the first ($waited ms)"
psql -XAtq "$DATABASE_URL" -c "BEGIN" -c "SELECT pgoutbox.inbox_claim('c1', 'm4')" \
	-c "SELECT pg_sleep(2)" -c "ROLLBACK" >/dev/null &
sleeping 2
[ "$(claim c1 m4)" = t ] || fail "after the first claim rolled back, the second is not fresh"
wait
note "concurrent claim waited $waited ms for the first to commit"

# REPEATABLE READ cannot see a concurrent claim: refused.
out=$(psql -XAtq "$DATABASE_URL" -c "BEGIN ISOLATION LEVEL REPEATABLE READ" \
	-c "SELECT pgoutbox.inbox_claim('c1', 'm5')" 2>&1 || true)
grep -q 'needs READ COMMITTED or SERIALIZABLE' <<<"$out" || fail "REPEATABLE READ not refused: $out"
q "BEGIN ISOLATION LEVEL SERIALIZABLE; SELECT pgoutbox.inbox_claim('c1', 'm5'); COMMIT" >/dev/null

# A claim from yesterday's partition is still a duplicate today.
yesterday=$(q "SELECT ((now() AT TIME ZONE 'UTC')::date - 1)")
ypart=inbox_$(q "SELECT to_char(date '$yesterday', 'YYYYMMDD')")
q "CREATE TABLE pgoutbox.$ypart PARTITION OF pgoutbox.inbox FOR VALUES FROM ('$yesterday 00:00:00+00') TO ('$yesterday 00:00:00+00'::timestamptz + interval '1 day')"
q "INSERT INTO pgoutbox.inbox (consumer, message_id, received_at) VALUES ('c1', 'old', '$yesterday 12:00:00+00')"
[ "$(claim c1 old)" = f ] || fail "a claim in yesterday's partition was not seen"

# Maintenance: an expired partition goes, the next days exist.
q "CREATE TABLE pgoutbox.inbox_20000101 PARTITION OF pgoutbox.inbox FOR VALUES FROM ('2000-01-01 00:00:00+00') TO ('2000-01-02 00:00:00+00')"
q "INSERT INTO pgoutbox.inbox VALUES ('c1', 'ancient', '2000-01-01 10:00:00+00')"
out=$("$PGO_BIN" inbox maintain --window '7 days')
[ "$out" = "inbox partitions: 0 created, 1 dropped" ] || fail "inbox maintain printed: $out"
[ "$(q "SELECT to_regclass('pgoutbox.inbox_20000101') IS NULL")" = t ] || fail "the expired partition is still there"
[ "$(q "SELECT to_regclass('pgoutbox.$ypart') IS NOT NULL")" = t ] || fail "yesterday's partition was dropped within the window"
[ "$(q "SELECT count(*) FROM pgoutbox.inbox WHERE received_at < now() - interval '1 day' AND message_id = 'ancient'")" = 0 ] || fail "an expired claim survived"
[ "$(q "SELECT count(*) FROM pg_inherits WHERE inhparent = 'pgoutbox.inbox'::regclass")" = 4 ] || fail "expected yesterday + today + 2 partitions"
# Yesterday's partition ends at midnight UTC: gone under a 1 hour window
# (unless it is not yet 01:00 UTC).
gone=$(q "SELECT CASE WHEN (now() AT TIME ZONE 'UTC')::time >= '01:00' THEN 1 ELSE 0 END")
out=$("$PGO_BIN" inbox maintain --window '1 hour')
[ "$out" = "inbox partitions: 0 created, $gone dropped" ] || fail "a 1 hour window should drop yesterday: $out"
"$PGO_BIN" inbox maintain --window '5 minutes' >/dev/null 2>"$T_TMP/err" && fail "a window under 1 hour was accepted"
grep -q 'at least 1 hour' "$T_TMP/err" || fail "no reason for the refused window: $(cat "$T_TMP/err")"

# Without today's partition a claim says what to do.
today=inbox_$(q "SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYYMMDD')")
q "DROP TABLE pgoutbox.$today"
out=$(psql -XAtq "$DATABASE_URL" -c "SELECT pgoutbox.inbox_claim('c1', 'm6')" 2>&1 || true)
grep -q 'has no partition for today' <<<"$out" || fail "missing partition: $out"
grep -q 'inbox_maintain' <<<"$out" || fail "missing partition: no hint: $out"
[ "$("$PGO_BIN" inbox maintain)" = "inbox partitions: 1 created, 0 dropped" ] || fail "maintain did not recreate today"
[ "$(claim c1 m6)" = t ] || fail "claim after maintenance"
"$PGO_BIN" inbox vacuum >/dev/null 2>&1 && fail "an unknown inbox action was accepted"
true
