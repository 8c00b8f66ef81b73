# The man pages (tools/cli_docs.py, built next to the binary) cover every
# command the binary lists and every flag its --help shows, and every key
# of `config reference`; each renders through man and groff without a
# warning (issue 43).
. "$(dirname "$0")/../lib.sh"
build=$(dirname "$PGO_BIN")
pages=$T_TMP/pages
mkdir -p "$pages"
# Rendered as plain ASCII, where \- is '-', one page a file.
render() { groff -man -Tascii -ww -P-cbou "$1" 2>"$T_TMP/groff.err"; }

cmds=$("$PGO_BIN" --help | sed -n '/^Commands:/,/^$/p' | awk 'NF && !/:$/ {print $1}')
[ "$(echo "$cmds" | wc -l)" -ge 10 ] || fail "pgoutbox --help lists too few commands: $cmds"
for page in pgoutbox.1 pgoutbox.ini.5 $(printf 'pgoutbox-%s.1 ' $cmds); do
	f=$build/$page
	[ -s "$f" ] || fail "no man page $page in $build"
	MANWIDTH=80 man --warnings -E UTF-8 -l "$f" >"$T_TMP/man.out" 2>"$T_TMP/man.err" || fail "man -l $page: $(cat "$T_TMP/man.err")"
	[ ! -s "$T_TMP/man.err" ] || fail "man -l $page warns: $(head -5 "$T_TMP/man.err")"
	groff -man -Tutf8 -ww -z "$f" 2>"$T_TMP/groff.err"
	[ ! -s "$T_TMP/groff.err" ] || fail "groff $page warns: $(head -5 "$T_TMP/groff.err")"
	render "$f" >"$pages/$page" || fail "groff -Tascii $page"
	[ ! -s "$T_TMP/groff.err" ] || fail "groff -Tascii $page warns: $(head -5 "$T_TMP/groff.err")"
	grep -q '^NAME' "$pages/$page" || fail "$page has no NAME section"
done

# Each flag of each command's --help is on its page, and each command on
# pgoutbox(1).
has() { grep -qE -- "(^|[^a-z0-9-])$1([^a-z0-9-]|\$)" "$2"; }
nflags=0
for c in $cmds; do
	has "$c" "$pages/pgoutbox.1" || fail "pgoutbox(1) does not name $c"
	"$PGO_BIN" "$c" --help >"$T_TMP/help" || fail "$c --help"
	for flag in $(grep -oE '^ +(-h, )?--[a-z][a-z0-9-]*' "$T_TMP/help" | grep -oE -- '--[a-z0-9-]+'); do
		has "$flag" "$pages/pgoutbox-$c.1" || fail "pgoutbox-$c(1) lacks $flag that \`$c --help\` shows"
		nflags=$((nflags + 1))
	done
	usage=$(head -1 "$T_TMP/help" | sed 's/^usage: //')
	grep -qF -- "$usage" "$pages/pgoutbox-$c.1" || fail "pgoutbox-$c(1) lacks the usage line: $usage"
done
[ "$nflags" -ge 100 ] || fail "only $nflags flags checked"
for flag in --version --help; do
	has "$flag" "$pages/pgoutbox.1" || fail "pgoutbox(1) lacks $flag"
done

# Every key of the configuration reference, with its environment variable.
nkeys=0
while IFS='|' read -r _ key _ _ _ _ _ env _; do
	key=$(echo "$key" | tr -d ' `')
	var=$(echo "$env" | tr -d ' `' | cut -d, -f1)
	case $key in *.*) ;; *) continue ;; esac
	has "${key#*.}" "$pages/pgoutbox.ini.5" || fail "pgoutbox.ini(5) lacks the key $key"
	grep -qF -- "$var" "$pages/pgoutbox.ini.5" || fail "pgoutbox.ini(5) lacks $var"
	nkeys=$((nkeys + 1))
done < <("$PGO_BIN" config reference | grep '^| `')
[ "$nkeys" -ge 50 ] || fail "only $nkeys keys checked"

# The pages are those the binary makes now: regenerated, they are the same.
python3 "$(dirname "$0")/../../tools/cli_docs.py" man "$PGO_BIN" "$T_TMP" $cmds ||
	fail "tools/cli_docs.py man failed"
for page in pgoutbox.1 pgoutbox.ini.5 $(printf 'pgoutbox-%s.1 ' $cmds); do
	cmp -s "$T_TMP/$page" "$build/$page" || fail "$page in $build is stale"
done
note "$(echo "$cmds" | wc -l) commands, $nflags flags, $nkeys keys"
