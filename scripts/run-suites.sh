#!/bin/sh
# Runs the test suites, one pytest process each (every domain's tests are a package named
# `tests`). Usage: run-suites.sh PYTHON SERIAL_SUITES... -- LANES... (a suite is one word, or
# several in quotes: paths and pytest options, split on spaces; a lane is one suite, or several
# joined by ` ; `, run one after another).
# The serial suites run one after another, alone (live SRE shops are sensitive to a busy
# machine); then the lanes run side by side, each with its output kept apart and printed whole
# when it ends. Exits 1 when any suite fails.
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

# Runs the suites of lane $1 one after another; exits 1 when any of them fails.
lane() {
    lane_rc=0
    old_ifs=$IFS
    IFS=';'
    set -f
    # shellcheck disable=SC2086 # a lane is split into its suites on purpose
    set -- $1
    IFS=$old_ifs
    for suite in "$@"; do
        case $suite in *[![:space:]]*) ;; *) continue ;; esac
        # shellcheck disable=SC2086
        "$py" -m pytest --durations=10 --tb=short $suite || lane_rc=1
    done
    set +f
    return $lane_rc
}

i=0
for s in "$@"; do
    i=$((i + 1))
    ( lane "$s" >"$logs/$i.log" 2>&1; echo $? >"$logs/$i.rc" ) &
done
wait
i=0
for s in "$@"; do
    i=$((i + 1))
    cat "$logs/$i.log"
    [ "$(cat "$logs/$i.rc")" = 0 ] || rc=1
done
exit $rc
