#!/usr/bin/env python3
"""Slow clients for tests/http_safe_spec.lua: N connections to 127.0.0.1:PORT,
each sending a GET of about BYTES bytes one byte every INTERVAL seconds.

Prints "connected N" once all are open, then, when every connection has
ended (the server closed it, or its request went whole and was answered)
or after the whole request's time plus 15 s, one line:
  opened=N closed_early=K answered=A last_close_s=T
closed_early: closed by the server before the request was whole;
answered: the request went whole and an answer came.

usage: http_trickle.py PORT N INTERVAL BYTES
"""
import select
import socket
import sys
import time


def main():
    port, n, interval, size = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
    head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: "
    req = head + b"a" * max(1, size - len(head) - 4) + b"\r\n\r\n"
    t0 = time.monotonic()
    conns = {}
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.setblocking(False)
        conns[s] = 0                        # bytes sent
    print("connected %d" % len(conns), flush=True)
    closed_early = answered = 0
    last_close = 0.0
    deadline = t0 + interval * len(req) + 15
    next_send = time.monotonic()
    while conns and time.monotonic() < deadline:
        now = time.monotonic()
        if now >= next_send:
            next_send = now + interval
            for s in list(conns):
                sent = conns[s]
                if sent < len(req):
                    try:
                        conns[s] = sent + s.send(req[sent:sent + 1])
                    except OSError:
                        closed_early += 1
                        last_close = now - t0
                        del conns[s]
                        s.close()
        ready, _, _ = select.select(list(conns), [], [], max(0.0, next_send - time.monotonic()))
        for s in ready:
            try:
                data = s.recv(65536)
            except OSError:
                data = b""
            full = conns[s] >= len(req)
            if data and full:
                answered += 1
            elif not full:
                closed_early += 1
                last_close = time.monotonic() - t0
            del conns[s]
            s.close()
    print("opened=%d closed_early=%d answered=%d last_close_s=%.1f"
          % (n, closed_early, answered, last_close), flush=True)


if __name__ == "__main__":
    main()
