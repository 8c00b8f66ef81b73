# Pause and resume under load (issue 39).  Two exec workers drain a queue
# of short jobs; `pgoutbox queue pause` stops their claims: no job starts
# later than 1 s after the pause (jobs claimed before it may still be
# starting), producers still enqueue, and the workers run everything
# after `queue resume`, woken without restarting.  The same for a --sql
# worker (pgoutbox.work_sql).
. "$(dirname "$0")/../lib.sh"
t_db
"$PGO_BIN" queue create p >/dev/null || fail "queue create"
cat >"$T_TMP/job.sh" <<SH
#!/bin/sh
echo "\$(date +%s.%N) \$PGOUTBOX_JOB_ID" >> $T_TMP/starts
sleep 0.02
SH
chmod +x "$T_TMP/job.sh"
q "SELECT pgoutbox.enqueue('p', jsonb_build_object('i', i)) FROM generate_series(1, 1500) i" >/dev/null
for n in a b; do
	"$PGO_BIN" worker --queue p --exec "$T_TMP/job.sh" --concurrency 4 \
		--poll-interval 30s --name "$n" 2>"$T_TMP/$n.log" &
	PIDS+=($!)
done
wait_until 30 "[ \$(wc -l < $T_TMP/starts 2>/dev/null || echo 0) -ge 100 ]"
"$PGO_BIN" queue pause p >"$T_TMP/pause.out" || fail "queue pause: $(cat "$T_TMP/pause.out")"
paused_at=$(date +%s.%N)
grep -q 'queue p paused' "$T_TMP/pause.out" || fail "pause said: $(cat "$T_TMP/pause.out")"
grep -q '^queue p: paused' <<<"$("$PGO_BIN" queue stats p)" || fail "queue stats does not say paused: $("$PGO_BIN" queue stats p)"
sleep 2.5
late=$(awk -v t="$paused_at" '$1 > t + 1.0' "$T_TMP/starts" | wc -l)
[ "$late" = 0 ] || fail "$late jobs started more than 1 s after the pause"
left=$(q "SELECT count(*) FROM pgoutbox.p")
[ "$left" -gt 0 ] || fail "the queue drained before the pause took effect"
# Producers still enqueue into a paused queue.
q "SELECT pgoutbox.enqueue('p', '{\"late\": true}') FROM generate_series(1, 10)" >/dev/null ||
	fail "enqueue into a paused queue"
sleep 1
[ "$(awk -v t="$paused_at" '$1 > t + 1.0' "$T_TMP/starts" | wc -l)" = 0 ] || fail "jobs started while paused"
note "pause: $(wc -l < "$T_TMP/starts") started before it, $left left"
# Resume: the workers' poll is 30 s, so only the wake-up can start them.
resumed_at=$(date +%s)
grep -q 'queue p resumed' <<<"$("$PGO_BIN" queue resume p)" || fail "queue resume"
wait_until 60 "[ \"\$(q 'SELECT count(*) FROM pgoutbox.p')\" = 0 ]"
[ "$(sort -u -k2,2 "$T_TMP/starts" | wc -l)" = 1510 ] ||
	fail "$(sort -u -k2,2 "$T_TMP/starts" | wc -l) distinct jobs ran, want 1510"
first=$(awk -v t="$resumed_at" '$1 >= t { print $1; exit }' "$T_TMP/starts")
[ -n "$first" ] || fail "nothing ran after the resume"
[ "$(q "SELECT count(*) FROM pgoutbox.dead_letters")" = 0 ] || fail "dead letters appeared"
[ "$(q "SELECT count(*) FROM pgoutbox.queue_controls")" = 0 ] || fail "resume left a controls row"

# sql mode: the batch function claims nothing while paused.
q "CREATE TABLE done_jobs (i int PRIMARY KEY, at timestamptz NOT NULL DEFAULT clock_timestamp())" >/dev/null
q "CREATE FUNCTION do_job(p jsonb) RETURNS void LANGUAGE sql AS \$\$ INSERT INTO done_jobs (i) VALUES ((p->>'i')::int) \$\$" >/dev/null
"$PGO_BIN" queue create s >/dev/null || fail "queue create s"
"$PGO_BIN" queue pause s >/dev/null || fail "queue pause s"
q "SELECT pgoutbox.enqueue('s', jsonb_build_object('i', i)) FROM generate_series(1, 2000) i" >/dev/null
"$PGO_BIN" worker --queue s --sql do_job --concurrency 2 --batch 50 --poll-interval 30s \
	--name sq 2>"$T_TMP/sq.log" &
PIDS+=($!)
sleep 1.5
[ "$(q 'SELECT count(*) FROM done_jobs')" = 0 ] || fail "the sql worker ran jobs of a paused queue"
"$PGO_BIN" queue resume s >/dev/null || fail "queue resume s"
wait_until 30 "[ \"\$(q 'SELECT count(*) FROM done_jobs')\" = 2000 ]"
q "SELECT pgoutbox.enqueue('s', jsonb_build_object('i', i)) FROM generate_series(2001, 40000) i" >/dev/null
wait_until 30 "[ \"\$(q 'SELECT count(*) FROM done_jobs')\" -ge 3000 ]"
"$PGO_BIN" queue pause s >/dev/null || fail "queue pause s (under load)"
paused=$(q "SELECT clock_timestamp()")
sleep 2
[ "$(q "SELECT count(*) FROM pgoutbox.s")" -gt 0 ] || fail "s drained before the pause"
late=$(q "SELECT count(*) FROM done_jobs WHERE at > '$paused'::timestamptz + interval '1 second'")
[ "$late" = 0 ] || fail "sql mode: $late jobs done more than 1 s after the pause"
"$PGO_BIN" queue resume s >/dev/null || fail "queue resume s"
wait_until 60 "[ \"\$(q 'SELECT count(*) FROM done_jobs')\" = 40000 ]"
[ "$(q "SELECT count(*) FROM pgoutbox.s")" = 0 ] || fail "jobs left in s"
