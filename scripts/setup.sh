#!/usr/bin/env bash
# Installs everything iopath needs on Debian 12 (as root) and builds it. Idempotent: a second run
# installs nothing and rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

# Build: compiler, libbpf's link deps, clang for BPF. Tests: e2fsprogs/util-linux (mkfs, losetup,
# chattr, setpriv), xfsprogs and btrfs-progs (the file-system matrix's mkfs), fio (the --pid tests and benchmarks; python3-six for its fio2gnuplot, which
# reads our --log-prefix logs in a test), perf (flamegraph interop). Flamegraphs:
# libc6-dbg, so libc's internal frames (start_thread) have names. HTML report tests: chromium
# (renders and prints the pages), poppler-utils (pdftoppm, pdftotext: reads the printed PDF).
# Route tests: strace (the independent syscall count). Benchmarks: bpftrace, python3. Real
# applications traced by the tests: sqlite3, postgresql-15 (initdb, postgres, pgbench); bpftrace
# is their reference on the same run. Fleet tests: tmux (drives `iopath top`), prometheus (scrapes
# `iopath serve`), python3-protobuf (reads the Perfetto trace with its own protobuf runtime), Go
# (`go tool pprof` reads the profiles; Debian's golang-go where no Go is installed).
PKGS=(build-essential pkg-config libelf-dev zlib1g-dev clang llvm clang-format bpftool
      e2fsprogs xfsprogs btrfs-progs util-linux fio python3-six bpftrace strace linux-perf libc6-dbg chromium poppler-utils python3 python3-venv curl ca-certificates
      sqlite3 postgresql-15 tmux prometheus python3-yaml man-db groff-base bash-completion)
command -v go >/dev/null 2>&1 || [ -x /usr/local/go/bin/go ] || PKGS+=(golang-go)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Rust: Debian 12's rustc is older than the crates need (libbpf-rs 0.27 wants 1.82).
MSRV=1.82
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
version_ok() {
  command -v cargo >/dev/null 2>&1 || return 1
  local v; v=$(cargo --version | awk '{print $2}')
  [ "$(printf '%s\n%s\n' "$MSRV" "$v" | sort -V | head -n1)" = "$MSRV" ]
}
if ! version_ok; then
  echo "setup: installing Rust with rustup (cargo missing or older than $MSRV)"
  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal -c rustfmt,clippy
  . "$HOME/.cargo/env"
fi
if command -v rustup >/dev/null 2>&1; then
  rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy rustfmt
fi

cargo build --release --locked
echo "setup: built $(pwd)/target/release/iopath"

# Man pages and shell completions where man and the shells look for them.
target/release/iopath man /usr/local/share/man/man1
mkdir -p /usr/share/bash-completion/completions /usr/share/zsh/vendor-completions /usr/share/fish/vendor_completions.d
target/release/iopath completions bash > /usr/share/bash-completion/completions/iopath
target/release/iopath completions zsh > /usr/share/zsh/vendor-completions/_iopath
target/release/iopath completions fish > /usr/share/fish/vendor_completions.d/iopath.fish

# The Perfetto test's independent reader: the perfetto package's compiled protos, which need a
# newer protobuf runtime than Debian's, in a venv of the build's own.
if ! target/pyenv/bin/python -c 'import perfetto.protos.perfetto.trace.perfetto_trace_pb2' 2>/dev/null; then
  python3 -m venv target/pyenv
  target/pyenv/bin/pip install -q 'perfetto==0.59.1' 'protobuf>=6.31.1,<7'
fi
