# Work queue, nothing crashing: 3 workers drain 20,000 jobs with a no-op
# sql handler, and 500 jobs with an exec handler; every job is done
# exactly once (a results table without a unique constraint counts the
# runs), and SIGTERM makes each worker exit 0.
. "$(dirname "$0")/../lib.sh"
t_db
"$PGO_BIN" queue create jobs >/dev/null || fail "queue create"
"$PGO_BIN" queue create shell >/dev/null || fail "queue create shell"
q "CREATE TABLE results (job int, worker text);
   CREATE FUNCTION record_job(p jsonb) RETURNS void LANGUAGE sql
   AS \$\$ INSERT INTO results VALUES ((p->>'i')::int, current_setting('application_name')) \$\$"
q "SELECT count(pgoutbox.enqueue('jobs', jsonb_build_object('i', i))) FROM generate_series(1, 20000) i" >/dev/null
start=$(date +%s.%N)
W=()
for i in 1 2 3; do
	"$PGO_BIN" worker --queue jobs --sql record_job --concurrency 2 --name "w$i" 2>"$T_TMP/w$i.log" &
	W+=($!); PIDS+=($!)
done
wait_until 60 '[ "$(q "SELECT count(*) FROM pgoutbox.jobs")" = 0 ]'
end=$(date +%s.%N)
for p in "${W[@]}"; do stop_relay "$p"; done
row=$(q "SELECT count(*), count(DISTINCT job), count(DISTINCT worker) FROM results")
[ "$row" = "20000|20000|3" ] || fail "sql handler: runs|distinct jobs|workers = $row, want 20000|20000|3"
note "sql: 20000 jobs by 3 workers in $(python3 -c "print(round($end - $start, 2))") s"

# exec: 500 jobs, 3 workers with 4 jobs at once each.
q "SELECT count(pgoutbox.enqueue('shell', jsonb_build_object('i', i))) FROM generate_series(1, 500) i" >/dev/null
cat >"$T_TMP/job.sh" <<SH
#!/bin/sh
payload=\$(cat)
echo "\$PGOUTBOX_JOB_ID \$PGOUTBOX_JOB_ATTEMPT \$PGOUTBOX_QUEUE \$payload" >> $T_TMP/runs
SH
chmod +x "$T_TMP/job.sh"
W=()
for i in 1 2 3; do
	"$PGO_BIN" worker --queue shell --exec "$T_TMP/job.sh" --concurrency 4 --name "e$i" 2>"$T_TMP/e$i.log" &
	W+=($!); PIDS+=($!)
done
wait_until 60 '[ "$(q "SELECT count(*) FROM pgoutbox.shell")" = 0 ]'
for p in "${W[@]}"; do stop_relay "$p"; done
[ "$(wc -l <"$T_TMP/runs")" = 500 ] || fail "exec: $(wc -l <"$T_TMP/runs") runs, want 500"
[ "$(cut -d' ' -f1 "$T_TMP/runs" | sort -u | wc -l)" = 500 ] || fail "exec: a job ran twice"
grep -qv ' 1 shell {"i": ' "$T_TMP/runs" && fail "exec: wrong environment or payload: $(grep -v ' 1 shell {"i": ' "$T_TMP/runs" | head -3)"
[ "$(q "SELECT count(*) FROM pgoutbox.dead_letters")" = 0 ] || fail "dead letters appeared"
total=0
for i in 1 2 3; do
	n=$(grep -o 'stopped: done [0-9]*' "$T_TMP/e$i.log" | grep -o '[0-9]*$')
	total=$((total + n))
done
[ "$total" = 500 ] || fail "exec workers report $total done, want 500"
