#!/usr/bin/env python3
"""Floods a leash HTTP server on 127.0.0.1:PORT for SECONDS, then stops by
itself: malformed requests, slowloris clients, up to 10,000 parallel
connections, and 10 MB request lines, each in a thread of its own.  Every
loop is bounded in count and time; loopback only.  Prints what it did as
one line of key=value."""
import resource
import socket
import sys
import threading
import time

HOST = "127.0.0.1"
port, secs = int(sys.argv[1]), float(sys.argv[2])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 12000), hard))
end = time.time() + secs
stats = {}

MALFORMED = [
    b"GARBAGE\r\n\r\n",
    b"GET\r\n\r\n",
    b"GET / HTTP/9.9\r\nHost: x\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost\r\n\r\n",
    b"\x00\x01\x02\xff" * 100 + b"\r\n\r\n",
    b"GET /%zz%00 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzzz\r\n",
    b"POST /api/status HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n" + b"x" * 1000,
    b"GET / HTTP/1.1\r\n" + b"X-h: " + b"v" * 100000 + b"\r\n\r\n",
]


def connect(timeout=2.0):
    s = socket.socket()
    s.settimeout(timeout)
    s.connect((HOST, port))
    return s


def send(payload):
    """One connection: payload sent, the answer's start read, closed; a
    server that refuses or cuts it off is what is expected."""
    try:
        s = connect()
        try:
            s.sendall(payload)
            s.recv(4096)
        finally:
            s.close()
    except OSError:
        pass


def malformed():
    n = 0
    while time.time() < end and n < 20000:
        for p in MALFORMED:
            send(p)
            n += 1
    stats["malformed"] = n


def slowloris(k=40):
    socks = []
    for _ in range(k):
        try:
            s = connect()
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
            socks.append(s)
        except OSError:
            pass
    stats["slowloris_opened"] = len(socks)
    while time.time() < end and socks:
        for s in list(socks):
            try:
                s.sendall(b"X-a: b\r\n")
            except OSError:
                socks.remove(s)
                s.close()
        time.sleep(0.5)
    stats["slowloris_left"] = len(socks)
    for s in socks:
        s.close()


def many(total=10000):
    socks, failed = [], 0
    for _ in range(total):
        try:
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex((HOST, port))
            socks.append(s)
        except OSError:
            failed += 1
    stats["parallel"] = len(socks)
    stats["parallel_failed"] = failed
    time.sleep(max(0.0, min(3.0, end - time.time())))
    for s in socks:
        s.close()


def big_line():
    n = 0
    line = b"GET /" + b"a" * (10 * 1024 * 1024) + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    while time.time() < end and n < 20:
        send(line)
        n += 1
    stats["big_lines"] = n


threads = [threading.Thread(target=f) for f in (malformed, slowloris, many, big_line)]
for t in threads:
    t.start()
for t in threads:
    t.join(secs + 30)
print(" ".join("%s=%s" % kv for kv in sorted(stats.items())), flush=True)
