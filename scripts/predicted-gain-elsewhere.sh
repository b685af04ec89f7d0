#!/usr/bin/env bash
# parprof's "× faster if fixed" checked against the fix on another machine (one with many cores
# and no Rust toolchain): what `cargo bench --bench predicted_gain` does here, from executables
# built here.
#
#   scripts/predicted-gain-elsewhere.sh pack [DIR]
#       here: builds examples/gain_pairs twice — plain (`cargo build --release`) and for
#       profiling (`cargo parprof build`, rayon-core hooked) — cargo-parprof and its
#       report_phases example, and copies the four executables to DIR (default target/gain-pack)
#   scripts/predicted-gain-elsewhere.sh run [DIR] [WORKERS] [ROUNDS]
#       there: for each pair, ROUNDS (default 5) plain runs of the bad and the fixed side,
#       alternated, and 3 recordings of the bad side with `cargo-parprof record`; prints the
#       predicted gain, the real gain and predicted ÷ real (goal 0.85–1.18). With 8 workers or
#       more, first 5 recordings of a 16 M-key quicksort joined down to single elements, each
#       of which must be too_fine_granularity, with what profiling costs it, and where the
#       time after the program went in the first (report_phases). WORKERS defaults
#       to the machine's CPUs. Needs python3 (to read report.json) and perf_event_open
#       (kernel.perf_event_paranoid <= 2). With KEEP set to a
#       folder, each recording's report.json is copied there, and every run's work time
#       (plain, and the profiling build run without the profiler) is written to KEEP/times.tsv.
#   scripts/predicted-gain-elsewhere.sh breakdown [DIR] [KEYS] [WORKERS]
#       there: where the whole `cargo-parprof record` of the quicksort of KEYS keys (default
#       16 M) joined down to single elements goes, 3 rounds: the plain process, the profiling
#       build run alone (its hooks, no profiler), the record, each with the sort's own time,
#       and the phases after the program again on the run folder (report_phases).
set -euo pipefail

mode="${1:-}"
dir="${2:-target/gain-pack}"

pack() {
    local repo
    repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    cd "$repo"
    mkdir -p "$dir"
    cargo build --quiet --release --example gain_pairs
    cp target/release/examples/gain_pairs "$dir/gain_pairs-plain"
    cp "$(cargo parprof build --example gain_pairs | tail -n 1)" "$dir/gain_pairs-hooked"
    cargo build --quiet --release -p cargo-parprof --bin cargo-parprof --example report_phases
    # Their own symbols are not needed to record; the programs keep theirs (line tables).
    strip -o "$dir/cargo-parprof" target/release/cargo-parprof
    strip -o "$dir/report_phases" target/release/examples/report_phases
    du -sh "$dir"/*
}

# The work time a run of BUILD (plain or hooked) printed, in seconds; kept in KEEP/times.tsv.
work_s() {
    local build="$1" s
    shift
    s="$("$dir/gain_pairs-$build" "$@" | sed -n 's/^work_ns=//p' | awk '{ printf "%.6f", $1 / 1e9 }')"
    [[ -n "${KEEP:-}" ]] && printf '%s\t%s\t%s\n' "$build" "$*" "$s" >>"$KEEP/times.tsv"
    echo "$s"
}

# The predicted gain of a run folder: its longest region's first diagnosis of the schedule
# (oversubscription aside), 1.0 without one; the diagnosis' code; the `with_min_len(n)` its
# advice gives (256 without one).
predicted() {
    python3 - "$1/report.json" <<'EOF'
import json, re, sys
regions = json.load(open(sys.argv[1])).get("regions", [])
longest = max(regions, key=lambda r: r["elapsed_ns"], default=None)
ds = [d for d in (longest or {}).get("diagnoses", []) if d["code"] != "oversubscription"]
n = re.search(r"with_min_len\((\d+)\)", ds[0]["advice"]) if ds else None
print(f'{ds[0]["impact"]["speedup_if_fixed"]:.3f} {ds[0]["code"]}' if ds else "1.000 none",
      n.group(1) if n else 256)
EOF
}

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# The many-core checks of a 16 M-key quicksort joined down to single elements, 5 recordings,
# each before a plain run (the first recording is the machine's first): too_fine_granularity in
# each, and what profiling costs it — the sort's own time under the profiler ÷ plain (goal
# ≤ 1.15) and the whole `cargo-parprof record` ÷ the plain process (goal ≤ 2.5).
many_core() {
    local workers="$1" out="$2" args=(quicksort bad 16000000 "$1")
    echo "16 M-key quicksort to single elements on $workers workers, 5 recordings:"
    for i in 1 2 3 4 5; do
        local t0 t1 t2 plain_out rec_out
        t0="$(date +%s%N)"
        rec_out="$("$dir/cargo-parprof" record -o "$out/sort-$i" -- \
            "$dir/gain_pairs-hooked" "${args[@]}" 2>/dev/null)"
        t1="$(date +%s%N)"
        plain_out="$("$dir/gain_pairs-plain" "${args[@]}")"
        t2="$(date +%s%N)"
        [[ -n "${KEEP:-}" ]] && cp "$out/sort-$i/report.json" "$KEEP/sort-$workers-$i.json"
        python3 - "$out/sort-$i/report.json" "$rec_out" "$plain_out" "$((t1 - t0))" \
            "$((t2 - t1))" "$(du -sm "$out/sort-$i" | cut -f1)" <<'EOF'
import json, sys
r = max(json.load(open(sys.argv[1]))["regions"], key=lambda r: r["elapsed_ns"])
work = [int(l.split("=")[1]) for out in sys.argv[2:4] for l in out.splitlines()
        if l.startswith("work_ns=")]
record_ns, plain_ns, mb = int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
s, n = r["state_ns"], lambda k: r["state_ns"][k]
total = sum(s.values())
codes = [d["code"] for d in r["diagnoses"]]
print(f'  {"too_fine_granularity" in codes and "too fine" or "NOT too fine"}: {", ".join(codes) or "none"};'
      f' LQ {n("LQ") / total:.1%}, GS {n("GS") / total:.1%}, sched {r["sched"]["sched_ns"] / total:.1%}'
      f' (±{r["sched"]["sched_uncertainty_ns"] / total:.1%}), hooks taken out {sum(r["hook_ns"].values()) / 1e6:.1f} ms;'
      f' sort {work[0] / 1e6:.0f} ms profiled, {work[1] / 1e6:.0f} ms plain: {work[0] / work[1]:.2f}x;'
      f' command {record_ns / 1e9:.2f} s, plain process {plain_ns / 1e9:.2f} s: {record_ns / plain_ns:.2f}x;'
      f' folder {mb} MB')
EOF
    done
    # Where the time after the program went, phase by phase, on a copy of the first recording.
    echo "after the program, the first recording's phases again (report_phases):"
    "$dir/report_phases" "$out/sort-1" | sed 's/^/  /'
}

run() {
    local workers="${3:-$(nproc)}" rounds="${4:-5}" out
    out="$(mktemp -d)"
    [[ -n "${KEEP:-}" ]] && mkdir -p "$KEEP"
    # Sizes for many workers: each plain run a few tenths of a second; for a few workers,
    # those of `cargo bench --bench predicted_gain`.
    local -A size=([quicksort]=16000000 [map_reduce]=8000000 [nested]=1600000
        [imbalance]=3 [spawn_loop]=64000)
    if ((workers <= 4)); then
        size=([quicksort]=4000000 [map_reduce]=2000000 [nested]=800000 [imbalance]=3
            [spawn_loop]=8000)
    fi
    ((workers >= 8)) && many_core "$workers" "$out"
    echo "pair         predicted  real (rounds)                  predicted ÷ real  diagnosis"
    for pair in quicksort map_reduce nested imbalance spawn_loop; do
        local gains=() preds=() code="" min_len=256
        for i in 1 2 3; do
            "$dir/cargo-parprof" record -o "$out/$pair-$i" -- \
                "$dir/gain_pairs-hooked" "$pair" bad "${size[$pair]}" "$workers" >/dev/null 2>&1
            read -r p code min_len < <(predicted "$out/$pair-$i")
            [[ -n "${KEEP:-}" ]] && cp "$out/$pair-$i/report.json" "$KEEP/$pair-$workers-$i.json"
            preds+=("$p")
        done
        # The fixed map_reduce takes the last recording's advised `with_min_len`.
        for ((i = 0; i < rounds; i++)); do
            local bad fix
            bad="$(work_s plain "$pair" bad "${size[$pair]}" "$workers" "$min_len")"
            fix="$(work_s plain "$pair" fix "${size[$pair]}" "$workers" "$min_len")"
            if [[ -n "${KEEP:-}" ]]; then
                work_s hooked "$pair" bad "${size[$pair]}" "$workers" "$min_len" >/dev/null
                work_s hooked "$pair" fix "${size[$pair]}" "$workers" "$min_len" >/dev/null
            fi
            gains+=("$(awk -v b="$bad" -v f="$fix" 'BEGIN { printf "%.3f", b / f }')")
        done
        local real pred
        real="$(printf '%s\n' "${gains[@]}" | median)"
        pred="$(printf '%s\n' "${preds[@]}" | median)"
        printf '%-12s %-10s %-30s %-17s %s\n' "$pair" "$pred" "$real (${gains[*]})" \
            "$(awk -v p="$pred" -v r="$real" 'BEGIN { q = p / r; printf "%.2f %s", q, (q >= 0.85 && q <= 1.18) ? "ok" : "OUT" }')" \
            "$code (predicted ${preds[*]})"
    done
    echo "run folders: $out"
}

# Milliseconds between two `date +%s%N` readings.
ms() { echo $((($2 - $1) / 1000000)); }

# The sort's own time a run printed (`work_ns=`), in ms.
sort_ms() { awk -F= '/^work_ns=/ { printf "%d", $2 / 1e6 }' <<<"$1"; }

breakdown() {
    local keys="${3:-16000000}" workers="${4:-$(nproc)}" out t0 t1 t2 t3 plain hooked recorded
    out="$(mktemp -d)"
    local args=(quicksort bad "$keys" "$workers")
    for i in 1 2 3; do
        t0="$(date +%s%N)"
        plain="$("$dir/gain_pairs-plain" "${args[@]}")"
        t1="$(date +%s%N)"
        hooked="$("$dir/gain_pairs-hooked" "${args[@]}")"
        t2="$(date +%s%N)"
        recorded="$("$dir/cargo-parprof" record -o "$out/sort-$i" -- \
            "$dir/gain_pairs-hooked" "${args[@]}" 2>/dev/null)"
        t3="$(date +%s%N)"
        echo "round $i: plain $(ms "$t0" "$t1") ms (sort $(sort_ms "$plain")), hooked alone" \
            "$(ms "$t1" "$t2") ms (sort $(sort_ms "$hooked")), record $(ms "$t2" "$t3") ms" \
            "(sort $(sort_ms "$recorded"))"
        "$dir/report_phases" "$out/sort-$i" | sed -n '3,9p' | tr -s ' ' | paste -sd ';' | sed 's/^/  /'
    done
}

case "$mode" in
    pack) pack ;;
    run) run "$@" ;;
    breakdown) breakdown "$@" ;;
    *) sed -n '2,22p' "$0"; exit 2 ;;
esac
