#!/usr/bin/env python3
"""Puts FILE's pages in the page cache the way a read puts them there, whoever wrote the file.

  bench/reread-into-cache.py FILE

Writes FILE's dirty pages back (fdatasync), drops them from the page cache (POSIX_FADV_DONTNEED
drops clean pages only, hence the write-back first) and reads the file back in one sequential
pass, so the kernel's readahead fills the cache. Used by bench/sqlite-vs-kvtest.sh: the page cache
holds a file in folios whose size follows the I/O that brought them in, and copying out of the
small folios that 4 KiB writes leave is slower than out of readahead's larger ones. kvtest's
`init` and stowbench's puts write their databases differently (one bulk transaction against
10,000 through the WAL), so without this step the two tools read the same layout of pages from
caches in different states (docs/performance/sqlite-vs-kvtest.md, "The page cache behind each database").
"""
import os
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    path = sys.argv[1]
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        while os.read(fd, 1 << 20):
            pass
    finally:
        os.close(fd)


if __name__ == "__main__":
    main()
