# `pgoutbox run --config FILE` starts the relay, a worker and the cron
# scheduler together: an event is relayed, a cron tick becomes a job that
# the worker runs; a killed child is restarted; SIGTERM stops everything
# and run exits 0.
. "$(dirname "$0")/../lib.sh"
t_db
"$PGO_BIN" queue create chores >/dev/null || fail "queue create"
"$PGO_BIN" cron add sweep '* * * * * *' --queue chores --payload '{"task": "sweep"}' >/dev/null || fail "cron add"
cat >"$T_TMP/run.ini" <<INI
[relay]
sink = stdout
mode = concurrent
poll_interval = 200ms
[worker]
queue = chores
exec_command = cat >> $T_TMP/jobs; echo >> $T_TMP/jobs
concurrency = 2
poll_interval = 200ms
[cron]
enabled = on
INI
"$PGO_BIN" run --config "$T_TMP/run.ini" >"$T_TMP/out" 2>"$T_TMP/run.log" &
RUN=$!; PIDS+=($!)
q "SELECT pgoutbox.send('t', 'k', 'x', '{\"hello\": 1}')" >/dev/null
wait_until 20 "grep -q '\"hello\"' $T_TMP/out"
wait_until 20 "[ \$(grep -c sweep $T_TMP/jobs 2>/dev/null || echo 0) -ge 2 ]"
wpid=$(grep -o 'worker started (pid [0-9]*' "$T_TMP/run.log" | sed -n 1p | grep -o '[0-9]*$')
kill -9 "$wpid"
wait_until 10 "grep -q 'worker (pid $wpid) ended' $T_TMP/run.log"
wait_until 10 "[ \$(grep -c 'worker started' $T_TMP/run.log) = 2 ]"
n=$(grep -c sweep "$T_TMP/jobs")
wait_until 20 "[ \$(grep -c sweep $T_TMP/jobs) -gt $n ]"
stop_relay "$RUN"
grep -q 'relay stopped' "$T_TMP/run.log" && grep -q 'cron stopped' "$T_TMP/run.log" || fail "children not stopped: $(tail -5 "$T_TMP/run.log")"
