#!/usr/bin/env bash
# Install, start and stop the real services used by stowbench's tests, on loopback only.
#
#   scripts/services.sh install
#   scripts/services.sh start  [--only pg,mariadb,s3,mongo] [DIR]
#   scripts/services.sh stop   [--only pg,mariadb,s3,mongo] [DIR]
#   scripts/services.sh restart [--only pg,mariadb,s3,mongo] [DIR]  # same ports, same data (a killed one too)
#   scripts/services.sh status [DIR]
#   scripts/services.sh env    [DIR]        # eval "$(scripts/services.sh env)"
#
# DIR defaults to ${STOWBENCH_SERVICES_DIR:-/tmp/stowbench-services}.
# See scripts/README.md.
set -euo pipefail

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
readonly SCRIPT_DIR

# Pinned versions.
readonly MINIO_MODULE="github.com/minio/minio"
readonly MINIO_VERSION="v0.0.0-20260212201848-7aac2a2c5b7c"
readonly FERRETDB_MODULE="github.com/FerretDB/FerretDB"
readonly FERRETDB_VERSION="v1.24.0"
readonly PG_MAJOR=15
readonly PG_BIN="/usr/lib/postgresql/${PG_MAJOR}/bin"
readonly MARIADBD="/usr/sbin/mariadbd"

# openmpi-bin, libopenmpi-dev, libclang-dev: the `mpi` feature (rsmpi builds its bindings with bindgen)
# and tests/mpi.rs (mpirun). python3: bench/summarize.py, which tests/bench_summary.rs runs.
readonly APT_PACKAGES=(postgresql mariadb-server mariadb-client fio xfsprogs btrfs-progs e2fsprogs util-linux curl chromium openmpi-bin libopenmpi-dev libclang-dev python3)
readonly ALL_SERVICES=(pg mariadb s3 mongo)

TOOLS_DIR="${STOWBENCH_TOOLS:-${HOME:-/root}/.cache/stowbench/bin}"
DEFAULT_DIR="${STOWBENCH_SERVICES_DIR:-/tmp/stowbench-services}"
READY_TIMEOUT="${STOWBENCH_READY_TIMEOUT:-60}" # seconds, per service
STOP_TIMEOUT="${STOWBENCH_STOP_TIMEOUT:-60}"   # seconds, per service

log() { printf '[services] %s\n' "$*" >&2; }
die() {
  printf '[services] ERROR: %s\n' "$*" >&2
  exit 1
}

usage() {
  sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

need_root() {
  [[ ${EUID} -eq 0 ]] || die "$1 must run as root (it uses runuser/apt-get)"
}

# ---------------------------------------------------------------------------------------------
# install
# ---------------------------------------------------------------------------------------------

find_go() {
  if [[ -n ${GO:-} ]]; then
    printf '%s\n' "${GO}"
  elif command -v go >/dev/null 2>&1; then
    command -v go
  elif [[ -x /usr/local/go/bin/go ]]; then
    printf '%s\n' /usr/local/go/bin/go
  else
    die "no Go toolchain found (set GO=/path/to/go)"
  fi
}

pkg_installed() {
  [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" == "install ok installed" ]]
}

install_packages() {
  local missing=() p t0
  for p in "${APT_PACKAGES[@]}"; do
    pkg_installed "${p}" || missing+=("${p}")
  done
  if [[ ${#missing[@]} -eq 0 ]]; then
    log "apt: all packages already installed (${APT_PACKAGES[*]})"
    return
  fi
  need_root "installing packages"
  t0=${SECONDS}
  log "apt: installing ${missing[*]}"
  apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
  log "apt: done in $((SECONDS - t0))s"
}

# True if binary $1 was built from module $2 at version $3 (read from Go build info).
go_binary_has_module() {
  local go=$1 bin=$2 module=$3 version=$4
  [[ -x ${bin} ]] || return 1
  "${go}" version -m "${bin}" 2>/dev/null |
    awk -v m="${module}" -v v="${version}" '($1 == "mod" || $1 == "dep") && $2 == m && $3 == v { found = 1 } END { exit !found }'
}

build_minio() {
  local go=$1 bin="${TOOLS_DIR}/minio" stamp="${TOOLS_DIR}/minio.stamp"
  local want="${MINIO_MODULE}@${MINIO_VERSION}" scratch t0
  if [[ -f ${stamp} && "$(cat "${stamp}")" == "${want}" ]] &&
    go_binary_has_module "${go}" "${bin}" "${MINIO_MODULE}" "${MINIO_VERSION}"; then
    log "minio: ${bin} is already ${MINIO_VERSION}, skipping build"
    return
  fi
  t0=${SECONDS}
  log "minio: building ${want} (takes ~5-6 min on 2 cores without a warm Go build cache)"
  # `go install MODULE@VERSION` may fail with "403 ... loading deprecation"; a scratch module
  # with `go get` + `go build` avoids the version-list lookup.
  scratch="$(mktemp -d "${TMPDIR:-/tmp}/stowbench-minio-build.XXXXXX")"
  (
    cd "${scratch}"
    "${go}" mod init stowbench.local/minio-build >/dev/null 2>&1
    "${go}" get "${want}"
    "${go}" build -o "${bin}.tmp" "${MINIO_MODULE}"
  ) >&2 || {
    rm -rf "${scratch}" "${bin}.tmp"
    die "minio: build failed"
  }
  rm -rf "${scratch}"
  mv -f "${bin}.tmp" "${bin}"
  printf '%s\n' "${want}" >"${stamp}"
  log "minio: built ${bin} in $((SECONDS - t0))s"
}

ferretdb_wrapper_hash() {
  cat "${SCRIPT_DIR}/ferretdb-wrapper/go.mod" "${SCRIPT_DIR}/ferretdb-wrapper/go.sum" \
    "${SCRIPT_DIR}/ferretdb-wrapper/main.go" | sha256sum | cut -d' ' -f1
}

build_ferretdb_wrapper() {
  local go=$1 bin="${TOOLS_DIR}/ferretdb-wrapper" stamp="${TOOLS_DIR}/ferretdb-wrapper.stamp"
  local want t0
  want="${FERRETDB_MODULE}@${FERRETDB_VERSION} src=$(ferretdb_wrapper_hash)"
  if [[ -f ${stamp} && "$(cat "${stamp}")" == "${want}" ]] &&
    go_binary_has_module "${go}" "${bin}" "${FERRETDB_MODULE}" "${FERRETDB_VERSION}" &&
    [[ "$("${bin}" -version 2>/dev/null || true)" == *"${FERRETDB_VERSION}"* ]]; then
    log "ferretdb-wrapper: ${bin} is already FerretDB ${FERRETDB_VERSION}, skipping build"
    return
  fi
  t0=${SECONDS}
  log "ferretdb-wrapper: building from scripts/ferretdb-wrapper (FerretDB ${FERRETDB_VERSION})"
  (cd "${SCRIPT_DIR}/ferretdb-wrapper" && "${go}" build -o "${bin}.tmp" .) >&2 || {
    rm -f "${bin}.tmp"
    die "ferretdb-wrapper: build failed"
  }
  mv -f "${bin}.tmp" "${bin}"
  printf '%s\n' "${want}" >"${stamp}"
  log "ferretdb-wrapper: built ${bin} in $((SECONDS - t0))s"
}

cmd_install() {
  [[ $# -eq 0 ]] || die "install takes no arguments"
  local go t0=${SECONDS}
  install_packages
  go="$(find_go)"
  log "go: using ${go} ($("${go}" env GOVERSION))"
  mkdir -p "${TOOLS_DIR}"
  build_minio "${go}"
  build_ferretdb_wrapper "${go}"
  log "install: done in $((SECONDS - t0))s; tools in ${TOOLS_DIR}"
}

# ---------------------------------------------------------------------------------------------
# process bookkeeping
# ---------------------------------------------------------------------------------------------

# Executable name and data directory a recorded pid must match, per service.
service_exe() {
  case $1 in
  pg) printf 'postgres\n' ;;
  mariadb) printf 'mariadbd\n' ;;
  s3) printf 'minio\n' ;;
  mongo) printf 'ferretdb-wrapper\n' ;;
  *) die "unknown service '$1'" ;;
  esac
}

service_data() { printf '%s/%s/data\n' "$1" "$2"; } # DIR NAME

pid_alive() {
  local pid=$1 state
  [[ ${pid} =~ ^[0-9]+$ ]] || return 1
  [[ -r /proc/${pid}/stat ]] || return 1
  # A zombie is dead for our purposes (field 3 of /proc/PID/stat, after the "(comm)" field).
  state="$(sed 's/^.*) //' "/proc/${pid}/stat" 2>/dev/null | cut -d' ' -f1)" || return 1
  [[ -n ${state} && ${state} != Z && ${state} != X ]]
}

# True if pid $3 is alive, runs the executable expected for service $2 and names its data dir.
pid_is_ours() {
  local dir=$1 name=$2 pid=$3 exe want data
  pid_alive "${pid}" || return 1
  want="$(service_exe "${name}")"
  exe="$(readlink "/proc/${pid}/exe" 2>/dev/null)" || return 1
  exe="${exe% (deleted)}"
  [[ "$(basename -- "${exe}")" == "${want}" ]] || return 1
  data="$(service_data "${dir}" "${name}")"
  tr '\0' '\n' <"/proc/${pid}/cmdline" 2>/dev/null | grep -qF -- "${data}"
}

# Prints the recorded pid of service $2 if it is alive and ours; fails otherwise.
running_pid() {
  local dir=$1 name=$2 pid
  [[ -f "${dir}/${name}.pid" ]] || return 1
  pid="$(head -n1 "${dir}/${name}.pid" 2>/dev/null || true)"
  pid_is_ours "${dir}" "${name}" "${pid}" || return 1
  printf '%s\n' "${pid}"
}

# Waits until pid $1 has exited; fails after $2 seconds.
wait_exit() {
  local pid=$1 timeout=$2 i
  for ((i = 0; i < timeout * 10; i++)); do
    pid_alive "${pid}" || return 0
    sleep 0.1
  done
  return 1
}

# Picks $1 distinct free TCP ports on 127.0.0.1, below the kernel's ephemeral range.
free_ports() {
  local n=$1 py
  py="$(command -v python3 || true)"
  if [[ -n ${py} ]]; then
    "${py}" - "${n}" <<'EOF'
import random, socket, sys
n = int(sys.argv[1])
held, ports = [], []
while len(ports) < n:
    p = random.randint(20000, 32000)
    if p in ports:
        continue
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        s.close()
        continue
    held.append(s)
    ports.append(p)
print(" ".join(map(str, ports)))
EOF
  else
    # Fallback: a port nobody answers on is very likely free.
    local ports=() p
    while [[ ${#ports[@]} -lt ${n} ]]; do
      p=$((20000 + RANDOM % 12000))
      [[ " ${ports[*]} " == *" ${p} "* ]] && continue
      if ! (exec 3<>"/dev/tcp/127.0.0.1/${p}") 2>/dev/null; then ports+=("${p}"); fi
    done
    printf '%s\n' "${ports[*]}"
  fi
}

tcp_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

random_secret() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

# Polls "$@" until it succeeds; fails after READY_TIMEOUT seconds or when pid $2 dies.
wait_ready() {
  local name=$1 pid=$2 logfile=$3
  shift 3
  local i
  for ((i = 0; i < READY_TIMEOUT * 10; i++)); do
    if "$@" >/dev/null 2>&1; then
      return 0
    fi
    if [[ -n ${pid} ]] && ! pid_alive "${pid}"; then
      log "${name}: process ${pid} exited before becoming ready; read ${logfile}"
      return 1
    fi
    sleep 0.1
  done
  log "${name}: not ready after ${READY_TIMEOUT}s; read ${logfile}"
  return 1
}

# ---------------------------------------------------------------------------------------------
# per-service start / stop
# ---------------------------------------------------------------------------------------------

# Each start_<name> DIR PORT... writes DIR/<name>.pid and DIR/<name>.env (mode 600).

write_fragment() { # DIR NAME, lines on stdin
  (
    umask 077
    cat >"$1/$2.env.tmp"
  )
  mv -f "$1/$2.env.tmp" "$1/$2.env"
}

start_pg() {
  local dir=$1 port=$2
  local base="${dir}/pg" data="${dir}/pg/data" sock="${dir}/pg/sock" logf="${dir}/pg.log" pid i
  [[ -x "${PG_BIN}/postgres" ]] || die "pg: ${PG_BIN}/postgres not found; run '$0 install'"
  mkdir -p "${base}" "${sock}"
  chown postgres:postgres "${base}" "${sock}"
  chmod 700 "${base}"
  runuser -u postgres -- test -w "${base}" ||
    die "pg: user postgres cannot write ${base} (a parent directory is not traversable?)"
  touch "${logf}"
  chown postgres:postgres "${logf}"
  if [[ ! -s "${data}/PG_VERSION" ]]; then
    log "pg: initdb ${data}"
    runuser -u postgres -- "${PG_BIN}/initdb" -D "${data}" -U postgres -A trust --no-sync \
      -E UTF8 --locale=C.UTF-8 >>"${logf}" 2>&1 || die "pg: initdb failed; read ${logf}"
  fi
  log "pg: starting on 127.0.0.1:${port}"
  rm -f "${dir}/pg.pid"
  runuser -u postgres -- "${PG_BIN}/pg_ctl" -D "${data}" -l "${logf}" -W \
    -o "-c listen_addresses=127.0.0.1 -p ${port} -k ${sock}" start >/dev/null 9>&- ||
    die "pg: pg_ctl start failed; read ${logf}"
  # The postmaster writes its pid on the first line of postmaster.pid.
  pid=""
  for ((i = 0; i < READY_TIMEOUT * 10; i++)); do
    pid="$(head -n1 "${data}/postmaster.pid" 2>/dev/null || true)"
    pid_is_ours "${dir}" pg "${pid}" && break
    pid=""
    sleep 0.1
  done
  [[ -n ${pid} ]] || die "pg: postmaster did not start; read ${logf}"
  printf '%s\n' "${pid}" >"${dir}/pg.pid"
  wait_ready pg "${pid}" "${logf}" "${PG_BIN}/pg_isready" -q -h 127.0.0.1 -p "${port}" -t 2 ||
    fail_start "${dir}" pg
  if [[ "$("${PG_BIN}/psql" -h 127.0.0.1 -p "${port}" -U postgres -d postgres -XtAc \
    "select 1 from pg_database where datname = 'stowbench'")" != 1 ]]; then
    "${PG_BIN}/psql" -h 127.0.0.1 -p "${port}" -U postgres -d postgres -Xqc \
      'create database stowbench' || fail_start "${dir}" pg
  fi
  write_fragment "${dir}" pg <<EOF
STOWBENCH_PG_URI=postgres://postgres@127.0.0.1:${port}/stowbench
STOWBENCH_PG_PID=${pid}
STOWBENCH_PG_DATA=${data}
EOF
}

start_mariadb() {
  local dir=$1 port=$2
  local base="${dir}/mariadb" data="${dir}/mariadb/data" run="${dir}/mariadb/run" logf="${dir}/mariadb.log" pid
  [[ -x ${MARIADBD} ]] || die "mariadb: ${MARIADBD} not found; run '$0 install'"
  mkdir -p "${base}" "${data}" "${run}"
  chown mysql:mysql "${base}" "${data}" "${run}"
  chmod 750 "${base}"
  if [[ ! -d "${data}/mysql" ]]; then
    log "mariadb: mariadb-install-db ${data}"
    mariadb-install-db --no-defaults --user=mysql --datadir="${data}" \
      --auth-root-authentication-method=normal --skip-test-db >>"${logf}" 2>&1 ||
      die "mariadb: mariadb-install-db failed; read ${logf}"
  fi
  log "mariadb: starting on 127.0.0.1:${port}"
  # No buffer-pool dump and reload across restarts: a cold read phase restarts this server to
  # empty its cache, and MariaDB's default reload would fill a quarter of it again at start.
  rm -f "${dir}/mariadb.pid"
  setsid "${MARIADBD}" --no-defaults --user=mysql --datadir="${data}" \
    --socket="${run}/mariadbd.sock" --pid-file="${run}/mariadbd.pid" \
    --port="${port}" --bind-address=127.0.0.1 --max-allowed-packet=1G \
    --innodb-buffer-pool-dump-at-shutdown=0 --innodb-buffer-pool-load-at-startup=0 \
    </dev/null >>"${logf}" 2>&1 9>&- &
  pid=$!
  printf '%s\n' "${pid}" >"${dir}/mariadb.pid"
  wait_ready mariadb "${pid}" "${logf}" mariadb-admin --no-defaults --connect-timeout=2 \
    -h 127.0.0.1 -P "${port}" -u root ping || fail_start "${dir}" mariadb
  pid_is_ours "${dir}" mariadb "${pid}" || fail_start "${dir}" mariadb
  mariadb --no-defaults -h 127.0.0.1 -P "${port}" -u root \
    -e 'CREATE DATABASE IF NOT EXISTS stowbench' || fail_start "${dir}" mariadb
  write_fragment "${dir}" mariadb <<EOF
STOWBENCH_MARIADB_URI=mysql://root@127.0.0.1:${port}/stowbench
STOWBENCH_MARIADB_PID=${pid}
STOWBENCH_MARIADB_DATA=${data}
EOF
}

start_s3() {
  local dir=$1 port=$2 console_port=$3
  local data="${dir}/s3/data" logf="${dir}/s3.log" bin="${TOOLS_DIR}/minio" secret pid
  [[ -x ${bin} ]] || die "s3: ${bin} not found; run '$0 install' (or set STOWBENCH_TOOLS)"
  # The root credentials protect MinIO's stored config, so keep the secret for as long as
  # the data directory exists; generate a new one for a fresh data directory.
  if [[ -d ${data} && -s "${dir}/s3.secret" ]]; then
    secret="$(cat "${dir}/s3.secret")"
  else
    rm -rf "${data}"
    secret="$(random_secret)"
    (
      umask 077
      printf '%s\n' "${secret}" >"${dir}/s3.secret"
    )
  fi
  mkdir -p "${data}/stowbench" # a directory present at start is served as a bucket
  log "s3: starting MinIO on 127.0.0.1:${port}"
  rm -f "${dir}/s3.pid"
  MINIO_ROOT_USER=stowbench MINIO_ROOT_PASSWORD="${secret}" MINIO_REGION=us-east-1 \
    MINIO_UPDATE=off MINIO_BROWSER=off \
    setsid "${bin}" server "${data}" --quiet --address "127.0.0.1:${port}" \
    --console-address "127.0.0.1:${console_port}" </dev/null >>"${logf}" 2>&1 9>&- &
  pid=$!
  printf '%s\n' "${pid}" >"${dir}/s3.pid"
  wait_ready s3 "${pid}" "${logf}" curl -fsS -o /dev/null --max-time 2 \
    "http://127.0.0.1:${port}/minio/health/ready" || fail_start "${dir}" s3
  pid_is_ours "${dir}" s3 "${pid}" || fail_start "${dir}" s3
  write_fragment "${dir}" s3 <<EOF
STOWBENCH_S3_ENDPOINT=http://127.0.0.1:${port}
STOWBENCH_S3_BUCKET=stowbench
STOWBENCH_S3_REGION=us-east-1
AWS_ACCESS_KEY_ID=stowbench
AWS_SECRET_ACCESS_KEY=${secret}
STOWBENCH_S3_PID=${pid}
STOWBENCH_S3_DATA=${data}
EOF
}

start_mongo() {
  local dir=$1 port=$2
  local data="${dir}/mongo/data" logf="${dir}/mongo.log" bin="${TOOLS_DIR}/ferretdb-wrapper" pid
  [[ -x ${bin} ]] || die "mongo: ${bin} not found; run '$0 install' (or set STOWBENCH_TOOLS)"
  mkdir -p "${data}"
  log "mongo: starting FerretDB ${FERRETDB_VERSION} (SQLite) on 127.0.0.1:${port}"
  rm -f "${dir}/mongo.pid"
  setsid "${bin}" -listen "127.0.0.1:${port}" -dir "${data}" -log-level warn \
    </dev/null >>"${logf}" 2>&1 9>&- &
  pid=$!
  printf '%s\n' "${pid}" >"${dir}/mongo.pid"
  wait_ready mongo "${pid}" "${logf}" tcp_open 127.0.0.1 "${port}" || fail_start "${dir}" mongo
  pid_is_ours "${dir}" mongo "${pid}" || fail_start "${dir}" mongo
  write_fragment "${dir}" mongo <<EOF
STOWBENCH_MONGO_URI=mongodb://127.0.0.1:${port}/
STOWBENCH_MONGO_PID=${pid}
STOWBENCH_MONGO_DATA=${data}
EOF
}

# Stops the service that failed to become ready (only its recorded pid), then exits.
fail_start() {
  local dir=$1 name=$2
  stop_one "${dir}" "${name}" || true
  die "${name}: failed to start; read ${dir}/${name}.log (services started before it keep running; '$0 stop ${dir}' stops them)"
}

# Stops service $2 if its recorded pid is alive and ours; removes its pid file.
stop_one() {
  local dir=$1 name=$2 pidfile="$1/$2.pid" pid
  [[ -f ${pidfile} ]] || return 0
  pid="$(head -n1 "${pidfile}" 2>/dev/null || true)"
  if ! pid_alive "${pid}"; then
    log "${name}: not running (stale pid ${pid:-?}), removing ${pidfile}"
    rm -f "${pidfile}"
    return 0
  fi
  if ! pid_is_ours "${dir}" "${name}" "${pid}"; then
    log "${name}: pid ${pid} is not $(service_exe "${name}") on ${dir}; not touching it, removing ${pidfile}"
    rm -f "${pidfile}"
    return 0
  fi
  log "${name}: stopping pid ${pid}"
  case ${name} in
  pg)
    local data
    data="$(service_data "${dir}" pg)"
    if [[ "$(head -n1 "${data}/postmaster.pid" 2>/dev/null || true)" == "${pid}" ]]; then
      runuser -u postgres -- "${PG_BIN}/pg_ctl" -D "${data}" -m fast -W stop >/dev/null || true
    else
      kill -INT "${pid}" # the postmaster's "fast shutdown" signal
    fi
    ;;
  *) kill -TERM "${pid}" ;;
  esac
  if ! wait_exit "${pid}" "${STOP_TIMEOUT}"; then
    if pid_is_ours "${dir}" "${name}" "${pid}"; then
      log "${name}: pid ${pid} still running after ${STOP_TIMEOUT}s, sending SIGKILL"
      kill -KILL "${pid}" || true
      wait_exit "${pid}" 10 || die "${name}: pid ${pid} did not exit"
    fi
  fi
  rm -f "${pidfile}"
}

# Rewrites DIR/services.env from the fragments of the services that are running.
assemble_env() {
  local dir=$1 name tmp="$1/services.env.tmp"
  (
    umask 077
    : >"${tmp}"
    for name in "${ALL_SERVICES[@]}"; do
      if running_pid "${dir}" "${name}" >/dev/null && [[ -f "${dir}/${name}.env" ]]; then
        cat "${dir}/${name}.env" >>"${tmp}"
      fi
    done
  )
  if [[ -s ${tmp} ]]; then
    # stowbench restarts the services it finds here before cold read phases (cache = "cold").
    printf 'STOWBENCH_SERVICES_DIR=%s\nSTOWBENCH_SERVICES_SCRIPT=%s\n' "${dir}" "${SCRIPT_DIR}/services.sh" >>"${tmp}"
    chmod 600 "${tmp}"
    mv -f "${tmp}" "${dir}/services.env"
  else
    rm -f "${tmp}" "${dir}/services.env"
  fi
}

print_env_redacted() {
  local dir=$1
  [[ -f "${dir}/services.env" ]] || return 0
  sed "s|^AWS_SECRET_ACCESS_KEY=.*|AWS_SECRET_ACCESS_KEY=<redacted, see ${dir}/services.env>|" \
    "${dir}/services.env"
}

# ---------------------------------------------------------------------------------------------
# subcommands
# ---------------------------------------------------------------------------------------------

# Parses "[--only LIST] [DIR]" into the globals SEL (array) and DIR.
parse_args() {
  local only=""
  DIR=""
  while [[ $# -gt 0 ]]; do
    case $1 in
    --only)
      [[ $# -ge 2 ]] || die "--only needs a list"
      only=$2
      shift 2
      ;;
    --only=*)
      only=${1#--only=}
      shift
      ;;
    -h | --help)
      usage
      exit 0
      ;;
    -*) die "unknown option '$1'" ;;
    *)
      [[ -z ${DIR} ]] || die "more than one DIR given"
      DIR=$1
      shift
      ;;
    esac
  done
  DIR=${DIR:-${DEFAULT_DIR}}
  if [[ -d ${DIR} ]]; then DIR="$(cd -- "${DIR}" && pwd)"; fi
  SEL=()
  if [[ -z ${only} ]]; then
    SEL=("${ALL_SERVICES[@]}")
  else
    local item items=()
    IFS=',' read -r -a items <<<"${only}"
    for item in "${items[@]}"; do
      case ${item} in
      pg | mariadb | s3 | mongo) SEL+=("${item}") ;;
      postgres | postgresql) SEL+=(pg) ;;
      mysql) SEL+=(mariadb) ;;
      minio) SEL+=(s3) ;;
      ferretdb | mongodb) SEL+=(mongo) ;;
      "") ;;
      *) die "unknown service '${item}' (known: ${ALL_SERVICES[*]})" ;;
      esac
    done
  fi
}

# Serialises start/stop on DIR. The services are launched with fd 9 closed ("9>&-") so that
# they do not inherit (and hold) the lock.
lock_dir() {
  exec 9>"$1/.lock"
  flock -w 120 9 || die "timed out waiting for the lock $1/.lock (another services.sh start/stop?)"
}

cmd_start() {
  parse_args "$@"
  need_root "start"
  mkdir -p "${DIR}"
  DIR="$(cd -- "${DIR}" && pwd)"
  chmod 755 "${DIR}"
  lock_dir "${DIR}"
  # Keep services.env in step with what runs, even when a start fails half-way.
  trap 'assemble_env "${DIR}" || true' EXIT
  local name pid todo=() ports=() t0=${SECONDS}
  for name in "${SEL[@]}"; do
    if pid="$(running_pid "${DIR}" "${name}")"; then
      log "${name}: already running (pid ${pid})"
    else
      [[ -f "${DIR}/${name}.pid" ]] && log "${name}: removing stale ${DIR}/${name}.pid"
      rm -f "${DIR}/${name}.pid"
      todo+=("${name}")
    fi
  done
  if [[ ${#todo[@]} -gt 0 ]]; then
    read -r -a ports <<<"$(free_ports 5)"
    for name in "${todo[@]}"; do
      case ${name} in
      pg) start_pg "${DIR}" "${ports[0]}" ;;
      mariadb) start_mariadb "${DIR}" "${ports[1]}" ;;
      s3) start_s3 "${DIR}" "${ports[2]}" "${ports[3]}" ;;
      mongo) start_mongo "${DIR}" "${ports[4]}" ;;
      esac
    done
    log "started ${todo[*]} in $((SECONDS - t0))s; env in ${DIR}/services.env"
  fi
  assemble_env "${DIR}"
  trap - EXIT
  print_env_redacted "${DIR}"
}

cmd_stop() {
  parse_args "$@"
  [[ -d ${DIR} ]] || {
    log "nothing to stop: ${DIR} does not exist"
    return 0
  }
  DIR="$(cd -- "${DIR}" && pwd)"
  lock_dir "${DIR}"
  local name
  for name in "${SEL[@]}"; do
    stop_one "${DIR}" "${name}"
  done
  assemble_env "${DIR}"
}

# The port service $2 listens on, from its env fragment (its URI or endpoint).
recorded_port() {
  local dir=$1 name=$2
  [[ -f "${dir}/${name}.env" ]] || return 1
  grep -E '^STOWBENCH_[A-Z0-9]+_(URI|ENDPOINT)=' "${dir}/${name}.env" | head -n1 |
    sed -nE 's|^[^=]*=[a-z]+://([^@/]*@)?[^/:]*:([0-9]+).*|\2|p'
}

# Stops and starts the selected running services on the ports and data they had, so clients
# reconnect to the same address and find their data; the server's own caches start empty.
cmd_restart() {
  parse_args "$@"
  need_root "restart"
  [[ -d ${DIR} ]] || die "nothing to restart: ${DIR} does not exist"
  DIR="$(cd -- "${DIR}" && pwd)"
  lock_dir "${DIR}"
  trap 'assemble_env "${DIR}" || true' EXIT
  local name port console old i
  for name in "${SEL[@]}"; do
    port="$(recorded_port "${DIR}" "${name}" 2>/dev/null)" || true
    if running_pid "${DIR}" "${name}" >/dev/null; then
      [[ -n ${port} ]] || die "${name}: no port recorded in ${DIR}/${name}.env; stop and start it instead"
      stop_one "${DIR}" "${name}"
    elif [[ -n ${port} && -f "${DIR}/${name}.pid" ]]; then
      # Killed (its pid file names a dead process): back on its port, with its data.
      log "${name}: not running; starting it again on port ${port}"
      # Until init reaps it, a killed server lingers as a zombie, and PostgreSQL refuses to start
      # while the pid in its lock file exists at all: wait for it to go (at most 30 s).
      old="$(head -n1 "${DIR}/${name}.pid" 2>/dev/null || true)"
      for ((i = 0; i < 300; i++)); do
        [[ ${old} =~ ^[0-9]+$ && -e /proc/${old} ]] || break
        sleep 0.1
      done
      rm -f "${DIR}/${name}.pid"
    else
      continue
    fi
    case ${name} in
    pg) start_pg "${DIR}" "${port}" ;;
    mariadb) start_mariadb "${DIR}" "${port}" ;;
    s3)
      read -r console <<<"$(free_ports 1)"
      start_s3 "${DIR}" "${port}" "${console}"
      ;;
    mongo) start_mongo "${DIR}" "${port}" ;;
    esac
  done
  assemble_env "${DIR}"
  trap - EXIT
}

cmd_status() {
  parse_args "$@"
  local name pid addr
  for name in "${ALL_SERVICES[@]}"; do
    addr="-"
    if [[ -f "${DIR}/${name}.env" ]]; then
      addr="$(grep -E '^STOWBENCH_[A-Z0-9]+_(URI|ENDPOINT)=' "${DIR}/${name}.env" | head -n1 |
        sed -E 's|^[^=]*=[a-z]+://([^@/]*@)?([^/]*).*|\2|')"
    fi
    if pid="$(running_pid "${DIR}" "${name}")"; then
      printf '%-8s running  %-21s pid %s\n' "${name}" "${addr}" "${pid}"
    else
      printf '%-8s stopped\n' "${name}"
    fi
  done
}

cmd_env() {
  parse_args "$@"
  [[ -f "${DIR}/services.env" ]] || die "no ${DIR}/services.env; run '$0 start ${DIR}'"
  local line
  while IFS= read -r line; do
    [[ -z ${line} || ${line} == \#* ]] && continue
    printf 'export %s=%q\n' "${line%%=*}" "${line#*=}"
  done <"${DIR}/services.env"
}

main() {
  local cmd=${1:-}
  [[ $# -gt 0 ]] && shift
  case ${cmd} in
  install) cmd_install "$@" ;;
  start) cmd_start "$@" ;;
  stop) cmd_stop "$@" ;;
  restart) cmd_restart "$@" ;;
  status) cmd_status "$@" ;;
  env) cmd_env "$@" ;;
  -h | --help | help) usage ;;
  *)
    usage >&2
    exit 2
    ;;
  esac
}

main "$@"
