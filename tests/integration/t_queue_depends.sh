# Job dependencies (issue 39): enqueue(..., depends_on => ids).  (1) 20
# chains of 5 jobs, each depending on the one before, under 4 exec workers
# in lease mode: no job starts before each job it depends on has ended,
# and every job is done.  (2) The same in sql mode on a queue with
# controls (claim_ids): a dependent always runs in a later batch than
# its dependency.  (3) A dependency that dies: its dependent waits while
# it is a dead letter; `dead retry` (then done) releases it, and so does
# `dead discard`.  An id that is in neither the queue nor its dead
# letters counts as done.  `queue enqueue --depends-on` (pgo_enqueue's
# depends_on) stores them.
. "$(dirname "$0")/../lib.sh"
t_db
"$PGO_BIN" queue create dq >/dev/null || fail "queue create dq"
# (1) A chain's jobs enqueued one after the other (adjacent ids, so that
# without dependencies 4 workers would run them at once); each names the
# one before it.
q "CREATE TABLE chain_ids (chain int, step int, id bigint)" >/dev/null
q "DO \$\$
   DECLARE prev bigint; id bigint;
   BEGIN
     FOR c IN 1..20 LOOP
       FOR s IN 1..5 LOOP
         SELECT max(x.id) INTO prev FROM chain_ids x WHERE x.chain = c AND x.step = s - 1;
         id := pgoutbox.enqueue('dq', jsonb_build_object('c', c, 's', s),
                                depends_on => CASE WHEN prev IS NULL THEN NULL ELSE ARRAY[prev] END);
         INSERT INTO chain_ids VALUES (c, s, id);
       END LOOP;
     END LOOP;
   END \$\$" >/dev/null
[ "$(q "SELECT count(*) FROM pgoutbox.dq WHERE depends_on IS NOT NULL")" = 80 ] || fail "depends_on not stored"
cat >"$T_TMP/job.sh" <<SH
#!/bin/sh
echo "start \$PGOUTBOX_JOB_ID \$(date +%s.%N)" >> $T_TMP/runs
sleep 0.05
echo "end \$PGOUTBOX_JOB_ID \$(date +%s.%N)" >> $T_TMP/runs
SH
chmod +x "$T_TMP/job.sh"
"$PGO_BIN" worker --queue dq --exec "$T_TMP/job.sh" --concurrency 4 --poll-interval 100ms \
	--name w1 2>"$T_TMP/w1.log" &
W=$!; PIDS+=($!)
wait_until 60 "[ \"\$(q 'SELECT count(*) FROM pgoutbox.dq')\" = 0 ]"
stop_relay "$W"
q "CREATE TABLE runs (what text, id bigint, t numeric)" >/dev/null
sed 's/ /,/g' "$T_TMP/runs" | psql -XAtq "$DATABASE_URL" -c "\\copy runs FROM STDIN WITH (FORMAT csv)"
[ "$(q "SELECT count(DISTINCT id) FROM runs WHERE what = 'end'")" = 100 ] || fail "not every job ended"
early=$(q "SELECT count(*) FROM chain_ids a JOIN chain_ids b ON b.chain = a.chain AND b.step = a.step + 1
             JOIN runs ae ON ae.id = a.id AND ae.what = 'end' JOIN runs bs ON bs.id = b.id AND bs.what = 'start'
            WHERE bs.t < ae.t")
[ "$early" = 0 ] || fail "lease mode: $early jobs started before their dependency ended"
note "lease mode: 100 jobs in 20 chains of 5 under 4 workers, none before its dependency"

# (2) sql mode on a queue with controls.
"$PGO_BIN" queue create ds >/dev/null || fail "queue create ds"
"$PGO_BIN" queue set ds --group-concurrency 100 >/dev/null || fail "queue set ds"
q "CREATE TABLE ran (id bigint, tx bigint, at timestamptz)" >/dev/null
q "CREATE FUNCTION do_job(p jsonb) RETURNS void LANGUAGE sql AS
   \$\$ INSERT INTO ran VALUES ((p->>'id')::bigint, txid_current(), clock_timestamp()) \$\$" >/dev/null
q "CREATE TABLE ds_ids (chain int, step int, id bigint)" >/dev/null
q "DO \$\$
   DECLARE prev bigint; id bigint;
   BEGIN
     FOR s IN 1..3 LOOP
       FOR c IN 1..30 LOOP
         SELECT max(x.id) INTO prev FROM ds_ids x WHERE x.chain = c AND x.step = s - 1;
         id := nextval(pg_get_serial_sequence('pgoutbox.ds', 'id'));
         INSERT INTO pgoutbox.ds (id, payload, group_key, depends_on)
         VALUES (id, jsonb_build_object('id', id), 'g' || (c % 3),
                 CASE WHEN prev IS NULL THEN NULL ELSE ARRAY[prev] END);
         INSERT INTO ds_ids VALUES (c, s, id);
       END LOOP;
     END LOOP;
   END \$\$" >/dev/null
"$PGO_BIN" worker --queue ds --sql do_job --batch 50 --poll-interval 100ms --name ws 2>"$T_TMP/ws.log" &
W=$!; PIDS+=($!)
wait_until 60 "[ \"\$(q 'SELECT count(*) FROM pgoutbox.ds')\" = 0 ]"
stop_relay "$W"
[ "$(q "SELECT count(*) FROM ran")" = 90 ] || fail "sql mode: $(q "SELECT count(*) FROM ran") of 90 jobs ran"
early=$(q "SELECT count(*) FROM ds_ids a JOIN ds_ids b ON b.chain = a.chain AND b.step = a.step + 1
             JOIN ran ra ON ra.id = a.id JOIN ran rb ON rb.id = b.id
            WHERE rb.tx = ra.tx OR rb.at < ra.at")
[ "$early" = 0 ] || fail "sql mode: $early jobs ran with or before their dependency"

# (3) A dependency that dies.
"$PGO_BIN" queue create dd >/dev/null || fail "queue create dd"
q "CREATE TABLE healed (ok boolean)" >/dev/null
q "CREATE TABLE dd_done (name text, at timestamptz DEFAULT clock_timestamp())" >/dev/null
q "CREATE FUNCTION dd_job(p jsonb) RETURNS void LANGUAGE plpgsql AS \$\$
   BEGIN
     IF p ? 'fail' AND NOT EXISTS (SELECT FROM healed) THEN RAISE EXCEPTION 'broken'; END IF;
     INSERT INTO dd_done (name) VALUES (p->>'name');
   END \$\$" >/dev/null
x=$(q "SELECT pgoutbox.enqueue('dd', '{\"name\": \"x\", \"fail\": true}')")
x2=$(q "SELECT pgoutbox.enqueue('dd', '{\"name\": \"x2\", \"fail\": true}')")
y=$(q "SELECT pgoutbox.enqueue('dd', '{\"name\": \"y\"}', depends_on => ARRAY[$x])")
# The CLI (pgo_enqueue's depends_on) for y2.
y2=$("$PGO_BIN" queue enqueue dd '{"name": "y2"}' --depends-on "$x2,999998") || fail "enqueue --depends-on"
[ "$(q "SELECT depends_on FROM pgoutbox.dd WHERE id = $y2")" = "{$x2,999998}" ] || fail "y2's depends_on: $(q "SELECT depends_on FROM pgoutbox.dd WHERE id = $y2")"
rc=0; "$PGO_BIN" queue enqueue dd '{}' --depends-on "1,x" 2>"$T_TMP/err" || rc=$?
[ "$rc" = 2 ] && grep -q -- '--depends-on takes up to' "$T_TMP/err" || fail "--depends-on 1,x: exit $rc: $(cat "$T_TMP/err")"
q "SELECT pgoutbox.enqueue('dd', '{\"name\": \"z\"}', depends_on => ARRAY[999999])" >/dev/null
"$PGO_BIN" worker --queue dd --sql dd_job --max-attempts 1 --poll-interval 100ms --name wd 2>"$T_TMP/wd.log" &
W=$!; PIDS+=($!)
wait_until 30 "[ \"\$(q \"SELECT count(*) FROM pgoutbox.dead_letters WHERE queue = 'dd'\")\" = 2 ]"
wait_until 30 "[ \"\$(q \"SELECT count(*) FROM dd_done WHERE name = 'z'\")\" = 1 ]"
sleep 1
[ "$(q "SELECT count(*) FROM dd_done WHERE name IN ('y', 'y2')")" = 0 ] || fail "a job ran while its dependency was dead"
[ "$(q "SELECT attempts FROM pgoutbox.dd WHERE id = $y")" = 0 ] || fail "y was claimed"
grep -q '^  held            2 (waiting for jobs they depend on)$' <<<"$("$PGO_BIN" queue stats dd)" ||
	fail "queue stats: $("$PGO_BIN" queue stats dd)"
q "INSERT INTO healed VALUES (true)" >/dev/null
"$PGO_BIN" dead retry --queue dd --ids "$x" >/dev/null || fail "dead retry x"
wait_until 30 "[ \"\$(q \"SELECT count(*) FROM dd_done WHERE name = 'y'\")\" = 1 ]"
[ "$(q "SELECT (SELECT at FROM dd_done WHERE name = 'x') < (SELECT at FROM dd_done WHERE name = 'y')")" = t ] ||
	fail "y ran before its retried dependency"
sleep 0.5
[ "$(q "SELECT count(*) FROM dd_done WHERE name = 'y2'")" = 0 ] || fail "y2 ran while x2 was dead"
"$PGO_BIN" dead discard --queue dd --ids "$x2" >/dev/null || fail "dead discard x2"
wait_until 30 "[ \"\$(q \"SELECT count(*) FROM dd_done WHERE name = 'y2'\")\" = 1 ]"
[ "$(q "SELECT count(*) FROM dd_done WHERE name = 'x2'")" = 0 ] || fail "x2 ran after its discard"
stop_relay "$W"
[ "$(q "SELECT count(*) FROM pgoutbox.dd")" = 0 ] || fail "jobs left in dd"
