# No test ends a pipe with `grep -q` (nor an awk that exits early).  Under pipefail (lib.sh sets it)
# grep -q quits at its first match and a writer that is still writing
# dies of SIGPIPE, which fails the pipe: a check that passes or fails by
# scheduling (t_deb's `ldd | grep -q` failed on CI that way).  `qgrep`
# from lib.sh reads all of its input.
. "$(dirname "$0")/../lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
grep -nE '(^|[^|])\| *grep +-[a-zA-Z]*q' tests/lib.sh tests/*.sh tests/integration/*.sh tests/chaos/*.sh bench/*.sh 2>/dev/null |
	grep -vE '^[^:]+:[0-9]+: *#' >"$T_TMP/found" || true
[ -s "$T_TMP/found" ] && fail "a pipe ends in grep -q (use qgrep):
$(cat "$T_TMP/found")"
# The same with awk that exits at its first match: let it read to the end.
grep -nE '(^|[^|])\| *awk .*[{;] *exit *\}' tests/lib.sh tests/*.sh tests/integration/*.sh tests/chaos/*.sh bench/*.sh 2>/dev/null |
	grep -vE '^[^:]+:[0-9]+: *#' >"$T_TMP/found" || true
[ -s "$T_TMP/found" ] && fail "a pipe ends in an awk that exits early (let it read all):
$(cat "$T_TMP/found")"
note "$(ls tests/integration/*.sh | wc -l) test files read"
