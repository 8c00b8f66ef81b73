# The SQL worker retries on the backoff (--retry-base), not on its poll
# interval, and its log names each failed job, its attempt and its error,
# as the exec worker's does (issue 20 item 7).
. "$(dirname "$0")/../lib.sh"
t_db
"$PGO_BIN" queue create sqlflaky >/dev/null || fail "queue create"
q "CREATE FUNCTION always_fails(p jsonb) RETURNS void LANGUAGE plpgsql AS \$\$
   BEGIN RAISE EXCEPTION 'card % declined', p->>'card'; END \$\$" >/dev/null
id=$(q "SELECT pgoutbox.enqueue('sqlflaky', '{\"card\": \"4111\"}')")
"$PGO_BIN" worker --queue sqlflaky --sql always_fails --max-attempts 4 --retry-base 100ms \
	--poll-interval 30s --name s 2>"$T_TMP/s.log" &
S=$!; PIDS+=($!)
# Three retries within 100-200, 200-400 and 400-800 ms: dead in well under
# one poll interval.
start=$SECONDS
wait_until 20 "[ \"\$(q 'SELECT count(*) FROM pgoutbox.dead_letters')\" = 1 ]"
[ $((SECONDS - start)) -lt 10 ] || fail "retries took $((SECONDS - start)) s with --retry-base 100ms"
for a in 1 2 3; do
	grep -q "job $id failed (attempt $a of 4), retry in [0-9]* ms: card 4111 declined" "$T_TMP/s.log" ||
		fail "no log line for attempt $a: $(cat "$T_TMP/s.log")"
done
grep -q "job $id dead-lettered after 4 attempts: card 4111 declined" "$T_TMP/s.log" ||
	fail "no dead-letter line: $(cat "$T_TMP/s.log")"
[ "$(q "SELECT attempts, last_error FROM pgoutbox.dead_letters WHERE id = $id")" = "4|card 4111 declined" ] ||
	fail "dead letter: $(q "SELECT * FROM pgoutbox.dead_letters")"
stop_relay "$S"
