#!/usr/bin/env bash
# Durable `pack` against `sqlite` (synchronous = "full") and `fs` (fsync = true): does our own
# format earn its place at equal durability?
#
#   bench/pack-durable.sh [--small-sizes 4KiB,16KiB,64KiB] [--large-sizes 1MiB,16MiB,64MiB]
#                         [--threads 1,4] [--repeat N] [--objects N] [--small-volume SIZE]
#                         [--reads N] [--large-volume SIZE] [--large-read-volume SIZE]
#                         [--fs-fanout N] [--no-fio] [--no-verify] [--pack-pread]
#                         [--pack-unchecked] [--quick]
#                         [--out DIR] [--work-dir DIR]
#
# --pack-pread: pack reads large values with pread and then hashes the copy (`mmap = false`);
# by default it hashes them in place through its mapping (docs/backends/pack.md).
# --pack-unchecked: pack gets skip the record's body hash (`read_checks = false`): the same
# integrity work as fs's reads (none), so the large-get ratio then shows the format's read path.
#
# Targets (the issue's): for the small sizes (4–64 KiB) on 1 and 4 threads, durable pack put
# ≥ 2× sqlite synchronous=full and ≥ 5× fs fsync=true (op/s), pack get ≥ 1.35× sqlite (SQLite's
# published "35% faster than the filesystem" is the claim to beat); for the large sizes
# (≥ 1 MiB), pack get ≥ 0.97× fs. Every ratio is of the medians over the repeats (balanced over
# the order the tools ran in, bench/summarize.py).
#
# Cells, per repeat (default 4), each tool one `stowbench run` of a one-target job file written
# to OUT/jobs/ (rerun any number by hand with `stowbench run OUT/jobs/<file>.toml`):
# - small: each size × threads: pack (fsync = true), sqlite (synchronous = "full", WAL as by
#   default), fs (fsync = true, the backend's default fan-out) put the same N objects (--objects,
#   default 3000, fewer if N × size exceeds --small-volume), then read them: one untimed pass
#   (warm page cache and caches of the backend), then --reads timed gets (whole passes,
#   sequential keys). Beside them fio, for context only: the device's own ceiling for this write
#   pattern — one buffered pwrite of pack's record size (size + 56-byte header + 14-byte key) and
#   an fdatasync per write, into a file fio wrote, synced and read into the cache beforehand
#   (rw=write, overwrite=1, pre_read=1, fdatasync=1, psync, one job and file per thread,
#   N/threads writes each). Shown as "fio write+fdatasync IOPS", with pack/fio beside it, not a
#   target: a closed-loop writer's durable put waits for one write and one flush of the device,
#   so no format's one writer outruns this loop by much. Beside it fio's floor for any durable
#   write: the value alone (size bytes, sizes that are whole 4 KiB pages only), each write
#   O_DIRECT|O_DSYNC straight to the device (direct=1, sync=dsync). Below the table, each put
#   cell whose target asks more puts a second than the faster of the two did is named: there the
#   target lies above what this device does, not above what pack does.
# - large: each size × threads: pack and fs (both durable, as above) put --large-volume of data
#   (at least 8 objects), then one untimed pass and timed passes reading --large-read-volume.
#   The put figure is shown without a target (the issue sets none).
#
# Gets of small objects come from the same runs as the durable puts, not from separate
# non-durable cases: no backend's read path depends on its durability option (pack reads
# records by offset whatever `fsync` was; SQLite's `synchronous` only changes what a commit
# waits for; fs reads the same files), the data is already there, and a separate buffered put
# per cell would add a third of the run time and leave dirty pages whose writeback would run
# under the timed get. The large cells put durably for the same reason: nothing is dirty when
# the get starts. Gets run warm, as in stowbench's default run (nothing dropped from the cache).
#
# Interleaving: within a repeat, cell by cell, the tools run one after the other, the order
# rotated per repeat (small: pack sqlite fs fio fio-direct, then sqlite fs fio fio-direct pack,
# and so on; large: pack fs, then fs pack), so a drift of the machine falls on every tool alike.
# `sync` runs before every step (as any user: it only writes back, it drops nothing), because a
# step's figures swing with the writeback of whatever the previous step left dirty.
#
# What is matched and what differs (bench/README.md has the table): the same objects, sizes,
# keys, thread counts and order, each backend's put is durable when it returns. Not the same
# work: fs renames a temporary file and fsyncs the file and its directory per put, and with the
# default fan-out (2 levels of 256) most of 3000 puts also create and fsync a new directory
# (--fs-fanout 0 puts every file into one directory); sqlite commits one WAL transaction per
# put (BEGIN IMMEDIATE … COMMIT, fsync of the WAL with synchronous=full); pack writes one record
# into zeros it wrote and fdatasynced ahead of its tail (src/pack/store.rs `prepare`) and
# fdatasyncs its stripe once per record. fio's figure leaves out pack's zero-filling, which
# fio does before timing; the last of fio's writes is synced by end_fsync (one fsync per job).
#
# Results: OUT/raw.csv (every measurement), OUT/table.txt, OUT/summary.csv, OUT/summary.json,
# OUT/conditions.txt, OUT/jobs/ (every job file and log), OUT/stowbench/ (every report.json).
set -euo pipefail
BENCH_NAME=pack-durable
# shellcheck source=bench/lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

# A pack record is a 56-byte header, the key and the value (docs/formats/pack.md); stowbench's
# keys are obj-NNNNNNNNNN, 14 bytes (src/workload/keys.rs). fio writes records of this size.
readonly PACK_RECORD_OVERHEAD=$((56 + 14))
readonly TARGET_PUT_VS_SQLITE=2.0
readonly TARGET_PUT_VS_FS=5.0
readonly TARGET_GET_VS_SQLITE=1.35
readonly TARGET_LARGE_GET_VS_FS=0.97

SMALL_SIZES="4KiB,16KiB,64KiB"
LARGE_SIZES="1MiB,16MiB,64MiB"
THREADS="1,4"
# Four repeats put each of the four small-object tools in each position once (bench/summarize.py).
REPEAT=4
OUT=""
WORK=""
VERIFY=true
PACK_MMAP=true
PACK_READ_CHECKS=true
FS_FANOUT=2
FIO=true
# Small cells: N objects, at most SMALL_VOLUME bytes of them. 3000 durable puts last from under
# a second (pack) to several seconds (fs, one to three disk flushes each): enough to time, and at
# 64 KiB under 200 MiB. Then READS timed gets (in whole passes over the N objects).
OBJECTS=3000
SMALL_VOLUME=$((256 << 20))
READS=100000
# Large cells: LARGE_VOLUME bytes of objects (at least MIN_LARGE_OBJECTS of them), put at disk
# speed, then about LARGE_READ_VOLUME bytes of timed warm gets (memory speed: ~1 s).
LARGE_VOLUME=$((512 << 20))
LARGE_READ_VOLUME=$((4 << 30))
MIN_LARGE_OBJECTS=8
MAX_PASSES=1000

usage() { sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

parse_args() {
  while (($#)); do
    case $1 in
    --small-sizes) SMALL_SIZES=$2; shift 2 ;;
    --large-sizes) LARGE_SIZES=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --repeat) REPEAT=$2; shift 2 ;;
    --objects) OBJECTS=$2; shift 2 ;;
    --small-volume) SMALL_VOLUME=$(parse_size "$2"); shift 2 ;;
    --reads) READS=$2; shift 2 ;;
    --large-volume) LARGE_VOLUME=$(parse_size "$2"); shift 2 ;;
    --large-read-volume) LARGE_READ_VOLUME=$(parse_size "$2"); shift 2 ;;
    --fs-fanout) FS_FANOUT=$2; shift 2 ;;
    --no-fio) FIO=false; shift ;;
    --no-verify) VERIFY=false; shift ;;
    --pack-pread) PACK_MMAP=false; shift ;;
    --pack-unchecked) PACK_READ_CHECKS=false; shift ;;
    --out) OUT=$2; shift 2 ;;
    --work-dir) WORK=$2; shift 2 ;;
    --quick)
      # A smoke run: one repeat, two sizes of each kind, a third of the objects, a quarter of the
      # reads and of the large volumes.
      SMALL_SIZES="4KiB,64KiB"
      LARGE_SIZES="1MiB,16MiB"
      REPEAT=1
      OBJECTS=1000
      READS=$((READS / 4))
      LARGE_VOLUME=$((LARGE_VOLUME / 4))
      LARGE_READ_VOLUME=$((LARGE_READ_VOLUME / 4))
      shift
      ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
    esac
  done
  [[ ${REPEAT} =~ ^[1-9][0-9]*$ ]] || die "--repeat must be a positive integer"
  [[ ${OBJECTS} =~ ^[1-9][0-9]*$ ]] || die "--objects must be a positive integer"
  [[ ${READS} =~ ^[1-9][0-9]*$ ]] || die "--reads must be a positive integer"
  [[ ${FS_FANOUT} =~ ^[0-3]$ ]] || die "--fs-fanout must be 0 to 3"
  [[ -n ${SMALL_SIZES}${LARGE_SIZES} ]] || die "nothing to run: --small-sizes and --large-sizes are both empty"
  local t
  for t in $(split_list "${THREADS}"); do
    [[ ${t} =~ ^[1-9][0-9]*$ ]] || die "bad thread count '${t}'"
  done
}

lcm_of_threads() {
  local l=1 t a b
  for t in $(split_list "${THREADS}"); do
    a=${l} b=${t}
    while ((b)); do read -r a b <<<"${b} $((a % b))"; done
    l=$((l * t / a))
  done
  printf '%s\n' "${l}"
}

# Rounds $1 up to a multiple of $2 (every thread count): each fio job gets whole records, and
# every thread count of a size works on the same objects.
round_up() { printf '%s\n' $((($1 + $2 - 1) / $2 * $2)); }

small_objects_for() { # SIZE MULTIPLE
  local n=${OBJECTS}
  (($1 * n > SMALL_VOLUME)) && n=$((SMALL_VOLUME / $1))
  ((n < 1)) && n=1
  round_up "${n}" "$2"
}

large_objects_for() { # SIZE MULTIPLE
  local n=$((LARGE_VOLUME / $1))
  ((n < MIN_LARGE_OBJECTS)) && n=${MIN_LARGE_OBJECTS}
  round_up "${n}" "$2"
}

passes_for() { # READS_WANTED OBJECTS
  local p=$((($1 + $2 - 1) / $2))
  ((p > MAX_PASSES)) && p=${MAX_PASSES}
  ((p < 1)) && p=1
  printf '%s\n' "${p}"
}

# The tools of a cell in the order of repeat $1: the list rotated by (repeat - 1).
rotate() { # REPEAT TOOL...
  local r=$1
  shift
  local tools=("$@") n=$# i
  for ((i = 0; i < n; i++)); do
    printf '%s ' "${tools[$(((i + r - 1) % n))]}"
  done
  printf '\n'
}

target_options() { # TOOL: the target table's options, one per line
  case $1 in
  pack)
    printf 'backend = "pack"\nfsync = true\nread_checks = %s\n' "${PACK_READ_CHECKS}"
    # Unchecked gets never map, and pack refuses mmap = true beside read_checks = false.
    [[ ${PACK_MMAP} == false ]] && printf 'mmap = false\n'
    ;;
  sqlite) printf 'backend = "sqlite"\nsynchronous = "full"\n' ;;
  fs) printf 'backend = "fs"\nfsync = true\nfanout_levels = %s\n' "${FS_FANOUT}" ;;
  esac
}

write_sb_job() { # FILE TOOL SIZE THREADS OBJECTS PASSES
  local file=$1 tool=$2 size=$3 threads=$4 objects=$5 passes=$6
  cat >"${file}" <<EOF
# Written by bench/pack-durable.sh: ${tool}, durable puts of ${objects} objects of ${size} bytes,
# then warm gets, ${threads} thread(s).
version = 1
name = "bench-pack-durable"
seed = 42

[[target]]
name = "${tool}"
$(target_options "${tool}")

EOF
  sb_put_then_get_workload durable "${size}" "${threads}" "${objects}" "${passes}" >>"${file}"
}

write_fio_job() { # FILE BS THREADS OBJECTS MODE (BS: bytes per write, as measure chose them)
  local file=$1 bs=$2 threads=$3 objects=$4 mode=$5
  local per_job=$((objects / threads))
  {
    if [[ ${mode} == direct ]]; then
      printf '; the device floor beside durable pack: %s writes of the value alone (%s bytes, aligned), %s job(s),\n' "${objects}" "${bs}" "${threads}"
      printf '; each O_DIRECT|O_DSYNC straight to the device, into a file laid out and synced first (written by bench/pack-durable.sh)\n'
    else
      printf '; the device ceiling beside durable pack: %s records of %s bytes, %s job(s), each one\n' "${objects}" "${bs}" "${threads}"
      printf '; buffered pwrite + fdatasync, into a file laid out and synced first (written by bench/pack-durable.sh)\n'
    fi
    printf '[global]\n'
    printf 'directory=%s\n' "${FIO_DIR}"
    printf 'ioengine=psync\nrw=write\nbs=%s\nsize=%s\n' "${bs}" $((per_job * bs))
    if [[ ${mode} == direct ]]; then
      printf 'overwrite=1\ndirect=1\nsync=dsync\n'
    else
      printf 'overwrite=1\nfdatasync=1\nend_fsync=1\n'
      # fio drops the pages of a file it has just laid out; without them in the cache, each write
      # of a record that starts inside a page first reads that page from the device (2,883 device
      # reads for 3,000 writes of 4,166 bytes, each pwrite 74–82 µs), and the column measured a
      # read + write + flush a record. pack writes into zeros it has just written (cached), so fio
      # reads its file into the cache first: each pwrite then takes 6–8 µs, 7 device reads in all.
      printf 'pre_read=1\ndirect=0\ninvalidate=0\n'
    fi
    printf 'thread=1\ngroup_reporting=1\nnumjobs=%s\n' "${threads}"
    printf '[rec]\n'
  } >"${file}"
}

# Runs a fio job; prints "bytes_per_s ops_per_s fio": the job's writes over fio's runtime (the
# slowest job's, milliseconds).
run_fio() { # JOB WRITES BS
  local job=$1 json="${1%.fio}.json"
  fio --output-format=json --output="${json}" "${job}" >/dev/null 2>"${job%.fio}.err" ||
    die "fio failed on ${job}: $(tail -n 5 "${job%.fio}.err")"
  python3 - "${json}" "$2" "$3" <<'EOF'
import json, sys
doc, writes, bs = json.load(open(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3])
job = doc["jobs"][0]  # group_reporting: one entry for all numjobs threads
if job.get("error"):
    sys.exit(f"fio job error {job['error']} in {sys.argv[1]}")
w = job["write"]
if w["io_bytes"] < writes * bs:
    sys.exit(f"fio wrote {w['io_bytes']} bytes, fewer than {writes} records of {bs}, in {sys.argv[1]}")
if w["runtime"] <= 0:
    sys.exit(f"fio ran 0 ms in {sys.argv[1]}: too little to time")
ops = writes * 1000 / w["runtime"]
print(f"{ops * bs:.1f} {ops:.3f} fio")
EOF
}

# Appends one raw.csv row and logs it.
record() { # OP SIZE THREADS REPEAT TOOL TARGET OBJECTS TIMED_OPS BPS OPS WINDOW
  local op=$1 size=$2 threads=$3 repeat=$4 tool=$5 target=$6 objects=$7 timed=$8 bps=$9 ops=${10} window=${11}
  local label
  label="$(size_label "${size}")"
  csv_row "${OUT}/raw.csv" "${op}" "${label}" "${threads}" "${repeat}" "${tool}" "${ops}" "${target}" \
    "${size}" "${objects}" "${timed}" "${bps}" "${window}"
  log "$(printf '%-6s t%s r%s %-3s %-6s %10.1f op/s %9.1f MB/s' "${label}" "${threads}" "${repeat}" "${op}" "${tool}" \
    "${ops}" "$(awk -v b="${bps}" 'BEGIN { print b / 1e6 }')")"
}

# One tool, one cell, one repeat. KIND small or large decides the targets its rows carry: the
# target a ratio pack/TOOL must reach is written on TOOL's rows (bench/summarize.py --tools).
measure() { # KIND TOOL SIZE THREADS OBJECTS PASSES REPEAT
  local kind=$1 tool=$2 size=$3 threads=$4 objects=$5 passes=$6 repeat=$7
  local tag job report op put_target="" get_target="" line bps ops window
  tag="$(size_label "${size}")-t${threads}-${tool}-r${repeat}"
  case ${kind}/${tool} in
  small/sqlite) put_target=${TARGET_PUT_VS_SQLITE} get_target=${TARGET_GET_VS_SQLITE} ;;
  small/fs) put_target=${TARGET_PUT_VS_FS} ;;
  large/fs) get_target=${TARGET_LARGE_GET_VS_FS} ;;
  esac
  sync
  if [[ ${tool} == fio* ]]; then
    local mode=buffered bs=$((size + PACK_RECORD_OVERHEAD))
    if [[ ${tool} == fio-direct ]]; then
      # O_DIRECT takes whole sectors only: a size that is not a multiple of 4 KiB gets no floor.
      ((size % 4096 == 0)) || return 0
      mode=direct bs=${size}
    fi
    job="${OUT}/jobs/${tag}.fio"
    mkdir -p "${FIO_DIR}"
    write_fio_job "${job}" "${bs}" "${threads}" "${objects}" "${mode}"
    line="$(run_fio "${job}" "${objects}" "${bs}")"
    rm -rf -- "${FIO_DIR}"
    read -r bps ops window <<<"${line}"
    record put "${size}" "${threads}" "${repeat}" "${tool}" "" "${objects}" "${objects}" "${bps}" "${ops}" "${window}"
    return
  fi
  job="${OUT}/jobs/${tag}.toml"
  write_sb_job "${job}" "${tool}" "${size}" "${threads}" "${objects}" "${passes}"
  report="$(run_stowbench "${job}" "${OUT}/stowbench" "${OUT}/jobs/${tag}" --work-dir "${SB_DIR}")"
  [[ -n ${report} ]] || die "no report path in ${OUT}/jobs/${tag}.log"
  LAST_REPORT=${report}
  for op in put get; do
    line="$(sb_phase_throughput "${report}" "${op}")" || die "bad report ${report}"
    read -r bps ops window _ <<<"${line}"
    if [[ ${op} == put ]]; then
      record put "${size}" "${threads}" "${repeat}" "${tool}" "${put_target}" "${objects}" "${objects}" "${bps}" "${ops}" "${window}"
    else
      record get "${size}" "${threads}" "${repeat}" "${tool}" "${get_target}" "${objects}" $((passes * objects)) "${bps}" "${ops}" "${window}"
    fi
  done
}

# Names each put cell whose target, as puts a second (target × the other tool's figure), lies
# above the faster of fio's two durable-write loops in the same run: a target this device cannot meet.
beyond_the_device() { # SUMMARY_JSON
  python3 - "$1" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
for cell in doc["cells"]:
    # The device's best: the buffered loop of pack's records, or the value alone written
    # straight to the device, whichever went faster.
    fio = max((cell["tools"][t]["median"] or 0) for t in ("fio", "fio-direct"))
    if cell["op"] != "put" or not fio:
        continue
    for name, q in cell["ratios"].items():
        den = name.split("/")[1]
        other = cell["tools"][den]["median"]
        if q["target"] is None or q["verdict"] != "MISS" or not other:
            continue
        needed = q["target"] * other
        if needed > fio:
            print(f"put {cell['size']} on {cell['threads']} thread(s): {q['target']:g}× {den} is {needed:,.0f} puts/s, "
                  f"above this device's own durable writes ({fio:,.0f}/s, fio's best in the same run; pack did "
                  f"{cell['tools']['pack']['median']:,.0f})")
EOF
}

# The block device under a path and its write cache mode ("write back" makes each fdatasync a
# cache flush command to the device), when sysfs says.
device_cache() {
  local src dev sys
  src="$(df --output=source "$1" | tail -n1)"
  dev="$(basename -- "${src}")"
  sys="/sys/class/block/${dev}"
  [[ -e ${sys} ]] || { printf '%s: unknown\n' "${src}"; return; }
  [[ -e ${sys}/partition ]] && sys="$(dirname -- "$(readlink -f -- "${sys}")")"
  printf '%s: write cache %s, rotational %s\n' "${src}" \
    "$(cat "${sys}/queue/write_cache" 2>/dev/null || echo unknown)" "$(cat "${sys}/queue/rotational" 2>/dev/null || echo unknown)"
}

write_conditions() {
  {
    printf 'date: %s\n' "$(date -u +%FT%TZ)"
    printf 'command: %s\n' "${COMMAND_LINE}"
    printf 'stowbench: %s (%s)\n' "$("${STOWBENCH}" --version)" "${STOWBENCH}"
    if [[ ${FIO} == true ]]; then printf 'fio: %s\n' "$(fio --version)"; else printf 'fio: not run\n'; fi
    printf 'kernel: %s\n' "$(uname -sr)"
    printf 'cpus: %s, memory: %s\n' "$(nproc)" "$(free -h | awk '/^Mem:/ { print $2 }')"
    printf 'work dir: %s (%s)\n' "${WORK}" "$(df -T "${WORK}" | awk 'NR == 2 { print $2 " on " $1 }')"
    printf 'mount options: %s\n' "$(findmnt -no OPTIONS -T "${WORK}" 2>/dev/null || echo unknown)"
    printf 'device: %s\n' "$(device_cache "${WORK}")"
    printf 'root: %s; before every step: sync (nothing dropped; gets read warm)\n' "$(is_root && echo yes || echo no)"
    # Unchecked gets never map: say what the runs did.
    printf 'targets: pack fsync=true mmap=%s read_checks=%s; sqlite synchronous=full (journal_mode wal); fs fsync=true fanout_levels=%s\n' \
      "$([[ ${PACK_READ_CHECKS} == true ]] && echo "${PACK_MMAP}" || echo false)" "${PACK_READ_CHECKS}" "${FS_FANOUT}"
    printf 'small sizes: %s; large sizes: %s; threads: %s; repeats: %s\n' "${SMALL_SIZES:-none}" "${LARGE_SIZES:-none}" "${THREADS}" "${REPEAT}"
    printf 'objects (small): %s, at most %s bytes; timed gets (small): %s; large: %s bytes put, %s bytes of timed gets; verify: %s\n' \
      "${OBJECTS}" "${SMALL_VOLUME}" "${READS}" "${LARGE_VOLUME}" "${LARGE_READ_VOLUME}" "${VERIFY}"
    printf 'load average at start: %s\n' "$(load_average)"
  } >"${OUT}/conditions.txt"
}

main() {
  COMMAND_LINE="$0 $*"
  parse_args "$@"
  need_cmd python3
  if [[ ${FIO} == true ]] && ! command -v fio >/dev/null 2>&1; then
    log "fio not found (apt-get install fio): no device reference column"
    FIO=false
  fi
  STOWBENCH="$(find_stowbench)"
  OUT="$(make_out_dir "${OUT}")"
  mkdir -p "${OUT}/jobs" "${OUT}/stowbench"
  # A fresh directory of our own inside --work-dir (default /var/tmp: on disk, not tmpfs),
  # removed at exit; nothing outside it is touched.
  mkdir -p "${WORK:=/var/tmp}"
  WORK="$(mktemp -d "${WORK}/stowbench-pack-durable.XXXXXX")"
  trap 'rm -rf -- "${WORK}"' EXIT
  FIO_DIR="${WORK}/fio"
  SB_DIR="${WORK}/stowbench"
  mkdir -p "${SB_DIR}"
  write_conditions
  : >"${OUT}/raw.csv" # a fresh file: rows of an older run in the same --out must not mix in
  csv_row "${OUT}/raw.csv" op size threads repeat tool value target size_bytes objects timed_ops bytes_per_s window
  local multiple sz size threads objects passes repeat tool small_tools=(pack sqlite fs)
  [[ ${FIO} == true ]] && small_tools+=(fio fio-direct)
  multiple="$(lcm_of_threads)"
  LAST_REPORT=""
  local t0=${SECONDS}
  for repeat in $(seq 1 "${REPEAT}"); do
    for sz in $(split_list "${SMALL_SIZES}"); do
      size="$(parse_size "${sz}")"
      objects="$(small_objects_for "${size}" "${multiple}")"
      passes="$(passes_for "${READS}" "${objects}")"
      for threads in $(split_list "${THREADS}"); do
        for tool in $(rotate "${repeat}" "${small_tools[@]}"); do
          measure small "${tool}" "${size}" "${threads}" "${objects}" "${passes}" "${repeat}"
        done
      done
    done
    for sz in $(split_list "${LARGE_SIZES}"); do
      size="$(parse_size "${sz}")"
      objects="$(large_objects_for "${size}" "${multiple}")"
      passes="$(passes_for $(((LARGE_READ_VOLUME + size - 1) / size)) "${objects}")"
      for threads in $(split_list "${THREADS}"); do
        for tool in $(rotate "${repeat}" pack fs); do
          measure large "${tool}" "${size}" "${threads}" "${objects}" "${passes}" "${repeat}"
        done
      done
    done
  done
  log "measured in $((SECONDS - t0)) s; results in ${OUT}"
  {
    if [[ -n ${LAST_REPORT} ]]; then
      printf 'sqlite (bundled in stowbench): %s\n' "$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["environment"].get("sqlite_version", "unknown"))' "${LAST_REPORT}")"
    fi
    printf 'load average at end: %s\n' "$(load_average)"
  } >>"${OUT}/conditions.txt"
  local fio_tool="" fio_ratio=()
  [[ ${FIO} == true ]] && fio_tool=",fio=fio write+fdatasync IOPS,fio-direct=fio O_DIRECT+O_DSYNC of the value IOPS" &&
    fio_ratio=(--ratio pack/fio)
  python3 "${BENCH_DIR}/summarize.py" "${OUT}/raw.csv" --keys op,size,threads --unit op/s --out "${OUT}" \
    --tools "pack,sqlite,fs${fio_tool}" --ratio pack/sqlite --ratio pack/fs "${fio_ratio[@]}" \
    --title "durable pack (fsync=true) vs sqlite (synchronous=full) and fs (fsync=true); op/s, put = durable, get = warm; fio = the device's own durable-write rate, not a target" |
    tee "${OUT}/table.txt"
  if [[ ${FIO} == true ]]; then beyond_the_device "${OUT}/summary.json" | tee -a "${OUT}/table.txt"; fi
  printf '\nraw: %s/raw.csv  summary: %s/summary.csv %s/summary.json  conditions: %s/conditions.txt\n' \
    "${OUT}" "${OUT}" "${OUT}" "${OUT}"
}

main "$@"
