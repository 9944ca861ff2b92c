#!/usr/bin/env python3
"""Shape of the module's code (docs/architecture.md, "Code shape").

Prints, for src/uct/cuda_ipc_ns:
  - code lines (neither blank nor comment) per folder, .c and .h together;
  - the functions longer than 60 and than 100 code lines (signature to
    closing brace), with file and length;
  - exported names whose prefix is not their file's: a function defined
    without `static` in x.c, and a type (typedef or struct tag) defined in
    x.h, must start with uct_cuda_ipc_ns_<x> (uct_cuda_cpy_ns_<x> in cpy/),
    <x> being the file name less its cuda_ipc_ns_ (cuda_cpy_ns_) prefix;
  - type names defined in more than one file.

Usage: check_shape.py [--check] [TOP_SRCDIR]
With --check, exit status 1 when a function is over 100 lines, an exported
name has another file's prefix or a type name is defined twice.
"""
import collections
import os
import re
import sys

LONG, TOO_LONG = 60, 100

# exported names the file prefix rule does not apply to: names UCX or the
# loader looks up by a fixed spelling, and UCS_CLASS_* expansions
EXEMPT = re.compile(r'^(uct_cuda_(?:ipc|cpy)_ns_(?:component|md_component|'
                    r'tl|init|cleanup)\b|ucs_|uct_[a-z_]*_(?:t_(?:init|'
                    r'cleanup|new|delete|class)|_t)\b)')


def strip_comments(text):
    """Comments replaced by spaces, newlines kept (line numbers hold)."""
    def blank(match):
        return re.sub(r'[^\n]', ' ', match.group(0))
    return re.sub(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"',
                  lambda m: blank(m) if not m.group(0).startswith('"')
                  else m.group(0), text, flags=re.S)


def code_lines(text):
    return sum(1 for line in strip_comments(text).splitlines()
               if line.strip())


FUNC_NAME = re.compile(r'([A-Za-z_]\w*)\s*\(')
CLASS_FUNC = re.compile(r'\b(UCS_CLASS_(?:INIT|CLEANUP)_FUNC)\s*\(\s*(\w+)')


def functions(text):
    """(name, static, first line, code length) of each definition."""
    lines = strip_comments(text).splitlines()
    result = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith('{'):
            i += 1
            continue
        # the signature: back to the line after a blank one, a ';', a '}'
        # or a preprocessor line
        start = i
        while start > 0:
            prev = lines[start - 1].rstrip()
            if (not prev.strip() or prev.endswith((';', '}')) or
                    prev.lstrip().startswith('#')):
                break
            start -= 1
        header = ' '.join(l.strip() for l in lines[start:i])
        end = i + 1
        while end < len(lines) and not lines[end].startswith('}'):
            end += 1
        if header.startswith(('typedef', 'struct', 'union', 'enum')) or \
                '=' in header.split('(')[0] or '(' not in header:
            i = end + 1
            continue
        match = CLASS_FUNC.search(header)
        if match:
            name = '%s(%s)' % (match.group(1), match.group(2))
        else:
            match = FUNC_NAME.search(header)
            name = match.group(1) if match else header
            # a macro around the name (UCS_PROFILE_FUNC(ret, name, ...))
            if name.isupper() or name.startswith('UCS_'):
                inner = FUNC_NAME.findall(header)
                args = re.search(r'\(\s*[^,]+,\s*(\w+)', header)
                name = args.group(1) if args else name
        length = sum(1 for l in lines[start:end + 1] if l.strip())
        static = bool(re.match(r'\s*static\b', header)) or \
            'UCS_CLASS' in header
        result.append((name, static, start + 1, length))
        i = end + 1
    return result


TYPEDEF_END = re.compile(r'^\}\s*(\w+)\s*;', re.M)
TYPEDEF_LINE = re.compile(r'^typedef\b[^;{]*?\b(\w+)\s*;', re.M)
TYPEDEF_FPTR = re.compile(r'^typedef\b[^;{]*\(\s*\*\s*(\w+)\s*\)', re.M)
STRUCT_TAG = re.compile(r'^\s*(?:typedef\s+)?(?:struct|union|enum)\s+(\w+)'
                        r'\s*\{', re.M)


def types(text):
    code = strip_comments(text)
    names = []
    for pattern in (TYPEDEF_END, TYPEDEF_LINE, TYPEDEF_FPTR):
        names += [('type', n) for n in pattern.findall(code)]
    names += [('struct', n) for n in STRUCT_TAG.findall(code)]
    return names


def unit_prefix(path):
    base = os.path.basename(path)[:-2]
    for family in ('cuda_ipc_ns_', 'cuda_cpy_ns_'):
        if base.startswith(family):
            return 'uct_' + family + base[len(family):]
    return None


def prefix_ok(name, prefix):
    return name == prefix or name.startswith(prefix + '_') or \
        name == prefix + '_t'


def main():
    args = [a for a in sys.argv[1:] if a != '--check']
    check = '--check' in sys.argv[1:]
    top = args[0] if args else \
        os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
    module = os.path.join(top, 'src', 'uct', 'cuda_ipc_ns')

    files = {}
    for root, _, names in sorted(os.walk(module)):
        for name in sorted(names):
            if name.endswith(('.c', '.h')):
                path = os.path.join(root, name)
                files[os.path.relpath(path, module)] = open(path).read()

    print('code lines (no blank, no comment) per folder:')
    per_folder = collections.OrderedDict()
    for path, text in files.items():
        folder = os.path.dirname(path) or '.'
        per_folder[folder] = per_folder.get(folder, 0) + code_lines(text)
    for folder in sorted(per_folder):
        print('  %-12s %6d' % (folder + '/', per_folder[folder]))
    print('  %-12s %6d' % ('total', sum(per_folder.values())))

    funcs = []
    for path, text in files.items():
        for name, static, line, length in functions(text):
            funcs.append((length, name, path, line, static))
    funcs.sort(key=lambda f: (-f[0], f[2], f[1]))
    long_funcs = [f for f in funcs if f[0] > LONG]
    too_long = [f for f in funcs if f[0] > TOO_LONG]
    print('functions over %d code lines: %d, over %d: %d' %
          (LONG, len(long_funcs), TOO_LONG, len(too_long)))
    for length, name, path, line, _ in long_funcs:
        print('  %4d %s %s:%d' % (length, name, path, line))

    errors = []
    misnamed = []
    for path, text in files.items():
        prefix = unit_prefix(path)
        if prefix is None:
            continue
        if path.endswith('.c'):
            for name, static, line, _ in functions(text):
                if not static and not EXEMPT.match(name) and \
                        not prefix_ok(name, prefix):
                    misnamed.append('%s:%d function %s' % (path, line, name))
        else:
            for kind, name in types(text):
                if not prefix_ok(name, prefix) and not EXEMPT.match(name):
                    misnamed.append('%s %s %s' % (path, kind, name))
    print('exported names without their file\'s prefix: %d (%d functions, '
          '%d types)' % (len(misnamed),
                         sum(' function ' in m for m in misnamed),
                         sum(' function ' not in m for m in misnamed)))
    for entry in misnamed:
        print('  ' + entry)

    where = collections.defaultdict(set)
    for path, text in files.items():
        for kind, name in types(text):
            where[(kind, name)].add(path)
    twice = sorted((k, n, sorted(p)) for (k, n), p in where.items()
                   if len(p) > 1)
    print('type names defined in more than one file: %d' % len(twice))
    for kind, name, paths in twice:
        print('  %s %s: %s' % (kind, name, ' '.join(paths)))

    if check and (too_long or misnamed or twice):
        print('check_shape: %d functions over %d lines, %d misnamed exports, '
              '%d types defined twice' % (len(too_long), TOO_LONG,
                                           len(misnamed), len(twice)),
              file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
