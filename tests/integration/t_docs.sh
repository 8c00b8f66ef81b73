# The docs match the code: docs/configuration.md holds the reference that
# `pgoutbox config reference` prints, and every command has a --help.
. "$(dirname "$0")/../lib.sh"
cd "$(dirname "$0")/../.."
"$PGO_BIN" config reference >"$T_TMP/ref.md"
missing=$(grep -vxF -f docs/configuration.md "$T_TMP/ref.md" || true)
[ -z "$missing" ] || fail "docs/configuration.md is stale; these reference lines are missing:
$missing
(regenerate the table with: pgoutbox config reference)"
for cmd in migrate send relay status config; do
	"$PGO_BIN" "$cmd" --help >"$T_TMP/help" || fail "$cmd --help exited non-zero"
	grep -q "usage: pgoutbox $cmd" "$T_TMP/help" || fail "$cmd --help has no usage line"
done
grep -q relay <<<"$("$PGO_BIN" --help)" || fail "pgoutbox --help lists no commands"
"$PGO_BIN" --version | qgrep "pgoutbox [0-9]" || fail "--version"

# The README stays a five-minute read and the benchmark page a results
# page (issue 42); the README names the two commands and where the binary
# is (issue 44).
[ "$(wc -l <README.md)" -le 250 ] || fail "README.md has $(wc -l <README.md) lines (at most 250)"
[ "$(wc -l <docs/benchmarks.md)" -le 300 ] || fail "docs/benchmarks.md has $(wc -l <docs/benchmarks.md) lines (at most 300)"
for s in 'make demo' 'make check' 'build/pgoutbox' 'make install'; do
	grep -qF "$s" README.md || fail "README.md does not say \"$s\""
done
# Every relative link of the README, docs/ and tests/README.md leads to a
# file that exists, and to a heading of it when it names one.
python3 - README.md docs/*.md tests/README.md <<'PY' || fail "dead links in the docs"
import os, re, sys
def anchors(path):
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    out = set()
    for h in re.findall(r"^#+ (.*)$", text, re.M):
        out.add(re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-"))
    return out
bad = 0
for f in sys.argv[1:]:
    text = open(f, encoding="utf-8").read()
    for m in re.finditer(r"\]\(([^)\s]+)\)", text):
        target = m.group(1)
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        p = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
        if not os.path.exists(p):
            print(f"{f}: no such file: {target}", file=sys.stderr); bad += 1
        elif anchor and p.endswith(".md") and anchor not in anchors(p):
            print(f"{f}: no heading for #{anchor} in {p}", file=sys.stderr); bad += 1
sys.exit(1 if bad else 0)
PY
# Every integration test has a row in tests/README.md's table.
for t in tests/integration/t_*.sh; do
	n=$(basename "$t" .sh)
	grep -q "^| \`$n\` |" tests/README.md || fail "tests/README.md has no row for $n"
done
