#!/usr/bin/env python3
"""Include lint of the module (docs/architecture.md, "Layers").

The layers are read from the ```layers block of docs/architecture.md: each
line "FOLDER/N: unit unit ..." puts those units (x.c with x.h) in layer N of
FOLDER (base, cpy, ipc, ipc/broker, ipc/import, ipc/map: each folder is
checked as a layer set of its own; the folders of ipc/ share one numbering).
A unit listed as "x.h" is that header alone, in a layer of its own below x.c
(listed as "x"): the interface's and endpoint's structs sit below the lanes
that read them, their functions above (UCX's iface.h / ep.h split).
The ```folders block says, once per folder, what of the other folders its
units may include: "FOLDER: FOLDER2/unit ... FOLDER3/ ..." (FOLDER3/: any unit
of it). A unit may include:
  - only units of LOWER layers (never one of its own layer but itself),
  - of its own folder, of base/, or listed for its folder,
and every project header it includes must declare something the including
file uses (no unused includes). Every unit of the module must be listed, in
the folder where its files are.

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


def read_block(name):
    text = open(doc).read()
    block = re.search(r'```' + name + r'\n(.*?)```', text, re.S)
    if block is None:
        sys.exit('check_includes: no ```%s block in %s' % (name, doc))
    for line in block.group(1).splitlines():
        line = line.split('#', 1)[0].strip()
        if line:
            where, items = line.split(':', 1)
            yield where.strip(), items.split()


def read_layers():
    layers = {}
    for where, units in read_block('layers'):
        directory, number = where.rsplit('/', 1)
        for unit in units:
            layers[unit] = (directory, int(number))
    return layers


def read_folders():
    """FOLDER -> set of 'FOLDER2/unit' and 'FOLDER3/' it may include"""
    return {folder: set(items) for folder, items in read_block('folders')}


def same_numbering(a, b):
    """the folders of ipc/ share one numbering"""
    return a.split('/')[0] == b.split('/')[0]


def may_include(folders, directory, dep_dir, dep):
    if dep_dir in (directory, 'base'):
        return True
    allowed = folders.get(directory, set())
    return (dep_dir + '/' + dep) in allowed or (dep_dir + '/') in allowed


def main():
    layers = read_layers()
    folders = read_folders()
    errors = []
    files = {}
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

    def unit_of(name):
        """the unit of file (or include) @a name: x.h alone when listed"""
        header = name[:-2] + '.h'
        return header if name.endswith('.h') and header in layers \
            else name[:-2]

    edges = 0
    for path, text in files.items():
        directory = os.path.dirname(path)
        unit = unit_of(os.path.basename(path))
        if unit not in layers:
            errors.append('%s: unit %s is in no layer of docs/architecture.md'
                          % (path, unit))
            continue
        if layers[unit][0] != directory:
            errors.append('%s: docs/architecture.md puts %s in %s/' %
                          (path, unit, layers[unit][0]))
        used = set(IDENT.findall(strip_comments(INCLUDE.sub('', text))))
        for dep_name in INCLUDE.findall(text):
            edges += 1
            dep = unit_of(dep_name + '.h')
            if dep == unit:
                continue
            if dep not in layers:
                errors.append('%s includes %s.h, which is in no layer' %
                              (path, dep_name))
                continue
            dep_dir, dep_layer = layers[dep]
            if directory not in folders:
                errors.append('%s: folder %s/ is in no line of the folders '
                              'block of docs/architecture.md' % (path,
                                                                 directory))
            elif not may_include(folders, directory, dep_dir, dep):
                errors.append('%s includes %s/%s.h, which the folders block '
                              'of docs/architecture.md does not allow %s/' %
                              (path, dep_dir, dep_name, directory))
            elif same_numbering(dep_dir, directory) and \
                    dep_layer >= layers[unit][1]:
                errors.append('%s (layer %d) includes %s.h (layer %d): only '
                              'lower layers' % (path, layers[unit][1], dep_name,
                                                dep_layer))
            if not (declared.get(dep_name, set()) & used):
                errors.append('%s includes %s.h but uses nothing it declares'
                              % (path, dep_name))

    for message in errors:
        print('check_includes: ' + message, file=sys.stderr)
    if errors:
        return 1
    print('check_includes: %d include edges of %d files, in layer order, '
          'none unused' % (edges, len(files)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
