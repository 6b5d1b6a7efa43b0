# Shared by the benchmark scripts (sourced): a scratch folder with a 1 GiB file on the root file
# system and a loop device backed by tmpfs, all removed on exit; and a median helper.
IOPATH=${IOPATH:-./target/release/iopath}
[ -x "$IOPATH" ] || cargo build --release --locked
W=$(mktemp -d /var/tmp/iopath-bench.XXXXXX)
LOOP=""
cleanup() {
  [ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null || true
  umount "$W/tmpfs" 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT
"$IOPATH" run --file "$W/file.dat" --size 1g --ios 1 >/dev/null 2>&1
mkdir -p "$W/tmpfs"; mount -t tmpfs -o size=1100m tmpfs "$W/tmpfs"
truncate -s 1g "$W/tmpfs/backing"; LOOP=$(losetup -f --show "$W/tmpfs/backing")
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
