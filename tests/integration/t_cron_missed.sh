# Cron after downtime: with every scheduler down for ~12 s, the missed
# ticks follow each schedule's policy: skip (none run), run_once (one run)
# or catch_up (at most N run); every tick is still recorded, so the history
# has no gap.  Overlap skip: while the previous job is still queued, ticks
# are recorded as skipped.  Bad expressions and zones name the bad field.
. "$(dirname "$0")/../lib.sh"
t_db
"$PGO_BIN" queue create cq >/dev/null || fail "queue create"
rc=0; "$PGO_BIN" cron add bad '0 25 * * *' --queue cq 2>"$T_TMP/err" || rc=$?
[ "$rc" = 2 ] && grep -q 'hour field: 25 is out of range' "$T_TMP/err" || fail "bad hour: $rc $(cat "$T_TMP/err")"
rc=0; "$PGO_BIN" cron add bad '* * * * *' --queue cq --tz Europe/Nowhere 2>"$T_TMP/err" || rc=$?
[ "$rc" = 2 ] && grep -q 'unknown time zone "Europe/Nowhere"' "$T_TMP/err" || fail "bad zone: $rc $(cat "$T_TMP/err")"
rc=0; "$PGO_BIN" cron add bad '* * * * *' --queue nope 2>"$T_TMP/err" || rc=$?
[ "$rc" = 2 ] && grep -q 'no work queue named "nope"' "$T_TMP/err" || fail "bad queue: $rc $(cat "$T_TMP/err")"
rc=0; "$PGO_BIN" cron add bad '* * * * *' --queue cq --payload '{x' 2>"$T_TMP/err" || rc=$?
[ "$rc" = 2 ] && grep -q 'payload is not valid JSON' "$T_TMP/err" || fail "bad payload: $rc $(cat "$T_TMP/err")"

for p in skip run_once catch_up; do
	"$PGO_BIN" cron add "m_$p" '* * * * * *' --queue cq --overlap allow --missed "$p" --catch-up-max 3 >/dev/null || fail "add $p"
done
"$PGO_BIN" cron add busy '* * * * * *' --queue cq --overlap skip >/dev/null || fail "add busy"
"$PGO_BIN" cron list | qgrep '^m_catch_up .*missed=catch_up:3' || fail "cron list: $("$PGO_BIN" cron list)"
"$PGO_BIN" cron run --name a --grace 3s 2>"$T_TMP/a.log" & A=$!; PIDS+=($!)
sleep 3
kill -9 "$A"
sleep 12
"$PGO_BIN" cron run --name b --grace 3s 2>"$T_TMP/b.log" & B=$!; PIDS+=($!)
sleep 3
stop_relay "$B"
check() { # name, missed ticks run
	local row
	row=$(q "SELECT count(*), extract(epoch FROM max(tick) - min(tick))::int + 1,
	                count(*) FILTER (WHERE outcome = 'fired' AND reason LIKE 'missed%'),
	                count(*) FILTER (WHERE outcome = 'skipped' AND reason LIKE 'missed%')
	         FROM pgoutbox.cron_history WHERE name = '$1'")
	IFS='|' read -r n span ran skipped <<<"$row"
	[ "$n" = "$span" ] || fail "$1: $n ticks recorded over $span s"
	[ "$ran" = "$2" ] || fail "$1: $ran missed ticks run, want $2"
	[ $((ran + skipped)) -ge 5 ] || fail "$1: only $((ran + skipped)) ticks counted as missed"
	[ "$(q "SELECT count(*) FROM pgoutbox.cq WHERE key = '$1'")" = "$(q "SELECT count(*) FROM pgoutbox.cron_history WHERE name = '$1' AND outcome = 'fired'")" ] || fail "$1: jobs and fired ticks differ"
	note "$1: $n ticks, $ran missed ticks run, $skipped missed ticks skipped"
}
check m_skip 0
check m_run_once 1
check m_catch_up 3
row=$(q "SELECT count(*) FILTER (WHERE outcome = 'fired'), count(*) FILTER (WHERE reason = 'previous run still queued or running') FROM pgoutbox.cron_history WHERE name = 'busy'")
IFS='|' read -r fired skipped <<<"$row"
[ "$fired" = 1 ] && [ "$skipped" -ge 4 ] || fail "overlap skip: fired $fired, skipped as still running $skipped"
"$PGO_BIN" cron history busy --limit 3 | qgrep 'skipped .*previous run still queued' || fail "cron history: $("$PGO_BIN" cron history busy)"
"$PGO_BIN" cron remove busy | qgrep removed || fail "cron remove"
rc=0; "$PGO_BIN" cron remove busy 2>/dev/null || rc=$?
[ "$rc" = 1 ] || fail "removing a missing schedule: rc $rc"
# The compare-and-set itself: two instances that read the same last_tick;
# only the first call fires, the second changes nothing.
prev=$(q "SELECT extract(epoch FROM last_tick)::bigint FROM pgoutbox.cron_schedules WHERE name = 'm_skip'")
a=$(q "SELECT pgoutbox.cron_fire('m_skip', $prev, ARRAY[$prev + 1], ARRAY[true], ARRAY[NULL::text])")
b=$(q "SELECT pgoutbox.cron_fire('m_skip', $prev, ARRAY[$prev + 1], ARRAY[true], ARRAY[NULL::text])")
[ "$a|$b" = "1|-1" ] || fail "compare-and-set: first call $a, second $b (want 1, -1)"
[ "$(q "SELECT count(*) FROM pgoutbox.cron_history WHERE name = 'm_skip' AND tick = to_timestamp($prev + 1)")" = 1 ] || fail "tick not recorded once"
