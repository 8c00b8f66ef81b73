# cron add over an existing schedule keeps what it is not given (its
# zone above all) and says so; cron list shows no last tick until the
# schedule's first tick (issue 44, item 9).
. "$(dirname "$0")/../lib.sh"
t_db
"$PGO_BIN" queue create cq >/dev/null || fail "queue create"
"$PGO_BIN" cron add nightly '0 3 * * *' --queue cq --tz Europe/Berlin --missed catch_up --catch-up-max 4 --overlap allow >/dev/null || fail "cron add"
[ "$(q "SELECT tz || ' ' || missed || ' ' || catch_up_max || ' ' || overlap FROM pgoutbox.cron_schedules WHERE name = 'nightly'")" = "Europe/Berlin catch_up 4 allow" ] || fail "added: $(q 'TABLE pgoutbox.cron_schedules')"
out=$("$PGO_BIN" cron add nightly '0 4 * * *' --queue cq) || fail "cron add again"
[ "$out" = "schedule nightly replaced" ] || fail "a replace says: $out"
"$PGO_BIN" cron add other '0 5 * * *' --queue cq --payload '{"a":1}' >/dev/null || fail "cron add other"
"$PGO_BIN" cron add other '0 6 * * *' --queue cq >/dev/null || fail "cron add other again"
[ "$(q "SELECT payload::text FROM pgoutbox.cron_schedules WHERE name = 'other'")" = '{"a": 1}' ] || fail "payload reset: $(q "SELECT payload FROM pgoutbox.cron_schedules WHERE name = 'other'")"
got=$(q "SELECT expr || ' ' || tz || ' ' || missed || ' ' || catch_up_max || ' ' || overlap FROM pgoutbox.cron_schedules WHERE name = 'nightly'")
[ "$got" = "0 4 * * * Europe/Berlin catch_up 4 allow" ] || fail "replaced without --tz: $got"
"$PGO_BIN" cron add nightly '0 4 * * *' --queue cq --tz UTC >/dev/null || fail "cron add --tz UTC"
[ "$(q "SELECT tz FROM pgoutbox.cron_schedules WHERE name = 'nightly'")" = UTC ] || fail "--tz UTC not taken"
# Never ticked: no LAST TICK; NEXT TICK as before.
"$PGO_BIN" cron list >"$T_TMP/list" || fail "cron list"
line=$(grep '^nightly ' "$T_TMP/list")
[ "$(echo "$line" | grep -oE '[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z' | wc -l)" = 1 ] || fail "never ticked, yet: $line"
echo "$line" | qgrep -E ' - +[0-9]{4}-' || fail "no '-' as LAST TICK: $line"
# After a tick: the tick.
"$PGO_BIN" cron add beat '* * * * * *' --queue cq --overlap allow >/dev/null || fail "cron add beat"
"$PGO_BIN" cron list | qgrep -E '^beat .* - ' || fail "beat before its first tick: $("$PGO_BIN" cron list)"
"$PGO_BIN" cron run 2>"$T_TMP/cron.log" &
PIDS+=($!)
wait_until 20 "[ \$(q \"SELECT count(*) FROM pgoutbox.cron_history WHERE name = 'beat'\") -gt 0 ]"
last=$(q "SELECT to_char(last_tick AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') FROM pgoutbox.cron_schedules WHERE name = 'beat'")
"$PGO_BIN" cron list | qgrep -E "^beat .* $last " || fail "beat's last tick $last not shown: $("$PGO_BIN" cron list)"
note "a replaced schedule kept its zone and policies; LAST TICK '-' until the first tick"
