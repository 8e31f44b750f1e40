#!/usr/bin/env bash
# Builds the cargo-fuzz targets (optimised, with debug assertions and overflow
# checks as in test builds) and runs TARGET, or every target, for EXECUTIONS
# executions each, JOBS targets at a time (default 1). Prints, per target:
# executions, exec/s, coverage (libFuzzer's final cov: and ft:), corpus size,
# crashes and seconds. Exits 1 if any target crashed; the crashing inputs
# stay in fuzz/artifacts/<target>/ (replay one with
# `cargo +nightly fuzz run -O -a <target> <file>`), the corpora grow in
# fuzz/corpus/<target>/ and the logs are in fuzz/logs/ (all gitignored).
#
# FUZZ_MAX_TIME=<seconds> also stops each target after that long (whichever
# comes first; the table shows the executions reached). FUZZ_MIN_TIME=<seconds>
# instead runs each target for at least that long *and* at least EXECUTIONS
# executions: first for FUZZ_MIN_TIME seconds, then, if it has not reached
# EXECUTIONS yet, on the same corpus for the executions still missing (the
# table adds both runs up). FUZZ_PROFILE=dev
# builds unoptimised instead (much faster to compile; what CI uses to check
# that the targets build and run, not to fuzz).
#
# Needs the nightly toolchain and cargo-fuzz (see fuzz/README.md).
set -euo pipefail

usage() {
    echo "usage: fuzz/run.sh TARGET|all EXECUTIONS [JOBS]" >&2
    exit 2
}
[ $# -ge 2 ] && [ $# -le 3 ] || usage
target=$1 runs=$2 jobs=${3:-1}
[[ $runs =~ ^[0-9]+$ ]] && [[ $jobs =~ ^[1-9][0-9]*$ ]] || usage

cd "$(dirname "$0")/.."
all=$(cargo +nightly fuzz list)
if [ "$target" = all ]; then
    targets=$all
elif grep -qx -- "$target" <<<"$all"; then
    targets=$target
else
    echo "unknown target '$target'; targets: $(echo $all)" >&2
    exit 2
fi

case ${FUZZ_PROFILE:-release} in
release) flags=(-O -a) ;;
dev) flags=(-D) ;;
*) usage ;;
esac
cargo +nightly fuzz build "${flags[@]}"

mkdir -p fuzz/logs
touch fuzz/logs/.start
executed() { grep -o 'stat::number_of_executed_units: *[0-9]*' "$1" | tail -1 | grep -o '[0-9]*$' || echo 0; }
fuzz_once() { # target log libfuzzer-limit...
    local t=$1 log=$2
    shift 2
    cargo +nightly fuzz run "${flags[@]}" "$t" -- \
        -print_final_stats=1 -timeout=30 "$@" >>"$log" 2>&1
}
run_one() {
    local t=$1 start rc=0 log=fuzz/logs/$1.log done_runs=0
    start=$(date +%s)
    : >"$log"
    if [ -n "${FUZZ_MIN_TIME:-}" ]; then
        fuzz_once "$t" "$log" -max_total_time="$FUZZ_MIN_TIME" || rc=$?
        done_runs=$(executed "$log")
        if [ "$rc" -eq 0 ] && [ "$done_runs" -lt "$runs" ]; then
            fuzz_once "$t" "$log" -runs=$((runs - done_runs)) || rc=$?
            done_runs=$((done_runs + $(executed "$log")))
        fi
    else
        fuzz_once "$t" "$log" -runs="$runs" \
            ${FUZZ_MAX_TIME:+-max_total_time=$FUZZ_MAX_TIME} || rc=$?
        done_runs=$(executed "$log")
    fi
    echo "$rc $(($(date +%s) - start)) $done_runs" >"fuzz/logs/$t.status"
}

# Crash artifacts before this run, so only new ones are reported.
declare -A before
for t in $targets; do
    mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
    before[$t]=$(find "fuzz/artifacts/$t" -type f ! -name 'slow-unit-*' | wc -l)
done

for t in $targets; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
        wait -n || true
    done
    run_one "$t" &
done
wait

last() { grep -o "$1: [0-9]*" "$2" | tail -1 | grep -o '[0-9]*$' || echo -; }

failed=0
printf '%-20s %12s %8s %6s %7s %7s %7s %7s\n' \
    target executions exec/s cov ft corpus crashes seconds
for t in $targets; do
    log=fuzz/logs/$t.log
    read -r rc secs done_runs <"fuzz/logs/$t.status"
    now=$(find "fuzz/artifacts/$t" -type f ! -name 'slow-unit-*' | wc -l)
    crashes=$((now - ${before[$t]}))
    if [ "$rc" -ne 0 ] && [ "$crashes" -eq 0 ]; then
        crashes="?"  # failed without an artifact: see the log
    fi
    printf '%-20s %12s %8s %6s %7s %7s %7s %7s\n' "$t" \
        "$done_runs" "$((done_runs / (secs > 0 ? secs : 1)))" \
        "$(last cov "$log")" "$(last ft "$log")" \
        "$(find "fuzz/corpus/$t" -type f | wc -l)" "$crashes" "$secs"
    if [ "$rc" -ne 0 ] || [ "$crashes" != 0 ]; then
        failed=1
        echo "  $t failed (exit $rc): fuzz/logs/$t.log" >&2
        grep -m3 -E 'panicked at|ERROR: libFuzzer|SUMMARY' "$log" | sed 's/^/    /' >&2 || true
        find "fuzz/artifacts/$t" -type f ! -name 'slow-unit-*' -newer fuzz/logs/.start |
            sed 's/^/    artifact: /' >&2
    fi
done
exit "$failed"
