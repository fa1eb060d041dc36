#!/usr/bin/env python3
"""Drives headless Chromium through the DevTools protocol on a pipe
(--remote-debugging-pipe: no port, no websocket) and prints a page's DOM as
Chromium holds it (DOM.getOuterHTML, which needs no script in the page).

    cdp.py PROFILE_DIR URL [--noscript] [--loaded N] [--click SELECTOR] [--screenshot PNG]

--noscript  scripts are off from the first byte (the server's first paint)
--loaded N  waits until the page's body has data-loaded >= N (its script
            drew N times), or data-failed
--click S   then clicks the element S (a real mouse press and release at
            its centre) and waits until the script drew once more
--screenshot PNG  saves what the screen shows then (1280x800)

Every wait is bounded (60 s in all); a page that never gets there exits 1
with what it was waiting for."""
import base64
import json
import os
import subprocess
import sys
import time

args = sys.argv[1:]
profile, url = args[0], args[1]
noscript = "--noscript" in args
loaded = int(args[args.index("--loaded") + 1]) if "--loaded" in args else 0
click = args[args.index("--click") + 1] if "--click" in args else None
shot = args[args.index("--screenshot") + 1] if "--screenshot" in args else None
deadline = time.time() + 60

to_chrome_r, to_chrome_w = os.pipe()
from_chrome_r, from_chrome_w = os.pipe()


def child_fds():
    # Through copies: a pipe's own end may already be 3 or 4 (and closes
    # at exec), and putting one at 3 must not close the other.
    r, w = os.dup(to_chrome_r), os.dup(from_chrome_w)
    os.dup2(r, 3)
    os.dup2(w, 4)


proc = subprocess.Popen(
    ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
     "--user-data-dir=" + profile, "--remote-debugging-pipe", "--window-size=1280,800",
     "about:blank"],
    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=None if os.environ.get("CDP_DEBUG") else subprocess.DEVNULL,
    close_fds=False, preexec_fn=child_fds, env=dict(os.environ, HOME=profile))
os.close(to_chrome_r)
os.close(from_chrome_w)
buf = b""
next_id = 0
events = []


def fail(why):
    sys.stderr.write("cdp.py: " + why + "\n")
    proc.kill()
    sys.exit(1)


def read_message():
    global buf
    while b"\0" not in buf:
        if time.time() > deadline:
            fail("Chromium did not answer within 60 s")
        chunk = os.read(from_chrome_r, 65536)
        if not chunk:
            fail("Chromium closed the pipe (exit %s)" % proc.poll())
        buf += chunk
    msg, buf = buf.split(b"\0", 1)
    return json.loads(msg)


def call(method, params=None, session=None):
    global next_id
    next_id += 1
    msg = {"id": next_id, "method": method, "params": params or {}}
    if session:
        msg["sessionId"] = session
    os.write(to_chrome_w, json.dumps(msg).encode() + b"\0")
    while True:
        m = read_message()
        if m.get("id") == next_id:
            if "error" in m:
                fail("%s: %s" % (method, m["error"]))
            return m.get("result", {})
        events.append(m)


def wait_event(name, session):
    while True:
        for i, m in enumerate(events):
            if m.get("method") == name and m.get("sessionId") == session:
                del events[: i + 1]
                return m
        events.append(read_message())


def evaluate(expr, session):
    r = call("Runtime.evaluate", {"expression": expr, "returnByValue": True}, session)
    return r.get("result", {}).get("value")


def wait_drawn(n, session):
    while True:
        state = evaluate("[Number(document.body.dataset.loaded || 0), document.body.dataset.failed || null]",
                         session)
        if state and (state[0] >= n or state[1]):
            return
        if time.time() > deadline:
            fail("the page's script did not draw %d times: %r" % (n, state))
        time.sleep(0.1)


target = call("Target.createTarget", {"url": "about:blank"})["targetId"]
session = call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
call("Page.enable", session=session)
if noscript:
    call("Emulation.setScriptExecutionDisabled", {"value": True}, session)
call("Page.navigate", {"url": url}, session)
wait_event("Page.loadEventFired", session)
if loaded:
    wait_drawn(loaded, session)
if click:
    box = call("DOM.getBoxModel", {"nodeId": call("DOM.querySelector", {
        "nodeId": call("DOM.getDocument", session=session)["root"]["nodeId"],
        "selector": click}, session)["nodeId"]}, session)["model"]["content"]
    x, y = (box[0] + box[4]) / 2, (box[1] + box[5]) / 2
    drawn = evaluate("Number(document.body.dataset.loaded || 0)", session)
    for kind in ("mousePressed", "mouseReleased"):
        call("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left",
                                          "clickCount": 1}, session)
    wait_drawn(drawn + 1, session)
    sys.stderr.write("location: %s\n" % evaluate("location.pathname + location.search + location.hash",
                                                   session))
if shot:
    with open(shot, "wb") as f:
        f.write(base64.b64decode(call("Page.captureScreenshot", {"format": "png"}, session)["data"]))
root = call("DOM.getDocument", {"depth": -1}, session)["root"]["nodeId"]
sys.stdout.write(call("DOM.getOuterHTML", {"nodeId": root}, session)["outerHTML"])
try:
    call("Browser.close")
except SystemExit:
    pass
try:
    proc.wait(10)
except subprocess.TimeoutExpired:
    proc.kill()
