#!/usr/bin/env bash
# One thread's warm gets, stowbench against fio on the very same files, with fio against itself
# as the control.
#
#   bench/fs-same-files.sh [--size 16MiB] [--objects 64] [--passes 4] [--trials 40]
#                          [--no-verify] [--out DIR] [--work-dir DIR]
#
# fs-vs-fio.sh gives each tool its own files, so a cell's ratio also carries which set of pages
# each tool drew. Here every trial: stowbench puts OBJECTS files and reads them (one untimed pass,
# then PASSES timed ones, --keep), then fio reads exactly those files the same way twice, as two
# processes (a and b: `opendir`, `read`s of min(size, 256 KiB), one warm pass, then PASSES
# loops). It prints the paired medians stowbench ÷ fio a and fio b ÷ fio a, each with the
# interval its order statistics give: the second is what two runs of one reader on the same files
# differ by. Results: OUT/raw.csv, OUT/summary.txt, OUT/jobs/.
set -euo pipefail
BENCH_NAME=fs-same-files
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

SIZE=16MiB OBJECTS=64 PASSES=4 TRIALS=40 VERIFY=true OUT="" WORK=""
while (($#)); do
  case $1 in
    --size) SIZE=$2; shift 2 ;;
    --objects) OBJECTS=$2; shift 2 ;;
    --passes) PASSES=$2; shift 2 ;;
    --trials) TRIALS=$2; shift 2 ;;
    --no-verify) VERIFY=false; shift ;;
    --out) OUT=$2; shift 2 ;;
    --work-dir) WORK=$2; shift 2 ;;
    -h | --help) sed -n '2,14p' "$0"; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
need_cmd fio "apt-get install fio"
need_cmd python3
STOWBENCH="$(find_stowbench)"
BYTES="$(parse_size "${SIZE}")"
OUT="$(make_out_dir "${OUT}")"
mkdir -p "${OUT}/jobs" "${OUT}/stowbench" "${WORK:=/var/tmp}"
WORK="$(mktemp -d "${WORK}/stowbench-fs-same-files.XXXXXX")"
trap 'rm -rf -- "${WORK}"' EXIT

JOB="${OUT}/jobs/stowbench.toml"
{
  printf 'version = 1\nname = "bench-fs-same-files"\nseed = 42\n\n'
  printf '[[target]]\nname = "fs"\nbackend = "fs"\nfanout_levels = 0\nwrite_mode = "in-place"\n\n'
  sb_put_then_get_workload same-files "${BYTES}" 1 "${OBJECTS}" "${PASSES}"
} >"${JOB}"

# fio's read of every file in $1, LOOPS times: prints bytes per second over its runtime.
fio_read() { # DIR LOOPS NAME
  local job="${OUT}/jobs/$3.fio" bs
  bs="$(fs_call_bytes "${BYTES}")"
  printf '[global]\nopendir=%s\nioengine=sync\nthread=1\ndirect=0\ninvalidate=0\nbs=%s\n' "$1" "${bs}" >"${job}"
  printf 'file_service_type=sequential\nopenfiles=1\n[obj]\nrw=read\nloops=%s\n' "$2" >>"${job}"
  fio --output-format=json --output="${job%.fio}.json" "${job}" >/dev/null 2>"${job%.fio}.err" || die "fio failed: ${job%.fio}.err"
  python3 -c '
import json, sys
text = open(sys.argv[1]).read()
read = json.loads(text[text.index("{"):])["jobs"][0]["read"]  # fio prints "opendir added" first
print("%.1f" % (read["io_bytes"] * 1000 / read["runtime"]))' "${job%.fio}.json"
}

rm -f -- "${OUT}/raw.csv"
csv_row "${OUT}/raw.csv" trial stowbench fio_a fio_b
for trial in $(seq 1 "${TRIALS}"); do
  settle_before_put
  data="${WORK}/trial-${trial}"
  mkdir -p "${data}"
  report="$(run_stowbench "${JOB}" "${OUT}/stowbench" "${OUT}/jobs/trial-${trial}" --keep --work-dir "${data}")"
  read -r _ _ _ sb _ <<<"$(sb_phase_throughput "${report}" get)"
  # The objects' directory: where a file of exactly the object size lies (`c`: bytes, so objects
  # under 1 KiB are found too), holding exactly OBJECTS files, or fio would read other things.
  object="$(find "${data}" -type f -size "${BYTES}c" -print -quit)"
  [[ -n ${object} ]] || die "no file of ${BYTES} bytes under ${data}: did stowbench's layout change?"
  files="$(dirname -- "${object}")"
  count="$(find "${files}" -maxdepth 1 -type f | wc -l)"
  ((count == OBJECTS)) || die "${files} holds ${count} files, not the ${OBJECTS} objects: fio would read other files too"
  fio_read "${files}" 1 "trial-${trial}-warm" >/dev/null
  a="$(fio_read "${files}" "${PASSES}" "trial-${trial}-a")"
  b="$(fio_read "${files}" "${PASSES}" "trial-${trial}-b")"
  csv_row "${OUT}/raw.csv" "${trial}" "${sb}" "${a}" "${b}"
  log "$(awk -v t="${trial}" -v s="${sb}" -v a="${a}" -v b="${b}" 'BEGIN { printf "trial %s: stowbench %.0f, fio a %.0f, fio b %.0f MB/s", t, s / 1e6, a / 1e6, b / 1e6 }')"
  rm -rf -- "${data}"
done

python3 - "${OUT}/raw.csv" "${SIZE}" "${VERIFY}" <<'EOF' | tee "${OUT}/summary.txt"
import csv, math, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
col = lambda k: [float(r[k]) for r in rows]
sb, a, b = col("stowbench"), col("fio_a"), col("fio_b")
def paired(xs):
    xs = sorted(xs); n = len(xs); k = max(int(n / 2 - 0.98 * math.sqrt(n)), 0)  # about 95 %
    return f"{statistics.median(xs):.3f} ({xs[k]:.3f}–{xs[n - 1 - k]:.3f})"
mb = lambda xs: f"median {statistics.median(xs) / 1e6:,.0f}, max {max(xs) / 1e6:,.0f} MB/s"
print(f"{len(rows)} trials, {sys.argv[2]} objects, one thread, verify {sys.argv[3]}")
print(f"stowbench: {mb(sb)}; fio a: {mb(a)}; fio b: {mb(b)}")
print(f"stowbench ÷ fio a, paired: {paired([s / x for s, x in zip(sb, a)])}")
print(f"fio b ÷ fio a, paired (the control): {paired([y / x for y, x in zip(b, a)])}")
EOF
