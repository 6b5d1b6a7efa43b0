#!/usr/bin/env bash
# study.html of the VM rig's kernel study: each kernel's sweeps side by side, IOMMU off (dashed)
# against strict (solid), with each pair's verdict. The charts are the sweep comparison's own
# SVGs (OUT/<kernel>-compare-sweep/), inlined: nothing is fetched.
#   scripts/study-page.sh OUT "SWEEP ARGS" KERNEL...     (called by scripts/vmtest)
set -euo pipefail
out=$1 sweep=$2; shift 2
ks=()
for k in "$@"; do [ -f "$out/$k-compare-sweep/compare.json" ] && ks+=("$k"); done
((${#ks[@]})) || exit 0
esc() { sed 's/&/\&amp;/g;s/</\&lt;/g;s/>/\&gt;/g'; }
{
  echo '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>iopath: the kernel study under emulation</title>'
  echo '<style>body{font-family:sans-serif;margin:20px;color:#222}td{vertical-align:top;padding:4px}svg{max-width:100%;height:auto}p{font-size:13px}</style></head><body>'
  echo "<h1>The kernel study: IOMMU off (dashed) vs strict (solid), per kernel</h1>"
  echo "<p>scripts/vmtest --sweep '$(printf %s "$sweep" | esc)' under QEMU's software emulation (emulated NVMe and Intel IOMMU): compare shapes, not absolute speeds.</p>"
  echo "<table><tr>"; for k in "${ks[@]}"; do echo "<th>Debian $k</th>"; done; echo "</tr><tr>"
  for k in "${ks[@]}"; do
    echo "<td><p>$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["verdict"])' "$out/$k-compare-sweep/compare.json" | esc)</p></td>"
  done
  echo "</tr>"
  for f in iops p50 p99; do
    echo "<tr>"; for k in "${ks[@]}"; do echo "<td>"; cat "$out/$k-compare-sweep/$f.svg" 2>/dev/null || true; echo "</td>"; done; echo "</tr>"
  done
  echo "</table></body></html>"
} > "$out/study.html"
echo "vmtest: the kernels side by side: $out/study.html" >&2
