#!/usr/bin/env bash
# Scale and memory: does stowbench stay bounded when the work gets large? (issue 10)
#
#   bench/scale.sh [--out DIR] [--work-dir DIR] [--objects N] [--only many,threads,huge]
#
# - many:    N (default 1,000,000) objects of 1 KiB through fs, sqlite and pack, 4 threads.
# - threads: 64 threads on fs (100,000 objects of 4 KiB).
# - huge:    two objects of 1 GiB through fs and pack, and through postgres (mode = "lo"), s3 and
#            gridfs when their servers are configured (eval "$(scripts/services.sh env DIR)");
#            two of 900 MB through sqlite (its row limit is just under 1 GB). Peak client memory
#            must stay within 64 MiB of what the process held when the case started.
#
# Prints, per case: status, put and get throughput, the client's resident memory at the start of
# the case and its peak, and for huge objects PASS or MISS against the 64 MiB bound. Reports and
# job files stay in OUT. Not part of the test suite: "many" writes a million files.
set -euo pipefail
BENCH_NAME=scale
# shellcheck source=bench/lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

OUT=""
WORK="/var/tmp"
OBJECTS=1000000
ONLY="many,threads,huge"
while (($#)); do
  case $1 in
  --out) OUT=$2; shift 2 ;;
  --work-dir) WORK=$2; shift 2 ;;
  --objects) OBJECTS=$2; shift 2 ;;
  --only) ONLY=$2; shift 2 ;;
  -h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ ${OBJECTS} =~ ^[0-9]+$ ]] || die "--objects takes a whole number"
SB="$(find_stowbench)"
OUT="$(make_out_dir "${OUT}")"
mkdir -p "${OUT}/jobs"
work="$(mktemp -d "${WORK}/stowbench-scale.XXXXXX")"
trap 'rm -rf "${work}"' EXIT

# Writes job $1 with targets $2 (TOML text) and one workload: size $3, objects $4, threads $5.
write_job() {
  cat >"${OUT}/jobs/$1.toml" <<EOF
# Written by bench/scale.sh.
version = 1
name = "scale-$1"
$2
[[workload]]
name = "$1"
sizes = ["$3"]
objects = $4
threads = [$5]
phases = ["put", "get"]
EOF
}

# Runs job $1; prints the report's path.
run_job() {
  local log="${OUT}/jobs/$1.log"
  log "running $1 (log: ${log})"
  "${SB}" run "${OUT}/jobs/$1.toml" --out "${OUT}/reports/$1" --work-dir "${work}" --no-progress >"${log}" 2>&1 || true
  sed -n 's/^report: //p' "${log}" | tail -n 1
}

# One line per case of report $1; with $2 = bound, PASS or MISS against a peak-RSS growth bound.
summarize() {
  python3 - "$1" "${2:-}" <<'EOF'
import json, sys
report, bound = json.load(open(sys.argv[1])), sys.argv[2]
mib = lambda b: b / 2**20
for c in report["cases"]:
    tp = {p["phase"]: (p.get("throughput_all_active") or p["throughput_total"]) for p in c["phases"]}
    r = c["resources"]
    grew = r["client_rss_peak_bytes"] - r["client_rss_start_bytes"]
    verdict = ""
    if bound:
        verdict = "PASS" if c["status"] == "ok" and grew <= int(bound) * 2**20 else "MISS"
    print(f"{c['case_id']:<34} {c['status']:<7}"
          f" put {tp.get('put', {}).get('ops_per_s', 0):>10.0f} op/s {tp.get('put', {}).get('bytes_per_s', 0) / 1e6:>8.1f} MB/s"
          f" get {tp.get('get', {}).get('ops_per_s', 0):>10.0f} op/s {tp.get('get', {}).get('bytes_per_s', 0) / 1e6:>8.1f} MB/s"
          f"  rss start {mib(r['client_rss_start_bytes']):7.1f} MiB peak {mib(r['client_rss_peak_bytes']):7.1f} MiB (+{mib(grew):.1f}) {verdict}")
    if c["status"] != "ok":
        print(f"    {c.get('failure')}")
EOF
}

report_of() {
  local report
  report="$(run_job "$1")"
  [[ -n ${report} && -f ${report} ]] || die "$1 wrote no report; see ${OUT}/jobs/$1.log"
  printf '%s\n' "${report}"
}

table="${OUT}/table.txt"
: >"${table}"
for part in $(split_list "${ONLY}"); do
  case ${part} in
  many)
    write_job many $'[[target]]\nbackend = "fs"\n[[target]]\nbackend = "sqlite"\n[[target]]\nbackend = "pack"\n' 1KiB "${OBJECTS}" 4
    summarize "$(report_of many)" | tee -a "${table}"
    ;;
  threads)
    write_job threads $'[[target]]\nbackend = "fs"\n' 4KiB 100000 64
    summarize "$(report_of threads)" | tee -a "${table}"
    ;;
  huge)
    targets=$'[[target]]\nbackend = "fs"\n[[target]]\nbackend = "pack"\n'
    [[ -n ${STOWBENCH_PG_URI:-} ]] && targets+=$'[[target]]\nname = "postgres-lo"\nbackend = "postgres"\nmode = "lo"\n'
    [[ -n ${STOWBENCH_S3_ENDPOINT:-} ]] && targets+=$'[[target]]\nbackend = "s3"\n'
    [[ -n ${STOWBENCH_MONGO_URI:-} ]] && targets+=$'[[target]]\nbackend = "gridfs"\n'
    write_job huge "${targets}" 1GiB 2 1
    summarize "$(report_of huge)" 64 | tee -a "${table}"
    write_job huge-sqlite $'[[target]]\nbackend = "sqlite"\n' 900MB 2 1
    summarize "$(report_of huge-sqlite)" 64 | tee -a "${table}"
    ;;
  *) die "unknown part '${part}' (many, threads, huge)" ;;
  esac
done
log "table: ${table}"
