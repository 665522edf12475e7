#!/bin/sh
# Rebuilds the committed reference entries of leaderboards/ from a clean checkout: runs each
# reference agent over the CISO and FinOps catalogs (and the FinOps heuristic of benchmarks/agents
# over FinOps), adds each run (which checks its results chain, labels and code), verifies each
# entry by re-running random trials, and rebuilds the tables. Usage: scripts/leaderboard-runs.sh [RUNS_DIR] (default: runs/leaderboard-<time>).
# `leaderboard add` takes runs of committed code only: commit first.
set -eu
cd "$(dirname "$0")/.."
bin=.venv/bin
out=${1:-runs/leaderboard-$(date -u +%Y%m%dT%H%M%S)}
rerun=${RERUN:-10}
mkdir -p "$out"
entries="oracle:oracle baseline:baseline noop:noop probe-constant:probe/constant
probe-leak:probe/leak probe-thrash:probe/thrash"
# Every run first: adding entries changes leaderboards/, and a run of a changed tree is refused.
for entry in $entries; do
    name=${entry%%:*}
    agent=${entry#*:}
    $bin/itbench evaluate --agent "$agent" -s 'ciso/*' -s 'finops/*' --workers 2 --out "$out/$name"
done
heuristic="--plugin finops_heuristic"
PYTHONPATH=benchmarks/agents $bin/itbench evaluate $heuristic --agent finops/heuristic \
    -s 'finops/*' --workers 2 --out "$out/finops-heuristic"
for entry in $entries finops-heuristic:finops/heuristic; do
    name=${entry%%:*}
    rm -rf "leaderboards/runs/$name"
    PYTHONPATH=benchmarks/agents $bin/itbench leaderboard add "$out/$name" --name "$name" $heuristic
    PYTHONPATH=benchmarks/agents $bin/itbench leaderboard verify "$name" --rerun "$rerun" \
        --out "$out/verify-$name" $heuristic
done
$bin/itbench leaderboard
