#!/usr/bin/env bash
# The whole test suite, as CI runs it: setup, formatting, lints, then unit and integration tests
# (as root: they load BPF programs, make loop devices and drive real I/O), then the VM rig's
# quick variant (scripts/vmtest; IOPATH_SKIP_VMTEST=1 skips it on a developer machine).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
  echo "test.sh: run as root (the tests load BPF and create loop devices)" >&2
  exit 1
fi
./scripts/setup.sh
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
cargo fmt --all -- --check
clang-format --dry-run --Werror $(ls bpf/*.c bpf/*.h | grep -v vmlinux.h)
cargo clippy --release --locked --all-targets -- -D warnings
cargo test --release --locked
# The VM rig's quick variant: portability on 5.10, 6.1, 6.12 and the newest 7.x (7.3-rc), the
# stack boot and the IOMMU pair on 6.12 (a few minutes).
if [ "${IOPATH_SKIP_VMTEST:-0}" != 1 ]; then
  ./scripts/vmtest --kernel 5.10,6.1,6.12,7.3 --scenario quick
fi
