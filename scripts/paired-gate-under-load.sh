#!/usr/bin/env bash
# The paired pull-request gate on a machine whose load comes and goes: while another program
# switches a CPU-bound load on and off, `cargo parprof diff --base REV --head REV --bin twelve
# --fail-above 10` compares, N times each,
#
#   - a head that changes a comment only: every row `slower` or `faster` is a false verdict,
#     and every exit code but 0 a false alarm of the gate;
#   - a head whose probe `p07` does 10% more work: counted when `p07` is `slower` with its
#     change within +5..+20%; any other row flagged is a false verdict;
#
# and prints the wall time of each comparison (the first one builds both commits; the others
# rebuild only the program). The program (12 probes of equal fixed work, parprof-rt by path) is
# the one of tests/paired_diff_e2e.rs, in a git repository made here.
#
#   scripts/paired-gate-under-load.sh [N]        N comparisons of each kind (default 10)
#
#   PARPROF=PATH      the cargo-parprof executable (default: this checkout's, built with cargo)
#   LOAD_THREADS=K    busy loops while the load is on (default 1: one of two cores)
#   LOAD_PERIOD=S     seconds on, then seconds off (default 3)
#   BUDGET=S          the diff's --budget (default 120)
#   KEEP=DIR          keep the repository and the diffs there (default: a temporary folder)
set -euo pipefail

n="${1:-10}"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
load_threads="${LOAD_THREADS:-1}" load_period="${LOAD_PERIOD:-3}" budget="${BUDGET:-120}"
work="${KEEP:-$(mktemp -d)}"
mkdir -p "$work"
[[ -n "${KEEP:-}" ]] || trap 'rm -rf "$work"' EXIT

parprof="${PARPROF:-}"
if [[ -z "$parprof" ]]; then
    cargo build --quiet --manifest-path "$repo_root/Cargo.toml" -p cargo-parprof --bin cargo-parprof
    parprof="$repo_root/target/debug/cargo-parprof"
fi

# The program: probes p01 … p12 of fixed work each; p07's work is $1, the comment above main $2.
program() {
    local p07_work="$1" comment="$2" calls=()
    cat <<'EOF'
use parprof_rt::probe;
use std::hint::black_box;

const UNIT: u64 = 6_000_000;

fn work(iterations: u64) -> u64 {
    let mut x = 1u64;
    for _ in 0..iterations {
        x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407));
    }
    x
}
EOF
    for i in $(seq -w 1 12); do
        local amount=UNIT
        [[ "$i" == 07 ]] && amount="$p07_work"
        printf '\n#[probe]\nfn p%s() -> u64 {\n    work(%s)\n}\n' "$i" "$amount"
        calls+=("p$i()")
    done
    local joined
    joined="$(IFS='^'; echo "${calls[*]}")"
    printf '\n%s\nfn main() {\n    let x = %s;\n    println!("checksum={x:x}");\n}\n' \
        "$comment" "${joined//^/ ^ }"
}

repo="$work/repo"
mkdir -p "$repo/src"
cat >"$repo/Cargo.toml" <<EOF
[package]
name = "twelve"
version = "0.1.0"
edition = "2021"

[dependencies]
parprof-rt = { path = "$repo_root/parprof-rt" }

[workspace]
EOF
cp "$repo_root/Cargo.lock" "$repo/Cargo.lock"
printf '/target\n' >"$repo/.gitignore"
git_() { git -C "$repo" -c user.name=parprof -c user.email=parprof@invalid "$@"; }
program UNIT "// Twelve probes." >"$repo/src/main.rs"
git_ init --quiet && git_ add . && git_ commit --quiet -m base
base="$(git_ rev-parse HEAD)"
program UNIT "// Twelve probes, each of equal work." >"$repo/src/main.rs"
git_ commit --quiet -am "a comment"
comment_only="$(git_ rev-parse HEAD)"
program "UNIT * 11 / 10" "// Twelve probes, each of equal work." >"$repo/src/main.rs"
git_ commit --quiet -am "p07 does 10% more"
slower="$(git_ rev-parse HEAD)"

# The other program: K busy loops for LOAD_PERIOD seconds, then none for as long, again and
# again; on TERM it ends its loops (after the sleep under way).
load() {
    local pids=()
    trap '((${#pids[@]} == 0)) || kill "${pids[@]}" 2>/dev/null || true; exit 0' TERM
    while :; do
        pids=()
        for _ in $(seq "$load_threads"); do
            sh -c 'while :; do :; done' &
            pids+=($!)
        done
        sleep "$load_period"
        kill "${pids[@]}" 2>/dev/null || true
        wait "${pids[@]}" 2>/dev/null || true
        pids=()
        sleep "$load_period"
    done
}
load &
load_pid=$!
trap 'kill "$load_pid" 2>/dev/null || true; wait "$load_pid" 2>/dev/null || true
      [[ -n "${KEEP:-}" ]] || rm -rf "$work"' EXIT

# One comparison: its exit code, wall time, pairs, and the verdicts of its rows.
compare() {
    local head="$1" out="$2" start end code=0
    start="$(date +%s.%N)"
    (cd "$repo" && CARGO_NET_OFFLINE=true "$parprof" parprof diff --base "$base" --head "$head" \
        --bin twelve --fail-above 10 --budget "$budget" -o "$out" >"$out.log" 2>&1) || code=$?
    end="$(date +%s.%N)"
    python3 - "$out/diff.json" "$code" "$start" "$end" <<'EOF'
import json, sys
path, code, start, end = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
try:
    d = json.load(open(path))
except OSError:
    print(f"exit={code} wall_s={end - start:.0f} no diff.json")
    sys.exit()
flagged = [r for r in d["rows"] if r["verdict"] in ("slower", "faster")]
p07 = next((r for r in d["rows"] if r["name"] == "twelve::p07"), {})
others = [r["name"] for r in flagged if r["name"] != "twelve::p07"]
# CPU frames judged changed or marked outside p07 (whose work changed) are false verdicts too.
frames = [f for f in d["cpu_frames"] if not any("p07" in p for p in f["path"])]
print(
    f"exit={code} wall_s={end - start:.0f} pairs={d['pairing']['pairs']} "
    f"p07={p07.get('verdict')} {100 * p07.get('change', 0):+.1f}% "
    f"flagged={len(flagged)} other_flagged={len(others)} {' '.join(others)} "
    f"frames_flagged={len(frames)} of {d['cpu_frames_tested']} tested"
)
EOF
}

echo "paired-gate-under-load: $n comparisons of each kind; load: $load_threads busy loop(s)," \
    "${load_period} s on, ${load_period} s off; $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)"
results="$work/results.txt"
: >"$results"
# The kinds alternate, so that a drift of the machine over the script reaches both alike.
for i in $(seq "$n"); do
    for kind in comment slower; do
        head="$comment_only"
        [[ "$kind" == slower ]] && head="$slower"
        line="$(compare "$head" "$work/$kind-$i")"
        echo "$kind $i: $line" | tee -a "$results"
    done
done

sum() { sed -n "s/^$1 .* $2=\([0-9]*\).*/\1/p" "$results" | awk '{ s += $1 } END { print s + 0 }'; }
echo
echo "comment-only: exit 0 in $(grep -c '^comment .*exit=0 ' "$results") of $n;" \
    "false verdicts (rows slower or faster) in all: $(sum comment flagged);" \
    "CPU frames judged or marked in all: $(sum comment frames_flagged)"
echo "p07 10% slower: \`slower\` at +5..+20% in $(awk '/^slower .*p07=slower/ {
        c = $0; sub(/.*p07=slower /, "", c); sub(/%.*/, "", c)
        if (c + 0 >= 5 && c + 0 <= 20) k++ } END { print k + 0 }' "$results") of $n;" \
    "exit 1 in $(grep -c '^slower .*exit=1 ' "$results") of $n; other rows flagged in all:" \
    "$(sum slower other_flagged); CPU frames outside p07 judged or marked: $(sum slower frames_flagged)"
echo "wall time of each comparison (s): $(sed -n 's/.* wall_s=\([0-9]*\).*/\1/p' "$results" | paste -sd' ')"
