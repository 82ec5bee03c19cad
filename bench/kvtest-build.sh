#!/usr/bin/env bash
# Builds SQLite's kvtest (test/kvtest.c of Debian's sqlite3 source package) and prints its path.
# Called by bench/sqlite-vs-kvtest.sh; runnable alone: bench/kvtest-build.sh [--rebuild]
#
# Why this way:
# - kvtest.c comes from Debian's source package (`apt-get source sqlite3`), the only place this
#   machine may fetch SQLite's test programs from. A `deb-src` entry for the configured Debian
#   suites is added if none exists (/etc/apt/sources.list.d/stowbench-deb-src.sources).
# - It is compiled against the SQLite amalgamation stowbench itself links (rusqlite's bundled
#   libsqlite3-sys/sqlite3/sqlite3.c from the cargo registry, the version in Cargo.lock) with the
#   same -D options libsqlite3-sys's build.rs passes and -O3 (cargo's release opt-level), so both
#   sides run the same SQLite code. Without that source it falls back to the source package's own
#   SQLite (its sqlite3.c if present, else the system libsqlite3 of the same Debian version),
#   and says so.
# - The binary is cached in ~/.cache/stowbench/kvtest/ keyed by the kvtest.c, sqlite3.c and
#   project definitions it was built from; --rebuild forces a new build.
set -euo pipefail
BENCH_NAME=kvtest-build
# shellcheck source=bench/lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

KV_CACHE="${CACHE_DIR}/kvtest"
REBUILD=false
[[ ${1:-} == --rebuild ]] && REBUILD=true

# The same compile-time options as libsqlite3-sys 0.39's build.rs for a bundled build on Linux.
readonly RUSQLITE_DEFINES=(
  -DSQLITE_CORE -DSQLITE_DEFAULT_FOREIGN_KEYS=1 -DSQLITE_ENABLE_API_ARMOR
  -DSQLITE_ENABLE_COLUMN_METADATA -DSQLITE_ENABLE_DBSTAT_VTAB -DSQLITE_ENABLE_FTS3
  -DSQLITE_ENABLE_FTS3_PARENTHESIS -DSQLITE_ENABLE_FTS5 -DSQLITE_ENABLE_JSON1
  -DSQLITE_ENABLE_LOAD_EXTENSION=1 -DSQLITE_ENABLE_RTREE -DSQLITE_ENABLE_STAT4 -DSQLITE_SOUNDEX
  -DSQLITE_THREADSAFE=1 -DSQLITE_USE_URI -DHAVE_USLEEP=1 -DHAVE_ISNAN
  -D_POSIX_THREAD_SAFE_FUNCTIONS -DHAVE_LOCALTIME_R
)
# And the ones stowbench's own build adds to them (LIBSQLITE3_FLAGS in .cargo/config.toml: SQLite
# syncs with fdatasync, as a distribution's build does; docs/backends/sqlite.md, "Which sync call").
read -r -a PROJECT_DEFINES <<<"$(sed -n 's/^LIBSQLITE3_FLAGS *= *"\(.*\)"$/\1/p' "${REPO_DIR}/.cargo/config.toml" 2>/dev/null)"
readonly PROJECT_DEFINES

# Adds deb-src entries mirroring the configured Debian `deb` entries when apt has none.
ensure_deb_src() {
  if apt-cache showsrc sqlite3 2>/dev/null | grep -q '^Package: sqlite3'; then
    return
  fi
  is_root || die "apt has no deb-src entry for sqlite3 and adding one needs root"
  local file=/etc/apt/sources.list.d/stowbench-deb-src.sources
  log "adding deb-src entries for the configured Debian suites: ${file}"
  python3 - "${file}" <<'EOF'
import glob, re, sys
# Copy every Debian `deb` entry (deb822 stanzas and one-line entries) as a `deb-src` stanza.
stanzas = []
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    if path == sys.argv[1]:
        continue
    for block in re.split(r"\n\s*\n", open(path).read()):
        fields = {}
        for line in block.splitlines():
            if line.startswith("#") or ":" not in line or line[0].isspace():
                continue
            key, value = line.split(":", 1)
            fields[key.strip().lower()] = value.strip()
        types = fields.get("types", "").split()
        if "deb" in types and "deb-src" not in types and "debian" in fields.get("uris", ""):
            if fields.get("enabled", "yes").lower() == "no":
                continue
            stanzas.append(fields)
for path in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")):
    try:
        lines = open(path).read().splitlines()
    except OSError:
        continue
    for line in lines:
        m = re.match(r"^deb\s+(\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s+(.*)$", line.strip())
        if m and "debian" in m.group(2):
            opts = m.group(1) or ""
            signed = re.search(r"signed-by=(\S+?)\]?(\s|$)", opts)
            st = {"uris": m.group(2), "suites": m.group(3), "components": m.group(4)}
            if signed:
                st["signed-by"] = signed.group(1).rstrip("]")
            stanzas.append(st)
if not stanzas:
    sys.exit("no Debian deb entry found in /etc/apt/sources.list*; add a deb-src line by hand")
out = []
for st in stanzas:
    lines = ["Types: deb-src", f"URIs: {st['uris']}", f"Suites: {st['suites']}", f"Components: {st['components']}"]
    if "signed-by" in st:
        lines.append(f"Signed-By: {st['signed-by']}")
    out.append("\n".join(lines))
with open(sys.argv[1], "w") as f:
    f.write("# Added by stowbench bench/kvtest-build.sh: source packages for kvtest.c\n" + "\n\n".join(out) + "\n")
EOF
  apt-get update -q >&2
}

# Unpacks the sqlite3 source package into $KV_CACHE/src (once) and prints its directory.
fetch_source() {
  local dir
  dir="$(find "${KV_CACHE}/src" -maxdepth 3 -path '*/test/kvtest.c' 2>/dev/null | head -n1 || true)"
  if [[ -n ${dir} ]]; then
    dirname -- "$(dirname -- "${dir}")"
    return
  fi
  ensure_deb_src
  need_cmd dpkg-source "apt-get install dpkg-dev"
  mkdir -p "${KV_CACHE}/src"
  log "apt-get source sqlite3 into ${KV_CACHE}/src"
  (cd "${KV_CACHE}/src" && apt-get source -q sqlite3) >&2 || die "apt-get source sqlite3 failed"
  dir="$(find "${KV_CACHE}/src" -maxdepth 3 -path '*/test/kvtest.c' | head -n1)"
  [[ -n ${dir} ]] || die "the sqlite3 source package has no test/kvtest.c"
  dirname -- "$(dirname -- "${dir}")"
}

# The amalgamation rusqlite bundles into stowbench (version from Cargo.lock), if on this machine.
rusqlite_amalgamation() {
  local version
  version="$(awk '/^name = "libsqlite3-sys"$/ { getline; gsub(/"/, "", $3); print $3; exit }' "${REPO_DIR}/Cargo.lock" 2>/dev/null || true)"
  [[ -n ${version} ]] || return 1
  local f
  for f in "${CARGO_HOME:-${HOME:-/root}/.cargo}"/registry/src/*/"libsqlite3-sys-${version}/sqlite3/sqlite3.c"; do
    if [[ -f ${f} ]]; then
      printf '%s\n' "${f}"
      return 0
    fi
  done
  return 1
}

main() {
  need_cmd cc "apt-get install gcc"
  mkdir -p "${KV_CACHE}"
  local src kvtest_c amalg how key bin
  src="$(fetch_source)"
  kvtest_c="${src}/test/kvtest.c"
  if amalg="$(rusqlite_amalgamation)" && [[ -n ${amalg} ]]; then
    how="rusqlite-bundled"
  elif [[ -f "${src}/sqlite3.c" ]]; then
    amalg="${src}/sqlite3.c"
    how="source-package"
  else
    amalg=""
    how="system-libsqlite3"
  fi
  key="$({ cat "${kvtest_c}" ${amalg:+"${amalg}"}; printf '%s\n' "${PROJECT_DEFINES[@]}"; } | sha256sum | cut -c1-16)"
  bin="${KV_CACHE}/kvtest-${how}-${key}"
  if [[ -x ${bin} && ${REBUILD} == false ]]; then
    printf '%s\n' "${bin}"
    return
  fi
  log "compiling ${kvtest_c} against ${amalg:-the system libsqlite3} (${how}); about a minute"
  if [[ -n ${amalg} ]]; then
    # kvtest.c includes "sqlite3.h": use the header that belongs to the amalgamation.
    cc -O3 "${RUSQLITE_DEFINES[@]}" "${PROJECT_DEFINES[@]}" -I"$(dirname -- "${amalg}")" -o "${bin}.tmp" \
      "${kvtest_c}" "${amalg}" -lpthread -ldl -lm >&2
  else
    dpkg -s libsqlite3-dev >/dev/null 2>&1 || die "no amalgamation found and libsqlite3-dev is not installed"
    cc -O3 -o "${bin}.tmp" "${kvtest_c}" -lsqlite3 >&2
  fi
  mv -f "${bin}.tmp" "${bin}"
  printf '%s\n' "${how}" >"${bin}.how"
  printf '%s\n' "${bin}"
}

main "$@"
