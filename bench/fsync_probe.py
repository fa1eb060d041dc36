#!/usr/bin/env python3
"""bench/fsync_probe.py DIR SECONDS OUT: this disk's commit latency, beside a
benchmark.  Every 20 ms for SECONDS it writes 8 KB at the start of a file in
DIR and fsyncs it, as a database's commit does with its log, and writes one
line per fsync to OUT: the wall time it began (ms since the epoch) and how
long it took (ms).  Each claim of a fire is a commit, so a fire waits for an
fsync: the benchmark sets its late seconds beside this disk's slow ones."""
import os
import sys
import time

d, secs, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
path = os.path.join(d, "fsync_probe.dat")
fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
buf = b"x" * 8192
end = time.time() + secs
with open(out, "w") as f:
    while time.time() < end:
        t0 = time.time()
        os.pwrite(fd, buf, 0)
        os.fsync(fd)
        f.write("%d %.3f\n" % (t0 * 1000, (time.time() - t0) * 1000))
        time.sleep(0.02)
os.close(fd)
os.unlink(path)
