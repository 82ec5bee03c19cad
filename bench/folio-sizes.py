#!/usr/bin/env python3
"""How the page cache holds files: the share of their pages in folios of each size.

    sudo bench/folio-sizes.py FILE...

Maps each file read-only, touches every page (which maps the page cache's own pages, reading from
disk only what is not cached), takes each page's frame number from /proc/self/pagemap and its
flags from /proc/kpageflags (both need root), and counts runs of a compound head and its tails.
Prints "64p:100%" when every page sits in a 64-page (256 KiB) folio. Copies out of small folios
are slower (docs/performance/pack-durable.md, session 10), so two tools' figures on "the same" files are only
comparable when their files are held alike.
"""
import collections
import ctypes
import os
import struct
import sys

PAGE = os.sysconf("SC_PAGE_SIZE")
KPF_COMPOUND_TAIL = 1 << 16
PFN_MASK = (1 << 55) - 1

libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
PROT_READ, MAP_SHARED = 1, 1


def folio_pages(path, pagemap, kpageflags, histogram):
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        pages = size // PAGE
        if pages == 0:
            return
        addr = libc.mmap(None, size, PROT_READ, MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            sys.exit(f"{path}: mmap failed (errno {ctypes.get_errno()})")
        try:
            view = (ctypes.c_ubyte * size).from_address(addr)
            for i in range(pages):
                view[i * PAGE]  # fault the page in
            entries = os.pread(pagemap, 8 * pages, (addr // PAGE) * 8)
            run = 0
            for i in range(pages):
                pfn = struct.unpack_from("Q", entries, 8 * i)[0] & PFN_MASK
                if pfn == 0:
                    sys.exit("/proc/self/pagemap shows no frame numbers: run as root")
                flags = struct.unpack("Q", os.pread(kpageflags, 8, pfn * 8))[0]
                if flags & KPF_COMPOUND_TAIL and run:
                    run += 1
                else:
                    if run:
                        histogram[run] += run
                    run = 1
            histogram[run] += run
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    histogram = collections.Counter()
    pagemap = os.open("/proc/self/pagemap", os.O_RDONLY)
    kpageflags = os.open("/proc/kpageflags", os.O_RDONLY)
    for path in sys.argv[1:]:
        folio_pages(path, pagemap, kpageflags, histogram)
    total = sum(histogram.values())
    if total == 0:
        sys.exit("no whole page in the files given")
    print(" ".join(f"{pages}p:{100 * n / total:.0f}%" for pages, n in sorted(histogram.items())))


if __name__ == "__main__":
    main()
