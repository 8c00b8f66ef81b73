# Cron time zones come from the database (pgoutbox.tz_offsets, sql/009):
# cron add checks a zone against pg_timezone_names and names a bad one;
# the next ticks of the DST cases of tests/unit/test_cronexpr.c (gaps,
# overlaps, half-hour offsets, Samoa's skipped day, dates past 2037), here
# computed with the database's offsets, as `cron list` shows them; CET is
# the zone with summer time, not the abbreviation AT TIME ZONE would take;
# a scheduler catching up two years of a daily 02:30 Europe/Berlin
# schedule fires once per local day, at 03:00 when 02:30 is skipped and at
# the first 02:30 when it repeats.
. "$(dirname "$0")/../lib.sh"
t_db
"$PGO_BIN" queue create cq >/dev/null || fail "queue create"

# --- zones cron add takes and refuses
for tz in UTC Etc/UTC Europe/Berlin America/Argentina/Buenos_Aires Etc/GMT+5 CET; do
	"$PGO_BIN" cron add ok '0 3 * * *' --queue cq --tz "$tz" >/dev/null 2>"$T_TMP/err" ||
		fail "zone $tz refused: $(cat "$T_TMP/err")"
done
"$PGO_BIN" cron remove ok >/dev/null
# Unknown to PostgreSQL, or known only as an abbreviation (PST) or a POSIX
# rule (UTC+3), which are no zone names.
for tz in Mars/Olympus Europe Europe/Nowhere 'Europe/Berlin ' ../../etc/passwd /etc/localtime \
	'Europe/../Europe/Berlin' /usr/share/zoneinfo/Europe/Berlin 'Europe/Berlin;rm' PST UTC+3; do
	rc=0; "$PGO_BIN" cron add bad '* * * * *' --queue cq --tz "$tz" 2>"$T_TMP/err" || rc=$?
	[ "$rc" = 2 ] && grep -qF "unknown time zone \"$tz\"" "$T_TMP/err" || fail "zone \"$tz\": rc $rc: $(cat "$T_TMP/err")"
done
rc=0; "$PGO_BIN" cron add bad '* * * * *' --queue cq --tz europe/berlin 2>"$T_TMP/err" || rc=$?
[ "$rc" = 2 ] && grep -qF 'unknown time zone "europe/berlin" (did you mean "Europe/Berlin"?)' "$T_TMP/err" ||
	fail "wrong case: rc $rc: $(cat "$T_TMP/err")"
[ "$(q "SELECT count(*) FROM pgoutbox.cron_schedules")" = 0 ] || fail "a refused schedule was added"

# --- next ticks: name|expr|zone|after|want
cat >"$T_TMP/cases" <<'CASES'
b1|30 2 * * *|Europe/Berlin|2027-03-27T12:00:00Z|2027-03-28T01:00:00Z
b2|30 2 * * *|Europe/Berlin|2027-03-28T01:00:00Z|2027-03-29T00:30:00Z
b3|*/15 * * * *|Europe/Berlin|2027-03-28T00:45:00Z|2027-03-28T01:00:00Z
b4|30 * * * *|Europe/Berlin|2027-03-28T00:30:00Z|2027-03-28T01:30:00Z
b5|30 2 * * *|Europe/Berlin|2027-10-30T12:00:00Z|2027-10-31T00:30:00Z
b6|30 2 * * *|Europe/Berlin|2027-10-31T00:30:00Z|2027-11-01T01:30:00Z
b7|*/15 * * * *|Europe/Berlin|2027-10-31T00:45:00Z|2027-10-31T01:00:00Z
b8|*/15 * * * *|Europe/Berlin|2027-10-31T01:00:00Z|2027-10-31T01:15:00Z
b9|0 * * * *|Europe/Berlin|2027-10-31T00:00:00Z|2027-10-31T01:00:00Z
n1|0 9 * * *|America/New_York|2024-07-01T00:00:00Z|2024-07-01T13:00:00Z
n2|0 9 * * *|America/New_York|2024-01-15T00:00:00Z|2024-01-15T14:00:00Z
n3|30 2 * * *|America/New_York|2024-03-10T05:00:00Z|2024-03-10T07:00:00Z
n4|30 1 * * *|America/New_York|2024-11-03T05:00:00Z|2024-11-03T05:30:00Z
n5|30 1 * * *|America/New_York|2024-11-03T05:30:00Z|2024-11-04T06:30:00Z
k1|0 9 * * *|Asia/Kolkata|2024-01-01T00:00:00Z|2024-01-01T03:30:00Z
k2|*/45 * * * *|Asia/Kolkata|2024-01-01T00:00:00Z|2024-01-01T00:15:00Z
l1|0 2 * * *|Australia/Lord_Howe|2024-10-05T12:00:00Z|2024-10-05T15:30:00Z
l2|0 * * * *|Australia/Lord_Howe|2024-10-05T14:30:00Z|2024-10-05T16:00:00Z
l3|45 1 * * *|Australia/Lord_Howe|2025-04-05T14:00:00Z|2025-04-05T14:45:00Z
a1|0 12 * * *|Pacific/Apia|2011-12-29T22:00:00Z|2011-12-30T10:00:00Z
a2|0 12 * * *|Pacific/Apia|2011-12-30T10:00:00Z|2011-12-30T22:00:00Z
a3|0 * * * *|Pacific/Apia|2011-12-30T09:00:00Z|2011-12-30T10:00:00Z
f1|0 12 * * *|Europe/Berlin|2045-07-01T00:00:00Z|2045-07-01T10:00:00Z
f2|0 12 * * *|Europe/Berlin|2045-01-10T00:00:00Z|2045-01-10T11:00:00Z
f3|30 2 * * *|Europe/Berlin|2045-03-25T12:00:00Z|2045-03-26T01:00:00Z
f4|0 0 1 1 *|Europe/Berlin|2099-06-01T00:00:00Z|2099-12-31T23:00:00Z
c1|0 12 * * *|CET|2027-07-01T00:00:00Z|2027-07-01T10:00:00Z
c2|0 12 * * *|CET|2027-01-10T00:00:00Z|2027-01-10T11:00:00Z
u1|0 9 * * *|UTC|2027-07-01T00:00:00Z|2027-07-01T09:00:00Z
u2|0 9 * * *|Etc/GMT+5|2027-07-01T00:00:00Z|2027-07-01T14:00:00Z
CASES
while IFS='|' read -r name expr tz after want; do
	echo "INSERT INTO pgoutbox.cron_schedules (name, expr, tz, queue, last_tick)
	      VALUES ('$name', '$expr', '$tz', 'cq', '$after');"
done <"$T_TMP/cases" | psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null || fail "inserting the cases"
# Stored without cron add's check: the database does not know this zone.
q "INSERT INTO pgoutbox.cron_schedules (name, expr, tz, queue, last_tick)
   VALUES ('x1', '0 9 * * *', 'Mars/Olympus', 'cq', '2027-07-01T00:00:00Z')" >/dev/null
"$PGO_BIN" cron list >"$T_TMP/list" 2>"$T_TMP/list.err" || fail "cron list: $(cat "$T_TMP/list.err")"
n=0
while IFS='|' read -r name expr tz after want; do
	got=$(grep "^$name " "$T_TMP/list" | grep -oE '[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z' | sed -n 2p)
	[ "$got" = "$want" ] || fail "$name: \"$expr\" in $tz after $after: next tick ${got:-?}, want $want"
	n=$((n + 1))
done <"$T_TMP/cases"
grep -qE '^x1 .* \? ' "$T_TMP/list" || fail "a zone the database does not know: $(grep '^x1 ' "$T_TMP/list")"
note "$n next ticks in $(cut -d"|" -f3 "$T_TMP/cases" | sort -u | wc -l) zones as the database's offsets give them"

# --- the scheduler: a daily 02:30 in Berlin, last fired on January 1st of
# last year, catches up (missed = skip records every tick as skipped).
q "INSERT INTO pgoutbox.cron_schedules (name, expr, tz, queue, missed, last_tick)
   VALUES ('daily', '30 2 * * *', 'Europe/Berlin', 'cq', 'skip',
           date_trunc('year', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' - interval '1 year')" >/dev/null
q "UPDATE pgoutbox.cron_schedules SET enabled = false WHERE name NOT IN ('daily', 'x1')" >/dev/null
"$PGO_BIN" cron run 2>"$T_TMP/cron.log" &
PIDS+=($!)
wait_until 30 "[ \$(q \"SELECT count(*) FROM pgoutbox.cron_history WHERE name = 'daily'\") -gt 300 ]"
wait_until 10 "grep -q 'schedule x1: unknown time zone \"Mars/Olympus\"' '$T_TMP/cron.log'"
stop_relay "${PIDS[-1]}"
Z="'Europe/Berlin'"
row=$(q "WITH h AS (SELECT tick, tick AT TIME ZONE $Z AS local FROM pgoutbox.cron_history WHERE name = 'daily')
         SELECT count(*), count(DISTINCT local::date), max(local::date) - min(local::date) + 1,
                -- 02:30 does not exist that day: fired at 03:00, as the gap ends
                count(*) FILTER (WHERE local::time = '03:00' AND ((local::date + time '02:30') AT TIME ZONE $Z) AT TIME ZONE $Z <> local::date + time '02:30'
                                 AND ((tick - interval '1 second') AT TIME ZONE $Z)::time = '01:59:59'),
                -- 02:30 comes twice that day: fired at the first
                count(*) FILTER (WHERE local::time = '02:30' AND (tick + interval '1 hour') AT TIME ZONE $Z = local),
                -- anything else
                count(*) FILTER (WHERE local::time <> '02:30' AND local::time <> '03:00'),
                count(*) FILTER (WHERE (tick - interval '1 hour') AT TIME ZONE $Z = local),
                count(*) FILTER (WHERE local::time = '03:00' AND ((local::date + time '02:30') AT TIME ZONE $Z) AT TIME ZONE $Z = local::date + time '02:30')
         FROM h")
IFS='|' read -r ticks days span gaps overlaps other second wrong_gap <<<"$row"
[ "$ticks" -gt 300 ] || fail "only $ticks ticks caught up"
[ "$ticks" = "$days" ] && [ "$days" = "$span" ] || fail "$ticks ticks on $days local days over $span days: not once a day"
[ "$gaps" -ge 1 ] || fail "no tick at 03:00 on a spring-forward day ($row)"
[ "$overlaps" -ge 1 ] || fail "no tick at the first 02:30 of a fall-back day ($row)"
[ "$other|$second|$wrong_gap" = "0|0|0" ] || fail "ticks at other times $other, at a second 02:30 $second, at 03:00 without a gap $wrong_gap"
note "scheduler: $ticks daily ticks, once per Berlin day, $gaps at the end of a DST gap, $overlaps at the first of a repeated 02:30"
