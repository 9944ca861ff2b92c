#!/usr/bin/env python3
"""
Split the counts of callgrind dumps by who spent them (contrib/icount.sh).

usage: callgrind_split.py PROGRAM MODULE_SO EMULATOR_SO DUMP...

For each dump (one thread's counts of one phase), prints one line:
  DUMP Ir_ours Ir_module Ir_emulator sys_ours sys_emulator
where, of what the benchmark program's calls into other objects cost
(inclusive: UCX, the module, the driver, the C library they call),
  emulator  is what the calls into EMULATOR_SO cost, inclusive (the
            driver's share: on a GPU it is the real driver's);
  ours      the rest: the module, UCX, and the C library they call;
  module    the instructions of MODULE_SO's own functions (self cost);
  sys_*     system calls (callgrind's sysCount, --collect-systime=yes) in
            ours and in the emulator's share.
"""
import os
import re
import sys

SUBPOS = re.compile(r'^[+-]?\d+|^\*|^0x[0-9a-fA-F]+')
# what the program calls to move data: UCX's libraries, the module (a
# libuct_*), the driver; not the C library or the loader, whose frames
# (below main) hold everything
STACK = re.compile(r'^lib(uct|ucs|ucp|ucm|cuda|cudasim)[-_.a-z0-9]*\.so')


def parse(path, program, emulator):
    """(events, self cost per object, inclusive cost of the calls from
    @program into other objects, inclusive cost of the calls into
    @emulator from other objects)"""
    names = {}
    events = []
    ob = cob = None
    self_cost = {}
    from_program = into_emulator = None
    pending_call = False
    n = 0

    def name(kind, rest):
        m = re.match(r'\((\d+)\)\s*(.*)', rest)
        if not m:
            return rest.strip()
        key = (kind, m.group(1))
        if m.group(2):
            names[key] = os.path.basename(m.group(2).strip())
        return names.get(key, '?')

    def add(acc, costs):
        for i, c in enumerate(costs):
            acc[i] += c

    with open(path) as f:
        for line in f:
            line = line.rstrip('\n')
            if line.startswith('events:'):
                events = line.split()[1:]
                n = len(events)
                from_program = [0] * n
                into_emulator = [0] * n
            elif line.startswith('ob='):
                ob, cob = name('ob', line[3:]), None
            elif line.startswith('cob='):
                cob = name('ob', line[4:])
            elif line.startswith('fn='):
                cob = None
            elif line.startswith('calls='):
                pending_call = True
            elif line and SUBPOS.match(line):
                fields = line.split()
                costs = [int(x) for x in fields[1:1 + n]]
                costs += [0] * (n - len(costs))
                if not pending_call:
                    add(self_cost.setdefault(ob, [0] * n), costs)
                    continue
                pending_call = False
                callee = cob if cob is not None else ob
                if (ob == program) and STACK.match(callee or ''):
                    add(from_program, costs)
                if (callee == emulator) and (ob != emulator):
                    add(into_emulator, costs)
    return events, self_cost, from_program, into_emulator


def main():
    program, module, emulator = (os.path.basename(a) for a in sys.argv[1:4])
    for dump in sys.argv[4:]:
        events, self_cost, ops, emu = parse(dump, program, emulator)
        ir = events.index('Ir')
        sysc = events.index('sysCount')
        mod = self_cost.get(module, [0] * len(events))
        print(dump, ops[ir] - emu[ir], mod[ir], emu[ir],
              ops[sysc] - emu[sysc], emu[sysc])


if __name__ == '__main__':
    main()
