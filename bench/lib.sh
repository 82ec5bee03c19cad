# shellcheck shell=bash
# Shared helpers of the bench/ scripts (sourced, never run). Bash only; JSON through python3.
#
# Every script here runs a reference tool and stowbench on the same work and prints their ratio.
# Rows of raw measurements go to OUT/raw.csv as they are taken (a crash loses nothing taken),
# and bench/summarize.py turns them into the table, summary.csv and summary.json at the end.

BENCH_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd -- "${BENCH_DIR}/.." && pwd)"
# Where built tools (kvtest, warp) are kept between runs; used by the scripts sourcing this file.
# shellcheck disable=SC2034
CACHE_DIR="${STOWBENCH_CACHE:-${HOME:-/root}/.cache/stowbench}"
# The fs backend streams through a buffer of this many bytes (src/backend/mod.rs): every read()
# and write() it makes is at most this long, so fio's bs is min(object size, this).
# shellcheck disable=SC2034
readonly COPY_BUFFER_BYTES=$((256 << 10))
# fio's bs for objects of $1 bytes: the size of the fs backend's read() and write() calls.
fs_call_bytes() { echo $(($1 < COPY_BUFFER_BYTES ? $1 : COPY_BUFFER_BYTES)); }

log() { printf '[%s] %s\n' "${BENCH_NAME:-bench}" "$*" >&2; }
die() {
  printf '[%s] ERROR: %s\n' "${BENCH_NAME:-bench}" "$*" >&2
  exit 2
}

is_root() { [[ ${EUID} -eq 0 ]]; }

# The stowbench binary: $STOWBENCH_BIN, else the release build of this checkout. Built by the
# caller (`cargo build --release`): these scripts never build Rust, so a benchmark never competes
# with a compiler for the CPU it measures.
find_stowbench() {
  local bin="${STOWBENCH_BIN:-${REPO_DIR}/target/release/stowbench}"
  [[ -x ${bin} ]] || die "no stowbench binary at ${bin}; run 'cargo build --release' or set STOWBENCH_BIN"
  printf '%s\n' "${bin}"
}

need_cmd() {
  command -v "$1" >/dev/null 2>&1 || die "$1 not found${2:+; $2}"
}

# Output directory: the --out argument (created), else a fresh temporary one.
make_out_dir() {
  local out=$1
  if [[ -z ${out} ]]; then
    out="$(mktemp -d "${TMPDIR:-/tmp}/stowbench-bench-${BENCH_NAME}.XXXXXX")"
  else
    mkdir -p "${out}"
    out="$(cd -- "${out}" && pwd)"
  fi
  printf '%s\n' "${out}"
}

# Throughput of phase $2 in a stowbench report.json ($1): "bytes_per_s ops_per_s window".
# The steady-state window (every worker running) when the report has one, else the whole phase:
# the same figure stowbench's own table shows. Fails if the phase is missing or the case failed.
sb_phase_throughput() {
  python3 - "$1" "$2" <<'EOF'
import json, sys
report, phase = json.load(open(sys.argv[1])), sys.argv[2]
cases = report.get("cases") or []
if len(cases) != 1:
    sys.exit(f"expected one case in {sys.argv[1]}, found {len(cases)}")
case = cases[0]
if case["status"] != "ok":
    sys.exit(f"case {case['case_id']} {case['status']}: {case.get('failure')}")
for p in case["phases"]:
    if p["phase"] == phase:
        t, window = p.get("throughput_all_active"), "all_active"
        if not t:
            t, window = p["throughput_total"], "total"
        total = p["throughput_total"]
        print(f"{t['bytes_per_s']:.1f} {t['ops_per_s']:.3f} {window} {total['bytes_per_s']:.1f} {total['ops_per_s']:.3f}")
        break
else:
    sys.exit(f"no phase {phase!r} in {sys.argv[1]}")
EOF
}

# Appends one CSV row (fields as arguments) to file $1; fields must not contain commas.
csv_row() {
  local file=$1
  shift
  local IFS=,
  printf '%s\n' "$*" >>"${file}"
}

# As root, before every put (never before a get): write back dirty pages and drop the page
# cache, so each put starts from the same state and no writeback of the previous step runs under
# it. Without root nothing is synced or dropped (a user's cache is not ours to flush).
# DROP_CACHES=false (the scripts' --no-drop-caches) keeps the sync and skips the drop: on a VM
# whose freed memory goes back to the host (virtio balloon free-page reporting), the pages a
# drop frees must be faulted back in by the next put, which then runs up to 5x slower, at random.
DROP_CACHES=${DROP_CACHES:-true}
settle_before_put() {
  if is_root && [[ -w /proc/sys/vm/drop_caches ]]; then
    sync
    if [[ ${DROP_CACHES} == true ]]; then echo 3 >/proc/sys/vm/drop_caches; fi
  fi
}

# Between a reference tool's put and its reads: what stowbench does before each phase
# (settle_writeback, on by default): write back the dirty pages, untimed, so the reads do not run
# beside the writeback of the puts. Nothing is dropped, so no root is needed.
settle_between_phases() { sync; }

# What settle_before_put does on this machine, for conditions.txt.
settle_description() {
  if ! is_root; then echo nothing; elif [[ ${DROP_CACHES} == true ]]; then echo 'sync + drop_caches'; else echo sync; fi
}

# "fio first" on odd repeats, "stowbench first" on even ones: a slow drift of the machine then
# falls on both tools alike instead of always on the second.
order_for_repeat() {
  if (($1 % 2 == 1)); then printf 'ref sb\n'; else printf 'sb ref\n'; fi
}

# "4KiB" → 4096, "94kB" → 94000, "1048576" → 1048576 (whole numbers only: fio and stowbench both
# get plain integers from these scripts, never "2.6m").
parse_size() {
  local s=$1 n unit
  [[ ${s} =~ ^([0-9]+)([KMG]iB|[kMG]B|B)?$ ]] || die "bad size '${s}': use e.g. 4096, 4KiB, 16MiB, 94kB"
  n=${BASH_REMATCH[1]}
  unit=${BASH_REMATCH[2]:-B}
  case ${unit} in
  B) printf '%s\n' "${n}" ;;
  KiB) printf '%s\n' $((n << 10)) ;;
  MiB) printf '%s\n' $((n << 20)) ;;
  GiB) printf '%s\n' $((n << 30)) ;;
  kB) printf '%s\n' $((n * 1000)) ;;
  MB) printf '%s\n' $((n * 1000000)) ;;
  GB) printf '%s\n' $((n * 1000000000)) ;;
  esac
}

# 4096 → 4KiB, 16777216 → 16MiB, 10000 → 10000B: exact labels for the table.
size_label() {
  local b=$1
  if ((b % (1 << 30) == 0)); then
    printf '%dGiB\n' $((b >> 30))
  elif ((b % (1 << 20) == 0)); then
    printf '%dMiB\n' $((b >> 20))
  elif ((b % (1 << 10) == 0)); then
    printf '%dKiB\n' $((b >> 10))
  else
    printf '%dB\n' "${b}"
  fi
}

# Splits a comma-separated list into words: "1,4" → "1 4".
split_list() { printf '%s\n' "${1//,/ }"; }

# Runs stowbench on job file $1 with extra arguments; prints the report.json path. The report is
# written under $2 (stowbench's --out); stdout and stderr go to $3.log. $STOWBENCH_ARGS adds
# arguments of `stowbench run` to every run (e.g. "--clock monotonic", to compare clocks).
run_stowbench() {
  local job=$1 out=$2 logbase=$3 rc=0 more=()
  shift 3
  read -r -a more <<<"${STOWBENCH_ARGS:-}"
  "${STOWBENCH}" run "${job}" --out "${out}" --no-progress "$@" "${more[@]}" >"${logbase}.log" 2>&1 || rc=$?
  if ((rc != 0)); then
    tail -n 20 "${logbase}.log" >&2
    die "stowbench exited with ${rc} on ${job}; full output in ${logbase}.log"
  fi
  sed -n 's/^report: //p' "${logbase}.log" | tail -n1
}

# The [[workload]] table of a matched run: NAME, OBJECTS objects of SIZE bytes on THREADS threads,
# each written once with sequential keys, then read back: one untimed pass (warm caches, as the
# reference tool's discarded read), then PASSES timed passes; verification as $VERIFY says.
# Printed to stdout, to end a job file.
sb_put_then_get_workload() { # NAME SIZE THREADS OBJECTS PASSES
  local name=$1 size=$2 threads=$3 objects=$4 passes=$5
  cat <<EOF
[[workload]]
name = "${name}"
sizes = [${size}]
threads = [${threads}]
objects = ${objects}
verify = ${VERIFY}
key_order = "sequential"

# put: one pass over the keys, each object written once.
[[workload.phase]]
mix = { put = 1 }

# get: one untimed pass (warm caches), then ${passes} timed pass(es).
[[workload.phase]]
mix = { get = 1 }
warmup_count = ${objects}
count = $((passes * objects))
EOF
}

# The 1, 5 and 15 minute load averages: a benchmark on a busy machine says so in its conditions.
load_average() { cut -d' ' -f1-3 /proc/loadavg; }
