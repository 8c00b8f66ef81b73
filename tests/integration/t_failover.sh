# Failover (issue 38): a primary with a synchronous streaming standby;
# three ordered relays, an exec worker, an sql worker and cron, all with
# a multi-host connection string (host=DIR1,DIR2 port=P1,P2
# target_session_attrs=read-write), while a producer writes and records
# each acknowledged commit.  The primary is killed -9 (postmaster and
# backends, a crashed host) and the standby promoted with pg_ctl promote.
# Then: every acknowledged event is delivered and every acknowledged job
# done (the sql ones once), per-key order held, no cron tick fired twice,
# each shard's lease held by one session on the new primary, and the time
# from the promotion to the first delivery from the new primary (goal
# 5 s) is reported.  T_FAILOVER_OLD_ONLY=1 gives everything the old
# primary's address alone: the test must fail then.
. "$(dirname "$0")/../lib.sh"
PG_PORT= pg_start "$T_TMP/pg1" fsync=off
SB_DIR=
trap 'cleanup_pids; [ -n "$SB_DIR" ] && pg_stop_dir "$SB_DIR"; pg_stop' EXIT
t_db
. "$(dirname "$0")/../fleet.sh"
fleet_schema
pg_standby_start "$T_TMP/pg2" fsync=off
# Synchronous from now on: a commit is acknowledged once the standby has
# it.  (Set after the base backup so that the standby, once promoted,
# waits for no standby of its own.)
q "ALTER SYSTEM SET synchronous_standby_names = '*'"
q "SELECT pg_reload_conf()" >/dev/null
wait_until 30 '[ "$(q "SELECT count(*) FROM pg_stat_replication WHERE sync_state = '"'sync'"'")" = 1 ]'
DB=$(basename "$0" .sh)
URL="host=$PG_DIR,$SB_DIR port=$PG_PORT,$SB_PORT user=postgres dbname=$DB target_session_attrs=read-write"
[ -z "${T_FAILOVER_OLD_ONLY:-}" ] || URL="host=$PG_DIR port=$PG_PORT user=postgres dbname=$DB"
NEW="host=$SB_DIR port=$SB_PORT user=postgres dbname=$DB"
fleet_start "$URL" 3
code_of() { curl -s -o /dev/null -w '%{http_code}' "$1"; }
wait_until 30 '[ "$(code_of http://127.0.0.1:$MPORT/readyz)" = 200 ]'
fleet_produce "$URL" 16
sleep 6
[ "$(ids_of "$OUT" | wc -l)" -gt 0 ] || fail "nothing delivered before the failover"
pg_kill9 "$PG_DIR"
sleep 1
before=$(wc -l <"$OUT")
t0=$(date +%s%N)
pg_promote
t1=$(date +%s%N)
wait_until 30 '[ "$(wc -l <"$OUT")" -gt "$before" ]'
t2=$(date +%s%N)
ms_promote=$(((t1 - t0) / 1000000))
ms_first=$(((t2 - t0) / 1000000))
for p in "${PRODUCERS[@]}"; do wait "$p"; done
fleet_alive
fleet_drain "$NEW"
cron_after=$(psql -XAtq "$NEW" -c "SELECT count(*) FROM pgoutbox.cron_history WHERE outcome = 'fired' AND recorded_at > now() - interval '5 seconds'")
[ "$cron_after" -gt 0 ] || fail "cron fired nothing on the new primary"
# Fencing: every shard leased, each by one session of the new primary
# (the old primary's sessions died with it).
row=$(psql -XAtq "$NEW" -c "SELECT count(*), count(DISTINCT objid) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND granted AND classid = pgoutbox.lease_ns('outbox')::oid AND database = (SELECT oid FROM pg_database WHERE datname = current_database())")
IFS='|' read -r held distinct <<<"$row"
shards=$(psql -XAtq "$NEW" -c "SELECT shards FROM pgoutbox.queues WHERE name = 'outbox'")
[ "$held" = "$distinct" ] && [ "$distinct" = "$shards" ] || fail "shard leases on the new primary: $held held, $distinct distinct, $shards shards"
fleet_stop
fleet_check "$NEW"
note "promotion took ${ms_promote} ms; first delivery from the new primary ${ms_first} ms after pg_ctl promote began"
[ "$ms_first" -le 5000 ] || fail "first delivery ${ms_first} ms after the promotion began (goal 5000 ms)"
