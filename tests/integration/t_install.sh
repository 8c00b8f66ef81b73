# `make install PREFIX=...` honours PREFIX even when the build was
# configured before with another one (as `make demo` does), and `make
# uninstall` removes what it installed (issue 20 item 3).  A small build
# of its own (no optional sinks, no tests) in the test's directory.
# The install carries what an operator needs beside the binary (issue 44
# item 2): the systemd unit, written for that PREFIX's binary and passing
# systemd-analyze verify, the docs it names, tools/bullmq-export.js.
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

unit=$T_TMP/second/lib/systemd/system/pgoutbox@.service
[ -f "$unit" ] || fail "no systemd unit in PREFIX/lib/systemd/system"
grep -qx "ExecStart=$T_TMP/second/bin/pgoutbox run --config /etc/pgoutbox/%i.ini" "$unit" ||
	fail "the unit does not run the PREFIX's binary: $(grep ^ExecStart "$unit")"
doc=$(sed -n 's|^Documentation=file://||p' "$unit")
[ "$doc" = "$T_TMP/second/share/doc/pgoutbox/operations.md" ] || fail "the unit's Documentation= is not in the PREFIX: $doc"
[ -f "$doc" ] || fail "the unit's Documentation= file is not installed: $doc"
[ -f "$T_TMP/second/share/doc/pgoutbox/install.md" ] || fail "docs/install.md not installed"
[ -x "$T_TMP/second/share/pgoutbox/bullmq-export.js" ] || fail "tools/bullmq-export.js not installed"
[ -f "$T_TMP/second/share/pgoutbox/prometheus/pgoutbox.rules.yml" ] || fail "the alert rules are not installed"
if command -v systemd-analyze >/dev/null; then
	# verify wants an instance of the template.
	mkdir -p "$T_TMP/units"
	cp "$unit" "$T_TMP/units/pgoutbox@demo.service"
	systemd-analyze verify --man=no "$T_TMP/units/pgoutbox@demo.service" >"$T_TMP/verify.txt" 2>&1 ||
		fail "systemd-analyze verify of the installed unit: $(cat "$T_TMP/verify.txt")"
else
	note "systemd-analyze not installed: the installed unit is not verified"
fi
make -C "$root" --no-print-directory "BUILD=$b" uninstall >"$T_TMP/make3.log" 2>&1 || fail "make uninstall: $(tail -20 "$T_TMP/make3.log")"
left=$( [ ! -d "$T_TMP/second" ] || find "$T_TMP/second" -type f | head -5)
[ -z "$left" ] || fail "make uninstall left: $left"
