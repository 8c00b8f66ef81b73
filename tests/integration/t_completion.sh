# The bash and zsh completions (contrib/completion, made by
# tools/cli_docs.py from the binary's help) complete commands, actions,
# flags and flag values as the binary has them now (issue 43).
# serial: failed once each in a parallel run, never alone (tests/run.sh)
. "$(dirname "$0")/../lib.sh"
comp=$(dirname "$PGO_BIN")/contrib/completion/pgoutbox
[ -s "$comp" ] || fail "no completion script at $comp"
bash -n "$comp" || fail "the completion script is not valid bash"

# What _pgoutbox offers for the words given, the last being completed:
# one word a line.
complete_words() {
	bash --norc --noprofile -c '
		. "$1" || exit 3
		complete -p pgoutbox >/dev/null || exit 4
		shift
		COMP_WORDS=("$@")
		COMP_CWORD=$(($# - 1))
		COMP_LINE="$*"
		COMPREPLY=()
		_pgoutbox pgoutbox "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
		printf "%s\n" "${COMPREPLY[@]}"' _ "$comp" "$@"
}
expect() { # expect WANT WORDS...: WANT space-separated and sorted
	local want=$1 got
	shift
	got=$(complete_words "$@" | sort | tr '\n' ' ' | sed 's/ $//')
	[ "$got" = "$want" ] || fail "${*}<TAB>: got \"$got\", want \"$want\""
}
expect "queue" pgoutbox qu
expect "relay" pgoutbox re
expect "--sink" pgoutbox relay --si
expect "kafka" pgoutbox relay --sink ka
expect "concurrent ordered strict" pgoutbox relay --mode ""
expect "--redis-stream" pgoutbox relay --redis-s
expect "--concurrency" pgoutbox worker --conc
expect "history" pgoutbox cron h
expect "check reference show" pgoutbox config ""

# `queue <TAB>` offers exactly the actions of `queue --help`'s usage lines.
want=$("$PGO_BIN" queue --help | sed -n 's/^\(usage:\)\? *pgoutbox queue \([a-z]*\).*/\2/p' | sort | tr '\n' ' ' | sed 's/ $//')
[ "$(echo "$want" | wc -w)" -ge 5 ] || fail "queue --help has too few actions: $want"
expect "$want" pgoutbox queue ""

# Every command of `pgoutbox --help` at the first word, and every flag of
# each command's --help after it.
cmds=$("$PGO_BIN" --help | sed -n '/^Commands:/,/^$/p' | awk 'NF && !/:$/ {print $1}' | sort)
got=$(complete_words pgoutbox "" | grep -v '^-' | sort)
[ "$got" = "$cmds" ] || fail "pgoutbox <TAB>: got $(echo $got), want $(echo $cmds)"
n=0
for c in $cmds; do
	offered=$(complete_words pgoutbox "$c" --)
	for flag in $("$PGO_BIN" "$c" --help | grep -oE '^ +(-h, )?--[a-z][a-z0-9-]*' | grep -oE -- '--[a-z0-9-]+'); do
		echo "$offered" | qgrep -x -- "$flag" || fail "pgoutbox $c --<TAB> does not offer $flag"
		n=$((n + 1))
	done
done
[ "$n" -ge 100 ] || fail "only $n flags checked"

# zsh: _pgoutbox called as a completion widget would, with compadd (which
# matches against PREFIX) and _files stubbed: one candidate a line.
zcomp=$(dirname "$PGO_BIN")/contrib/completion/_pgoutbox
[ -s "$zcomp" ] || fail "no zsh completion at $zcomp"
command -v zsh >/dev/null || fail "zsh missing: scripts/deps.sh installs it"
zsh_words() {
	zsh -f -c '
		compadd() { [[ $1 == -- ]] && shift; local x; for x in "$@"; do [[ $x == ${PREFIX}* ]] && print -r -- $x; done; return 0; }
		_files() { print -r -- "(files)"; }
		f=$1; shift
		words=("$@"); CURRENT=$#; PREFIX=${words[CURRENT]}
		source $f' _ "$zcomp" "$@"
}
zexpect() { # zexpect WANT WORDS...
	local want=$1 got
	shift
	got=$(zsh_words "$@" | sort | tr '\n' ' ' | sed 's/ $//')
	[ "$got" = "$want" ] || fail "zsh: ${*}<TAB>: got \"$got\", want \"$want\""
}
zexpect "queue" pgoutbox qu
zexpect "--sink" pgoutbox relay --si
zexpect "concurrent ordered strict" pgoutbox relay --mode ""
zexpect "$want" pgoutbox queue ""
zexpect "(files)" pgoutbox relay --config ""
got=$(zsh_words pgoutbox "" | grep -v '^-' | sort)
[ "$got" = "$cmds" ] || fail "zsh: pgoutbox <TAB>: got $(echo $got)"
for c in $cmds; do
	[ "$(zsh_words pgoutbox "$c" -- | sort)" = "$(complete_words pgoutbox "$c" -- | sort)" ] ||
		fail "zsh and bash offer different flags for $c"
done
note "$(echo "$cmds" | wc -l) commands, $n flags; zsh offers the same"
