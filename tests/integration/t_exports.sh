# The library exports exactly its API: the dynamic symbols of
# libpgoutbox.so, the functions the public headers declare (pgoutbox.h
# and pgoutbox/*.h) and src/lib/exports.txt are one set, each symbol under
# its version node; the example program links against the shared library
# alone and works; the version is meson's project version everywhere.
. "$(dirname "$0")/../lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(dirname "$PGO_BIN")
LIB=$BUILD/libpgoutbox.so
[ -e "$LIB" ] || fail "$LIB not built"

# Exported: "pgo_send node" per defined dynamic symbol, the version node
# definitions themselves (type A) left out; "-" for an unversioned one.
nm -D --defined-only "$LIB" | awk '$2 != "A" {
	n = split($3, p, "@"); print p[1], (n > 1 ? p[n] : "-") }' |
	sort >"$T_TMP/exported"
cut -d' ' -f1 "$T_TMP/exported" >"$T_TMP/exported.names"

# Declared: every name followed by "(" in the headers once comments and
# preprocessor lines are gone (function pointer typedefs read
# "(*name)(" and do not match).  A static inline function would count as
# declared and fail here: the API has none.
python3 - "$ROOT/include" <<'PY' | sort -u >"$T_TMP/declared"
import glob, re, sys
inc = sys.argv[1]
for path in [inc + '/pgoutbox.h'] + sorted(glob.glob(inc + '/pgoutbox/*.h')):
    text = open(path).read()
    text = re.sub(r'/\*.*?\*/', ' ', text, flags=re.S)
    text = re.sub(r'//[^\n]*', ' ', text)
    text = re.sub(r'(?m)^[ \t]*#(.*\\\n)*.*$', ' ', text)
    for name in re.findall(r'\b([A-Za-z_]\w*)\s*\(', text):
        if name.startswith('pgo_'):
            print(name)
PY
[ -s "$T_TMP/declared" ] || fail "no declarations found in include/"

# Listed: "pgo_send node" per line of exports.txt.
awk '{ sub(/#.*/, "") } /^[ \t]*$/ { next }
	/^\[/ { node = substr($1, 2, length($1) - 2); next }
	{ print $1, node }' "$ROOT/src/lib/exports.txt" | sort >"$T_TMP/listed"

extra=$(comm -23 "$T_TMP/exported.names" "$T_TMP/declared")
[ -z "$extra" ] || fail "libpgoutbox.so exports symbols no public header declares (internals: drop PGO_EXPORT, or declare them in include/):
$extra"
missing=$(comm -13 "$T_TMP/exported.names" "$T_TMP/declared")
[ -z "$missing" ] || fail "functions the public headers declare are not exported (mark them PGO_EXPORT and list them in src/lib/exports.txt):
$missing"
diff -u "$T_TMP/listed" "$T_TMP/exported" >"$T_TMP/list.diff" ||
	fail "src/lib/exports.txt and the exported symbols differ (- listed, + exported as NAME NODE):
$(tail -n +3 "$T_TMP/list.diff")"
# Both layers hold on their own: what the objects define with default
# visibility (PGO_EXPORT) is the list too, so an internal marked
# PGO_EXPORT is caught even while the version script keeps it local.
# libpgoutbox.a holds the same objects as the shared library.
readelf -sW "$BUILD/libpgoutbox.a" | awk '($5 == "GLOBAL" || $5 == "WEAK") &&
	$6 == "DEFAULT" && $7 != "UND" { print $8 }' | sort -u >"$T_TMP/visible"
[ -s "$T_TMP/visible" ] || fail "no default-visibility symbols in $BUILD/libpgoutbox.a"
cut -d' ' -f1 "$T_TMP/listed" | diff -u - "$T_TMP/visible" >"$T_TMP/vis.diff" ||
	fail "what the library compiles with default visibility (PGO_EXPORT) and src/lib/exports.txt differ (- listed, + visible):
$(tail -n +3 "$T_TMP/vis.diff")"
note "$(wc -l <"$T_TMP/exported") symbols exported, all declared and listed"

# The soname is major-versioned like the version node.
major=$(sed -n 's/^#define PGO_VERSION_MAJOR \([0-9]*\)$/\1/p' "$BUILD/include/pgoutbox/version.h")
# (Outputs are captured first: grep -q quits early, and under pipefail
# the writer's SIGPIPE would fail the pipe.)
dyn=$(readelf -d "$LIB")
grep -q "(SONAME).*\[libpgoutbox\.so\.$major\]" <<<"$dyn" ||
	fail "soname: $(grep SONAME <<<"$dyn")"

# One version: meson.build's project(), the generated header, the binary.
want=$(sed -n "s/^  version : '\([0-9.]*\)',$/\1/p" "$ROOT/meson.build")
[ -n "$want" ] || fail "no version in meson.build's project()"
IFS=. read -r ma mi pa <<<"$want"
num=$((ma * 10000 + mi * 100 + pa))
grep -qx "#define PGO_VERSION \"$want\"" "$BUILD/include/pgoutbox/version.h" &&
	grep -qx "#define PGO_VERSION_NUM $num" "$BUILD/include/pgoutbox/version.h" ||
	fail "pgoutbox/version.h does not say $want ($num)"
"$PGO_BIN" --version >"$T_TMP/version"
grep -q "^pgoutbox $want (version number $num," "$T_TMP/version" ||
	fail "--version: $(cat "$T_TMP/version"), want $want ($num)"

# A program using only the API runs against the shared library: the
# example, built dynamically as c_api_shared.
EX=$BUILD/c_api_shared
[ -x "$EX" ] || fail "$EX not built"
libs=$(ldd "$EX")
grep -q 'libpgoutbox\.so\.' <<<"$libs" || fail "$EX does not use libpgoutbox.so: $libs"
t_db
"$EX" produce 10 >"$T_TMP/produce" 2>&1 || fail "c_api_shared produce: $(cat "$T_TMP/produce")"
grep -q '^bulk 10$' "$T_TMP/produce" || fail "c_api_shared: $(cat "$T_TMP/produce")"
[ "$(pending)" = 11 ] || fail "pending $(pending), want 11"
