#!/usr/bin/env python3
"""Include lint of the module (docs/architecture.md, "Layers").

The layers are read from the ```layers block of docs/architecture.md: each
line "DIR/N: unit unit ..." puts those units (x.c with x.h) in layer N of
DIR (a top directory: units of ipc/broker/ are in ipc/). A unit may include:
  - only units of LOWER layers (never one of its own layer but itself),
  - in its own directory or in base/ (ipc/ and cpy/ never include each
    other; base/ includes only base/),
and every project header it includes must declare something the including
file uses (no unused includes). Every unit of the module must be listed.

Usage: check_includes.py [TOP_SRCDIR]      exit status 1 on a violation
"""
import os
import re
import sys

top = sys.argv[1] if len(sys.argv) > 1 else \
    os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
module = os.path.join(top, 'src', 'uct', 'cuda_ipc_ns')
doc = os.path.join(top, 'docs', 'architecture.md')

INCLUDE = re.compile(r'^#\s*include\s*"(cuda_(?:ipc|cpy)_ns_\w+)\.h"', re.M)
IDENT = re.compile(r'\b[A-Za-z_]\w*\b')
DECLS = [
    re.compile(r'^#\s*define\s+(\w+)', re.M),
    re.compile(r'^\}\s*(\w+)\s*;', re.M),
    re.compile(r'^typedef\b[^;{]*?\b(\w+)\s*;', re.M),
    re.compile(r'^typedef\b[^;{]*\(\s*\*\s*(\w+)\s*\)', re.M),
    re.compile(r'^(?:static\s+inline\s+|static\s+UCS_F_ALWAYS_INLINE\s+)?'
               r'[\w \*]*?\b(uct_\w+)\s*\(', re.M),
    re.compile(r'^(uct_\w+)\s*\(', re.M),
    re.compile(r'^extern\b[^;]*?\b(\w+)\s*(?:\[\s*\])?\s*;', re.M),
    re.compile(r'^\s+(UCT_[A-Z0-9_]+)\s*(?:=[^,\n]*)?,?\s*(?:/\*.*)?$', re.M),
    re.compile(r'^\s*(?:typedef\s+)?struct\s+(\w+)\s*\{', re.M),
    re.compile(r'^UCS_CLASS_DECLARE\w*\((\w+)', re.M),
]


def strip_comments(text):
    text = re.sub(r'/\*.*?\*/', ' ', text, flags=re.S)
    return re.sub(r'//[^\n]*', ' ', text)


def read_layers():
    text = open(doc).read()
    block = re.search(r'```layers\n(.*?)```', text, re.S)
    if block is None:
        sys.exit('check_includes: no ```layers block in ' + doc)
    layers = {}
    for line in block.group(1).splitlines():
        line = line.split('#', 1)[0].strip()
        if not line:
            continue
        where, units = line.split(':', 1)
        directory, number = where.strip().split('/')
        for unit in units.split():
            layers[unit] = (directory, int(number))
    return layers


def main():
    layers = read_layers()
    errors = []
    files = {}
    # a unit's directory is the top one (ipc/broker/x.c is in ipc/)
    for directory in ('base', 'ipc', 'cpy'):
        for root, _, names in sorted(os.walk(os.path.join(module, directory))):
            for name in sorted(names):
                if name.endswith(('.c', '.h')):
                    path = os.path.join(root, name)
                    files[os.path.relpath(path, module)] = open(path).read()

    declared = {}
    for path, text in files.items():
        if path.endswith('.h'):
            code = strip_comments(text)
            names = set()
            for pattern in DECLS:
                names.update(pattern.findall(code))
            declared[os.path.basename(path)[:-2]] = names

    edges = 0
    for path, text in files.items():
        directory = path.split(os.sep)[0]
        unit = os.path.basename(path)[:-2]
        if unit not in layers:
            errors.append('%s: unit %s is in no layer of docs/architecture.md'
                          % (path, unit))
            continue
        if layers[unit][0] != directory:
            errors.append('%s: docs/architecture.md puts %s in %s/' %
                          (path, unit, layers[unit][0]))
        used = set(IDENT.findall(strip_comments(INCLUDE.sub('', text))))
        for dep in INCLUDE.findall(text):
            edges += 1
            if dep == unit:
                continue
            if dep not in layers:
                errors.append('%s includes %s.h, which is in no layer' %
                              (path, dep))
                continue
            dep_dir, dep_layer = layers[dep]
            if dep_dir not in (directory, 'base'):
                errors.append('%s includes %s/%s.h: %s/ may include only '
                              '%s/ and base/' % (path, dep_dir, dep,
                                                 directory, directory))
            elif dep_dir == directory and dep_layer >= layers[unit][1]:
                errors.append('%s (layer %d) includes %s.h (layer %d): only '
                              'lower layers' % (path, layers[unit][1], dep,
                                                dep_layer))
            if not (declared.get(dep, set()) & used):
                errors.append('%s includes %s.h but uses nothing it declares'
                              % (path, dep))

    for message in errors:
        print('check_includes: ' + message, file=sys.stderr)
    if errors:
        return 1
    print('check_includes: %d include edges of %d files, in layer order, '
          'none unused' % (edges, len(files)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
