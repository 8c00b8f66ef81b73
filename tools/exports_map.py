#!/usr/bin/env python3
"""Writes the linker version script of libpgoutbox from src/lib/exports.txt.

Usage: exports_map.py exports.txt OUTPUT.map
exports.txt holds one symbol a line; '#' starts a comment and a line
[NODE] starts a version node (the first must come before any symbol).
Each later node inherits from the one before it; only the first has
"local: *;", so nothing that is not listed is exported.
"""
import re
import sys


def main():
    src, out = sys.argv[1], sys.argv[2]
    nodes = []  # [(name, [symbols])]
    seen = set()
    with open(src) as f:
        for n, line in enumerate(f, 1):
            line = line.split('#', 1)[0].strip()
            if not line:
                continue
            m = re.fullmatch(r'\[([A-Z][A-Z0-9_]*)\]', line)
            if m:
                nodes.append((m.group(1), []))
                continue
            if not re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*', line):
                sys.exit(f'{src}:{n}: "{line}" is not a symbol name')
            if not nodes:
                sys.exit(f'{src}:{n}: a [NODE] line must come first')
            if line in seen:
                sys.exit(f'{src}:{n}: {line} is listed twice')
            seen.add(line)
            nodes[-1][1].append(line)
    if not nodes:
        sys.exit(f'{src}: no version node')
    parts = ['/* Generated from src/lib/exports.txt by tools/exports_map.py. */\n']
    for i, (name, syms) in enumerate(nodes):
        body = ''.join(f'\t{s};\n' for s in syms)
        local = 'local:\n\t*;\n' if i == 0 else ''
        inherit = f' {nodes[i - 1][0]}' if i else ''
        parts.append(f'{name} {{\nglobal:\n{body}{local}}}{inherit};\n')
    with open(out, 'w') as f:
        f.write('\n'.join(parts))


if __name__ == '__main__':
    main()
