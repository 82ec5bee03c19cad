#!/usr/bin/env bash
# MinIO's warp vs stowbench's `s3` backend: PUT and GET throughput against one S3 endpoint.
#
#   bench/s3-vs-warp.sh [--sizes 1MiB,16MiB] [--concurrency 1,4] [--duration 20s]
#                       [--payload chunked|whole|unsigned]
#                       [--repeat N] [--quick] [--out DIR] [--work-dir DIR] [--no-verify]
#                       [--no-drop-caches]
#
# The endpoint: STOWBENCH_S3_ENDPOINT, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (and optionally
# STOWBENCH_S3_REGION, STOWBENCH_S3_BUCKET) — e.g. `eval "$(scripts/services.sh env DIR)"`.
# Without them, the script starts its own MinIO on 127.0.0.1 with `scripts/services.sh start
# --only s3` in a fresh directory and stops exactly that MinIO at exit (root; MinIO built by
# `scripts/services.sh install`). warp is built once from the Go module proxy at a pinned version.
#
# Per cell (size × concurrency) and repeat, back to back (order alternating per repeat):
# - put: `warp put --duration D --concurrent C --obj.size S --disable-multipart` vs stowbench
#   with C threads putting new keys of S bytes for D (a duration-stopped put phase over a key
#   space larger than it can fill, so no put overwrites);
# - get: `warp get --objects K …` (uploads K objects, then GETs random ones for D) vs stowbench
#   with K objects (an untimed preload puts them) and a get phase of D with uniform random keys.
# --payload: how stowbench signs a PUT's body (its option payload_signing). chunked, the default,
# is what warp (minio-go) does over plain HTTP too: each 64 KiB chunk signed as it is sent. whole
# hashes the whole body into the signature before sending (object_store's way; warp unchanged).
# unsigned: warp --disable-sha256-payload and stowbench's payload_signing = "unsigned", so neither
# client hashes bodies to sign them.
# Compared: bytes/s over each tool's whole run of the operation, one definition for both: all the
# bytes its operations moved over the span from the first one's start to the last one's end
# (warp: by_op_type.<OP> total_bytes over end_time - start_time; stowbench: throughput_total).
# Each tool's own steady-state figure is kept in raw.csv as steady_value but not compared: warp's
# analysed average drops 2 s at each end, stowbench's all-active window drops nothing on one
# thread, and that alone moved one-thread 1 MiB puts from parity to 0.90-1.01 (MinIO slows when
# writeback starts, late in a 10 s put phase, which only warp's figure leaves out).
# Target: ratio >= 1.0.
#
# Not matched (bench/README.md): the client libraries (warp: minio-go; stowbench: object_store +
# reqwest) sign and stream requests their own ways; warp's objects are random bytes it makes
# once, stowbench's are generated per object and each get is verified (--no-verify drops that);
# warp works in a bucket of its own that it empties (a fresh `stowbench-warp-<random>` bucket,
# removed at the end), stowbench under a prefix of $STOWBENCH_S3_BUCKET.
set -euo pipefail
BENCH_NAME=s3-vs-warp
# shellcheck source=bench/lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

# Pinned warp: the module version and the go.sum hash of its module zip. The checksum database
# is not reachable for this module through the proxy here, so the hash is checked by this script.
readonly WARP_MODULE=github.com/minio/warp
readonly WARP_VERSION=v1.3.1
readonly WARP_SUM="h1:EHNax13sUn7YUR4bYpUrgXW+ldtMKoELPYzN4rrtH6U="
readonly TARGET=1.0

SIZES="1MiB,16MiB"
CONCURRENCY="1,4"
DURATION=20
# An even number of repeats runs each tool first equally often (bench/summarize.py).
REPEAT=2
OUT=""
WORK=""
VERIFY=true
PAYLOAD=chunked
GET_VOLUME=$((512 << 20)) # bytes warp get uploads before it reads (K = volume / size, 16 to 2500)

usage() { sed -n '2,7p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

parse_args() {
  while (($#)); do
    case $1 in
    --sizes) SIZES=$2; shift 2 ;;
    --concurrency) CONCURRENCY=$2; shift 2 ;;
    --duration) DURATION=${2%s}; shift 2 ;;
    --repeat) REPEAT=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --work-dir) WORK=$2; shift 2 ;;
    --no-verify) VERIFY=false; shift ;;
    --payload) PAYLOAD=$2; shift 2 ;;
    --no-drop-caches) DROP_CACHES=false; shift ;;
    --quick) SIZES="1MiB"; DURATION=8; REPEAT=1; GET_VOLUME=$((128 << 20)); shift ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
    esac
  done
  [[ ${DURATION} =~ ^[1-9][0-9]*$ ]] || die "--duration takes whole seconds, e.g. 20s"
  [[ ${REPEAT} =~ ^[1-9][0-9]*$ ]] || die "--repeat must be a positive integer"
  [[ ${PAYLOAD} == chunked || ${PAYLOAD} == whole || ${PAYLOAD} == unsigned ]] || die "--payload is chunked, whole or unsigned, not '${PAYLOAD}'"
}

find_go() {
  if command -v go >/dev/null 2>&1; then command -v go; elif [[ -x /usr/local/go/bin/go ]]; then echo /usr/local/go/bin/go; else die "no Go toolchain (needed once, to build warp)"; fi
}

# Builds warp into the tool cache once; prints its path.
install_warp() {
  local bin="${CACHE_DIR}/bin/warp" stamp="${CACHE_DIR}/bin/warp.stamp" go scratch sum
  if [[ -x ${bin} && -f ${stamp} && "$(cat "${stamp}")" == "${WARP_MODULE}@${WARP_VERSION}" ]]; then
    printf '%s\n' "${bin}"
    return
  fi
  go="$(find_go)"
  mkdir -p "${CACHE_DIR}/bin"
  log "building ${WARP_MODULE}@${WARP_VERSION} (a few minutes on 2 cores, once)"
  # `go install MODULE@VERSION` can fail with "403 ... loading deprecation" on the version list;
  # a scratch module with `go get` + `go build` asks only for the pinned version.
  scratch="$(mktemp -d "${TMPDIR:-/tmp}/stowbench-warp-build.XXXXXX")"
  (
    cd "${scratch}"
    "${go}" mod init stowbench.local/warp-build >/dev/null 2>&1
    GONOSUMDB="${WARP_MODULE}" "${go}" get "${WARP_MODULE}@${WARP_VERSION}"
    sum="$(awk -v m="${WARP_MODULE}" -v v="${WARP_VERSION}" '$1 == m && $2 == v { print $3 }' go.sum)"
    [[ ${sum} == "${WARP_SUM}" ]] || {
      echo "warp ${WARP_VERSION}: go.sum has '${sum}', expected '${WARP_SUM}'" >&2
      exit 1
    }
    "${go}" build -o "${bin}.tmp" "${WARP_MODULE}"
  ) >&2 || {
    rm -rf -- "${scratch}" "${bin}.tmp"
    die "building warp failed"
  }
  rm -rf -- "${scratch}"
  mv -f "${bin}.tmp" "${bin}"
  printf '%s\n' "${WARP_MODULE}@${WARP_VERSION}" >"${stamp}"
  printf '%s\n' "${bin}"
}

# Uses the endpoint from the environment, or starts a MinIO of our own (stopped at exit).
SERVICES_DIR=""
ensure_endpoint() {
  if [[ -n ${STOWBENCH_S3_ENDPOINT:-} ]]; then
    [[ -n ${AWS_ACCESS_KEY_ID:-} && -n ${AWS_SECRET_ACCESS_KEY:-} ]] ||
      die "STOWBENCH_S3_ENDPOINT is set but AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY are not"
    log "using S3 endpoint ${STOWBENCH_S3_ENDPOINT} from the environment"
    return
  fi
  is_root || die "no STOWBENCH_S3_ENDPOINT set, and starting MinIO needs root; see scripts/README.md"
  SERVICES_DIR="$(mktemp -d /tmp/stowbench-bench-s3.XXXXXX)"
  chmod 755 "${SERVICES_DIR}"
  log "no STOWBENCH_S3_ENDPOINT: starting MinIO in ${SERVICES_DIR}"
  "${REPO_DIR}/scripts/services.sh" start --only s3 "${SERVICES_DIR}" >/dev/null ||
    die "could not start MinIO (run 'scripts/services.sh install' once)"
  eval "$("${REPO_DIR}/scripts/services.sh" env "${SERVICES_DIR}")"
}

cleanup() {
  if [[ -n ${WARP_BUCKET:-} && -n ${STOWBENCH_S3_ENDPOINT:-} ]]; then
    # warp empties its bucket after each run; remove the (empty) bucket we had it make.
    curl -fsS -o /dev/null -X DELETE --aws-sigv4 "aws:amz:${STOWBENCH_S3_REGION:-us-east-1}:s3" \
      --user "${AWS_ACCESS_KEY_ID}:${AWS_SECRET_ACCESS_KEY}" "${STOWBENCH_S3_ENDPOINT%/}/${WARP_BUCKET}" 2>/dev/null || true
  fi
  if [[ -n ${SERVICES_DIR} ]]; then
    "${REPO_DIR}/scripts/services.sh" stop --only s3 "${SERVICES_DIR}" >/dev/null 2>&1 || true
    rm -rf -- "${SERVICES_DIR}"
  fi
  [[ -n ${WORK:-} && -d ${WORK} ]] && rm -rf -- "${WORK}"
  return 0
}

# Runs warp OP (put or get) for one cell; prints "bytes_per_s objects_per_s steady_bytes_per_s"
# of the benchmark data file's by_op_type.<OP>: the whole run (total_bytes and total_objects over
# end_time - start_time), then warp's analysed average (throughput, 2 s left out at each end).
run_warp() { # OP SIZE CONC OBJECTS TAG
  local op=$1 size=$2 conc=$3 objects=$4 tag=$5 data args
  data="${OUT}/warp/${tag}-warp-${op}"
  args=(--bucket "${WARP_BUCKET}" --obj.size "${size}" --concurrent "${conc}" --duration "${DURATION}s"
    --disable-multipart --benchdata "${data}" --no-color)
  [[ ${op} == get ]] && args+=(--objects "${objects}")
  [[ ${PAYLOAD} == unsigned ]] && args+=(--disable-sha256-payload)
  # Credentials through warp's environment variables, not the command line (ps shows that).
  WARP_HOST="${S3_HOSTPORT}" WARP_ACCESS_KEY="${AWS_ACCESS_KEY_ID}" WARP_SECRET_KEY="${AWS_SECRET_ACCESS_KEY}" \
    WARP_REGION="${STOWBENCH_S3_REGION:-us-east-1}" WARP_TLS="${S3_TLS}" \
    "${WARP}" "${op}" "${args[@]}" >"${data}.log" 2>&1 || die "warp ${op} failed: $(tail -n 5 "${data}.log")"
  zstd -dcqf "${data}.json.zst" -o "${data}.json"
  python3 - "${data}.json" "${op}" <<'EOF'
import json, sys
from datetime import datetime, timezone
doc, op = json.load(open(sys.argv[1])), sys.argv[2].upper()
run = doc["by_op_type"][op]
t = run["throughput"]
secs = t["measure_duration_millis"] / 1000
if secs <= 0 or t.get("errors") or run.get("total_errors"):
    sys.exit(f"warp {op}: no clean measurement window ({t})")

def unix(stamp):  # RFC 3339 with up to nanoseconds, which datetime.fromisoformat cannot take
    whole, _, frac = stamp.rstrip("Z").partition(".")
    return datetime.fromisoformat(whole).replace(tzinfo=timezone.utc).timestamp() + float("0." + (frac or "0"))

span = unix(run["end_time"]) - unix(run["start_time"])
print(f"{run['total_bytes'] / span:.1f} {run['total_objects'] / span:.3f} {t['bytes'] / secs:.1f}")
EOF
}

write_sb_job() { # FILE OP SIZE CONC OBJECTS
  local file=$1 op=$2 size=$3 conc=$4 objects=$5 order=sequential
  [[ ${op} == get ]] && order=uniform
  cat >"${file}" <<EOF
# Written by bench/s3-vs-warp.sh: ${op}, ${size}-byte objects, ${conc} thread(s), ${DURATION} s.
version = 1
name = "bench-s3-vs-warp"
seed = 42

[[target]]
name = "s3"
backend = "s3"
payload_signing = "${PAYLOAD}"

[[workload]]
name = "warp-${op}"
sizes = [${size}]
threads = [${conc}]
objects = ${objects}
verify = ${VERIFY}
key_order = "${order}"
# warp reads right after its own uploads, with no write-back between that a script could add:
# stowbench's gets do the same.
settle_writeback = false

[[workload.phase]]
mix = { ${op} = 1 }
duration = "${DURATION}s"
EOF
}

run_sb() { # OP SIZE CONC OBJECTS TAG; prints "bytes_per_s objects_per_s steady_bytes_per_s" (whole phase, then all-active window)
  local op=$1 size=$2 conc=$3 objects=$4 tag=$5 job report line steady whole whole_ops
  job="${OUT}/jobs/${tag}-stowbench-${op}.toml"
  write_sb_job "${job}" "${op}" "${size}" "${conc}" "${objects}"
  # A put phase stops after DURATION, long before it fills its key space (sized so that no put
  # overwrites): stowbench's space check, which holds the whole key space against the free disk
  # space, would refuse it on a small disk. What a phase writes is its rate times DURATION.
  local space=()
  [[ ${op} == put ]] && space=(--no-space-check)
  report="$(run_stowbench "${job}" "${OUT}/stowbench" "${OUT}/jobs/${tag}-stowbench-${op}" --work-dir "${WORK}" "${space[@]}")"
  line="$(sb_phase_throughput "${report}" "${op}")" || die "bad report ${report}"
  # sb_phase_throughput: steady bytes/s, ops/s, window name, whole-phase bytes/s, ops/s.
  read -r steady _ _ whole whole_ops <<<"${line}"
  echo "${whole} ${whole_ops} ${steady}"
}

main() {
  local cmdline="$0 $*"
  parse_args "$@"
  need_cmd zstd "apt-get install zstd (warp writes its data zstd-compressed)"
  need_cmd curl
  STOWBENCH="$(find_stowbench)"
  WARP="$(install_warp)"
  OUT="$(make_out_dir "${OUT}")"
  mkdir -p "${OUT}/jobs" "${OUT}/warp" "${OUT}/stowbench" "${WORK:=/var/tmp}"
  WORK="$(mktemp -d "${WORK}/stowbench-s3-vs-warp.XXXXXX")"
  trap cleanup EXIT
  ensure_endpoint
  case ${STOWBENCH_S3_ENDPOINT} in
  https://*) S3_TLS=true ;;
  http://*) S3_TLS=false ;;
  *) die "STOWBENCH_S3_ENDPOINT must start with http:// or https://" ;;
  esac
  S3_HOSTPORT="${STOWBENCH_S3_ENDPOINT#*://}"
  S3_HOSTPORT="${S3_HOSTPORT%%/*}"
  # A bucket name no one else uses: warp deletes everything in its bucket before and after a run.
  WARP_BUCKET="stowbench-warp-$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  {
    printf 'date: %s\ncommand: %s\n' "$(date -u +%FT%TZ)" "${cmdline}"
    printf 'warp: %s@%s (%s)\n' "${WARP_MODULE}" "${WARP_VERSION}" "${WARP}"
    printf 'stowbench: %s (%s)\n' "$("${STOWBENCH}" --version)" "${STOWBENCH}"
    printf 'endpoint: %s (%s)\n' "${STOWBENCH_S3_ENDPOINT}" "$([[ -n ${SERVICES_DIR} ]] && echo "MinIO started by this script" || echo "from the environment")"
    printf 'warp bucket: %s; stowbench bucket: %s; duration per tool per cell: %s s; verify: %s; payload: %s\n' \
      "${WARP_BUCKET}" "${STOWBENCH_S3_BUCKET:-stowbench}" "${DURATION}" "${VERIFY}" "${PAYLOAD}"
    printf 'figure compared: bytes/s over each tool'"'"'s whole run (first start to last end); steady_value in raw.csv: warp'"'"'s analysed average, stowbench'"'"'s all-active window\n'
    printf 'root: %s; before each tool runs: %s\n' "$(is_root && echo yes || echo no)" \
      "$(settle_description)"
    printf 'load average at start: %s\n' "$(load_average)"
  } >"${OUT}/conditions.txt"
  : >"${OUT}/raw.csv" # a fresh file: rows of an older run in the same --out must not mix in
  csv_row "${OUT}/raw.csv" size concurrency op repeat tool value target objects_per_s objects steady_value
  local repeat first tool sz size conc op objects put_keys line tag label bps ops steady
  for repeat in $(seq 1 "${REPEAT}"); do
    first="$(order_for_repeat "${repeat}")"
    for sz in $(split_list "${SIZES}"); do
      size="$(parse_size "${sz}")"
      label="$(size_label "${size}")"
      objects=$((GET_VOLUME / size))
      ((objects < 16)) && objects=16
      ((objects > 2500)) && objects=2500
      # More keys than a put phase can write in DURATION at 2 GB/s, so every put makes a new
      # object (run_sb tells stowbench not to hold that key space against the free disk space).
      put_keys=$((DURATION * 2000000000 / size + 16))
      for conc in $(split_list "${CONCURRENCY}"); do
        for op in put get; do
          tag="${label}-c${conc}-r${repeat}"
          for tool in ${first}; do
            # MinIO writes what either tool uploads through the page cache: let the last run's
            # writeback finish first, or it slows whichever tool comes next (the first put on a
            # fresh MinIO ran 1.5x the later ones without this).
            settle_before_put
            if [[ ${tool} == ref ]]; then
              line="$(run_warp "${op}" "${size}" "${conc}" "${objects}" "${tag}")"
            elif [[ ${op} == put ]]; then
              line="$(run_sb put "${size}" "${conc}" "${put_keys}" "${tag}")"
            else
              line="$(run_sb get "${size}" "${conc}" "${objects}" "${tag}")"
            fi
            read -r bps ops steady <<<"${line}"
            csv_row "${OUT}/raw.csv" "${label}" "${conc}" "${op}" "${repeat}" "${tool}" "${bps}" "${TARGET}" "${ops}" \
              "$([[ ${op} == get ]] && echo "${objects}" || echo -)" "${steady}"
            log "$(printf '%-6s c%s %-3s r%s %-9s %8.1f MB/s' "${label}" "${conc}" "${op}" "${repeat}" \
              "$([[ ${tool} == ref ]] && echo warp || echo stowbench)" "$(awk -v b="${bps}" 'BEGIN { print b / 1e6 }')")"
          done
        done
      done
    done
  done
  printf 'load average at end: %s\n' "$(load_average)" >>"${OUT}/conditions.txt"
  python3 "${BENCH_DIR}/summarize.py" "${OUT}/raw.csv" --keys size,concurrency,op --ref-name warp --unit MB/s \
    --scale 1e6 --out "${OUT}" --title "s3 backend vs warp (${DURATION} s per tool per cell; MB/s = 10^6 bytes/s over each tool's whole run)" |
    tee "${OUT}/table.txt"
  printf '\nraw: %s/raw.csv  summary: %s/summary.csv %s/summary.json  conditions: %s/conditions.txt\n' \
    "${OUT}" "${OUT}" "${OUT}" "${OUT}"
}

main "$@"
