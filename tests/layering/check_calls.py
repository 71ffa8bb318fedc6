#!/usr/bin/env python3
"""check_calls.py: the calls between the files of a static library go one way. Given its files
in order, bottom first, each object may use (an undefined symbol another member defines) only
members of lower ranks; a call upward, or between two files of one rank, fails and is named.

usage: check_calls.py NM LIBRARY.a RANKS
  RANKS: file names (without .c) bottom first, '|' between ranks, ',' within one.
"""
import subprocess
import sys


def members(nm, archive):
    """{member name: (defined, undefined)} global symbols per object of the archive."""
    out = subprocess.run([nm, "-g", "-A", archive], capture_output=True, text=True,
                         check=True).stdout
    found = {}
    for line in out.splitlines():
        where, _, rest = line.rpartition(": ")  # archive:member.o: [value] type symbol
        if not where:
            where, rest = line.rsplit(":", 1)
        member = where.rsplit(":", 1)[-1].split(".")[0]
        parts = rest.split()
        defined, undefined = found.setdefault(member, (set(), set()))
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBRCV":
            defined.add(parts[2])
    return found


def main():
    nm, archive, ranks = sys.argv[1:4]
    rank = {name: i for i, group in enumerate(ranks.split("|")) for name in group.split(",")}
    objs = members(nm, archive)
    unranked = sorted(set(objs) - set(rank))
    missing = sorted(set(rank) - set(objs))
    if unranked or missing:
        sys.exit("check_calls: place every file in the order (unranked: %s; no such file: %s)" %
                 (", ".join(unranked) or "-", ", ".join(missing) or "-"))
    owner = {sym: name for name, (defined, _) in objs.items() for sym in defined}
    bad = ["%s uses %s of %s" % (name, sym, owner[sym])
           for name, (_, undefined) in sorted(objs.items()) for sym in sorted(undefined)
           if owner.get(sym, name) != name and rank[owner[sym]] >= rank[name]]
    print("\n".join(bad + ["%d files, %d calls against the order" % (len(objs), len(bad))]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
