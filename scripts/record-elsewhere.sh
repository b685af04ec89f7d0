#!/usr/bin/env bash
# Build a program for profiling here, pack it with cargo-parprof, record it on another Linux
# machine that has no Rust toolchain, and bring the run folder back.
#
#   scripts/record-elsewhere.sh [--ssh HOST | --here] [-o RUN] [--record "OPTIONS"] \
#       BUILD-OPTIONS... [-- PROGRAM-ARGS...]
#
#   BUILD-OPTIONS   what `cargo parprof build` takes: --bin/--example/--bench/--test NAME, -p,
#                   --features, --profile, --manifest-path
#   --ssh HOST      copy the pack to HOST (scp), record there (ssh), copy the run folder back
#   --here          record on this machine, in an empty folder, with no cargo/rustc in PATH
#   (neither)       only write the pack, parprof-pack.tar.gz, and say how to record with it
#   -o RUN          where the run folder comes back to (default: parprof-run-<name>)
#   --record "..."  options for `cargo-parprof record` (e.g. "--repeat 3 --no-offcpu")
#
# The pack holds two executables and a script: the program (built with rayon-core hooks) and
# cargo-parprof, both linked against the C library of this machine, so the other machine needs
# a glibc at least as new, Linux with perf_event_open (kernel.perf_event_paranoid <= 2), and
# nothing else. The run folder holds the symbolised stacks: `cargo parprof report RUN` works on
# any machine.
set -euo pipefail

mode=pack host="" run_out="" record_opts="" build_args=() program_args=()
while (($#)); do
    case "$1" in
        --ssh) mode=ssh host="$2"; shift 2 ;;
        --here) mode=here; shift ;;
        -o) run_out="$2"; shift 2 ;;
        --record) record_opts="$2"; shift 2 ;;
        --) shift; program_args=("$@"); break ;;
        *) build_args+=("$1"); shift ;;
    esac
done

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cargo="${CARGO:-cargo}"

echo "record-elsewhere: building the program for profiling" >&2
exe="$("$cargo" parprof build "${build_args[@]}" | tail -n 1)"
[[ -x "$exe" ]] || { echo "record-elsewhere: cargo parprof build printed no executable" >&2; exit 1; }
name="$(basename "$exe")"

echo "record-elsewhere: building cargo-parprof (release)" >&2
"$cargo" build --quiet --release --manifest-path "$repo/Cargo.toml" \
    --package cargo-parprof --bin cargo-parprof
target_dir="${CARGO_TARGET_DIR:-$repo/target}"
parprof="$target_dir/release/cargo-parprof"

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
pack_dir="$stage/parprof-pack"
mkdir -p "$pack_dir"
cp -p "$exe" "$pack_dir/$name"
cp -p "$parprof" "$pack_dir/cargo-parprof"
{
    echo '#!/bin/sh'
    echo '# Records the packed program into ./run (or $PARPROF_RUN); options go to `record`.'
    echo 'cd "$(dirname "$0")" || exit 1'
    printf 'exec ./cargo-parprof record -o "${PARPROF_RUN:-run}" %s "$@" -- ./%q' \
        "$record_opts" "$name"
    for arg in "${program_args[@]+"${program_args[@]}"}"; do printf ' %q' "$arg"; done
    echo
} >"$pack_dir/record.sh"
chmod +x "$pack_dir/record.sh"
pack="$stage/parprof-pack.tar.gz"
tar -C "$stage" -czf "$pack" parprof-pack
run_out="${run_out:-parprof-run-$name}"

case "$mode" in
    pack)
        cp "$pack" ./parprof-pack.tar.gz
        cat >&2 <<MSG
record-elsewhere: wrote parprof-pack.tar.gz ($(du -h parprof-pack.tar.gz | cut -f1)). On the other machine:
    tar xzf parprof-pack.tar.gz && parprof-pack/record.sh
then copy parprof-pack/run back and run \`cargo parprof report RUN\` (or open its report.html).
MSG
        ;;
    here)
        # An empty folder and a PATH without cargo or rustc: what the other machine has.
        work="$stage/elsewhere"
        mkdir -p "$work"
        tar -C "$work" -xzf "$pack"
        env -i PATH=/usr/bin:/bin HOME="$work" "$work/parprof-pack/record.sh"
        rm -rf "$run_out"
        cp -r "$work/parprof-pack/run" "$run_out"
        ;;
    ssh)
        remote="$(ssh "$host" mktemp -d)"
        scp -q "$pack" "$host:$remote/"
        ssh "$host" "cd '$remote' && tar xzf parprof-pack.tar.gz && parprof-pack/record.sh"
        rm -rf "$run_out"
        scp -q -r "$host:$remote/parprof-pack/run" "$run_out"
        ssh "$host" "rm -rf '$remote'"
        ;;
esac
if [[ "$mode" != pack ]]; then
    echo "record-elsewhere: run folder copied to $run_out; its reports are there" >&2
    echo "record-elsewhere: \`cargo parprof report $run_out\` analyses it again (other thresholds)" >&2
fi
