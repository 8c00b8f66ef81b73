#!/usr/bin/env python3
"""Man pages and shell completion from what the pgoutbox binary says.

Usage:
  cli_docs.py man PGOUTBOX OUTDIR CMD...  pgoutbox.1, pgoutbox-CMD.1 for
                                           each CMD, pgoutbox.ini.5
  cli_docs.py bash PGOUTBOX OUTPUT        the bash completion script
  cli_docs.py zsh PGOUTBOX OUTPUT         the zsh completion (_pgoutbox)

Both are built from `pgoutbox --help`, `pgoutbox CMD --help` and
`pgoutbox config reference`, which the binary prints from its command
tables and the configuration key table: the pages and the completion
cannot drift from the help.  The CMD list is meson's (it must name each
output at configure time): a CMD the binary does not have is an error; a
command the binary has that the list lacks gets no page and a warning
(tests/integration/t_man.sh fails on it, the build does not).
"""
import os
import re
import subprocess
import sys

DESCRIPTION = 'pgoutbox manual'
INI_FILE = '/etc/pgoutbox/NAME.ini'


def run(binary, *args):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith('PGOUTBOX_') and k != 'DATABASE_URL'}
    out = subprocess.run([binary, *args], env=env, check=True,
                         stdout=subprocess.PIPE, text=True)
    return out.stdout


# --- what the help says -------------------------------------------------

def blocks(text):
    """The help's paragraphs: lists of lines separated by blank lines."""
    out, cur = [], []
    for line in text.rstrip('\n').split('\n'):
        if line.strip():
            cur.append(line.rstrip())
        elif cur:
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


def top_help(binary):
    """The commands of `pgoutbox --help`, in order: [(name, summary)]."""
    text = run(binary, '--help')
    cmds = []
    for b in blocks(text):
        if b[0] == 'Commands:':
            for line in b[1:]:
                m = re.match(r'\s+(\S+)\s+(.*)', line)
                cmds.append((m.group(1), m.group(2)))
    return text, cmds


OPT_RE = re.compile(r'\s+(-\S+(?:, -\S+)?)((?: (?:[A-Z][A-Z_.]*|\S*\|\S*))?)'
                    r'(?:\s+(.*))?$')


def parse_option(line):
    """'  --batch VALUE   relay.batch (...)' -> ('--batch', 'VALUE', help)."""
    m = OPT_RE.match(line)
    if not m:
        return None
    return m.group(1), m.group(2).strip(), (m.group(3) or '').strip()


def cmd_help(binary, name):
    """A command's help cut in its parts: usage lines, the paragraphs up to
    the options, the options, the paragraphs after them."""
    bl = blocks(run(binary, name, '--help'))
    usage = bl[0]
    oi = next(i for i, b in enumerate(bl) if b[0] == 'Options:')
    opts = [parse_option(line) for line in bl[oi][1:]]
    if None in opts:
        sys.exit(f'cli_docs: cannot read an option of `{name} --help`')
    return usage, bl[1:oi], opts, bl[oi + 1:]


def flags_in(text):
    """Every --flag the text shows at the start of a line (the options and
    the sinks' flags of relay --help)."""
    return re.findall(r'^\s+(?:-h, )?(--[a-z][a-z0-9-]*)', text, re.M)


def actions(usage, name):
    """The actions of a command with several ("queue create", "config
    show|check|reference"), from its usage lines; [] for others."""
    out = []
    for line in usage:
        m = re.match(r'(?:usage:)?\s*pgoutbox ' + name + r' ([a-z|]+)(?:\s|$)',
                     line)
        if m:
            out += [a for a in m.group(1).split('|') if a]
    return out


def reference(binary):
    """The key table: [{key, type, default, range, reload, flag, env,
    desc}] from `pgoutbox config reference`."""
    rows = []
    for line in run(binary, 'config', 'reference').split('\n'):
        if not line.startswith('| `'):
            continue
        cells = [c.strip().replace('\\|', '|')
                 for c in re.split(r'(?<!\\)\|', line)[1:-1]]
        cells = [c.replace('`', '') for c in cells]
        keys = ('key', 'type', 'default', 'range', 'reload', 'flag', 'env',
                'desc')
        rows.append(dict(zip(keys, cells)))
    return rows


# --- roff ---------------------------------------------------------------

def esc(text):
    """Text as roff reads it: backslashes escaped, an option's dashes as
    \\- (so that they render and search as '-')."""
    text = text.replace('\\', '\\e')
    return re.sub(r'(?<![\w\\])--?[A-Za-z0-9][\w-]*|(?<![\w\\])-',
                  lambda m: m.group(0).replace('-', '\\-'), text)


def line_safe(line):
    """A roff line that does not start a request."""
    return '\\&' + line if line[:1] in ('.', "'") else line


def para(lines):
    """A paragraph of the help: filled text, or kept as it is when it has
    indented lines (lists, SQL)."""
    out = ['.PP']
    if any(line[:1].isspace() for line in lines[1:]) or \
            lines[0].endswith(':') and len(lines) > 1:
        out.append('.nf')
        out += [line_safe(esc(line)) for line in lines]
        out.append('.fi')
    else:
        out += [line_safe(esc(line.strip())) for line in lines]
    return out


def header(name, section, version):
    return [f'.\\" Generated by tools/cli_docs.py from the help of pgoutbox '
            f'{version}: do not edit.',
            f'.TH {name.upper()} {section} "" "pgoutbox {version}" '
            f'"{DESCRIPTION}"',
            '.nh', '.ad l']


def option_item(flag, arg, help_text):
    left = ', '.join(f'\\fB{esc(f)}\\fR' for f in flag.split(', '))
    if arg:
        left += f' \\fI{esc(arg)}\\fR'
    return ['.TP', left, line_safe(esc(help_text))]


def man_command(binary, name, summary, version):
    usage, body, opts, after = cmd_help(binary, name)
    out = header(f'pgoutbox-{name}', 1, version)
    out += ['.SH NAME', f'pgoutbox\\-{name} \\- {esc(summary)}',
            '.SH SYNOPSIS', '.nf']
    for line in usage:
        line = re.sub(r'^(usage:| {6}) ?', '', line)
        out.append(line_safe(esc(line)))
    out += ['.fi', '.SH DESCRIPTION']
    for b in body:
        out += para(b)
    out.append('.SH OPTIONS')
    for flag, arg, help_text in opts:
        out += option_item(flag, arg, help_text)
    if after:
        out.append('.SH CONFIGURATION')
        for b in after:
            out += para(b)
    out += ['.SH EXIT STATUS',
            '0 when done, 1 when the operation failed (retrying later may '
            'work), 2 when something must be fixed first; see',
            '.BR pgoutbox (1).',
            '.SH SEE ALSO', '.BR pgoutbox (1),', '.BR pgoutbox.ini (5)']
    return '\n'.join(out) + '\n'


def man_main(binary, text, cmds, version):
    out = header('pgoutbox', 1, version)
    bl = blocks(text)
    out += ['.SH NAME', 'pgoutbox \\- ' + esc(bl[1][0].rstrip('.')[:1].lower() +
                                             bl[1][0].rstrip('.')[1:]),
            '.SH SYNOPSIS', '.nf',
            esc(re.sub(r'^usage: ', '', bl[0][0])),
            esc('pgoutbox COMMAND --help'), esc('pgoutbox --version'), '.fi',
            '.SH DESCRIPTION']
    out += para(bl[1])
    out += ['.PP', 'Each command has a page of its own,',
            '.BR pgoutbox\\-COMMAND (1);',
            'the configuration file is described in',
            '.BR pgoutbox.ini (5).',
            '.SH COMMANDS']
    for name, summary in cmds:
        out += ['.TP', f'\\fB{esc(name)}\\fR', esc(summary) + ':',
                f'.BR pgoutbox\\-{esc(name)} (1).']
    for b in bl[2:]:
        if b[0] == 'Commands:':
            continue
        if b[0] == 'Exit status:':
            out.append('.SH EXIT STATUS')
            items = []
            for line in b[1:]:
                m = re.match(r'\s+(\d)\s+(.*)', line)
                if m:
                    items.append([m.group(1), m.group(2)])
                else:
                    items[-1][1] += ' ' + line.strip()
            for code, what in items:
                out += ['.TP', f'\\fB{code}\\fR', line_safe(esc(what))]
            continue
        out.append('.SH OPTIONS')
        for line in b:
            opt = parse_option(line) if line[:1].isspace() else None
            if opt:
                out += option_item(*opt)
            else:
                out += ['.PP', line_safe(esc(line))]
        out += option_item('-h, --help', '', 'show the commands')
    out += ['.SH ENVIRONMENT',
            '.TP', '\\fBDATABASE_URL\\fR, \\fBPGOUTBOX_DATABASE_URL\\fR',
            'the database: a libpq conninfo string or a postgres:// URL.',
            '.TP', '\\fBPGOUTBOX_\\fISECTION\\fB_\\fIKEY\\fR',
            'any setting of the configuration file; see',
            '.BR pgoutbox.ini (5).',
            '.SH FILES', '.TP', f'\\fI{INI_FILE}\\fR',
            'a configuration, as the systemd unit',
            '\\fBpgoutbox@NAME.service\\fR runs it with',
            '\\fBpgoutbox run \\-\\-config\\fR.',
            '.SH SEE ALSO', '.BR pgoutbox.ini (5)' +
            ''.join(f',\n.BR pgoutbox\\-{esc(n)} (1)' for n, _ in cmds)]
    return '\n'.join(out) + '\n'


def man_ini(binary, version):
    rows = reference(binary)
    out = header('pgoutbox.ini', 5, version)
    out += ['.SH NAME', 'pgoutbox.ini \\- the configuration file of pgoutbox',
            '.SH SYNOPSIS', f'\\fI{INI_FILE}\\fR',
            '.SH DESCRIPTION',
            'An INI file read with \\fB\\-\\-config\\fR \\fIFILE\\fR:',
            '\\fB[section]\\fR lines, then \\fBname = value\\fR lines',
            '(or \\fBname: value\\fR); a line starting with \\fB;\\fR or',
            '\\fB#\\fR is a comment.  An error names the file and line,',
            'and the command exits 2.',
            '.PP',
            'A setting comes from, the later winning: its default, the file,',
            'the environment variable \\fBPGOUTBOX_\\fISECTION\\fB_\\fIKEY\\fR,',
            'the command line flag.',
            '\\fBpgoutbox config show\\fR prints what is in force (secrets',
            'masked), \\fBpgoutbox config check\\fR validates.',
            'A setting marked reloadable takes effect on SIGHUP.',
            '.PP', 'An example:', '.PP', '.nf', '.RS 4',
            '[database]', 'url = postgres://relay@localhost/app', '',
            '[relay]', 'sink = stdout', 'batch = 500', '.RE', '.fi']
    section = None
    for r in rows:
        sec, _, name = r['key'].partition('.')
        if sec != section:
            section = sec
            out += ['.SH "THE [' + esc(sec) + '] SECTION"']
        facts = [r['type']]
        if r['default'] and r['default'] != '(empty)':
            facts.append('default ' + r['default'])
        if r['range']:
            facts.append(('one of ' if r['type'] == 'enum' else 'range ') +
                         r['range'])
        if r['reload'] == 'yes':
            facts.append('reloadable')
        out += ['.TP', f'\\fB{esc(name)}\\fR ({esc("; ".join(facts))})',
                line_safe(esc(r['desc'])) + '.']
        where = []
        if r['flag']:
            where.append(f'flag \\fB{esc(r["flag"])}\\fR')
        where.append('environment ' + ', '.join(
            f'\\fB{esc(e)}\\fR' for e in r['env'].split(', ')))
        out += ['.br', 'Also: ' + '; '.join(where) + '.']
    out += ['.SH FILES', f'\\fI{INI_FILE}\\fR: read by',
            '\\fBpgoutbox@NAME.service\\fR.',
            '.SH SEE ALSO', '.BR pgoutbox (1),', '.BR pgoutbox\\-run (1)']
    return '\n'.join(out) + '\n'


def version_of(binary):
    return run(binary, '--version').split()[1]


def write(path, text):
    with open(path, 'w') as f:
        f.write(text)


def man(binary, outdir, expected):
    text, cmds = top_help(binary)
    names = [n for n, _ in cmds]
    missing = [n for n in expected if n not in names]
    if missing:
        sys.exit(f'cli_docs: meson.build names {missing} in man_commands, '
                 f'the binary has no such command (it has {names})')
    # A command meson does not name yet gets no page (meson names each
    # output before the build): said here, and t_man.sh fails on it.
    for n in names:
        if n not in expected:
            print(f'cli_docs: warning: no man page for "{n}": add it to '
                  f'man_commands in meson.build', file=sys.stderr)
    version = version_of(binary)
    write(os.path.join(outdir, 'pgoutbox.1'),
          man_main(binary, text, cmds, version))
    for name, summary in cmds:
        if name in expected:
            write(os.path.join(outdir, f'pgoutbox-{name}.1'),
                  man_command(binary, name, summary, version))
    write(os.path.join(outdir, 'pgoutbox.ini.5'), man_ini(binary, version))


# --- bash completion ----------------------------------------------------

BASH = r'''# bash completion for pgoutbox.  Generated by tools/cli_docs.py from the
# help of pgoutbox %(version)s: do not edit.

_pgoutbox()
{
    local cur prev cmd
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    # The command is the first word: pgoutbox takes no option before it.
    cmd=${COMP_WORDS[1]}
    if ((COMP_CWORD == 1)); then
        COMPREPLY=($(compgen -W '%(commands)s --help --version' -- "$cur"))
        return
    fi
    case $prev in
    --config) COMPREPLY=($(compgen -f -- "$cur")); return ;;
%(values)s
    esac
    if [[ $cur == -* ]]; then
        case $cmd in
%(flags)s
        esac
        return
    fi
    if ((COMP_CWORD == 2)); then
        case $cmd in
%(actions)s
        esac
    fi
}
complete -F _pgoutbox -o default pgoutbox
'''


ZSH = r'''#compdef pgoutbox
# zsh completion for pgoutbox.  Generated by tools/cli_docs.py from the
# help of pgoutbox %(version)s: do not edit.

_pgoutbox() {
    local cmd=${words[2]} prev=${words[CURRENT-1]}
    local -a w
    if (( CURRENT == 2 )); then
        w=(%(commands)s --help --version)
    else
        case $prev in
        --config) _files; return ;;
%(values)s
        esac
        if (( ! $#w )) && [[ $PREFIX == -* ]]; then
            case $cmd in
%(flags)s
            esac
        elif (( ! $#w && CURRENT == 3 )); then
            case $cmd in
%(actions)s
            esac
        fi
        if (( ! $#w )); then
            _files
            return
        fi
    fi
    compadd -- $w
}

_pgoutbox "$@"
'''


def completion_data(binary):
    """What both completions offer: the commands, each command's flags and
    actions, the values of the choice flags."""
    text, cmds = top_help(binary)
    flags, acts = {}, {}
    for name, _ in cmds:
        htext = run(binary, name, '--help')
        usage, _, _, _ = cmd_help(binary, name)
        flags[name] = sorted(set(flags_in(htext)) | {'--help', '--config'})
        a = actions(usage, name)
        if a:
            acts[name] = a
    values = {}
    for r in reference(binary):
        if r['flag'] and r['type'] == 'enum':
            values[r['flag']] = r['range'].replace(',', ' ').split()
        elif r['flag'] and r['type'] == 'bool':
            values[r['flag']] = ['on', 'off']
    return [n for n, _ in cmds], flags, acts, values


def bash(binary, output):
    cmds, flags, acts, values = completion_data(binary)
    write(output, BASH % {
        'version': version_of(binary),
        'commands': ' '.join(cmds),
        'values': '\n'.join(
            f'    {f}) COMPREPLY=($(compgen -W \'{" ".join(v)}\' -- "$cur")); '
            'return ;;' for f, v in values.items()),
        'flags': '\n'.join(
            f'        {c}) COMPREPLY=($(compgen -W \'{" ".join(v)}\' -- "$cur")) ;;'
            for c, v in flags.items()),
        'actions': '\n'.join(
            f'        {c}) COMPREPLY=($(compgen -W \'{" ".join(v)}\' -- "$cur")) ;;'
            for c, v in acts.items()) or '        *) ;;',
    })


def zsh(binary, output):
    cmds, flags, acts, values = completion_data(binary)
    write(output, ZSH % {
        'version': version_of(binary),
        'commands': ' '.join(cmds),
        'values': '\n'.join(f'        {f}) w=({" ".join(v)}) ;;'
                            for f, v in values.items()),
        'flags': '\n'.join(f'            {c}) w=({" ".join(v)}) ;;'
                           for c, v in flags.items()),
        'actions': '\n'.join(f'            {c}) w=({" ".join(v)}) ;;'
                             for c, v in acts.items()) or '            *) ;;',
    })


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == 'man':
        man(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif len(sys.argv) == 4 and sys.argv[1] == 'bash':
        bash(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == 'zsh':
        zsh(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)


if __name__ == '__main__':
    main()
