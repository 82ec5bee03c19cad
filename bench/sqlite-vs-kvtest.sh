#!/usr/bin/env bash
# SQLite's own kvtest vs stowbench's `sqlite` backend: reading N BLOBs of 10,000 bytes.
#
#   bench/sqlite-vs-kvtest.sh [--count N] [--size BYTES] [--reads R] [--modes sql,blob]
#                             [--order asc|random] [--repeat N] [--quick] [--out DIR]
#                             [--work-dir DIR] [--no-verify] [--no-drop-caches]
#                             [--schema rowid|text-key] [--blob-handle per-session|per-get]
#                             [--kvtest-threaded] [--cache-state reread|as-written]
#
# kvtest (test/kvtest.c of SQLite, built by bench/kvtest-build.sh against the same SQLite
# amalgamation stowbench links) is the SQLite authors' "BLOBs in a table vs files" read test.
# Per repeat and mode it runs, back to back (order alternating per repeat):
#   kvtest init DB --count N --size S --pagesize 4096      (a fresh table of N random BLOBs)
#   bench/reread-into-cache.py DB                          (--cache-state reread, the default)
#   kvtest run DB --count N ...                            (untimed: warms the page cache)
#   kvtest run DB --count R --max-id N --asc --jmode wal --cache-size -2000 --mmap 0
#                 --multitrans [--blob-api]                 (timed: R reads)
# and stowbench with backend sqlite, schema = "rowid" (--schema) and otherwise its defaults (WAL,
# synchronous=normal, 4096-byte pages, 2000 KiB cache, no mmap): N puts of S bytes, then an
# untimed pass of N gets, then R timed gets (sequential keys, 1 thread). It prints get objects/s
# of both and the ratio (target ≥ 0.95).
#
# The page cache: both tools write the same layout of pages (dbstat lists the same page numbers
# for every row), but in different ways — kvtest in one bulk transaction, stowbench in N through
# the WAL and its checkpoints — and the cache keeps the pages in folios shaped by those writes.
# kvtest itself read its own database faster than one stowbench wrote, by 3–18 % in five pairs
# of six (docs/performance/sqlite-vs-kvtest.md, "The page cache behind each database"). So by default each
# database is written back, dropped from the cache and read back in one sequential pass before
# the untimed warm pass (bench/reread-into-cache.py; for stowbench, the get phase's `before`
# command, after the WAL checkpoint): both tools then read from a cache in the same state.
# --cache-state as-written skips that, as this script did before.
#
# Modes: `sql` — kvtest reads with `SELECT v FROM kv WHERE k=?1`; stowbench with its default
# blob_io_threshold (1 MiB), so a 10,000-byte value is read by SQL as well. `blob` — kvtest
# --blob-api (one sqlite3_blob handle moved with sqlite3_blob_reopen + sqlite3_blob_read);
# stowbench with blob_io_threshold = 1KiB, so it reads (and writes) the value through incremental
# blob I/O, and blob_handle = "per-session" (--blob-handle): one handle per session, moved the
# same way.
#
# What is the same: kvtest's table kv(k INTEGER PRIMARY KEY, v BLOB) is read by rowid, and so is
# stowbench's objects(id INTEGER PRIMARY KEY, key, size_bytes, body) with schema = "rowid" (one
# B-tree search; `--schema text-key` measures the default layout, found through the key's index).
# stowbench's keys obj-0000000000 … are "numbered keys", stored under their number, so keys read
# in sequence sit side by side as kvtest's ids 1..N read --asc do (--order random takes that
# locality from both), and their reads need no key check: in blob mode the handle is moved to the
# id and read blind, as kvtest does (docs/backends/sqlite.md, "Which id").
# In blob mode both hold one read transaction across reads (kvtest for the whole run, stowbench
# for up to 100 ms at a time; docs/backends/sqlite.md says what a get then sees).
# What still differs (bench/README.md): in SQL mode each stowbench get is its own transaction;
# kvtest --multitrans resets its statement only before the next read.
# kvtest is one thread; stowbench has helper threads, and a multi-threaded process pays more per
# pread (glibc's cancellation-point wrappers; stowbench's lone worker avoids the kernel's
# reference on a shared file table: its helpers keep their own, src/threads.rs).
# --kvtest-threaded starts one idle thread inside kvtest (bench/kvtest-idle-thread.c, LD_PRELOAD)
# so both processes have that shape; the target is judged against plain kvtest either way.
# stowbench copies each value into its verification buffer and checks it after the timed call
# (--no-verify drops the check); kvtest only takes a pointer (SQL) or copies into its buffer
# (blob). kvtest's data comes from its own `init` (one bulk transaction), stowbench's from its
# timed puts (one transaction each).
set -euo pipefail
BENCH_NAME=sqlite-vs-kvtest
# shellcheck source=bench/lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

COUNT=10000
SIZE=10000
READS=200000
MODES="sql,blob"
ORDER=asc
# An even number of repeats runs each tool first equally often (bench/summarize.py).
REPEAT=4
OUT=""
WORK=""
VERIFY=true
SCHEMA=rowid
BLOB_HANDLE=per-session
KVTEST_THREADED=false
CACHE_STATE=reread
readonly TARGET=0.95

usage() { sed -n '2,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

parse_args() {
  while (($#)); do
    case $1 in
    --count) COUNT=$2; shift 2 ;;
    --size) SIZE=$(parse_size "$2"); shift 2 ;;
    --reads) READS=$2; shift 2 ;;
    --modes) MODES=$2; shift 2 ;;
    --order) ORDER=$2; shift 2 ;;
    --repeat) REPEAT=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --work-dir) WORK=$2; shift 2 ;;
    --no-verify) VERIFY=false; shift ;;
    --schema) SCHEMA=$2; shift 2 ;;
    --blob-handle) BLOB_HANDLE=$2; shift 2 ;;
    --kvtest-threaded) KVTEST_THREADED=true; shift ;;
    --cache-state) CACHE_STATE=$2; shift 2 ;;
    --no-drop-caches) DROP_CACHES=false; shift ;;
    --quick) COUNT=2000; READS=50000; REPEAT=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
    esac
  done
  [[ ${REPEAT} =~ ^[1-9][0-9]*$ ]] || die "--repeat must be a positive integer"
  [[ ${COUNT} =~ ^[1-9][0-9]*$ && ${READS} =~ ^[1-9][0-9]*$ ]] || die "--count and --reads must be positive integers"
  [[ ${ORDER} == asc || ${ORDER} == random ]] || die "--order is asc or random"
  [[ ${SCHEMA} == rowid || ${SCHEMA} == text-key ]] || die "--schema is rowid or text-key"
  [[ ${BLOB_HANDLE} == per-session || ${BLOB_HANDLE} == per-get ]] || die "--blob-handle is per-session or per-get"
  [[ ${CACHE_STATE} == reread || ${CACHE_STATE} == as-written ]] || die "--cache-state is reread or as-written"
  local m
  for m in $(split_list "${MODES}"); do
    [[ ${m} == sql || ${m} == blob ]] || die "--modes takes sql and/or blob, not '${m}'"
  done
}

# Runs kvtest; prints reads per second from its "Microseconds per BLOB read" line.
kvtest_run() { # LOGFILE ARGS...
  local logf=$1
  shift
  local preload=()
  [[ -n ${KVTEST_PRELOAD} ]] && preload=(LD_PRELOAD="${KVTEST_PRELOAD}")
  env "${preload[@]}" "${KVTEST}" "$@" >"${logf}" 2>&1 || die "kvtest $* failed: $(tail -n 5 "${logf}")"
  awk '/^Microseconds per BLOB read:/ { printf "%.3f\n", 1e6 / $5; found = 1 } END { exit !found }' "${logf}" ||
    die "no 'Microseconds per BLOB read' line in ${logf}"
}

# Builds bench/kvtest-idle-thread.c into a preload library (cached by its source); prints its path.
build_idle_thread() {
  need_cmd cc "apt-get install gcc"
  local src="${BENCH_DIR}/kvtest-idle-thread.c" lib
  lib="${CACHE_DIR}/kvtest/idle-thread-$(sha256sum "${src}" | cut -c1-16).so"
  if [[ ! -f ${lib} ]]; then
    mkdir -p "$(dirname -- "${lib}")"
    cc -O2 -shared -fPIC -o "${lib}.tmp" "${src}" -lpthread >&2 || die "could not build ${src}"
    mv -- "${lib}.tmp" "${lib}"
  fi
  printf '%s\n' "${lib}"
}

measure_kvtest() { # MODE REPEAT TAG; prints get objects/s
  local mode=$1 tag=$3 db="${WORK}/kvtest.db" args
  rm -f -- "${db}" "${db}-wal" "${db}-shm" "${db}-journal"
  settle_before_put
  "${KVTEST}" init "${db}" --count "${COUNT}" --size "${SIZE}" --pagesize 4096 >"${OUT}/logs/${tag}-kvtest-init.log" 2>&1 ||
    die "kvtest init failed: $(tail -n 5 "${OUT}/logs/${tag}-kvtest-init.log")"
  settle_between_phases
  [[ ${CACHE_STATE} == reread ]] && python3 "${BENCH_DIR}/reread-into-cache.py" "${db}"
  # The same settings as stowbench's sqlite backend defaults, spelled out (kvtest's own defaults
  # differ: cache_size 1000 pages, rollback journal, all reads in one transaction).
  args=(--max-id "${COUNT}" "--${ORDER}" --jmode wal --cache-size -2000 --mmap 0 --multitrans)
  [[ ${mode} == blob ]] && args+=(--blob-api)
  kvtest_run "${OUT}/logs/${tag}-kvtest-warm.log" run "${db}" --count "${COUNT}" "${args[@]}" >/dev/null
  kvtest_run "${OUT}/logs/${tag}-kvtest-run.log" run "${db}" --count "${READS}" "${args[@]}"
  rm -f -- "${db}" "${db}-wal" "${db}-shm" "${db}-journal"
}

write_sb_job() { # FILE MODE
  local file=$1 mode=$2 blob_options=""
  # Blob mode: every value through incremental blob I/O, as kvtest --blob-api; per-session: one
  # handle moved row to row (sqlite3_blob_reopen), as kvtest --blob-api.
  [[ ${mode} == blob ]] && blob_options="blob_io_threshold = \"1KiB\"
blob_handle = \"${BLOB_HANDLE}\""
  local order=sequential reread=""
  [[ ${ORDER} == random ]] && order=uniform
  # Runs after the phase's WAL checkpoint, so the whole database is in objects.db. The script's
  # path goes in as $0, so no quoting of it is needed inside the shell command.
  [[ ${CACHE_STATE} == reread ]] &&
    reread="before = [\"sh\", \"-c\", 'exec python3 \"\$0\" \"\$STOWBENCH_CASE_DIR/objects.db\"', \"${BENCH_DIR}/reread-into-cache.py\"]"
  cat >"${file}" <<EOF
# Written by bench/sqlite-vs-kvtest.sh (${mode} mode).
version = 1
name = "bench-sqlite-vs-kvtest"
seed = 42

[[target]]
name = "sqlite"
backend = "sqlite"
schema = "${SCHEMA}"   # rowid: one B-tree search per get, as kvtest's kv(k INTEGER PRIMARY KEY, v BLOB)
${blob_options}

[[workload]]
name = "kvtest-match"
sizes = [${SIZE}]
threads = [1]
objects = ${COUNT}
verify = ${VERIFY}
key_order = "sequential"   # the puts write every key once, as kvtest init

[[workload.phase]]
mix = { put = 1 }

# One untimed pass warms the page cache (as kvtest's discarded run), then ${READS} timed gets.
[[workload.phase]]
mix = { get = 1 }
${reread}
key_order = "${order}"
warmup_count = ${COUNT}
count = ${READS}
EOF
}

measure_stowbench() { # MODE REPEAT TAG; prints "get_objects_per_s put_objects_per_s"
  local mode=$1 tag=$3 job report get put
  job="${OUT}/jobs/${tag}-stowbench.toml"
  write_sb_job "${job}" "${mode}"
  settle_before_put
  report="$(run_stowbench "${job}" "${OUT}/stowbench" "${OUT}/logs/${tag}-stowbench" --work-dir "${WORK}")"
  get="$(sb_phase_throughput "${report}" get)" || die "bad report ${report}"
  put="$(sb_phase_throughput "${report}" put)" || die "bad report ${report}"
  printf '%s %s\n' "$(cut -d' ' -f2 <<<"${get}")" "$(cut -d' ' -f2 <<<"${put}")"
}

main() {
  local cmdline="$0 $*"
  parse_args "$@"
  STOWBENCH="$(find_stowbench)"
  KVTEST="$("${BENCH_DIR}/kvtest-build.sh")"
  KVTEST_PRELOAD=""
  [[ ${KVTEST_THREADED} == true ]] && KVTEST_PRELOAD="$(build_idle_thread)"
  OUT="$(make_out_dir "${OUT}")"
  mkdir -p "${OUT}/jobs" "${OUT}/logs" "${OUT}/stowbench"
  mkdir -p "${WORK:=/var/tmp}"
  WORK="$(mktemp -d "${WORK}/stowbench-sqlite-vs-kvtest.XXXXXX")"
  trap 'rm -rf -- "${WORK}"' EXIT
  {
    printf 'date: %s\ncommand: %s\n' "$(date -u +%FT%TZ)" "${cmdline}"
    printf 'kvtest: %s (built against: %s)\n' "${KVTEST}" "$(cat "${KVTEST}.how" 2>/dev/null || echo unknown)"
    printf 'stowbench: %s (%s)\n' "$("${STOWBENCH}" --version)" "${STOWBENCH}"
    printf 'objects: %s of %s bytes; timed reads: %s (%s order); verify: %s\n' "${COUNT}" "${SIZE}" "${READS}" "${ORDER}" "${VERIFY}"
    printf 'kvtest threads: %s\n' "$([[ ${KVTEST_THREADED} == true ]] && echo "2 (one idle, ${KVTEST_PRELOAD})" || echo 1)"
    printf 'stowbench sqlite: schema = %s; blob mode: blob_handle = %s\n' "${SCHEMA}" "${BLOB_HANDLE}"
    printf 'page cache before the warm pass: %s\n' "$([[ ${CACHE_STATE} == reread ]] && echo 'each database written back, dropped and read back sequentially (bench/reread-into-cache.py)' || echo 'as each tool wrote its database')"
    printf 'work dir: %s (%s)\n' "${WORK}" "$(df -T "${WORK}" | awk 'NR == 2 { print $2 " on " $1 }')"
    printf 'load average at start: %s\n' "$(load_average)"
  } >"${OUT}/conditions.txt"
  : >"${OUT}/raw.csv" # a fresh file: rows of an older run in the same --out must not mix in
  csv_row "${OUT}/raw.csv" mode op repeat tool value target stowbench_put_objects_per_s
  local repeat mode first tool tag value sb
  for repeat in $(seq 1 "${REPEAT}"); do
    first="$(order_for_repeat "${repeat}")"
    for mode in $(split_list "${MODES}"); do
      for tool in ${first}; do
        tag="${mode}-r${repeat}"
        if [[ ${tool} == ref ]]; then
          value="$(measure_kvtest "${mode}" "${repeat}" "${tag}")"
          csv_row "${OUT}/raw.csv" "${mode}" get "${repeat}" ref "${value}" "${TARGET}" ""
          log "$(printf '%-4s r%s kvtest    get %10.0f objects/s' "${mode}" "${repeat}" "${value}")"
        else
          sb="$(measure_stowbench "${mode}" "${repeat}" "${tag}")"
          read -r value put <<<"${sb}"
          csv_row "${OUT}/raw.csv" "${mode}" get "${repeat}" sb "${value}" "${TARGET}" "${put}"
          log "$(printf '%-4s r%s stowbench get %10.0f objects/s (put %.0f objects/s)' "${mode}" "${repeat}" "${value}" "${put}")"
        fi
      done
    done
  done
  printf 'load average at end: %s\n' "$(load_average)" >>"${OUT}/conditions.txt"
  python3 "${BENCH_DIR}/summarize.py" "${OUT}/raw.csv" --keys mode,op --ref-name kvtest --unit objects/s \
    --out "${OUT}" --title "sqlite backend vs SQLite's kvtest (${COUNT} BLOBs of ${SIZE} bytes, ${READS} warm reads, 1 thread)" |
    tee "${OUT}/table.txt"
  printf '\nraw: %s/raw.csv  summary: %s/summary.csv %s/summary.json  conditions: %s/conditions.txt\n' \
    "${OUT}" "${OUT}" "${OUT}" "${OUT}"
}

main "$@"
