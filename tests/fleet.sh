# fleet.sh — sourced by the failover and connection-storm tests
# (tests/integration/t_failover*.sh, t_storm_*.sh) after lib.sh: the
# whole of pgoutbox running against one database while producers write,
# and the checks that nothing acknowledged was lost or done twice.
#
#   fleet_schema             aggregates, queues ex (exec) and sq (sql), cron beat
#   fleet_start URL N [relay flags...]
#                            N ordered relays (stdout appended to $OUT, logs
#                            $T_TMP/relayI.log; relay 0 serves /readyz on
#                            $MPORT), an exec worker, an sql worker, cron run
#   fleet_produce URL SECS [N]
#                            one producer in the background (N statements
#                            each 50 ms at most, 5 by default): per statement an
#                            event, an exec job and an sql job in one
#                            transaction; psql prints "id|key|v" once
#                            acknowledged, appended to $ACKED.  Reconnects
#                            (through URL) until SECS have passed.
#   fleet_drain URL          waits until every queue is empty
#   fleet_check URL          every acknowledged event delivered and job done,
#                            per-key order, sql jobs once, cron ticks once
#   fleet_loglines           log lines of every fleet process
OUT=$T_TMP/out
ACKED=$T_TMP/acked
EXEC_DONE=$T_TMP/exec_done
FLEET_PIDS=()
MPORT=$(pg_free_port)
: >"$OUT"
: >"$ACKED"
: >"$EXEC_DONE"

fleet_schema() {
	make_aggregates
	"$PGO_BIN" queue create ex >/dev/null && "$PGO_BIN" queue create sq >/dev/null || fail "queue create"
	psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<'SQL'
CREATE TABLE results (i bigint);
CREATE FUNCTION rec(p jsonb) RETURNS void LANGUAGE sql
    AS 'INSERT INTO results VALUES ((p->>''i'')::bigint)';
CREATE FUNCTION produce_one() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    k text := 'k' || (1 + floor(random() * 200))::int;
    v int;
    id bigint;
BEGIN
    UPDATE agg SET version = version + 1 WHERE key = k RETURNING version INTO v;
    id := pgoutbox.send('agg', k, 'agg.changed', jsonb_build_object('v', v));
    PERFORM pgoutbox.enqueue('ex', jsonb_build_object('i', id));
    PERFORM pgoutbox.enqueue('sq', jsonb_build_object('i', id));
    RETURN id || '|' || k || '|' || v;
END $$;
SQL
	"$PGO_BIN" cron add beat '* * * * * *' --queue ex --overlap allow --payload '{"cron": 1}' >/dev/null || fail "cron add"
}

fleet_start() {
	local url=$1 n=$2 i
	shift 2
	for ((i = 0; i < n; i++)); do
		local m=()
		[ "$i" = 0 ] && m=(--metrics-listen "127.0.0.1:$MPORT")
		PGOUTBOX_RELAY_STATS_INTERVAL=0 "$PGO_BIN" relay --db "$url" --sink stdout \
			--mode ordered "${m[@]}" "$@" >>"$OUT" 2>"$T_TMP/relay$i.log" &
		PIDS+=($!)
		FLEET_PIDS+=($!)
	done
	"$PGO_BIN" worker --db "$url" --queue ex --exec "cat >> $EXEC_DONE; echo >> $EXEC_DONE" \
		--concurrency 4 --poll-interval 200ms 2>"$T_TMP/ex.log" &
	PIDS+=($!)
	FLEET_PIDS+=($!)
	"$PGO_BIN" worker --db "$url" --queue sq --sql rec --concurrency 2 \
		--poll-interval 200ms 2>"$T_TMP/sq.log" &
	PIDS+=($!)
	FLEET_PIDS+=($!)
	"$PGO_BIN" cron run --db "$url" 2>"$T_TMP/cron.log" &
	PIDS+=($!)
	FLEET_PIDS+=($!)
}

# Statements at up to 20 * N a second; psql stops at a lost connection and
# a new one starts.
fleet_produce() {
	local url=$1 secs=$2 n=${3:-5}
	(
		end=$((SECONDS + secs))
		while [ $SECONDS -lt $end ]; do
			while [ $SECONDS -lt $end ]; do
				for ((i = 0; i < n; i++)); do echo 'SELECT produce_one();'; done
				sleep 0.05
			done | psql -XAtq "$url" >>"$ACKED" 2>>"$T_TMP/producer.log" || sleep 0.2
		done
	) &
	PIDS+=($!)
	PRODUCERS+=($!)
}

fleet_alive() {
	local p
	for p in "${FLEET_PIDS[@]}"; do
		kill -0 "$p" 2>/dev/null || fail "fleet process $p exited: $(tail -n 3 "$T_TMP"/*.log)"
	done
}

fleet_drain() {
	local url=$1
	wait_until 120 '[ "$(psql -XAtq "$url" -c "SELECT (SELECT count(*) FROM pgoutbox.outbox) + (SELECT count(*) FROM pgoutbox.ex) + (SELECT count(*) FROM pgoutbox.sq)" 2>/dev/null)" = 0 ]'
}

fleet_stop() {
	local p
	for p in "${FLEET_PIDS[@]}"; do stop_relay "$p"; done
	FLEET_PIDS=()
}

fleet_check() {
	local url=$1 acked lost n
	acked=$(cut -d'|' -f1 "$ACKED" | grep -c . || true)
	[ "$acked" -gt 0 ] || fail "no commit was acknowledged: $(tail -n 3 "$T_TMP/producer.log")"
	# Events: every acknowledged id was delivered.
	lost=$(comm -23 <(cut -d'|' -f1 "$ACKED" | sort -u) <(ids_of "$OUT" | sort -u) | wc -l)
	[ "$lost" = 0 ] || fail "$lost of $acked acknowledged events never delivered"
	# Jobs: every acknowledged one done by the exec worker and the sql worker.
	lost=$(comm -23 <(cut -d'|' -f1 "$ACKED" | sort -u) <(grep -o '"i": [0-9]*' "$EXEC_DONE" | cut -d' ' -f2 | sort -u) | wc -l)
	[ "$lost" = 0 ] || fail "$lost of $acked acknowledged exec jobs never done"
	psql -XAtq "$url" -c "SELECT i FROM results" | sort -u >"$T_TMP/sq_done"
	lost=$(comm -23 <(cut -d'|' -f1 "$ACKED" | sort -u) "$T_TMP/sq_done" | wc -l)
	[ "$lost" = 0 ] || fail "$lost of $acked acknowledged sql jobs never done"
	# An sql job runs in the transaction that claims it: once.
	n=$(psql -XAtq "$url" -c "SELECT count(*) FROM (SELECT i FROM results GROUP BY i HAVING count(*) > 1) d")
	[ "$n" = 0 ] || fail "$n sql jobs done twice"
	n=$(psql -XAtq "$url" -c "SELECT count(*) FROM (SELECT tick FROM pgoutbox.cron_history WHERE name = 'beat' AND outcome = 'fired' GROUP BY tick HAVING count(*) > 1) d")
	[ "$n" = 0 ] || fail "$n cron ticks fired twice"
	python3 "$(dirname "${BASH_SOURCE[0]}")/order_check.py" "$OUT" "$url" >"$T_TMP/check" || { cat "$T_TMP/check" >&2; fail "order check"; }
	note "acknowledged $acked; delivered $(ids_of "$OUT" | wc -l) ($(ids_of "$OUT" | sort -u | wc -l) distinct); exec jobs run $(grep -o '"i": [0-9]*' "$EXEC_DONE" | wc -l); cron ticks fired $(psql -XAtq "$url" -c "SELECT count(*) FROM pgoutbox.cron_history WHERE outcome = 'fired'")"
}

# Log lines of each fleet process: "relay0.log N" ...
fleet_loglines() {
	local f
	for f in "$T_TMP"/relay*.log "$T_TMP/ex.log" "$T_TMP/sq.log" "$T_TMP/cron.log"; do
		echo "$(basename "$f") $(wc -l <"$f")"
	done
}
