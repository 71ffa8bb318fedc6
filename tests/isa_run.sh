#!/bin/sh
# isa_run.sh LEVEL OXIDIZE TEST: runs TEST with OX_CPU_ISA=LEVEL, so the kernel and model tests
# cover every instruction-set level this CPU has; exits 77 (skipped) for a level it lacks, and
# for the level it picks by itself, which the plain run of TEST covers already.
level=$1 oxidize=$2
shift 2
if ! OX_CPU_ISA="$level" "$oxidize" --version | grep -qx "isa: $level"; then
    echo "this CPU has no $level: skipped"
    exit 77
fi
if env -u OX_CPU_ISA "$oxidize" --version | grep -qx "isa: $level"; then
    echo "$level is this CPU's own level, which the plain run tests: skipped"
    exit 77
fi
OX_CPU_ISA="$level" exec "$@"
