#!/usr/bin/env bash
# The static iopath: what the VM rig boots with (its guests have no libelf, zlib or glibc of
# ours) and what deploy/Containerfile packs. glibc linked in (crt-static), libelf and zlib
# vendored (--features static), frame pointers kept for the flamegraphs.
# Prints its path: target/vmtest/x86_64-unknown-linux-gnu/release/iopath
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
LIBBPF_SYS_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu \
  RUSTFLAGS="-C target-feature=+crt-static -C force-frame-pointers=yes" \
  cargo build -q --release --locked --features static --target x86_64-unknown-linux-gnu \
  --target-dir "$PWD/target/vmtest"
out=$PWD/target/vmtest/x86_64-unknown-linux-gnu/release/iopath
if ! file -b "$out" | grep -q 'static'; then
  echo "build-static: $out is not statically linked" >&2
  exit 1
fi
echo "$out"
