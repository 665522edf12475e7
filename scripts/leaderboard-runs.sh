#!/bin/sh
# Rebuilds the committed reference entries of leaderboards/ from a clean checkout: runs each
# reference agent over the CISO and FinOps catalogs, adds each run (which checks its results
# chain, labels and code), verifies each entry by re-running random trials, and rebuilds the
# tables. Usage: scripts/leaderboard-runs.sh [RUNS_DIR] (default: runs/leaderboard-<time>).
# `leaderboard add` takes runs of committed code only: commit first.
set -eu
cd "$(dirname "$0")/.."
bin=.venv/bin
out=${1:-runs/leaderboard-$(date -u +%Y%m%dT%H%M%S)}
rerun=${RERUN:-10}
mkdir -p "$out"
entries="oracle:oracle baseline:baseline noop:noop probe-constant:probe/constant
probe-leak:probe/leak probe-thrash:probe/thrash finops-heuristic:finops/heuristic"
# Every run first: adding entries changes leaderboards/, and a run of a changed tree is refused.
for entry in $entries; do
    name=${entry%%:*}
    agent=${entry#*:}
    case $agent in
        finops/*) set -- -s 'finops/*' ;;
        *) set -- -s 'ciso/*' -s 'finops/*' ;;
    esac
    $bin/itbench evaluate --agent "$agent" "$@" --workers 2 --out "$out/$name"
done
for entry in $entries; do
    name=${entry%%:*}
    rm -rf "leaderboards/runs/$name"
    $bin/itbench leaderboard add "$out/$name" --name "$name"
    $bin/itbench leaderboard verify "$name" --rerun "$rerun" --out "$out/verify-$name"
done
$bin/itbench leaderboard
