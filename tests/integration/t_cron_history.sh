# Cron history expires by partition (issue 7): migrating keeps the history
# recorded before (migration 008 moves it into day partitions), expired
# days are DROPped whole by the scheduler (no DELETE, no dead tuples),
# and a missing partition for today does not stop a tick.
. "$(dirname "$0")/../lib.sh"
PGOPTIONS="-c client_min_messages=warning" psql -XAtq "$(pg_url postgres)" -c "DROP DATABASE IF EXISTS t_cron_history" -c "CREATE DATABASE t_cron_history" >/dev/null
export DATABASE_URL=$(pg_url t_cron_history)
"$PGO_BIN" migrate --to 7 >/dev/null 2>&1 || fail "migrate --to 7"
q "SELECT pgoutbox.create_queue('cq')" >/dev/null
# History of the old, unpartitioned table: 10 and 2 days old, and today.
q "INSERT INTO pgoutbox.cron_history (name, tick, outcome, recorded_at)
   SELECT 'old', now() - d * interval '1 day', 'fired', now() - d * interval '1 day'
     FROM unnest(ARRAY[10, 2, 0]) d"
"$PGO_BIN" migrate >/dev/null 2>"$T_TMP/migrate.err" || fail "migrate to the newest: $(cat "$T_TMP/migrate.err")"
[ "$(q "SELECT count(*) FROM pgoutbox.cron_history WHERE name = 'old'")" = 3 ] || fail "history lost in the migration"
[ "$(q "SELECT relkind FROM pg_class WHERE oid = 'pgoutbox.cron_history'::regclass")" = p ] || fail "cron_history is not partitioned"
parts() { q "SELECT count(*) FROM pg_inherits WHERE inhparent = 'pgoutbox.cron_history'::regclass"; }
[ "$(parts)" = 5 ] || fail "want 5 partitions (3 days of history, tomorrow and the day after), have $(parts)"

# A scheduler with a 7-day history: the day 10 days old goes, whole.
"$PGO_BIN" cron add beat '* * * * * *' --queue cq --overlap allow >/dev/null || fail "cron add"
# Today's partition is gone (as if maintenance never ran, and with it
# today's old row): the scheduler must make it again and go on firing.
q "DROP TABLE pgoutbox.cron_history_$(date -u +%Y%m%d)"
"$PGO_BIN" cron run --history-keep 168h 2>"$T_TMP/cron.log" &
PIDS+=($!)
wait_until 20 "[ \$(q \"SELECT count(*) FROM pgoutbox.cron_history WHERE name = 'beat'\") -ge 3 ]"
wait_until 10 "grep -q 'dropped 1 day' '$T_TMP/cron.log'"
kill -TERM "${PIDS[-1]}"; wait "${PIDS[-1]}" || fail "cron run exited non-zero: $(tail -n 5 "$T_TMP/cron.log")"
[ "$(q "SELECT count(*) FROM pgoutbox.cron_history WHERE name = 'old'")" = 1 ] || fail "want only the 2-day-old history row left: $(q "SELECT tick FROM pgoutbox.cron_history WHERE name = 'old'")"
fired=$(q "SELECT count(*) FROM pgoutbox.cron_history WHERE name = 'beat'")
jobs=$(q "SELECT count(*) FROM pgoutbox.cq")
[ "$fired" = "$jobs" ] || fail "$fired ticks recorded, $jobs jobs"
note "history: migrated 3 rows, dropped the expired day, $fired ticks recorded after today's partition was dropped"

# A scheduler role with the grants of docs/queue.md but without EXECUTE on
# cron_history_maintain: ticks still fire, and the log says why the
# history is not expired.
R=t_cron_history_sched
psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<SQL
CREATE ROLE $R LOGIN;
GRANT USAGE ON SCHEMA pgoutbox TO $R;
GRANT SELECT ON pgoutbox.migrations TO $R;
GRANT SELECT, UPDATE, DELETE ON pgoutbox.cron_schedules TO $R;
GRANT SELECT ON pgoutbox.cron_history TO $R;
GRANT EXECUTE ON FUNCTION pgoutbox.cron_fire(text, bigint, bigint[], boolean[], text[]) TO $R;
SQL
before=$(q "SELECT count(*) FROM pgoutbox.cron_history WHERE name = 'beat'")
DATABASE_URL=${DATABASE_URL/user=postgres/user=$R} "$PGO_BIN" cron run 2>"$T_TMP/cron-role.log" &
PIDS+=($!)
wait_until 20 "[ \$(q \"SELECT count(*) FROM pgoutbox.cron_history WHERE name = 'beat'\") -ge $((before + 2)) ]"
wait_until 10 "grep -q 'WARN.*permission denied for function cron_history_maintain; the history is kept' '$T_TMP/cron-role.log'"
kill -TERM "${PIDS[-1]}"; wait "${PIDS[-1]}" || fail "cron run as $R exited non-zero: $(tail -n 5 "$T_TMP/cron-role.log")"
