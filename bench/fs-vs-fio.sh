#!/usr/bin/env bash
# fio vs stowbench's `fs` backend on the same file I/O: one file per object, put then warm get.
#
#   bench/fs-vs-fio.sh [--sizes 4KiB,1MiB] [--threads 1,4] [--durability buffered,fsync]
#                      [--repeat N] [--quick] [--out DIR] [--work-dir DIR] [--no-verify]
#                      [--fanout N] [--buffered-volume SIZE] [--fsync-volume SIZE]
#                      [--read-volume SIZE] [--max-reads N] [--max-objects N]
#                      [--max-fsync-objects N] [--no-drop-caches] [--write-mode rename|in-place]
#                      [--no-dir-fsync]
#
# For every cell (size × threads × durability) and every repeat it runs fio and stowbench
# back to back on the same filesystem, and prints each tool's median MB/s, the min–max over the
# repeats, the ratio stowbench/fio, and PASS when the ratio reaches the target (≥0.97 for objects
# of 1 MiB and more, ≥0.90 below: per-file overheads weigh more on small objects). Results:
# OUT/raw.csv (every measurement), OUT/summary.csv, OUT/summary.json, OUT/jobs/ (every fio job
# file and stowbench job file run), OUT/stowbench/ (stowbench's own reports).
#
# How the work is matched (bench/README.md has the full table):
# - stowbench fs put  = open(tmp, O_CREAT|O_TRUNC) + write() in 256 KiB pieces + close + rename
#                       (+ fsync(file) before the rename and fsync(dir) after it with fsync=true).
#   fio put           = rw=write, ioengine=sync (plain write()), bs = min(size, 256 KiB) (the fs
#                       backend's copy buffer, src/backend/mod.rs COPY_BUFFER_BYTES), one file of
#                       `filesize` per object created when opened (create_on_open=1, no
#                       preallocation: fallocate=none), one file open at a time, written whole
#                       before the next (openfiles=1, file_service_type=sequential).
#                       fsync: fsync=<blocks per file> fsyncs each file after its last block,
#                       before close — see fio_sync_options for why not fsync_on_close.
#   --write-mode in-place makes the fs backend write the final file directly (no temporary name,
#                       no rename; fsync of the directory only for a new file): exactly fio's I/O,
#                       which shows what the default's atomic visibility costs.
#   --no-dir-fsync makes the fs backend fsync only the file (fsync_dir = false), never its
#                       directory, as fio does: with --write-mode in-place, the fsync cells then
#                       make exactly fio's calls, one device flush per file.
# - stowbench fs get  = open + fstat + read() in 256 KiB pieces + close, sequential keys.
#   fio get           = rw=read on the files the put made, same bs, same one-file-at-a-time order;
#                       invalidate=0 keeps the page cache (fio drops it per file by default).
# - objects: N files in total; fio numjobs = threads, each job its own N/threads files
#   (nrfiles); stowbench's threads share one counter over the same N keys. N is the same for
#   every thread count of a size, rounded up to a multiple of every thread count.
# - directory: stowbench writes into its namespace under --work-dir (stowbench-<run id>/
#   case-0000/objects), fio into fio-<cell>/case-0000/objects beside it: the same filesystem,
#   the same parent and depth. Both tools' files of a cell stay until both have run, then go
#   together (remove_cell_files says why), so a cell holds both sets on disk at once (about
#   2 GiB at most). stowbench runs with fanout_levels = 0 (--fanout changes it), so both tools
#   put all N files into one directory: fio cannot reproduce stowbench's hashed fan-out
#   directories, and with the default of 2 levels of 256 almost every put would also make a
#   directory — work fio never does.
# - gets are warm on both sides: one untimed read of every object first (fio: a read job whose
#   result is discarded; stowbench: warmup_count = N), then `passes` timed reads of every object
#   (fio loops, stowbench count = passes × N) so the measured read lasts long enough to time.
# - the figure: fio's bytes over the slowest thread's runtime; stowbench's phase bytes over the
#   phase's span, first start to last end (throughput_total), its threads' mean own work taken
#   out (they share the operations and end together). Its all-active window is kept in raw.csv
#   as steady_value.
# Not matched by default (the two options above match them): the rename, the directory fsync
# with fsync=true. Not matchable: stowbench's fstat per get, and payload generation and
# verification (stowbench's own work, timed apart and taken out of its latencies and its
# windows, but run on the same cores; --no-verify turns verification off to see its share).
set -euo pipefail
BENCH_NAME=fs-vs-fio
# shellcheck source=bench/lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

SIZES="4KiB,16KiB,64KiB,1MiB,16MiB,64MiB"
THREADS="1,4"
DURABILITY="buffered,fsync"
# An even number of repeats runs each tool first equally often (bench/summarize.py).
REPEAT=4
OUT=""
WORK=""
VERIFY=true
FANOUT=0
WRITE_MODE=rename
FSYNC_DIR=true
# Data per put phase. Buffered puts land in the page cache at ~3 GB/s here: 1 GiB keeps even the
# largest objects' put above ~0.3 s, long enough for fio's millisecond runtime and stowbench's
# 10 ms throughput buckets to read within ~1 %. fsync puts go at disk speed: less data.
BUFFERED_VOLUME=$((1 << 30))
FSYNC_VOLUME=$((128 << 20))
# Timed gets read whole passes over the objects: about READ_VOLUME bytes, at most MAX_READS
# objects (small objects read at ~150k/s), at most MAX_PASSES passes. Warm reads go at memory
# speed: 4 GiB keeps the large sizes' get near half a second, well above both tools' clocks.
READ_VOLUME=$((4 << 30))
MAX_READS=200000
MAX_PASSES=256
MIN_OBJECTS=16
MAX_OBJECTS=20000
# ~2 flushes per object: on a disk that flushes in a few ms this bounds an fsync put to seconds.
# Not fewer: at 512, fio's 4 KiB four-thread fsync put ran 44 ms here (flushes take ~90 µs),
# too short for its millisecond runtime and for either tool's start-up to wash out.
MAX_FSYNC_OBJECTS=2048

usage() { sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

parse_args() {
  while (($#)); do
    case $1 in
    --sizes) SIZES=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --durability) DURABILITY=$2; shift 2 ;;
    --repeat) REPEAT=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --work-dir) WORK=$2; shift 2 ;;
    --no-verify) VERIFY=false; shift ;;
    --no-drop-caches) DROP_CACHES=false; shift ;;
    --fanout) FANOUT=$2; shift 2 ;;
    --write-mode) WRITE_MODE=$2; shift 2 ;;
    --no-dir-fsync) FSYNC_DIR=false; shift ;;
    --buffered-volume) BUFFERED_VOLUME=$(parse_size "$2"); shift 2 ;;
    --fsync-volume) FSYNC_VOLUME=$(parse_size "$2"); shift 2 ;;
    --read-volume) READ_VOLUME=$(parse_size "$2"); shift 2 ;;
    --max-reads) MAX_READS=$2; shift 2 ;;
    --max-objects) MAX_OBJECTS=$2; shift 2 ;;
    --max-fsync-objects) MAX_FSYNC_OBJECTS=$2; shift 2 ;;
    --quick)
      # A smoke run: three sizes, one repeat, a quarter of the data.
      SIZES="4KiB,1MiB,16MiB"
      REPEAT=1
      BUFFERED_VOLUME=$((BUFFERED_VOLUME / 4))
      FSYNC_VOLUME=$((FSYNC_VOLUME / 4))
      READ_VOLUME=$((READ_VOLUME / 4))
      MAX_READS=$((MAX_READS / 4))
      MAX_OBJECTS=$((MAX_OBJECTS / 4))
      MAX_FSYNC_OBJECTS=$((MAX_FSYNC_OBJECTS / 4))
      shift
      ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
    esac
  done
  [[ ${REPEAT} =~ ^[1-9][0-9]*$ ]] || die "--repeat must be a positive integer"
  [[ ${FANOUT} =~ ^[0-3]$ ]] || die "--fanout must be 0 to 3"
  [[ ${WRITE_MODE} == rename || ${WRITE_MODE} == in-place ]] || die "--write-mode must be rename or in-place"
  local d
  for d in $(split_list "${DURABILITY}"); do
    [[ ${d} == buffered || ${d} == fsync ]] || die "--durability takes buffered and/or fsync, not '${d}'"
  done
}

lcm_of_threads() {
  local l=1 t a b
  for t in $(split_list "${THREADS}"); do
    [[ ${t} =~ ^[1-9][0-9]*$ ]] || die "bad thread count '${t}'"
    a=${l} b=${t}
    while ((b)); do read -r a b <<<"${b} $((a % b))"; done
    l=$((l * t / a))
  done
  printf '%s\n' "${l}"
}

# Objects per cell: the volume over the size, clamped, rounded up to a multiple of $3 (every
# thread count), so each fio job gets a whole number of files.
objects_for() {
  local size=$1 durability=$2 multiple=$3 volume max n
  if [[ ${durability} == fsync ]]; then volume=${FSYNC_VOLUME} max=${MAX_FSYNC_OBJECTS}; else volume=${BUFFERED_VOLUME} max=${MAX_OBJECTS}; fi
  n=$((volume / size))
  ((n < MIN_OBJECTS)) && n=${MIN_OBJECTS}
  ((n > max)) && n=${max}
  ((n < MIN_OBJECTS)) && n=${MIN_OBJECTS}
  printf '%s\n' $(((n + multiple - 1) / multiple * multiple))
}

passes_for() { # SIZE OBJECTS
  local bytes=$(($1 * $2)) p by_count
  p=$(((READ_VOLUME + bytes - 1) / bytes))
  by_count=$(((MAX_READS + $2 - 1) / $2))
  ((p > by_count)) && p=${by_count}
  ((p > MAX_PASSES)) && p=${MAX_PASSES}
  ((p < 1)) && p=1
  printf '%s\n' "${p}"
}

# fio's sync options for an fsync put. Not fsync_on_close=1: at the end of a job fio then reopens
# and fsyncs every file again (backend.c, the end_fsync/fsync_on_close loop) — on this VM that
# doubled the runtime of a 500-file put. fsync=<blocks per file> fsyncs each file right after its
# last block, on the same descriptor, before close: stowbench's order. But fio issues that fsync
# only when it asks for the next block, so the job's last file would never be synced; io_size one
# block beyond size makes fio ask for one more block (it wraps to the job's first file and
# rewrites its first block, unsynced): every object file is fsynced once, at the cost of one extra
# buffered block write and one clean fsync per job.
fio_sync_options() {
  local size=$1 bs=$2 files=$3
  printf 'fsync=%s\nio_size=%s\n' $(((size + bs - 1) / bs)) $((files * size + bs))
}

write_fio_job() { # FILE RW SIZE THREADS OBJECTS DURABILITY LOOPS
  local file=$1 rw=$2 size=$3 threads=$4 objects=$5 durability=$6 loops=$7
  local bs files=$((objects / threads))
  bs="$(fs_call_bytes "${size}")"
  {
    printf '; %s: %s objects of %s bytes, %s thread(s), %s (written by bench/fs-vs-fio.sh)\n' \
      "${rw}" "${objects}" "${size}" "${threads}" "${durability}"
    printf '[global]\n'
    printf 'directory=%s\n' "${FIO_DIR}"
    printf 'ioengine=sync\nthread=1\ngroup_reporting=1\ndirect=0\ninvalidate=0\n'
    printf 'numjobs=%s\nnrfiles=%s\nfilesize=%s\nsize=%s\nbs=%s\n' "${threads}" "${files}" "${size}" $((files * size)) "${bs}"
    printf 'file_service_type=sequential\nopenfiles=1\nfallocate=none\nunlink=0\n'
    printf '[obj]\nrw=%s\n' "${rw}"
    if [[ ${rw} == write ]]; then
      printf 'create_on_open=1\n'
      if [[ ${durability} == fsync ]]; then fio_sync_options "${size}" "${bs}" "${files}"; fi
    else
      printf 'loops=%s\n' "${loops}"
    fi
  } >"${file}"
}

# Runs a fio job file; prints "bytes_per_s - fio" for direction $2 (write or read): $3, the
# object bytes the job moves, over fio's runtime. Not fio's io_bytes, which in an fsync put also
# counts the one extra block per job that fio_sync_options adds.
run_fio() { # JOB DIRECTION BYTES
  local job=$1 dir=$2 bytes=$3 json="${1%.fio}.json"
  fio --output-format=json --output="${json}" "${job}" >/dev/null 2>"${job%.fio}.err" ||
    die "fio failed on ${job}: $(tail -n 5 "${job%.fio}.err")"
  python3 - "${json}" "${dir}" "${bytes}" <<'EOF'
import json, sys
doc, ddir, want = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3])
job = doc["jobs"][0]  # group_reporting: one entry for all numjobs threads
if job.get("error"):
    sys.exit(f"fio job error {job['error']} in {sys.argv[1]}")
d = job[ddir]
if d["io_bytes"] < want:
    sys.exit(f"fio {ddir} moved {d['io_bytes']} bytes, fewer than the {want} of the objects, in {sys.argv[1]}")
ms = d["runtime"]  # the slowest thread's runtime, milliseconds
if ms <= 0:
    sys.exit(f"fio {ddir} ran 0 ms in {sys.argv[1]}: too little data to time")
print(f"{want * 1000 / ms:.1f} - fio")
EOF
}

write_sb_job() { # FILE SIZE THREADS OBJECTS DURABILITY PASSES
  local file=$1 size=$2 threads=$3 objects=$4 durability=$5 passes=$6
  cat >"${file}" <<EOF
# Written by bench/fs-vs-fio.sh: ${objects} objects of ${size} bytes, ${threads} thread(s), ${durability}.
version = 1
name = "bench-fs-vs-fio"
seed = 42

[[target]]
name = "fs"
backend = "fs"
fsync = $([[ ${durability} == fsync ]] && echo true || echo false)
fanout_levels = ${FANOUT}
write_mode = "${WRITE_MODE}"
$([[ ${durability} == fsync && ${FSYNC_DIR} == false ]] && echo 'fsync_dir = false')

EOF
  sb_put_then_get_workload fio-match "${size}" "${threads}" "${objects}" "${passes}" >>"${file}"
}

# Both tools' files of one cell and repeat, removed together once both have run: the second
# tool's put must not create its files over inodes the first has just freed. ext4 without a
# journal (this machine's root) will not reuse an inode freed in the last 60 s (360 s while its
# inode-table block is dirty) when the group has another free one, and checks every free inode
# it passes on the way: a put right after another tool's delete spent up to 100 µs of kernel CPU
# per file doing that (session 39, docs/performance/fs-vs-fio.md). Removed together, both puts of a cell
# find the same freed inodes, and the order (alternating per repeat) spreads what is left.
remove_cell_files() {
  rm -rf -- "${FILES_DIR:?}"/fio-* "${FILES_DIR:?}"/stowbench-*
}

# One cell, one repeat, one tool; appends its put and get rows to raw.csv. Its files stay until
# remove_cell_files.
measure() { # TOOL SIZE THREADS DURABILITY OBJECTS PASSES REPEAT
  local tool=$1 size=$2 threads=$3 durability=$4 objects=$5 passes=$6 repeat=$7
  local label tag put get target
  label="$(size_label "${size}")"
  tag="${label}-t${threads}-${durability}-r${repeat}"
  target=0.90
  ((size >= 1 << 20)) && target=0.97
  if [[ ${tool} == ref ]]; then
    # As deep under the same parent as stowbench's objects directory (stowbench-<run id>/
    # case-0000/objects): ext4 places each new directory from its parent's block group, and the
    # files from their directory's, so both tools' files start from the same place.
    FIO_DIR="${FILES_DIR}/fio-${tag}/case-0000/objects"
    write_fio_job "${OUT}/jobs/${tag}-fio-put.fio" write "${size}" "${threads}" "${objects}" "${durability}" 1
    write_fio_job "${OUT}/jobs/${tag}-fio-warm.fio" read "${size}" "${threads}" "${objects}" "${durability}" 1
    write_fio_job "${OUT}/jobs/${tag}-fio-get.fio" read "${size}" "${threads}" "${objects}" "${durability}" "${passes}"
    settle_before_put
    # fio's directory is made after the settle, as stowbench makes its own directories during
    # its run: made before the sync and drop_caches, it gave fio's small-file creates a head
    # start (session 38, 20-repeat matrices: 4 KiB puts on one thread 0.77 of fio, 0.88 with this order).
    mkdir -p "${FIO_DIR}"
    put="$(run_fio "${OUT}/jobs/${tag}-fio-put.fio" write $((objects * size)))"
    settle_between_phases
    run_fio "${OUT}/jobs/${tag}-fio-warm.fio" read $((objects * size)) >/dev/null
    get="$(run_fio "${OUT}/jobs/${tag}-fio-get.fio" read $((passes * objects * size)))"
  else
    local job="${OUT}/jobs/${tag}-stowbench.toml" report
    write_sb_job "${job}" "${size}" "${threads}" "${objects}" "${durability}" "${passes}"
    settle_before_put
    report="$(run_stowbench "${job}" "${OUT}/stowbench" "${OUT}/jobs/${tag}-stowbench" --work-dir "${FILES_DIR}" --keep)"
    put="$(sb_phase_throughput "${report}" put)" || die "bad report ${report}"
    get="$(sb_phase_throughput "${report}" get)" || die "bad report ${report}"
  fi
  local op line bps ops window steady
  for op in put get; do
    if [[ ${op} == put ]]; then line=${put}; else line=${get}; fi
    # fio's figure is bytes over the slowest thread's runtime; stowbench's is the same, the
    # phase's bytes over its span (throughput_total). Its all-active window, which leaves out
    # the last threads' ramp-down, is kept as steady_value (fio's line: its value again).
    if [[ ${tool} == ref ]]; then
      read -r bps _ window <<<"${line}"
      steady=${bps}
    else
      read -r steady _ _ bps _ <<<"${line}"
      window=total
    fi
    ops="$(awk -v b="${bps}" -v s="${size}" 'BEGIN { printf "%.1f", b / s }')"
    csv_row "${OUT}/raw.csv" "${label}" "${threads}" "${durability}" "${op}" "${repeat}" "${tool}" \
      "${bps}" "${target}" "${size}" "${objects}" "${passes}" "${ops}" "${window}" "${steady}"
    log "$(printf '%-6s t%s %-8s r%s %-3s %-9s %8.1f MB/s' "${label}" "${threads}" "${durability}" "${repeat}" "${op}" \
      "$([[ ${tool} == ref ]] && echo fio || echo stowbench)" "$(awk -v b="${bps}" 'BEGIN { print b / 1e6 }')")"
  done
}

write_conditions() {
  {
    printf 'date: %s\n' "$(date -u +%FT%TZ)"
    printf 'command: %s\n' "${COMMAND_LINE}"
    printf 'fio: %s\n' "$(fio --version)"
    printf 'stowbench: %s (%s)\n' "$("${STOWBENCH}" --version)" "${STOWBENCH}"
    printf 'kernel: %s\n' "$(uname -sr)"
    printf 'cpus: %s, memory: %s\n' "$(nproc)" "$(free -h | awk '/^Mem:/ { print $2 }')"
    printf 'work dir: %s (%s)\n' "${WORK}" "$(df -T "${WORK}" | awk 'NR == 2 { print $2 " on " $1 }')"
    printf 'root: %s; before each put: %s\n' "$(is_root && echo yes || echo no)" \
      "$(settle_description)"
    printf 'stowbench verify: %s, fanout_levels: %s, write_mode: %s, fsync_dir: %s\n' "${VERIFY}" "${FANOUT}" "${WRITE_MODE}" "${FSYNC_DIR}"
    printf 'load average at start: %s\n' "$(load_average)"
  } >"${OUT}/conditions.txt"
}

main() {
  COMMAND_LINE="$0 $*"
  parse_args "$@"
  need_cmd fio "apt-get install fio"
  need_cmd python3
  STOWBENCH="$(find_stowbench)"
  OUT="$(make_out_dir "${OUT}")"
  mkdir -p "${OUT}/jobs" "${OUT}/stowbench"
  # A fresh directory of our own inside --work-dir (default /var/tmp: on disk, not tmpfs),
  # removed at exit; nothing outside it is touched.
  mkdir -p "${WORK:=/var/tmp}"
  WORK="$(mktemp -d "${WORK}/stowbench-fs-vs-fio.XXXXXX")"
  trap 'rm -rf -- "${WORK}"' EXIT
  FILES_DIR="${WORK}/files"
  mkdir -p "${FILES_DIR}"
  write_conditions
  : >"${OUT}/raw.csv" # a fresh file: rows of an older run in the same --out must not mix in
  csv_row "${OUT}/raw.csv" size threads durability op repeat tool value target size_bytes objects passes ops_per_s window steady_value
  local multiple size sz threads durability objects passes repeat first second
  multiple="$(lcm_of_threads)"
  local t0=${SECONDS}
  for repeat in $(seq 1 "${REPEAT}"); do
    read -r first second <<<"$(order_for_repeat "${repeat}")"
    for sz in $(split_list "${SIZES}"); do
      size="$(parse_size "${sz}")"
      for durability in $(split_list "${DURABILITY}"); do
        objects="$(objects_for "${size}" "${durability}" "${multiple}")"
        passes="$(passes_for "${size}" "${objects}")"
        for threads in $(split_list "${THREADS}"); do
          measure "${first}" "${size}" "${threads}" "${durability}" "${objects}" "${passes}" "${repeat}"
          measure "${second}" "${size}" "${threads}" "${durability}" "${objects}" "${passes}" "${repeat}"
          remove_cell_files
        done
      done
    done
  done
  log "measured in $((SECONDS - t0)) s; results in ${OUT}"
  printf 'load average at end: %s\n' "$(load_average)" >>"${OUT}/conditions.txt"
  python3 "${BENCH_DIR}/summarize.py" "${OUT}/raw.csv" --keys size,threads,durability,op --ref-name fio \
    --unit MB/s --scale 1e6 --out "${OUT}" \
    --title "fs backend vs fio (same files, same sizes; MB/s = 10^6 bytes/s; put = create+write, get = warm read)" |
    tee "${OUT}/table.txt"
  printf '\nraw: %s/raw.csv  summary: %s/summary.csv %s/summary.json  conditions: %s/conditions.txt\n' \
    "${OUT}" "${OUT}" "${OUT}" "${OUT}"
}

main "$@"
