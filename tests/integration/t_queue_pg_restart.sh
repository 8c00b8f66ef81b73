# PostgreSQL restarted (immediate, crash-like) under a worker of each kind
# and a cron scheduler: they reconnect by themselves; every job is done and
# the schedule goes on firing once per tick.
. "$(dirname "$0")/../lib.sh"
PG_PORT= pg_start "$T_TMP/pg" fsync=off
trap 'cleanup_pids; pg_stop' EXIT
t_db
"$PGO_BIN" queue create ex >/dev/null && "$PGO_BIN" queue create sq >/dev/null || fail "queue create"
q "CREATE TABLE results (i int); CREATE FUNCTION rec(p jsonb) RETURNS void LANGUAGE sql AS 'INSERT INTO results VALUES ((p->>''i'')::int)'"
"$PGO_BIN" cron add beat '* * * * * *' --queue ex --overlap allow --payload '{"i": 0}' >/dev/null || fail "cron add"
"$PGO_BIN" worker --queue ex --exec "cat >> $T_TMP/ran; echo >> $T_TMP/ran" --concurrency 4 --poll-interval 200ms 2>"$T_TMP/ex.log" &
EX=$!; PIDS+=($!)
"$PGO_BIN" worker --queue sq --sql rec --concurrency 2 --poll-interval 200ms 2>"$T_TMP/sq.log" &
SQ=$!; PIDS+=($!)
"$PGO_BIN" cron run 2>"$T_TMP/cron.log" &
CR=$!; PIDS+=($!)
q "SELECT count(pgoutbox.enqueue('sq', jsonb_build_object('i', i))) FROM generate_series(1, 5000) i" >/dev/null
sleep 2
pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate -w stop >/dev/null
sleep 1.5
pg_start_again
q "SELECT count(pgoutbox.enqueue('sq', jsonb_build_object('i', i))) FROM generate_series(5001, 10000) i" >/dev/null
wait_until 30 '[ "$(q "SELECT count(*) FROM pgoutbox.sq")" = 0 ]'
before=$(q "SELECT count(*) FROM pgoutbox.cron_history")
wait_until 15 "[ \$(q 'SELECT count(*) FROM pgoutbox.cron_history') -ge $((before + 3)) ]"
wait_until 15 '[ "$(q "SELECT count(*) FROM pgoutbox.ex")" = 0 ]'
for p in "$EX" "$SQ" "$CR"; do kill -0 "$p" || fail "a process exited when PostgreSQL went away"; stop_relay "$p"; done
[ "$(q "SELECT count(DISTINCT i) FROM results")" = 10000 ] || fail "sql jobs: $(q "SELECT count(DISTINCT i) FROM results") of 10000"
[ "$(q "SELECT count(*) FROM results")" = 10000 ] || fail "sql jobs ran $(q "SELECT count(*) FROM results") times"
row=$(q "SELECT count(*), extract(epoch FROM max(tick) - min(tick))::int + 1 FROM pgoutbox.cron_history")
IFS='|' read -r n span <<<"$row"
[ "$n" = "$span" ] || fail "cron history has gaps: $n ticks over $span s"
[ "$(q "SELECT count(*) FROM pgoutbox.cron_history WHERE outcome = 'fired'")" = "$(grep -c '"i": 0' "$T_TMP/ran")" ] || note "exec ran $(grep -c '"i": 0' "$T_TMP/ran") cron jobs for $n fired ticks (a crash between a job's end and its completion repeats it)"
grep -q 'connection lost' "$T_TMP/ex.log" && grep -q 'connection lost' "$T_TMP/sq.log" && grep -q 'connection lost' "$T_TMP/cron.log" || fail "no 'connection lost' logged"
