#!/bin/sh
# Runs the test suites, one pytest process each (every domain's tests are a package named
# `tests`). Usage: run-suites.sh PYTHON SERIAL_SUITES... -- PARALLEL_SUITES... (a suite is one
# word, or several in quotes: paths and pytest options, split on spaces).
# The serial suites run one after another (the SRE shops are sensitive to a busy machine); the
# parallel ones (moto servers, Rego engines) run side by side, each with its output kept apart
# and printed whole when it ends; each with a base temporary directory of its own (pytest's
# default one keeps only the last three runs' directories, so processes started side by side
# can delete each other's). Exits 1 when any suite fails.
set -u
py=$1
shift
rc=0
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    # shellcheck disable=SC2086 # a suite is split into its words on purpose
    "$py" -m pytest --durations=10 --tb=short $1 || rc=1
    shift
done
[ $# -gt 0 ] && shift
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
i=0
for s in "$@"; do
    i=$((i + 1))
    # shellcheck disable=SC2086
    ( "$py" -m pytest --durations=10 --tb=short --basetemp="$logs/tmp-$i" $s >"$logs/$i.log" 2>&1
      echo $? >"$logs/$i.rc" ) &
done
wait
i=0
for s in "$@"; do
    i=$((i + 1))
    cat "$logs/$i.log"
    [ "$(cat "$logs/$i.rc")" = 0 ] || rc=1
done
exit $rc
