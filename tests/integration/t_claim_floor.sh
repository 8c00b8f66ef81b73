# The claim floor (sql/006_claim_floor.sql) never skips an event: the
# relay claims from the floor up, so every way a row can appear below ids
# already sent is exercised while thousands of later events go through and
# move the floor on:
#   - a producer transaction that drew its id first and commits late;
#   - a savepoint rolled back and a transaction aborted (gaps in the ids);
#   - an event retried by the sink (back in with its old id);
#   - a dead letter put back with `pgoutbox queue retry` after the floor
#     has long passed its id;
#   - an event inserted by hand with an old id (the sweep finds it).
# Each must be delivered, once per attempt, in ordered and concurrent mode.
. "$(dirname "$0")/../lib.sh"
t_db
cat >"$T_TMP/sink.sh" <<SH
#!/bin/sh
input=\$(cat)
# One file per batch: two slots' sinks run at once.
printf '%s\n' "\$input" > "\$SUNK.d/\$\$.\$(date +%s%N)"
# Event "retry-me" fails on its first delivery, "kill-me" always.
for id in \$(printf '%s\n' "\$input" | grep '"type":"retry-me"' | grep -o '^{"id":[0-9]*' | cut -d: -f2); do
	[ -e "$T_TMP/retried.\$id" ] || { touch "$T_TMP/retried.\$id"; echo "retry \$id first try fails"; }
done
for id in \$(printf '%s\n' "\$input" | grep '"type":"kill-me"' | grep -o '^{"id":[0-9]*' | cut -d: -f2); do
	echo "dead \$id rejected"
done
exit 0
SH
chmod +x "$T_TMP/sink.sh"
sunk() { cat "$SUNK".d/* 2>/dev/null; }
send_many() { q "INSERT INTO pgoutbox.outbox (topic, key, type, payload) SELECT 't', 'k' || (i % 50), 'bulk', '{}' FROM generate_series(1, $1) i"; }

for mode in ordered concurrent; do
	export SUNK=$T_TMP/sunk.$mode
	mkdir -p "$SUNK.d"
	q "TRUNCATE pgoutbox.dead_letters"
	PGOUTBOX_RELAY_RETRY_BASE=200ms PGOUTBOX_RELAY_RETRY_MAX=200ms start_relay "$T_TMP/out.$mode" --sink exec --exec "$T_TMP/sink.sh" --mode "$mode" \
		--max-attempts 3 --batch 200 --poll-interval 2s --log-level debug
	send_many 500
	wait_until 30 '[ "$(pending)" = 0 ]'
	# A transaction draws its id, then waits 3 s before it commits.
	psql -XAtq "$DATABASE_URL" -c "BEGIN" \
		-c "INSERT INTO pgoutbox.outbox (topic, key, type, payload) VALUES ('t', 'late', 'late', '{}')" \
		-c "SELECT pg_sleep(3)" -c "COMMIT" >/dev/null &
	late_pid=$!
	sleep 0.3
	# Gaps: a rolled-back savepoint and an aborted transaction.
	psql -XAtq "$DATABASE_URL" >/dev/null <<'SQL'
BEGIN;
SAVEPOINT s;
INSERT INTO pgoutbox.outbox (topic, type, payload) SELECT 't', 'gap', '{}' FROM generate_series(1, 10);
ROLLBACK TO SAVEPOINT s;
INSERT INTO pgoutbox.outbox (topic, key, type, payload) VALUES ('t', 'k1', 'after-savepoint', '{}');
COMMIT;
BEGIN;
INSERT INTO pgoutbox.outbox (topic, type, payload) SELECT 't', 'gap', '{}' FROM generate_series(1, 10);
ROLLBACK;
SQL
	q "INSERT INTO pgoutbox.outbox (topic, key, type, payload) VALUES ('t', 'r1', 'retry-me', '{}'), ('t', 'd1', 'kill-me', '{}')"
	for _ in 1 2 3 4 5; do send_many 400; sleep 0.2; done
	wait "$late_pid"
	wait_until 30 '[ "$(pending)" = 0 ]'
	wait_until 10 '[ "$(q "SELECT count(*) FROM pgoutbox.dead_letters")" = 1 ]'
	dead=$(q "SELECT id FROM pgoutbox.dead_letters")
	# The floor is far past the dead letter by now: more events, then the
	# dead letter goes back (with its id) and must be delivered again.
	for _ in 1 2 3; do send_many 400; sleep 0.2; done
	wait_until 30 '[ "$(pending)" = 0 ]'
	# "claim floor A -> B" lines (not the "claim floor probe N ms" ones a
	# slow probe logs).
	grep -qE "claim floor [0-9]+ -> [0-9]+$" "$T_TMP/out.$mode.log" || fail "$mode: the claim floor never moved"
	floor=$(grep -E "claim floor [0-9]+ -> [0-9]+$" "$T_TMP/out.$mode.log" | tail -n 1 | awk '{print $NF}')
	[ "$floor" -gt "$dead" ] || fail "$mode: the floor ($floor) did not pass the dead letter ($dead)"
	before=$(sunk | ids_of | grep -c "^$dead\$")
	"$PGO_BIN" queue retry "$dead" --queue outbox >/dev/null || fail "queue retry $dead"
	for _ in $(seq 100); do
		[ "$(sunk | ids_of | grep -c "^$dead\$")" -gt "$before" ] && break
		sleep 0.1
	done
	[ "$(sunk | ids_of | grep -c "^$dead\$")" -gt "$before" ] || {
		q "SELECT id, attempts, last_error, run_at > now(), pgoutbox.shard_of(key, id, 64) FROM pgoutbox.outbox" >&2
		tail -n 5 "$T_TMP/out.$mode.log" >&2
		fail "$mode: the dead letter put back ($dead) was not delivered"
	}
	wait_until 10 '[ "$(q "SELECT count(*) FROM pgoutbox.dead_letters")" = 1 ]'
	# An event re-sent by hand with its old id, far below the floor: no
	# claim from the floor sees it; the sweep from id 0 (every poll
	# interval here) does.
	resent=$(sunk | ids_of | sort -n | sed -n 1p)
	q "INSERT INTO pgoutbox.outbox (id, topic, key, type, payload) VALUES ($resent, 't', 'k0', 'resent', '{}')"
	wait_until 25 '[ "$(pending)" = 0 ]'
	stop_relay "$RELAY_PID"
	n=$(grep -c '"type":"resent"' <(sunk) || true)
	[ "$n" = 1 ] || fail "$mode: the event re-sent with id $resent was delivered $n times"

	# Every committed event reached the sink; the retried one twice, the
	# dead one once per try (1, then 1 more after it was put back).
	for t in late after-savepoint; do
		n=$(grep -c "\"type\":\"$t\"" <(sunk) || true)
		[ "$n" = 1 ] || fail "$mode: event $t delivered $n times"
	done
	got=$(sunk | ids_of | sort -un | wc -l)
	bulk=$(grep -c '"type":"bulk"' <(sunk) || true)
	[ "$bulk" = 3700 ] || fail "$mode: $bulk bulk events reached the sink, want 3700"
	sunk | qgrep '"type":"gap"' && fail "$mode: a rolled-back event was relayed"
	n=$(grep -c '"type":"retry-me"' <(sunk) || true)
	[ "$n" = 2 ] || fail "$mode: the retried event was delivered $n times, want 2"
	n=$(sunk | ids_of | grep -c "^$dead\$")
	[ "$n" = 2 ] || fail "$mode: the dead letter was delivered $n times, want 2"
	retried=$(sunk | grep '"type":"retry-me"' | ids_of | sed -n 1p)
	dups=$(sunk | ids_of | sort -n | uniq -d | { grep -vx -e "$dead" -e "$retried" -e "$resent" || true; } | wc -l)
	[ "$dups" = 0 ] || fail "$mode: $dups events delivered twice"
	note "$mode: $got events, floor at $floor, late commit, gaps, retry and put-back dead letter delivered"
	q "TRUNCATE pgoutbox.outbox"
done
