# Groups (issue 39).  (1) Fairness: group a has 10,000 jobs queued, group
# b enqueues 10 after them; with limits set, claims are round-robin
# across groups, so b's 10 jobs all run within the first two claim
# rounds (batches of the --sql worker) after they commit, not after a's
# 10,000.  (2) group_concurrency 1 under 4 exec workers, one killed with
# kill -9: no two jobs of one group overlap (recorded start/end times),
# each group's jobs start in enqueue order, every job is done.
. "$(dirname "$0")/../lib.sh"
t_db
# (1) fairness, sql mode: each batch is one transaction (txid).
q "CREATE TABLE ran (id bigserial PRIMARY KEY, grp text, i int, tx bigint, at timestamptz)" >/dev/null
# A job takes a millisecond: on an idle host the worker drains a's 10,000
# jobs of no work before b's can be enqueued, and there is nothing to jump.
q "CREATE FUNCTION do_job(p jsonb) RETURNS void LANGUAGE sql AS
   \$\$ SELECT pg_sleep(0.001); INSERT INTO ran (grp, i, tx, at) VALUES (p->>'g', (p->>'i')::int, txid_current(), clock_timestamp()) \$\$" >/dev/null
"$PGO_BIN" queue create f >/dev/null || fail "queue create f"
"$PGO_BIN" queue set f --group-concurrency 1000 >/dev/null || fail "queue set f"
q "SELECT pgoutbox.enqueue('f', jsonb_build_object('g', 'a', 'i', i), group_key => 'a') FROM generate_series(1, 10000) i" >/dev/null
"$PGO_BIN" worker --queue f --sql do_job --concurrency 2 --batch 100 --poll-interval 200ms \
	--name fw 2>"$T_TMP/fw.log" &
FW=$!; PIDS+=($!)
wait_until 30 "[ \"\$(q 'SELECT count(*) FROM ran')\" -ge 1000 ]"
b_at=$(psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" -c "SELECT count(pgoutbox.enqueue('f', jsonb_build_object('g', 'b', 'i', i), group_key => 'b')) FROM generate_series(1, 10) i" -c "SELECT clock_timestamp()" | tail -1)
left=$(q "SELECT count(*) FROM pgoutbox.f WHERE group_key = 'a'")
[ "$left" -gt 1000 ] || fail "only $left of a's jobs were left when b enqueued"
wait_until 60 "[ \"\$(q \"SELECT count(*) FROM ran WHERE grp = 'b'\")\" = 10 ]"
# The batches that ran a job after b's enqueue, in the order they began;
# b's jobs must all be in the first two.
rounds=$(q "WITH t AS (SELECT tx, min(at) AS began, count(*) FILTER (WHERE grp = 'b') AS b
                         FROM ran WHERE tx IN (SELECT tx FROM ran WHERE at >= '$b_at') GROUP BY tx),
               n AS (SELECT b, row_number() OVER (ORDER BY began) AS round FROM t)
            SELECT max(round) FROM n WHERE b > 0")
a_before=$(q "SELECT count(*) FROM ran WHERE grp = 'a' AND at < (SELECT max(at) FROM ran WHERE grp = 'b')")
note "fairness: b's 10 jobs ran within claim round $rounds after their enqueue ($a_before of a's jobs ran before b's last, $left were queued)"
[ "$rounds" -le 2 ] || fail "b's jobs waited $rounds claim rounds"
wait_until 60 "[ \"\$(q 'SELECT count(*) FROM ran')\" = 10010 ]"
stop_relay "$FW"
rate=$(q "SELECT round(10000 / extract(epoch FROM max(at) - min(at))) FROM ran WHERE grp = 'a'")
note "fairness: 10,010 jobs at ~$rate jobs/s (sql worker, 2 connections, batch 100, controls on)"

# (2) sequential per group under kill -9.
"$PGO_BIN" queue create s >/dev/null || fail "queue create s"
"$PGO_BIN" queue set s --group-concurrency 1 >/dev/null || fail "queue set s"
q "SELECT pgoutbox.enqueue('s', jsonb_build_object('i', i), group_key => 'g' || (i % 5)) FROM generate_series(1, 100) i" >/dev/null
# One job's first run is slow, so that its worker is surely running it
# when the test kills that worker and the job's processes: the machine
# died under it.
slow=$(q "SELECT min(id) + 42 FROM pgoutbox.s")
cat >"$T_TMP/job.sh" <<SH
#!/bin/sh
echo "start \$PGOUTBOX_JOB_ID \$PGOUTBOX_JOB_ATTEMPT \$(date +%s.%N)" >> $T_TMP/runs
if [ "\$PGOUTBOX_JOB_ID" = $slow ] && [ "\$PGOUTBOX_JOB_ATTEMPT" = 1 ]; then
	echo \$\$ > $T_TMP/slow.pid
	sleep 30
fi
sleep 0.1
echo "end \$PGOUTBOX_JOB_ID \$PGOUTBOX_JOB_ATTEMPT \$(date +%s.%N)" >> $T_TMP/runs
SH
chmod +x "$T_TMP/job.sh"
declare -A PID_OF
work() {
	"$PGO_BIN" worker --queue s --exec "$T_TMP/job.sh" --concurrency 4 --lease 1500ms \
		--reap-interval 300ms --poll-interval 100ms --name "$1" 2>"$T_TMP/$1.log" &
	PID_OF[$1]=$!; PIDS+=($!)
}
work s1; work s2; work s3; work s4
# The victim: the worker running the slow job.
wait_until 60 "[ -s $T_TMP/slow.pid ]"
victim=$(q "SELECT locked_by FROM pgoutbox.s WHERE id = $slow")
[ -n "${PID_OF[$victim]:-}" ] || fail "job $slow is running, but not leased to a worker of the test ('$victim')"
job_group=$(ps -o pgid= -p "$(cat "$T_TMP/slow.pid")" | tr -d ' ')
kill -9 "${PID_OF[$victim]}"
kill -9 -- "-$job_group"
killed_at=$(date +%s.%N)
work s5
wait_until 90 "[ \"\$(q 'SELECT count(*) FROM pgoutbox.s')\" = 0 ]"
sleep 0.5
q "CREATE TABLE runs (what text, id bigint, attempt int, t numeric)" >/dev/null
sed 's/ /,/g' "$T_TMP/runs" | psql -XAtq "$DATABASE_URL" -c "\\copy runs FROM STDIN WITH (FORMAT csv)"
# A run without its end (its process killed with the worker) ended at the
# kill at the latest.
overlaps=$(q "WITH r AS (SELECT s.id, s.attempt, s.t AS st, coalesce(e.t, $killed_at) AS en, 'g' || (s.id % 5) AS g
                           FROM runs s LEFT JOIN runs e ON e.what = 'end' AND e.id = s.id AND e.attempt = s.attempt
                          WHERE s.what = 'start')
              SELECT count(*) FROM r x JOIN r y ON x.g = y.g AND (x.id, x.attempt) < (y.id, y.attempt)
               AND x.st < y.en AND y.st < x.en")
[ "$overlaps" = 0 ] || fail "$overlaps pairs of runs of one group overlap"
[ "$(q "SELECT count(DISTINCT id) FROM runs WHERE what = 'end'")" = 100 ] || fail "not every job ended"
disorder=$(q "WITH f AS (SELECT id, min(t) AS st FROM runs WHERE what = 'start' GROUP BY id)
              SELECT count(*) FROM f x JOIN f y ON x.id % 5 = y.id % 5 AND x.id < y.id AND x.st > y.st")
[ "$disorder" = 0 ] || fail "$disorder pairs of one group's jobs started out of enqueue order"
[ "$(q "SELECT count(*) FROM pgoutbox.dead_letters")" = 0 ] || fail "dead letters appeared"
[ "$(q "SELECT count(*) FROM runs WHERE what = 'end' AND id = $slow AND attempt = 2")" = 1 ] ||
	fail "job $slow did not run again after $victim was killed under it"
note "sequential: $(q "SELECT count(*) FROM runs WHERE what = 'start'") runs of 100 jobs in 5 groups, $(q "SELECT count(*) FROM runs WHERE what = 'start' AND attempt > 1") again after the kill"
