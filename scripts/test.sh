#!/usr/bin/env bash
# The project's test command (README, .ci/run): checks formatting, installs what the tests need,
# starts the real services on loopback in a fresh directory, runs clippy (warnings are errors)
# and every test in release mode, and stops exactly the services it started — also when a test
# fails or the run is interrupted.
#
# Extra arguments go to `cargo test` (e.g. `scripts/test.sh --test cli`).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
  [ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
fi
command -v cargo >/dev/null || { echo "test.sh: cargo not found; install Rust with rustup" >&2; exit 2; }
command -v go >/dev/null || { [ -x /usr/local/go/bin/go ] && export PATH="/usr/local/go/bin:$PATH"; }

echo "== cargo fmt --check (rustfmt.toml)"
cargo fmt --check

# A test refused for want of disk space names the free space it saw; this line says what the
# whole run started with (the build alone takes about 5.5 GiB).
echo "== free space where the build and the tests' data go"
df -h . /tmp

echo "== installing services and tools (skipped when present)"
scripts/services.sh install

services_dir=$(mktemp -d /tmp/stowbench-test-services.XXXXXX)
chmod 755 "$services_dir" # the postgres and mysql users must reach their data directories
stop_services() {
  scripts/services.sh stop "$services_dir" || true
  rm -rf "$services_dir"
}
trap stop_services EXIT
trap 'exit 130' INT TERM

echo "== starting services in $services_dir"
scripts/services.sh start "$services_dir"
eval "$(scripts/services.sh env "$services_dir")"

echo "== cargo clippy --release --all-targets -- -D warnings"
cargo clippy --release --all-targets -- -D warnings
# The lean build (local backends only) must build too, its tests included (Cargo.toml leaves out
# the two that need the server crates); checked, not linked, so the binary the tests run stays
# the default one.
echo "== cargo clippy --release --no-default-features --all-targets -- -D warnings"
cargo clippy --release --no-default-features --all-targets -- -D warnings

echo "== cargo test --release"
cargo test --release "$@"

# Multi-host runs (docs/multi-host.md): the one test binary built with the `mpi` feature, last,
# since it rebuilds target/release/stowbench with MPI linked in.
if [[ $# -eq 0 ]]; then
  echo "== cargo clippy --release --features mpi --lib --test mpi -- -D warnings"
  cargo clippy --release --features mpi --lib --test mpi -- -D warnings
  echo "== cargo test --release --features mpi --test mpi"
  cargo test --release --features mpi --test mpi
fi
