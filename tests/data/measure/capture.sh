#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# How tests/data/measure/ was made (once, as root, on the machine named in
# README there): a private tracing instance with the block request
# tracepoints on a fresh loop device, some buffered reads (readahead) and
# synchronous writes, then the instance's text `trace` (what the kernel
# formats itself) and its raw per-CPU pages, with the format files that
# describe them. tests/test_measure_trace.cpp decodes the pages and must
# find exactly what the text says.
set -euo pipefail
out=$(cd "$(dirname "$0")" && pwd)
T=/sys/kernel/tracing
idx=${1:-251}
work=$(mktemp -d)
python3 -c "import fcntl,os; fd=os.open('/dev/loop-control',os.O_RDWR); fcntl.ioctl(fd,0x4C80,$idx)"
truncate -s 64M "$work/f"
losetup "/dev/loop$idx" "$work/f"
I=$T/instances/bp-capture-$$
cleanup() { rmdir "$I" 2>/dev/null || true; losetup -d "/dev/loop$idx" || true
            python3 -c "import fcntl,os; fd=os.open('/dev/loop-control',os.O_RDWR); fcntl.ioctl(fd,0x4C81,$idx)" || true
            rm -rf "$work"; }
trap cleanup EXIT
mkdir "$I"
echo 0 > "$I/tracing_on"; echo 64 > "$I/buffer_size_kb"; echo mono > "$I/trace_clock"
dev=$(( (7 << 20) | idx ))
for e in block_rq_issue block_rq_complete block_getrq; do
    echo "dev == $dev" > "$I/events/block/$e/filter"; echo 1 > "$I/events/block/$e/enable"
done
echo 3 > /proc/sys/vm/drop_caches
echo 1 > "$I/tracing_on"
dd if="/dev/loop$idx" of=/dev/null bs=4k count=64 status=none
dd if=/dev/zero of="/dev/loop$idx" bs=4k count=20 seek=1000 oflag=dsync status=none
echo 0 > "$I/tracing_on"
grep -v '^#' "$I/trace" > "$out/trace.txt"
for c in "$I"/per_cpu/cpu*; do
    n=${c##*cpu}
    dd if="$c/trace_pipe_raw" of="$out/cpu$n.raw" bs=4096 iflag=nonblock status=none 2>/dev/null || true
done
cp "$T/events/header_page" "$out/header_page"
for e in block_rq_issue block_rq_complete block_getrq; do cp "$T/events/block/$e/format" "$out/$e.format"; done
for e in wbt_lat wbt_step wbt_timer; do cp "$T/events/wbt/$e/format" "$out/$e.format"; done
for e in mm_filemap_fault mm_filemap_get_pages mm_filemap_map_pages; do cp "$T/events/filemap/$e/format" "$out/$e.format"; done
grep -E '"scale (up|down)"' "$T/printk_formats" > "$out/printk_formats"
uname -r > "$out/kernel"
echo "loop$idx $dev" > "$out/device"
