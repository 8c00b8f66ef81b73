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
"$PGO_BIN" --help | grep -q relay || fail "pgoutbox --help lists no commands"
"$PGO_BIN" --version | grep -q "pgoutbox [0-9]" || fail "--version"
