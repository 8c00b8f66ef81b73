# The shipped Prometheus rules (contrib/prometheus): `promtool check rules`
# is clean, `promtool test rules` passes a unit test per alert, every alert
# has a runbook line and a section in docs/operations.md, and every metric
# the rules and the Grafana dashboard name is one the code exports.
. "$(dirname "$0")/../lib.sh"
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="$root/contrib/prometheus"
promtool check rules "$dir/pgoutbox.rules.yml" >"$T_TMP/check.txt" 2>&1 || fail "promtool check rules: $(cat "$T_TMP/check.txt")"
(cd "$dir" && promtool test rules pgoutbox.rules.test.yml) >"$T_TMP/test.txt" 2>&1 || fail "promtool test rules: $(cat "$T_TMP/test.txt")"
alerts=$(grep -o 'alert: [A-Za-z]*' "$dir/pgoutbox.rules.yml" | cut -d' ' -f2)
n=0
for a in $alerts; do
	n=$((n + 1))
	grep -q "alertname: $a\$" "$dir/pgoutbox.rules.test.yml" || fail "no unit test for $a"
	grep -q "^### $a\$" "$root/docs/operations.md" || fail "docs/operations.md has no section for $a"
done
runbooks=$(grep -c '^ *runbook: ' "$dir/pgoutbox.rules.yml")
[ "$runbooks" = "$n" ] || fail "$n alerts but $runbooks runbook lines"
# Metric names in the rules and the dashboard exist in the code.
names=$( (grep -o 'pgoutbox_[a-z_]*' "$dir/pgoutbox.rules.yml"; grep -o 'pgoutbox_[a-z_]*' "$root/contrib/grafana/pgoutbox.json") |
	sed -E 's/_(bucket|sum|count)$//' | sort -u)
for m in $names; do
	grep -rqF "\"$m\"" "$root/src/lib" || fail "$m is used in contrib/ but no code exports it"
done
note "promtool: $n alerts checked and unit-tested, each with a runbook and a docs section; $(wc -w <<<"$names") metric names exist"
