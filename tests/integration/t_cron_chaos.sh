# Distributed cron under chaos: 3 scheduler instances (one waking 2 s
# late, one 2 s early, as skewed clocks would) run an every-second
# schedule for 30 s while instances are killed (kill -9) and restarted,
# one always up.  Every tick is fired exactly once: the history has every
# second with no gap, and exactly one job was enqueued per tick.
. "$(dirname "$0")/../lib.sh"
t_db
"$PGO_BIN" queue create ticks >/dev/null || fail "queue create"
"$PGO_BIN" cron add every '* * * * * *' --queue ticks --overlap allow --payload '{"job": "tick"}' >/dev/null || fail "cron add"
declare -A C
OFF=([1]=0s [2]=+2s [3]=-2s)
up() { "$PGO_BIN" cron run --name "c$1" --clock-offset "${OFF[$1]}" 2>>"$T_TMP/c$1.log" & C[$1]=$!; PIDS+=($!); }
up 1; up 2; up 3
sleep 4;  kill -9 "${C[1]}"
sleep 3;  up 1
sleep 3;  kill -9 "${C[3]}"
sleep 2;  kill -9 "${C[2]}"          # only c1 is up
sleep 4;  up 2; up 3
sleep 3;  kill -9 "${C[1]}"          # c2 (+2 s late) and c3 (-2 s early)
sleep 4;  kill -9 "${C[3]}"          # only c2, which wakes 2 s late
sleep 4;  up 1; up 3
sleep 3
for i in 1 2 3; do stop_relay "${C[$i]}"; done
row=$(q "SELECT count(*), count(DISTINCT tick), extract(epoch FROM max(tick) - min(tick))::int + 1,
                count(*) FILTER (WHERE outcome <> 'fired') FROM pgoutbox.cron_history WHERE name = 'every'")
IFS='|' read -r n distinct span notfired <<<"$row"
[ "$n" -ge 28 ] || fail "only $n ticks recorded in ~30 s"
[ "$n" = "$span" ] || fail "ticks missing: $n recorded over a span of $span seconds"
[ "$notfired" = 0 ] || fail "$notfired ticks not fired: $(q "SELECT tick, outcome, reason FROM pgoutbox.cron_history WHERE outcome <> 'fired'")"
jobs=$(q "SELECT count(*), count(DISTINCT headers->>'tick') FROM pgoutbox.ticks")
[ "$jobs" = "$n|$n" ] || fail "jobs|distinct ticks = $jobs, want $n|$n"
dup=$(q "SELECT count(*) FROM pgoutbox.cron_history h WHERE (SELECT count(*) FROM pgoutbox.ticks t WHERE t.id = h.job_id AND t.headers->>'tick' = to_char(h.tick AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')) <> 1")
[ "$dup" = 0 ] || fail "$dup history rows do not match exactly one job of their tick"
won=$(cat "$T_TMP"/c*.log | grep -o 'ticks won by other instances [0-9]*' | awk '{s += $NF} END {print s + 0}')
note "$n ticks over ${span}s, each fired once; ticks another instance had already fired: $won"
