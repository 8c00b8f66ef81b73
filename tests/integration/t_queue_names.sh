# Queue names that pgoutbox's own partitions use are reserved: a work queue
# named like the outbox's archive partition of a day took that partition's
# place, and once the outbox archived, the relay halted on "no partition
# ... found for row".  `queue create` refuses them before connecting (exit
# 2) and pgoutbox.create_queue() refuses them in SQL too.
. "$(dirname "$0")/../lib.sh"
t_db
day=$(q "SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYYMMDD')")
for name in outbox_archive_20261201 "outbox_archive_$day" outbox_archive jobs_archive \
	"inbox_$day" inbox_20300101 "cron_history_$day"; do
	rc=0
	"$PGO_BIN" queue create "$name" >"$T_TMP/out" 2>"$T_TMP/err" || rc=$?
	[ "$rc" = 2 ] || fail "queue create $name: exit $rc, not 2: $(cat "$T_TMP/out" "$T_TMP/err")"
	grep -q "queue name \"$name\" is reserved" "$T_TMP/err" || fail "queue create $name: $(cat "$T_TMP/err")"
	psql -XAtq "$DATABASE_URL" -c "SELECT pgoutbox.create_queue('$name')" >/dev/null 2>"$T_TMP/sql.err" &&
		fail "create_queue('$name') in SQL was not refused"
	grep -q "queue name \"$name\" is reserved" "$T_TMP/sql.err" || fail "create_queue('$name'): $(cat "$T_TMP/sql.err")"
done
[ "$(q "SELECT count(*) FROM pgoutbox.queues WHERE kind = 'work'")" = 0 ] || fail "a reserved name was created: $(q 'SELECT name FROM pgoutbox.queues')"
# Names that only look alike are queues like any other.
for name in archive_jobs outbox_archives inbox_jobs cron_history_2026 jobs_archive_1; do
	"$PGO_BIN" queue create "$name" >/dev/null 2>"$T_TMP/err" || fail "queue create $name: $(cat "$T_TMP/err")"
done
# The outbox archives, today's partition is its own, the relay relays.
"$PGO_BIN" maintain --retention archive --days 3 >/dev/null || fail "maintain --retention archive"
[ "$(q "SELECT count(*) FROM pg_inherits WHERE inhrelid = 'pgoutbox.outbox_archive_$day'::regclass")" = 1 ] ||
	fail "outbox_archive_$day is not a partition of the archive"
q "SELECT pgoutbox.send('t', 'k' || i, 'x', '{}') FROM generate_series(1, 20) i" >/dev/null
start_relay "$T_TMP/relay.out" --sink stdout
wait_until 20 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
[ "$(q 'SELECT count(*) FROM pgoutbox.outbox_archive')" = 20 ] || fail "archived $(q 'SELECT count(*) FROM pgoutbox.outbox_archive') of 20"
