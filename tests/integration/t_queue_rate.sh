# Rate limit and max_running across workers (issue 39).  (1) rate 50/s,
# burst 5, 4 exec workers of 4 slots each (up to 64 claims' worth per
# second): over 20 s the jobs started are 1,000 within 5 %, and no
# second holds more than 50 + the burst (+ 10: the start times' jitter
# on a loaded machine; without the limit a second holds hundreds).
# (2) max_running 3 across 3 workers of 4 slots: never more than 3 jobs
# run at once.
. "$(dirname "$0")/../lib.sh"
t_db
"$PGO_BIN" queue create r >/dev/null || fail "queue create"
"$PGO_BIN" queue set r --rate 50 --burst 5 >"$T_TMP/set.out" || fail "queue set"
grep -q 'rate 50/s, burst 5' "$T_TMP/set.out" || fail "queue set said: $(cat "$T_TMP/set.out")"
q "SELECT pgoutbox.enqueue('r', jsonb_build_object('i', i)) FROM generate_series(1, 3000) i" >/dev/null
cat >"$T_TMP/job.sh" <<SH
#!/bin/sh
date +%s.%N >> $T_TMP/starts
SH
chmod +x "$T_TMP/job.sh"
for n in 1 2 3 4; do
	"$PGO_BIN" worker --queue r --exec "$T_TMP/job.sh" --concurrency 4 --poll-interval 50ms \
		--name "r$n" 2>"$T_TMP/r$n.log" &
	PIDS+=($!)
done
wait_until 20 "[ -s $T_TMP/starts ]"
sleep 22
t0=$(head -1 "$T_TMP/starts")
n=$(awk -v a="$t0" '$1 >= a + 1 && $1 < a + 21' "$T_TMP/starts" | wc -l)
peak=$(awk -v a="$t0" '{ s = int($1 - a); c[s]++ } END { m = 0; for (k in c) if (c[k] > m) m = c[k]; print m }' "$T_TMP/starts")
note "rate: $n jobs started in 20 s (want 1000 +- 5 %), the busiest second $peak"
[ "$n" -ge 950 ] && [ "$n" -le 1050 ] || fail "$n jobs in 20 s at 50/s"
# 50 + the burst, and 10 for the jitter of the recorded start (a process
# start after the claim) across a second's edge.
[ "$peak" -le 65 ] || fail "a second with $peak jobs (rate 50, burst 5)"
for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
PIDS=()

# (2) max_running
"$PGO_BIN" queue create m >/dev/null || fail "queue create m"
"$PGO_BIN" queue set m --max-running 3 >/dev/null || fail "queue set m"
q "SELECT pgoutbox.enqueue('m', jsonb_build_object('i', i)) FROM generate_series(1, 60) i" >/dev/null
cat >"$T_TMP/mjob.sh" <<SH
#!/bin/sh
echo "\$(date +%s.%N) 1" >> $T_TMP/m
sleep 0.1
echo "\$(date +%s.%N) -1" >> $T_TMP/m
SH
chmod +x "$T_TMP/mjob.sh"
for n in 1 2 3; do
	"$PGO_BIN" worker --queue m --exec "$T_TMP/mjob.sh" --concurrency 4 --poll-interval 50ms \
		--name "m$n" 2>"$T_TMP/m$n.log" &
	PIDS+=($!)
done
wait_until 60 "[ \"\$(q 'SELECT count(*) FROM pgoutbox.m')\" = 0 ]"
most=$(sort -n "$T_TMP/m" | awk '{ r += $2; if (r > m) m = r } END { print m }')
note "max_running 3: at most $most jobs ran at once"
[ "$most" -le 3 ] || fail "$most jobs ran at once, max_running 3"
[ "$most" -ge 2 ] || fail "at most $most job ran at once: the workers did not run in parallel"
