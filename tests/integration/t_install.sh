# `make install PREFIX=...` honours PREFIX even when the build was
# configured before with another one (as `make demo` does), and `make
# uninstall` removes what it installed (issue 20 item 3).  A small build
# of its own (no optional sinks, no tests) in the test's directory.
. "$(dirname "$0")/../lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
b=$T_TMP/build
make -C "$root" --no-print-directory "BUILD=$b" "MESON_ARGS=-Dtests=false -Dredis=disabled -Dnats=disabled -Drabbitmq=disabled -Dkafka=disabled -Dcurl=disabled" \
	install PREFIX="$T_TMP/first" >"$T_TMP/make1.log" 2>&1 || fail "make install: $(tail -20 "$T_TMP/make1.log")"
[ -x "$T_TMP/first/bin/pgoutbox" ] || fail "nothing in the first PREFIX: $(tail -5 "$T_TMP/make1.log")"
make -C "$root" --no-print-directory "BUILD=$b" install PREFIX="$T_TMP/second" >"$T_TMP/make2.log" 2>&1 ||
	fail "make install again: $(tail -20 "$T_TMP/make2.log")"
[ -x "$T_TMP/second/bin/pgoutbox" ] || fail "PREFIX ignored: $(grep -m3 Installing "$T_TMP/make2.log")"
[ -f "$T_TMP/second/include/pgoutbox.h" ] || fail "no header in the second PREFIX"
"$T_TMP/second/bin/pgoutbox" --version >/dev/null || fail "the installed binary does not run"
make -C "$root" --no-print-directory "BUILD=$b" uninstall >"$T_TMP/make3.log" 2>&1 || fail "make uninstall: $(tail -20 "$T_TMP/make3.log")"
left=$( [ ! -d "$T_TMP/second" ] || find "$T_TMP/second" -type f | head -5)
[ -z "$left" ] || fail "make uninstall left: $left"
