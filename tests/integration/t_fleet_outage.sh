# serial: it drains 300,000 events on 3 clusters, loading the whole machine
# One relay process serving 3 databases on 3 PostgreSQL clusters (--db
# given three times: the databases are named db1, db2, db3, their
# dbnames being alike), a producer on each.  While db3 drains a backlog
# of 300,000 events, probes on db1 and db2 arrive within 2 s (fairness).
# Cluster 3 is stopped for
# ${OUTAGE_SECONDS:-20} s: meanwhile the two others keep delivering, and
# a probe event committed on each is delivered within 3 s (the latency
# before and during the outage is reported).  Cluster 3 starts again: a
# probe there is delivered within 15 s (its connections' backoff), and
# every committed event of every shard arrives, per key in commit order.
. "$(dirname "$0")/../lib.sh"
OUTAGE=${OUTAGE_SECONDS:-20}
DIRS=("$PG_DIR") PORTS=("$PG_PORT") OPTS=("$PG_OPTS")
for i in 2 3; do
	PG_PORT= pg_start "$T_TMP/pg$i" fsync=off
	DIRS+=("$PG_DIR") PORTS+=("$PG_PORT") OPTS+=("$PG_OPTS")
done
trap 'cleanup_pids; pg_stop_dir "${DIRS[1]}"; pg_stop_dir "${DIRS[2]}"' EXIT
url() { echo "host=${DIRS[$1]} port=${PORTS[$1]} user=postgres dbname=t_fleet_outage"; }
for i in 0 1 2; do
	PG_DIR=${DIRS[$i]} PG_PORT=${PORTS[$i]} t_db
	make_aggregates
done
PG_DIR=${DIRS[0]} PG_PORT=${PORTS[0]}
OUT=$T_TMP/out
PGOUTBOX_RELAY_RECONNECT_MAX=1s start_relay "$OUT" --mode ordered --sink stdout \
	--db "$(url 0)" --db "$(url 1)" --db "$(url 2)"
relay=$RELAY_PID
# Deliveries from database $1 (db1, db2, db3) so far.
got() { grep -c "\"pgoutbox-source\": \"$1\"}" "$OUT" || true; }
# A probe event on database $1 (0-2): ms until delivered (fleet_probe).
probe() { fleet_probe "$(url "$1")" "db$(($1 + 1))" "${2:-3}"; }
PRODUCERS=()
for i in 0 1 2; do
	DATABASE_URL=$(url "$i") start_producer $((OUTAGE + 20)) 0.01
	[ "$i" = 2 ] && victim=$!
done
wait_until 30 '[ "$(got db1)" -gt 0 ] && [ "$(got db2)" -gt 0 ] && [ "$(got db3)" -gt 0 ]'
before=()
for _ in 1 2 3; do for i in 0 1; do before+=("$(probe "$i")"); done; sleep 0.5; done
# Fairness: while db3 drains a backlog of 300,000 events, probes on db1
# and db2 still arrive within 2 s (db3 alone would take them longer).
psql -XAtq "$(url 2)" -c "INSERT INTO pgoutbox.outbox (topic, key, type, payload)
	SELECT 'bulk', 'b' || (i % 50), 'x', '{\"v\": 0}' FROM generate_series(1, 300000) i"
busy=()
while [ "$(DATABASE_URL=$(url 2) pending)" -gt 50000 ]; do
	for i in 0 1; do busy+=("$(probe "$i" 2)"); done
done
[ ${#busy[@]} -gt 0 ] || fail "db3 drained its backlog before a probe: nothing measured"
PG_DIR=${DIRS[2]} PG_PORT=${PORTS[2]} pg_stop
wait "$victim" 2>/dev/null || true # the producer on cluster 3 loses its server
n1=$(got db1) n2=$(got db2)
during=()
end=$((SECONDS + OUTAGE))
while [ $SECONDS -lt $end ]; do
	for i in 0 1; do during+=("$(probe "$i")"); done
	sleep 1
done
[ "$(got db1)" -gt $((n1 + 100)) ] && [ "$(got db2)" -gt $((n2 + 100)) ] ||
	fail "during the outage db1 delivered $(($(got db1) - n1)), db2 $(($(got db2) - n2))"
grep -q 'relay outbox@db3 -> stdout' "$OUT.log" || fail "no log line names db3"
kill -0 "$relay" || fail "the relay died with cluster 3"
PG_DIR=${DIRS[2]} PG_PORT=${PORTS[2]} PG_OPTS=${OPTS[2]} pg_start_again
# Delivering again: the first commit after the restart, and a producer.
back=$(probe 2 15)
DATABASE_URL=$(url 2) start_producer 5 0.01
t0=$SECONDS
for p in "${PRODUCERS[@]}"; do [ "$p" = "$victim" ] || wait "$p" || fail "a producer failed"; done
for i in 0 1 2; do DATABASE_URL=$(url "$i") wait_until 60 '[ "$(pending)" = 0 ]'; done
caught=$((SECONDS - t0))
stop_relay "$relay"
for i in 0 1 2; do
	grep "\"pgoutbox-source\": \"db$((i + 1))\"}" "$OUT" >"$OUT.$i" || true
	python3 "$(dirname "$0")/../order_check.py" "$OUT.$i" "$(url "$i")" >"$T_TMP/check$i" ||
		{ cat "$T_TMP/check$i"; fail "order check of db$((i + 1))"; }
	note "db$((i + 1)): $(head -1 "$T_TMP/check$i")"
done
max() { printf '%s\n' "$@" | sort -n | tail -1; }
note "probe latency of db1/db2: before the outage max $(max "${before[@]}") ms, while db3 drained 300,000 max $(max "${busy[@]}") ms (${#busy[@]} probes), during the outage max $(max "${during[@]}") ms (${#during[@]} probes); db3 delivering again ${back} ms after its restart, all drained ${caught}s later"
