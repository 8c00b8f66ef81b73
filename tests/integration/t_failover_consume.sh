# Failover under `pgoutbox consume` (issue 38): a primary with a
# synchronous streaming standby; a producer commits events (each with a
# number n, printed once acknowledged), a relay puts them into a Redis
# stream and two consumers of one group apply them to PostgreSQL through
# the inbox (--sql), all on the multi-host URL (postgresql://...?host=
# DIR1,DIR2&port=P1,P2&target_session_attrs=read-write).  Commits wait
# for the standby to apply them (remote_apply); the standby's replay is
# paused until both consumers' COMMITs wait, then the primary is killed
# -9 and the standby promoted: those COMMITs are on the new primary but
# the consumers saw them fail (the in-doubt window of a failover).  Then:
# every acknowledged message was applied exactly once on the new primary
# (the consumers' redeliveries of their in-doubt entries dropped by the
# inbox), nothing is left pending in the group, both consumers are alive,
# and the time from the promotion to the first message applied on the new
# primary is reported (goal 5 s).  T_FAILOVER_OLD_ONLY=1 gives the
# consumers (only them) the old primary's address: the test must fail.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../redis.sh"
PG_PORT= pg_start "$T_TMP/pg1" fsync=off
SB_DIR=
trap 'cleanup_pids; redis_stop; [ -n "$SB_DIR" ] && pg_stop_dir "$SB_DIR"; pg_stop' EXIT
redis_start "$T_TMP/redis"
t_db
DB=$(basename "$0" .sh)
psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<'SQL'
CREATE SEQUENCE msg_n;
-- No unique constraint: a message applied twice would show.
CREATE TABLE effects (seq bigserial, n bigint NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE FUNCTION apply_msg(p jsonb) RETURNS void LANGUAGE sql
    AS $$ SELECT pg_sleep(0.002); INSERT INTO effects (n) VALUES ((p->>'n')::bigint) $$;
CREATE FUNCTION produce_one() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    n bigint := nextval('msg_n');
BEGIN
    PERFORM pgoutbox.send('fo', 'k' || n % 16, 'msg', jsonb_build_object('n', n));
    RETURN n;
END $$;
SQL
pg_standby_start "$T_TMP/pg2" fsync=off
q "ALTER SYSTEM SET synchronous_standby_names = '*'"
q "ALTER SYSTEM SET synchronous_commit = remote_apply"
q "SELECT pg_reload_conf()" >/dev/null
wait_until 30 '[ "$(q "SELECT count(*) FROM pg_stat_replication WHERE sync_state = '"'sync'"'")" = 1 ]'
URL="postgresql://postgres@/$DB?host=$PG_DIR,$SB_DIR&port=$PG_PORT,$SB_PORT&target_session_attrs=read-write"
CURL=$URL
[ -z "${T_FAILOVER_OLD_ONLY:-}" ] || CURL="postgresql://postgres@/$DB?host=$PG_DIR&port=$PG_PORT"
NEW="host=$SB_DIR port=$SB_PORT user=postgres dbname=$DB"
ACKED=$T_TMP/acked
: >"$ACKED"

start_relay "$T_TMP/relay" --db "$URL" --sink redis --redis "$REDIS_URL" --mode ordered
relay=$RELAY_PID
consumers=()
for c in c1 c2; do
	"$PGO_BIN" consume --db "$CURL" --redis "$REDIS_URL" --stream pgoutbox:fo --group g \
		--consumer $c --sql apply_msg --count 20 --claim-idle 5s 2>"$T_TMP/$c.log" &
	PIDS+=($!)
	consumers+=($!)
done
# One producer: 100 commits a second for 16 s; psql stops at the lost
# connection and another starts on the multi-host URL.
(
	end=$((SECONDS + 16))
	while [ $SECONDS -lt $end ]; do
		while [ $SECONDS -lt $end ]; do
			echo 'SELECT produce_one(); SELECT produce_one(); SELECT produce_one(); SELECT produce_one(); SELECT produce_one();'
			sleep 0.05
		done | psql -XAtq "$URL" >>"$ACKED" 2>>"$T_TMP/producer.log" || sleep 0.2
	done
) &
producer=$!
PIDS+=($producer)
applied() { psql -XAtq "$1" -c "SELECT count(*) FROM effects" 2>/dev/null || echo 0; }
wait_until 20 '[ "$(applied "$DATABASE_URL")" -gt 200 ]'
# A burst of 1,500 so that the consumers have a backlog in the stream
# (they keep up with the producer), then the in-doubt window: the
# standby has the consumers' COMMITs (its replay paused, they wait for
# it) when the primary dies.
psql -XAtq "$URL" -c "SELECT produce_one() FROM generate_series(1, 1500)" >>"$ACKED"
n=$(grep -c . "$ACKED")
wait_until 10 '[ "$(rcli XLEN pgoutbox:fo)" -ge "$n" ]'
psql -XAtq "$NEW" -c "SELECT pg_wal_replay_pause()" >/dev/null
wait_until 10 '[ "$(q "SELECT count(*) FROM pg_stat_activity WHERE application_name = '"'pgoutbox consume'"' AND wait_event = '"'SyncRep'"'")" = 2 ]'
pg_kill9 "$PG_DIR"
sleep 1
t0=$(date +%s.%N)
pg_promote
t1=$(date +%s.%N)
# The first message a consumer applied on the new primary: its effect's
# clock_timestamp() after the promotion began (the old primary's rows,
# replayed by the promotion, are older).
first() { psql -XAtq "$NEW" -c "SELECT round(extract(epoch FROM min(at) - to_timestamp($t0)) * 1000) FROM effects WHERE at > to_timestamp($t0)"; }
wait_until 30 '[ -n "$(first)" ]'
ms_promote=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%d", (b - a) * 1000 }')
ms_first=$(first)
wait "$producer"
acked=$(grep -c . "$ACKED" || true)
note "acknowledged $acked messages"
# Drained: the outbox empty, every acknowledged message applied, the
# group's pending list empty.
missing() { comm -23 <(sort -u "$ACKED") <(psql -XAtq "$NEW" -c "SELECT n FROM effects" | sort -u) | wc -l; }
wait_until 60 '[ "$(psql -XAtq "$NEW" -c "SELECT count(*) FROM pgoutbox.outbox")" = 0 ] && [ "$(missing)" = 0 ] && [ "$(rcli XPENDING pgoutbox:fo g | head -1)" = 0 ]'
for p in "${consumers[@]}"; do
	kill -0 "$p" 2>/dev/null || fail "consumer $p exited: $(tail -n 3 "$T_TMP"/c*.log)"
done
for p in "${consumers[@]}"; do stop_relay "$p"; done
stop_relay "$relay"
twice=$(psql -XAtq "$NEW" -c "SELECT count(*) FROM (SELECT n FROM effects GROUP BY n HAVING count(*) > 1) d")
[ "$twice" = 0 ] || fail "$twice messages applied more than once"
[ "$(missing)" = 0 ] || fail "$(missing) of $acked acknowledged messages never applied"
entries=$(rcli XLEN pgoutbox:fo)
dups=$(cat "$T_TMP"/c1.log "$T_TMP"/c2.log | grep -c 'already in the inbox' || true)
[ "$dups" -ge 2 ] || fail "two COMMITs in doubt at the failover but $dups redeliveries dropped by the inbox"
after=$(psql -XAtq "$NEW" -c "SELECT count(*) FROM effects WHERE at > to_timestamp($t0)")
note "stream entries $entries for $(psql -XAtq "$NEW" -c "SELECT count(*) FROM effects") applied ($after on the new primary); $dups redeliveries dropped by the inbox"
note "consumer log lines: c1 $(wc -l <"$T_TMP/c1.log"), c2 $(wc -l <"$T_TMP/c2.log")"
note "promotion took ${ms_promote} ms; first message applied on the new primary ${ms_first} ms after pg_ctl promote began"
[ "$ms_first" -le 5000 ] || fail "first message applied ${ms_first} ms after the promotion began (goal 5000 ms)"
