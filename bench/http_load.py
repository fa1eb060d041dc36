#!/usr/bin/env python3
"""Requests at a steady RATE per second for SECONDS, round-robin over the
paths given, to 127.0.0.1:PORT (loopback only; bounded in time and count).
Prints requests, errors and the latency p50/p99 in ms as one line."""
import http.client
import sys
import time

port, rate, secs = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
paths = sys.argv[4:] or ["/"]
lat, errors, n = [], 0, 0
start = time.time()
while n < rate * secs:
    due = start + n / rate
    now = time.time()
    if due > now:
        time.sleep(due - now)
    t = time.time()
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", paths[n % len(paths)])
        r = c.getresponse()
        r.read()
        if r.status != 200:
            errors += 1
        c.close()
    except OSError:
        errors += 1
    lat.append((time.time() - t) * 1000)
    n += 1
lat.sort()
print("requests=%d errors=%d p50_ms=%.2f p99_ms=%.2f rate=%.1f" % (
    n, errors, lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))],
    n / (time.time() - start)), flush=True)
