#!/usr/bin/env python3
"""tds_server.py - a small TDS 7.4 server that stands in for SQL Server in the
mssql provider's tests.

It speaks enough of the protocol for FreeTDS db-lib: PRELOGIN, LOGIN7 (with
LOGINACK, ENVCHANGE and DONE, or error 18456 for a wrong password and 4060 for
a missing database), RPC calls to sp_executesql with typed parameters, SQL
batches, ATTENTION, and answers with COLMETADATA/ROW/ERROR/DONE tokens.

It does not run T-SQL.  Each statement the provider sends starts with a tag,
"/* leash:<kind> */"; STATEMENTS below maps each kind to a Python function
that does the same thing on a SQLite file.  So it proves that mssql.c and
FreeTDS work end to end (login, typed parameters, result parsing, duplicate
keys, errors, timeouts, dropped connections), not that the T-SQL is right:
only a real SQL Server proves that.

Faults: the spec writes lines to the control file given by --ctl; the server
takes each line (removing it) at the first point where it applies:
    stall           at the next PRELOGIN: never answer (a login timeout)
    drop            at the next RPC: close the connection instead of answering
    delay <ms>      at the next RPC: wait this long before answering; an
                    ATTENTION (the client's cancel) meanwhile abandons the
                    statement, answered with a DONE carrying DONE_ATTN only
    deaf            at the next RPC (with delay): ignore an ATTENTION, as a
                    server too stuck to acknowledge the cancel
    fail <number>   at the next RPC: answer with that server error instead
    race <owner>    at the next RPC: an insert finds a row that <owner>
                    inserted first (a duplicate key, error 2627; in
                    acquire_all, the first name that has no row)
    abort <kind>    at the next RPC, when it is a claim_runs or record_runs:
                    fail it with a deadlock (1205) after all its writes, so
                    that the batch is rolled back whole (XACT_ABORT ON)
Like SQL Server, it refuses an RPC with more than 2,100 parameters (8003).
After each successful login it writes the number of logins so far to the
file <ctl>.logins, so that a spec can tell a kept connection from a new one;
and it appends to <ctl>.sql each statement text it had not seen (numbers
aside), so that a spec can read the T-SQL the provider sends.
"""
import argparse
import os
import re
import select
import socket
import socketserver
import sqlite3
import struct
import sys
import threading
import time

# ---------------------------------------------------------------- the statements
# Each function gets (db, table, params, faults) and returns the batch's
# answer: a list of ("rows", columns, rows) and ("error", number, class, text).
# Columns are (name, "int" | "str").

LEASE_COLS = [("got", "int"), ("owner", "str"), ("token", "int"),
              ("expires_at", "int"), ("now", "int"), ("last_fire", "int")]


def now_ms():
    return int(time.time() * 1000)


# The bounds of a sane row (src/store/store.h): a corrupt lease row is never
# taken nor renewed, nor its token grown.
TOKEN_LIMIT, TIME_MAX = 1 << 62, 253402300799999
LEASE_OK = (f"(token >= 0 AND token < {TOKEN_LIMIT} AND "
            f"(last_fire IS NULL OR last_fire BETWEEN -1 AND {TIME_MAX}))")


def time_ok(c):
    return f"({c} IS NULL OR {c} BETWEEN 0 AND {TIME_MAX})"


RUN_OK = (f"(scheduled_at BETWEEN 0 AND {TIME_MAX} AND token >= 0 AND token < {TOKEN_LIMIT}"
          f" AND {time_ok('claimed_at')} AND {time_ok('started_at')} AND {time_ok('ended_at')}"
          f" AND {time_ok('recorded_at')})")


def sane(token, last_fire):
    return 0 <= token < TOKEN_LIMIT and (last_fire is None or -1 <= last_fire <= TIME_MAX)


def create(db, t):
    db.execute(f'CREATE TABLE IF NOT EXISTS "{t}" (name TEXT PRIMARY KEY, '
               'owner TEXT NOT NULL, token INTEGER NOT NULL, acquired_at INTEGER NOT NULL, '
               'renewed_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, last_fire INTEGER)')


def add_columns(db, t, names):
    """The IF COL_LENGTH(...) IS NULL ALTER TABLE ... ADD of an upgrade: the
    columns a table made before them lacks, NULL in every row."""
    cols = [r[1] for r in db.execute(f'PRAGMA table_info("{t}")')]
    for c in names:
        if c not in cols:
            db.execute(f'ALTER TABLE "{t}" ADD COLUMN {c} '
                       + ("TEXT" if c in ("handoff_to", "how") else "INTEGER"))


def schema(db, t, p, faults):
    """The batch that makes what is missing, under the schema lock (the
    server's one write lock stands for it): the lease table and the columns
    an older one lacks, the ledger with its indexes, the presence table."""
    create(db, t)
    add_columns(db, t, ("last_fire", "paused_until", "trigger_at", "handoff_at", "health",
                        "handoff_to"))
    create_runs(db, t + "_runs")
    # Only to a ledger of an older leash (every column it had), as the batch.
    if set(RUN_COLS) <= {r[1] for r in db.execute(f'PRAGMA table_info("{t}_runs")')}:
        add_columns(db, t + "_runs", RUN_ADDED)
    create_replicas(db, t + "_replicas")
    return []


def renewed(db, t, p, cols):
    """renew_all's UPDATE of every @n<i> the owner holds unexpired; the
    renewed rows' cols (SQL, ? for the statement's now)."""
    owner, ms, now = p["@owner"], p["@ms"], now_ms()
    names = [v for k, v in p.items() if re.fullmatch(r"@n\d+", k)]
    rows = []
    for name in dict.fromkeys(names):
        cur = db.execute(f'UPDATE "{t}" SET renewed_at = ?, expires_at = ? '
                         f'WHERE name = ? AND owner = ? AND expires_at > ? AND {LEASE_OK}',
                         (now, now + ms, name, owner, now))
        if cur.rowcount:
            args = (now, name) if "?" in cols else (name,)
            rows.append(db.execute(f'SELECT {cols} FROM "{t}" WHERE name = ?', args).fetchone())
    return rows


def renew_ctl(db, t, p, faults):
    """renew_all's UPDATE, its OUTPUT carrying the control columns and @now."""
    rows = renewed(db, t, p, "name, token, paused_until, trigger_at, handoff_at, ?")
    return [("rows", [("name", "str"), ("token", "int"), ("paused_until", "int"),
                      ("trigger_at", "int"), ("handoff_at", "int"), ("now", "int")], rows)]


def control(db, t, p, faults):
    """A pause (@until): a free row when none, then the UPDATE; the others
    (@what 2 resume, 3 trigger, 4 handoff): the UPDATE.  Its OUTPUT is
    (@now, name) when the row is there."""
    name, what, until, now = p["@name"], p.get("@what", 1), p.get("@until"), now_ms()
    if what == 1:
        db.execute(f'INSERT OR IGNORE INTO "{t}" (name, owner, token, acquired_at, renewed_at, '
                   "expires_at) VALUES (?, '', 0, 0, 0, 0)", (name,))
    cur = db.execute(
        f'UPDATE "{t}" SET '
        'paused_until = CASE ? WHEN 1 THEN ? WHEN 2 THEN NULL ELSE paused_until END, '
        'trigger_at = CASE WHEN ? = 3 THEN ? ELSE trigger_at END, '
        'handoff_at = CASE WHEN ? = 4 THEN ? ELSE handoff_at END, '
        'handoff_to = CASE WHEN ? = 4 THEN ? ELSE handoff_to END WHERE name = ?',
        (what, until, what, now, what, now, what, p.get("@to"), name))
    rows = [(now, name)] if cur.rowcount else []
    bump_controls(db, t)
    return [("rows", [("now", "int"), ("name", "str")], rows)]


CONTROLS = "@controls"


def bump_controls(db, t):
    """Every control grows the controls' version, the token of the
    reserved row '@controls' (made free, token 0, when missing)."""
    db.execute(f'INSERT OR IGNORE INTO "{t}" (name, owner, token, acquired_at, renewed_at, '
               "expires_at) VALUES (?, '', 0, 0, 0, 0)", (CONTROLS,))
    db.execute(f'UPDATE "{t}" SET token = token + 1 WHERE name = ?', (CONTROLS,))


def ctl_version(db, t, p, faults):
    """(now, the '@controls' row's token or NULL); writes nothing."""
    row = db.execute(f'SELECT token FROM "{t}" WHERE name = ?', (CONTROLS,)).fetchone()
    return [("rows", [("now", "int"), ("version", "int")], [(now_ms(), row[0] if row else None)])]


def handoff(db, t, p, faults):
    """The target read (handoff_to, when another owner's presence row is
    live and not draining), then the UPDATE: passed on as an acquire would,
    or freed.  A row (to, now) iff the holder held it."""
    name, owner, ms, live, now = p["@name"], p["@owner"], p["@ms"], p["@live"], now_ms()
    row = db.execute(f'SELECT handoff_to FROM "{t}" WHERE name = ? AND owner = ? '
                     'AND expires_at > ?', (name, owner, now)).fetchone()
    if not row:
        return [("rows", [("to", "str"), ("now", "int")], [])]
    to = row[0]
    if to is not None and (to == owner or not db.execute(
            f'SELECT 1 FROM "{t}_replicas" WHERE owner = ? AND pid <> 0 AND draining = 0 '
            'AND heartbeat > ?', (to, now - live)).fetchone()):
        to = None
    if to is None:
        db.execute(f'UPDATE "{t}" SET expires_at = ?, handoff_to = NULL WHERE name = ?',
                   (now, name))
    else:
        db.execute(f'UPDATE "{t}" SET owner = ?, token = token + 1, acquired_at = ?, '
                   'renewed_at = ?, expires_at = ?, handoff_to = NULL WHERE name = ?',
                   (to, now, now, now + ms, name))
    return [("rows", [("to", "str"), ("now", "int")], [(to or "", now)])]


def health(db, t, p, faults):
    """The conditional UPDATE; its OUTPUT row (name) when it changed the row."""
    name, owner, token, failing, now = p["@name"], p["@owner"], p["@token"], p["@failing"], now_ms()
    cur = db.execute(f'UPDATE "{t}" SET health = ? WHERE name = ? AND owner = ? AND token = ? '
                     'AND expires_at > ? AND COALESCE(health, 0) <> ?',
                     (failing, name, owner, token, now, failing))
    return [("rows", [("name", "str")], [(name,)] if cur.rowcount else [])]


def holder(db, t, name, now):
    r = db.execute(f'SELECT owner, token, expires_at, last_fire FROM "{t}" WHERE name = ?',
                   (name,)).fetchone()
    r = r or ("", 0, 0, None)
    return ("rows", LEASE_COLS, [(0,) + tuple(r[:3]) + (now, r[3])])


def try_acquire(db, t, p, faults):
    name, owner, ms, now = p["@name"], p["@owner"], p["@ms"], now_ms()
    out = []
    row = db.execute(f'SELECT owner, token, acquired_at, expires_at, last_fire FROM "{t}" '
                     'WHERE name = ?', (name,)).fetchone()
    if row and (row[0] == owner or row[3] <= now) and sane(row[1], row[4]):
        same = row[0] == owner and row[3] > now
        token = row[1] if same else row[1] + 1
        acquired = row[2] if same else now
        db.execute(f'UPDATE "{t}" SET owner = ?, token = ?, acquired_at = ?, renewed_at = ?, '
                   'expires_at = ? WHERE name = ?', (owner, token, acquired, now, now + ms, name))
        return [("rows", LEASE_COLS, [(1, owner, token, now + ms, now, row[4])])]
    if row:
        return [holder(db, t, name, now)]
    if "race" in faults:        # another replica inserts between UPDATE and INSERT
        db.execute(f'INSERT INTO "{t}" (name, owner, token, acquired_at, renewed_at, expires_at) VALUES (?, ?, 1, ?, ?, ?)',
                   (name, faults["race"], now, now, now + 60000))
    try:
        db.execute(f'INSERT INTO "{t}" (name, owner, token, acquired_at, renewed_at, expires_at) VALUES (?, ?, 1, ?, ?, ?)',
                   (name, owner, now, now, now + ms))
    except sqlite3.IntegrityError:
        out.append(("error", 2627, 14, "Violation of PRIMARY KEY constraint. "
                    f"Cannot insert duplicate key in object 'dbo.{t}'."))
        return out + [holder(db, t, name, now)]
    return [("rows", LEASE_COLS, [(1, owner, 1, now + ms, now, None)])]


def renew(db, t, p, faults):
    name, owner, ms, now = p["@name"], p["@owner"], p["@ms"], now_ms()
    cur = db.execute(f'UPDATE "{t}" SET renewed_at = ?, expires_at = ? '
                     f'WHERE name = ? AND owner = ? AND expires_at > ? AND {LEASE_OK}',
                     (now, now + ms, name, owner, now))
    if cur.rowcount == 0:               # lost: the UPDATE's OUTPUT has no row
        return [("rows", LEASE_COLS, [])]
    token, last_fire = db.execute(f'SELECT token, last_fire FROM "{t}" WHERE name = ?',
                                  (name,)).fetchone()
    return [("rows", LEASE_COLS, [(1, owner, token, now + ms, now, last_fire)])]


def release(db, t, p, faults):
    now = now_ms()
    db.execute(f'UPDATE "{t}" SET expires_at = ? WHERE name = ? AND owner = ? '
               'AND expires_at > ?', (now, p["@name"], p["@owner"], now))
    return []


def release_all(db, t, p, faults):
    owner, now = p["@owner"], now_ms()
    for name in dict.fromkeys(v for k, v in p.items() if re.fullmatch(r"@n\d+", k)):
        db.execute(f'UPDATE "{t}" SET expires_at = ? WHERE name = ? AND owner = ? '
                   'AND expires_at > ?', (now, name, owner, now))
    return []


def held(db, t, p, faults):
    """(name, token) of each @n<i> the owner holds unexpired; writes nothing."""
    owner, now = p["@owner"], now_ms()
    names = list(dict.fromkeys(v for k, v in p.items() if re.fullmatch(r"@n\d+", k)))
    rows = [db.execute(f'SELECT name, token FROM "{t}" WHERE name = ? AND owner = ? '
                       'AND expires_at > ?', (n, owner, now)).fetchone() for n in names]
    return [("rows", [("name", "str"), ("token", "int")], [r for r in rows if r])]


def renew_all(db, t, p, faults):
    rows = renewed(db, t, p, "name, token")
    return [("rows", [("name", "str"), ("token", "int")], rows)]


def acquire_all(db, t, p, faults, stmt):
    """The UPDATE of the free, expired and own rows, then one INSERT per name
    that has no row, where a duplicate key (the batch CATCHes 2627) means
    someone else got that one; then a row (name, got, owner, token,
    expires_at, now) per row (i, name) of @names."""
    owner, ms, now = p["@owner"], p["@ms"], now_ms()
    names = sorted((r["i"], r["name"]) for r in table_rows(stmt, "names", p, ("name", "i")))
    taken = {}
    for _, name in names:
        row = db.execute(f'SELECT owner, token, acquired_at, expires_at, last_fire FROM "{t}" '
                         'WHERE name = ?', (name,)).fetchone()
        if name in taken or not row or not (row[0] == owner or row[3] <= now) \
                or not sane(row[1], row[4]):
            continue
        same = row[0] == owner and row[3] > now
        token = row[1] if same else row[1] + 1
        db.execute(f'UPDATE "{t}" SET owner = ?, token = ?, acquired_at = ?, renewed_at = ?, '
                   'expires_at = ? WHERE name = ?',
                   (owner, token, row[2] if same else now, now, now + ms, name))
        taken[name] = (token, now + ms)
    race = faults.get("race")
    for _, name in names:
        if db.execute(f'SELECT 1 FROM "{t}" WHERE name = ?', (name,)).fetchone():
            continue
        if race is not None:    # another replica inserts between the check and the INSERT
            db.execute(f'INSERT INTO "{t}" (name, owner, token, acquired_at, renewed_at, expires_at) VALUES (?, ?, 1, ?, ?, ?)',
                       (name, race, now, now, now + 60000))
            race = None
        try:
            db.execute(f'INSERT INTO "{t}" (name, owner, token, acquired_at, renewed_at, expires_at) VALUES (?, ?, 1, ?, ?, ?)',
                       (name, owner, now, now, now + ms))
            taken[name] = (1, now + ms)
        except sqlite3.IntegrityError:
            pass
    rows = []
    for i, name in names:
        if name in taken:
            last_fire = db.execute(f'SELECT last_fire FROM "{t}" WHERE name = ?',
                                   (name,)).fetchone()[0]
            rows.append((name, 1, owner) + taken[name] + (now, last_fire))
        else:
            rows.append((name,) + holder(db, t, name, now)[2][0])
    return [("rows", [("name", "str")] + LEASE_COLS, rows)]


def list_leases(db, t, p, faults):
    rows = db.execute(f'SELECT name, owner, token, acquired_at, renewed_at, expires_at, '
                      f'last_fire, paused_until FROM "{t}" ORDER BY name').fetchall()
    cols = [("name", "str"), ("owner", "str"), ("token", "int"), ("acquired_at", "int"),
            ("renewed_at", "int"), ("expires_at", "int"), ("last_fire", "int"),
            ("paused_until", "int")]
    now = now_ms()
    return [("rows", [("now", "int")] + cols,
             [(now,) + r for r in rows] or [(now,) + (None,) * 8])]


def claims_answer(now, claims, won):
    """A row (now, i) per claim taken, or one (now, NULL) when none was."""
    return [("rows", [("now", "int"), ("i", "int")],
             [(now, c["i"]) for c in claims if c["i"] in won] or [(now, None)])]


def claim_all(db, t, p, faults, stmt):
    """The UPDATE of every row of @c held by @owner with its token, unexpired
    at the batch's @now and with last_fire below its fire; then a row (now,
    i) per claim taken.  The names of one batch are distinct (the wrapper
    sees to it)."""
    owner, now = p["@owner"], now_ms()
    claims = table_rows(stmt, "c", p, ("name",))
    won = set()
    for c in claims:
        cur = db.execute(f'UPDATE "{t}" SET last_fire = ? WHERE name = ? AND owner = ? '
                         'AND token = ? AND expires_at > ? '
                         'AND (last_fire IS NULL OR last_fire < ?)',
                         (c["fire"], c["name"], owner, c["token"], now, c["fire"]))
        if cur.rowcount:
            won.add(c["i"])
    return claims_answer(now, claims, won)


def unclaim_all(db, t, p, faults, stmt):
    """The UPDATE stepping back the cursor of every row of @c held by @owner
    with its token whose last_fire is its fire (to fire - 1, NULL for 0;
    expiry not judged), the DELETE of those fires' rows that are running and
    never started, in one transaction; then a row (now, i) per claim given
    back."""
    lease, runs = ledger_tables(stmt)
    owner, now = p["@owner"], now_ms()
    claims = table_rows(stmt, "c", p, ("name",))
    won = set()
    for c in claims:
        name, fire = c["name"], c["fire"]
        cur = db.execute(f'UPDATE "{lease}" SET last_fire = CASE WHEN ? > 0 THEN ? - 1 END '
                         'WHERE name = ? AND owner = ? AND token = ? AND last_fire = ?',
                         (fire, fire, name, owner, c["token"], fire))
        if cur.rowcount:
            won.add(c["i"])
            db.execute(f'DELETE FROM "{runs}" WHERE job = ? AND scheduled_at = ? AND owner = ? '
                       "AND outcome = 'running' AND started_at IS NULL", (name, fire, owner))
    return claims_answer(now, claims, won)


def floor_select(db, t, p, faults):
    return [("rows", [("one", "int")], [(1,)])]


def floor_create(db, t, p, faults):
    db.execute(f'CREATE TABLE IF NOT EXISTS "{t}" (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)')
    db.execute(f'INSERT OR IGNORE INTO "{t}" VALUES (1, 0)')
    return []


def floor_update(db, t, p, faults):
    db.execute(f'UPDATE "{t}" SET v = v + 1 WHERE id = 1')
    return []


# ---------------------------------------------------------------- the run ledger
# The ledger statements bind their claims as VALUES tuples into the table
# variable @c, and their rows as VALUES tuples into @w, each value a
# parameter (every distinct value bound once, however many rows use it), a
# NULL, or an integer literal (a claim's number).  The functions below
# evaluate those (table_rows) and then do what the batch does, in the one
# SQLite transaction the batch runs in: an error (TSqlError) rolls all of it
# back, as XACT_ABORT ON does.

RUN_COLS = ["job", "scheduled_at", "owner", "token", "claimed_at", "started_at", "ended_at",
            "outcome", "exit_code", "exit_signal", "duration_ms", "error", "actor",
            "recorded_at"]
RUN_KINDS = {"job": "str", "owner": "str", "outcome": "str", "error": "text", "actor": "str",
             "how": "str"}
# The ledger columns later versions added: record_runs writes them (a NULL
# keeps the stored value), read_runs reads them, schema adds them.
RUN_ADDED = ["run_id", "how"]


class TSqlError(Exception):
    def __init__(self, number, cls, text):
        super().__init__(text)
        self.number, self.cls, self.text = number, cls, text


def ledger_tables(stmt):
    """(lease table, ledger table) of a ledger statement: [<t>_runs] names both
    (the longest bracketed name: the lease table's name may end in _runs)."""
    names = re.findall(r"\[(\w+)\]", stmt)
    runs = max((n for n in names if n.endswith("_runs")), key=len, default=None)
    return (runs[:-5], runs) if runs else (names[0], None)   # a claim without rows


def split_items(s):
    items, depth, cur = [], 0, ""
    for ch in s:
        if ch == "," and depth == 0:
            items.append(cur.strip())
            cur = ""
            continue
        depth += (ch == "(") - (ch == ")")
        cur += ch
    return items + [cur.strip()] if cur.strip() else items


def evaluate(item, p):
    if item == "NULL":
        return None
    if re.fullmatch(r"-?\d+", item):
        return int(item)
    if re.fullmatch(r"@\w+", item):
        return p[item]
    raise ValueError(f"cannot evaluate {item!r}")


def table_columns(stmt, var):
    """The columns of DECLARE @var TABLE (...), in order."""
    m = re.search(rf"DECLARE @{var} TABLE \(((?:[^()]|\([^()]*\))*)\)", stmt)
    return [c.split()[0] for c in split_items(m.group(1)) if not c.startswith("PRIMARY KEY")]


def table_rows(stmt, var, p, key):
    """The rows the statement's INSERT INTO @var [(cols)] VALUES ... put in the
    table variable, as dicts; a repeated key is a duplicate key error, as the
    variable's PRIMARY KEY makes it."""
    rows, seen, declared = [], set(), None
    for m in re.finditer(rf"INSERT INTO @{var} (?:\(([^)]*)\) )?VALUES (.*?);", stmt):
        if m.group(1):
            cols = [c.strip() for c in m.group(1).split(",")]
        else:
            cols = declared = declared or table_columns(stmt, var)
        for tup in re.finditer(r"\(((?:[^()]|\([^()]*\))*)\)", m.group(2)):
            row = dict(zip(cols, (evaluate(i, p) for i in split_items(tup.group(1)))))
            k = tuple(row[c] for c in key)
            if k in seen:
                raise TSqlError(2627, 14, "Violation of PRIMARY KEY constraint. Cannot insert "
                                f"duplicate key in object '@{var}'. The duplicate key value "
                                f"is {k}.")
            seen.add(k)
            rows.append(row)
    return rows


def deadlock(faults, kind):
    """The "abort" fault: the batch dies after its writes (a deadlock victim)."""
    if faults.get("abort") == kind:
        raise TSqlError(1205, 13, "Transaction was deadlocked on lock resources with another "
                        "process and has been chosen as the deadlock victim. Rerun the "
                        "transaction.")


def create_runs(db, t):
    db.execute(f'CREATE TABLE IF NOT EXISTS "{t}" (job TEXT NOT NULL, scheduled_at INTEGER '
               'NOT NULL, owner TEXT NOT NULL, token INTEGER NOT NULL, claimed_at INTEGER, '
               'started_at INTEGER, ended_at INTEGER, outcome TEXT NOT NULL, exit_code INTEGER, '
               'exit_signal INTEGER, duration_ms INTEGER, error TEXT, actor TEXT, '
               'recorded_at INTEGER NOT NULL, run_id INTEGER, how TEXT, '
               'PRIMARY KEY (job, scheduled_at, owner))')
    db.execute(f'CREATE INDEX IF NOT EXISTS "{t}_at" ON "{t}" (scheduled_at)')
    db.execute(f'CREATE INDEX IF NOT EXISTS "{t}_running" ON "{t}" (job, token) '
               "WHERE outcome = 'running'")


def check_schema(db, t, p, faults, stmt):
    """The tables the statement lists ([name], in its order) that are not
    there: a reading command's open, which makes none."""
    have = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    want = re.findall(r"\((\d+), N'\[(\w+)\]'\)", stmt)
    return [("rows", [("name", "str")],
             [(f"[{c}]",) for _, c in sorted(want, key=lambda w: int(w[0])) if c not in have])]


def check_runs(db, t, p, faults, stmt):
    """The columns the statement lists (in its order) that the table lacks."""
    have = {r[1] for r in db.execute(f'PRAGMA table_info("{t}")')}
    want = re.findall(r"\((\d+), N'(\w+)'\)", stmt)
    return [("rows", [("name", "str")],
             [(c,) for _, c in sorted(want, key=lambda w: int(w[0])) if c not in have])]


def claim_runs(db, t, p, faults, stmt):
    """claim_all's UPDATE over @c, then for each row of @w whose claim won: the
    row with that key replaced (UPDATE, else INSERT), claimed_at and
    recorded_at the batch's @now; then a row (i, ok, now) per claim."""
    lease, runs = ledger_tables(stmt)
    owner, now = p["@owner"], now_ms()
    claims = table_rows(stmt, "c", p, ("name",))
    rows = table_rows(stmt, "w", p, ("i", "scheduled_at", "owner"))
    won = {}
    for c in sorted(claims, key=lambda c: c["name"].encode("utf-16-be", "surrogatepass")):
        cur = db.execute(f'UPDATE "{lease}" SET last_fire = ? WHERE name = ? AND owner = ? '
                         'AND token = ? AND expires_at > ? '
                         'AND (last_fire IS NULL OR last_fire < ?)',
                         (c["fire"], c["name"], owner, c["token"], now, c["fire"]))
        if cur.rowcount:
            won[c["i"]] = c["name"]
    for w in rows:
        if w["i"] not in won:
            continue
        v = {k: w[k] for k in RUN_COLS if k in w}
        v.update(job=won[w["i"]], claimed_at=now, recorded_at=now)
        sets = ", ".join(f"{k} = ?" for k in RUN_COLS[3:])
        cur = db.execute(f'UPDATE "{runs}" SET {sets} WHERE job = ? AND scheduled_at = ? '
                         'AND owner = ?', [v[k] for k in RUN_COLS[3:]]
                         + [v["job"], v["scheduled_at"], v["owner"]])
        if not cur.rowcount:
            db.execute(f'INSERT INTO "{runs}" ({", ".join(RUN_COLS)}) VALUES '
                       f'({", ".join("?" * len(RUN_COLS))})', [v[k] for k in RUN_COLS])
    deadlock(faults, "claim_runs")
    return claims_answer(now, claims, won)


def record_runs(db, t, p, faults, stmt):
    """Per row of @w: the stored row updated (token and outcome replaced, every
    other field only where the new one is not NULL), else inserted;
    recorded_at the batch's @now."""
    _, runs = ledger_tables(stmt)
    now = now_ms()
    keep = RUN_COLS[4:7] + RUN_COLS[8:13] + RUN_ADDED     # COALESCE(new, stored)
    for w in table_rows(stmt, "w", p, ("job", "scheduled_at", "owner")):
        sets = ", ".join(["token = ?", "outcome = ?", "recorded_at = ?"]
                         + [f"{k} = COALESCE(?, {k})" for k in keep])
        cur = db.execute(f'UPDATE "{runs}" SET {sets} WHERE job = ? AND scheduled_at = ? '
                         'AND owner = ?', [w["token"], w["outcome"], now]
                         + [w[k] for k in keep] + [w["job"], w["scheduled_at"], w["owner"]])
        if not cur.rowcount:
            v = dict(w, recorded_at=now)
            cols = RUN_COLS + RUN_ADDED
            db.execute(f'INSERT INTO "{runs}" ({", ".join(cols)}) VALUES '
                       f'({", ".join("?" * len(cols))})', [v[k] for k in cols])
    deadlock(faults, "record_runs")
    return []


def utf16(s):
    """SQL Server's BIN2 order on NVARCHAR: by UTF-16 code unit."""
    return s.encode("utf-16-be", "surrogatepass")


# The columns a ledger read answers, each row after the batch's now.
READ_COLS = ["job", "owner", "actor", "outcome", "error", "scheduled_at", "token", "claimed_at",
             "started_at", "ended_at", "duration_ms", "recorded_at", "exit_code", "exit_signal"]


def read_runs(db, t, p, faults, stmt):
    """SELECT TOP (@limit) ... [WHERE job = @job AND] scheduled_at >= @since
    ORDER BY scheduled_at DESC, job, owner, each row after the batch's now
    (one row of the clock alone when none: a LEFT JOIN)."""
    _, runs = ledger_tables(stmt)
    now = now_ms()
    one_job = "job = @job AND" in stmt
    names = READ_COLS + RUN_ADDED
    rows = db.execute(f'SELECT {", ".join(names)} FROM "{runs}" WHERE scheduled_at >= ?'
                      + (" AND job = ?" if one_job else ""),
                      (p["@since"], p["@job"]) if one_job else (p["@since"],)).fetchall()
    rows.sort(key=lambda r: (-r[5], utf16(r[0]), utf16(r[1])))
    cols = [("now", "int")] + [(c, RUN_KINDS.get(c, "int")) for c in names]
    rows = [(now,) + r for r in rows[:p["@limit"]]]
    return [("rows", cols, rows or [(now,) + (None,) * len(names)])]


FAILS = ("failed", "timeout", "lost", "killed")
# The error prune_runs gives a row it marks lost (driver.h's STORE_SQL_LOST_WHY).
LOST_WHY = "no end was recorded before the lease moved on (its replica died or lost the lease)"
NOT_RUNS = ("missed", "skipped-overlap", "skipped-paused")


def last_runs(db, t, p, faults, stmt):
    """Per job with a ledger row (BIN2 order): the latest row (scheduled_at,
    owner descending) of each class, 0 a run, 1 ok, 2 a failure, as the
    batch's now, READ_COLS (job always), cls, handled, fails; class 0 always
    (NULL columns when no run); one row of the clock alone when none."""
    _, runs = ledger_tables(stmt)
    now = now_ms()
    rows = db.execute(f'SELECT {", ".join(RUN_COLS)} FROM "{runs}"').fetchall()
    reorder = [RUN_COLS.index(c) for c in READ_COLS]
    by_job = {}
    for r in rows:
        by_job.setdefault(r[0], []).append(r)
    out = []
    for job in sorted(by_job, key=utf16):
        rs = sorted(by_job[job], key=lambda r: (r[1], utf16(r[2])), reverse=True)
        oc = RUN_COLS.index("outcome")
        handled = max((r[1] for r in rs if r[oc] != "missed"), default=None)
        oks = [r for r in rs if r[oc] == "ok"]
        since = oks[0][1] if oks else -1
        fails = sum(1 for r in rs if r[oc] in FAILS and r[1] > since)
        for cls, pick in ((0, lambda r: r[oc] not in NOT_RUNS), (1, lambda r: r[oc] == "ok"),
                          (2, lambda r: r[oc] in FAILS)):
            got = next((r for r in rs if pick(r)), None)
            if got is None and cls > 0:
                continue
            got = tuple(got[i] for i in reorder) if got else (None,) * len(READ_COLS)
            out.append((now, job) + got[1:] + (cls, handled, fails))
    cols = ([("now", "int")] + [(c, RUN_KINDS.get(c, "int")) for c in READ_COLS]
            + [("cls", "int"), ("handled", "int"), ("fails", "int")])
    return [("rows", cols, out or [(now,) + (None,) * (len(cols) - 1)])]


def prune_runs(db, t, p, faults, stmt):
    """Three steps sharing @max rows: running rows under an older token than
    their lease's, scheduled at or after @cut (= @now - @keep), become lost;
    rows scheduled before @cut go; and of each job with a lease row, the rows
    after its @per_job-th newest (scheduled_at DESC, owner DESC) go, but
    neither running ones nor those just marked lost.  Answers the count."""
    lease, runs = ledger_tables(stmt)
    now, top = now_ms(), p["@max"]
    cut = now - p["@keep"]
    lost = [r[0] for r in db.execute(
        f'SELECT x.rowid FROM "{runs}" x JOIN "{lease}" l ON l.name = x.job '
        "WHERE x.outcome = 'running' AND x.token < l.token AND x.scheduled_at >= ? LIMIT ?",
        (cut, top))]
    for rowid in lost:
        db.execute(f'UPDATE "{runs}" SET outcome = \'lost\', recorded_at = ?, '
                   'error = COALESCE(error, ?) WHERE rowid = ?', (now, LOST_WHY, rowid))
    n = len(lost)
    if n < top:
        n += db.execute(f'DELETE FROM "{runs}" WHERE rowid IN (SELECT rowid FROM "{runs}" '
                        'WHERE scheduled_at < ? LIMIT ?)', (cut, top - n)).rowcount
    for (name,) in db.execute(f'SELECT name FROM "{lease}"').fetchall():
        rows = db.execute(f'SELECT rowid, scheduled_at, owner, outcome FROM "{runs}" '
                          'WHERE job = ?', (name,)).fetchall()
        rows.sort(key=lambda r: (r[1], utf16(r[2])), reverse=True)
        for rowid, at, _, outcome in rows[p["@per_job"]:]:
            if n >= top:
                break
            if at >= cut and outcome != "running" and rowid not in lost:
                db.execute(f'DELETE FROM "{runs}" WHERE rowid = ?', (rowid,))
                n += 1
    return [("rows", [("n", "int")], [(n,)])]

PRESENCE_COLS = [("now", "int"), ("owner", "str"), ("host", "str"), ("pid", "int"),
                 ("version", "str"), ("started_at", "int"), ("heartbeat", "int"),
                 ("draining", "int"), ("jobs_hash", "str"), ("jobs", "max"), ("broken", "max")]


def create_replicas(db, t):
    db.execute(f'CREATE TABLE IF NOT EXISTS "{t}" (owner TEXT PRIMARY KEY, host TEXT NOT NULL, '
               'pid INTEGER NOT NULL, version TEXT NOT NULL, started_at INTEGER NOT NULL, '
               'heartbeat INTEGER NOT NULL, draining INTEGER NOT NULL DEFAULT 0, '
               'jobs_hash TEXT NOT NULL, jobs TEXT NOT NULL)')
    # The IF NOT EXISTS (SELECT ... sys.columns ...) ALTER TABLE ... ADD broken of
    # an upgrade: a table made before the broken files gets the column.
    if "broken" not in [r[1] for r in db.execute(f'PRAGMA table_info("{t}")')]:
        db.execute(f'ALTER TABLE "{t}" ADD COLUMN broken TEXT')


def presence_rows(db, t, mine):
    """(@now, owner, ..., jobs_hash, jobs, broken) of every replica (jobs NULL
    where jobs_hash is mine), or one row of the clock alone (a LEFT JOIN)."""
    now = now_ms()
    rows = db.execute(f'SELECT owner, host, pid, version, started_at, heartbeat, draining, '
                      f'jobs_hash, jobs, broken FROM "{t}" WHERE pid <> 0 ORDER BY owner').fetchall()
    out = [(now,) + r[:8] + (None if mine is not None and r[7] == mine else r[8], r[9])
           for r in rows]
    return [("rows", PRESENCE_COLS, out or [(now,) + (None,) * 10])]


def beat_write(db, t, p):
    """The UPDATE (else INSERT) of @owner's row, draining kept when a drain
    set it (1), else 2 while @name's drain marker (a pid 0 row) is there;
    the prune (never a marker)."""
    now, owner = now_ms(), p["@owner"]
    marked = 2 if db.execute(f'SELECT 1 FROM "{t}" WHERE owner = ? AND pid = 0',
                             (p["@name"],)).fetchone() else 0
    vals = (p["@host"], p["@pid"], p["@version"] or "", now, marked, p["@hash"] or "",
            p["@jobs"] or "", p["@broken"], owner)
    cur = db.execute(f'UPDATE "{t}" SET host = ?, pid = ?, version = ?, heartbeat = ?, '
                     'draining = CASE WHEN draining = 1 THEN 1 ELSE ? END, jobs_hash = ?, jobs = ?, '
                     'broken = ? WHERE owner = ?', vals)
    if cur.rowcount == 0:
        db.execute(f'INSERT INTO "{t}" (host, pid, version, heartbeat, draining, jobs_hash, '
                   'jobs, broken, owner, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
                   vals + (now,))
    db.execute(f'DELETE FROM "{t}" WHERE owner <> ? AND pid <> 0 AND heartbeat < ?',
               (owner, now - p["@prune"]))


def beat(db, t, p, faults):
    """The beat's writes, then the presence rows."""
    beat_write(db, t, p)
    return presence_rows(db, t, p["@hash"] or "")


def drain(db, t, p, faults):
    """The owners' (@n1, ...) draining = @on, then @name's marker written
    (@on 1) or deleted (@on 0) when @name is given; the clock and the rows
    matched."""
    now, on, c, mark = now_ms(), p["@on"], 0, p["@name"] is not None
    for o in dict.fromkeys(v for k, v in p.items() if re.fullmatch(r"@n\d+", k)):
        c += db.execute(f'UPDATE "{t}" SET draining = ? WHERE owner = ? AND pid <> 0',
                        (on, o)).rowcount
    if mark and on:
        if db.execute(f'UPDATE "{t}" SET heartbeat = ? WHERE owner = ? AND pid = 0',
                      (now, p["@name"])).rowcount:
            c += 1
        elif not db.execute(f'SELECT 1 FROM "{t}" WHERE owner = ?', (p["@name"],)).fetchone():
            db.execute(f'INSERT INTO "{t}" (owner, host, pid, version, started_at, heartbeat, '
                       "draining, jobs_hash, jobs) VALUES (?, '', 0, '', ?, ?, 1, '', '')",
                       (p["@name"], now, now))
            c += 1
    elif mark:
        c += db.execute(f'DELETE FROM "{t}" WHERE owner = ? AND pid = 0', (p["@name"],)).rowcount
    return [("rows", [("now", "int"), ("changed", "int")], [(now, c)])]


def renew_beat(db, t, p, faults):
    """renew_ctl's UPDATE and OUTPUT on the lease table (rows of kind 'L'),
    then the beat's transaction on <table>_replicas and its rows (kind 'R'),
    in one batch: two result sets."""
    rows = renewed(db, t, p, "?, name, NULL, token, NULL, paused_until, trigger_at, NULL, NULL, "
                   "NULL, NULL, 'L', handoff_at")
    beat_write(db, t + "_replicas", p)
    (_, cols, pres), = presence_rows(db, t + "_replicas", p["@hash"] or "")
    cols = cols + [("kind", "str"), ("h", "int")]
    return [("rows", cols, rows), ("rows", cols, [r + ("R", None) for r in pres])]


def repair(db, t, p, faults):
    """The row as it was, the new token (one above every sane one of the
    table and the job's ledger rows), the row's reset when corrupt and the
    job's corrupt ledger rows deleted; one row back."""
    name, now = p["@name"], now_ms()
    row = db.execute(f'SELECT token, last_fire FROM "{t}" WHERE name = ?', (name,)).fetchone()
    bad = 1 if row and not sane(row[0], row[1]) else 0
    top = 1 + max(
        db.execute(f'SELECT coalesce(max(token), 0) FROM "{t}" '
                   f'WHERE token >= 0 AND token < {TOKEN_LIMIT}').fetchone()[0],
        db.execute(f'SELECT coalesce(max(token), 0) FROM "{t}_runs" WHERE job = ? '
                   f'AND token >= 0 AND token < {TOKEN_LIMIT}', (name,)).fetchone()[0])
    if bad:
        fire = row[1] if row[1] is None or -1 <= row[1] <= TIME_MAX else None
        db.execute(f'UPDATE "{t}" SET token = ?, owner = \'\', expires_at = ?, last_fire = ? '
                   'WHERE name = ?', (top, now, fire, name))
    dropped = db.execute(f'DELETE FROM "{t}_runs" WHERE job = ? AND NOT {RUN_OK}',
                         (name,)).rowcount
    cols = [("now", "int"), ("found", "int"), ("token", "int"), ("last_fire", "int"),
            ("bad", "int"), ("new_token", "int"), ("dropped", "int")]
    return [("rows", cols, [(now, 1 if row else 0, row[0] if row else None,
                             row[1] if row else None, bad,
                             top if bad else (row[0] if row else None), dropped)])]


def corrupt_runs(db, t, p, faults):
    """The ledger rows whose scheduled_at is out of bounds, TOP (16), by job
    (BIN2 order), then scheduled_at."""
    rows = db.execute(f'SELECT job, scheduled_at FROM "{t}" '
                      f'WHERE scheduled_at < 0 OR scheduled_at > {TIME_MAX}').fetchall()
    rows = sorted(rows, key=lambda r: (utf16(r[0]), r[1]))[:16]
    return [("rows", [("job", "str"), ("scheduled_at", "int")], rows)]


def leave(db, t, p, faults):
    db.execute(f'DELETE FROM "{t}" WHERE owner = ?', (p["@owner"],))
    return []


def replicas(db, t, p, faults):
    return presence_rows(db, t, None)


STATEMENTS = {
    "schema": schema,
    "check_schema": check_schema,       # a reading command's open
    "renew_ctl": renew_ctl,
    "control": control,
    "ctl_version": ctl_version,
    "health": health,
    "handoff": handoff,
    "held": held,
    "try_acquire": try_acquire,
    "renew": renew,
    "release": release,
    "renew_all": renew_all,
    "release_all": release_all,
    "acquire_all": acquire_all,
    "claim_all": claim_all,
    "unclaim_all": unclaim_all,
    "list": list_leases,
    "floor_select": floor_select,       # the benchmark's floors
    "floor_create": floor_create,
    "floor_update": floor_update,
    "check_runs": check_runs,           # the run ledger
    "claim_runs": claim_runs,
    "record_runs": record_runs,
    "read_runs": read_runs,
    "prune_runs": prune_runs,
    "beat": beat,                       # presence
    "leave": leave,
    "replicas": replicas,
    "drain": drain,
    "renew_beat": renew_beat,
    "last_runs": last_runs,
    "repair": repair,
    "corrupt_runs": corrupt_runs,
}
# The statements whose function reads the statement's own text.
READS_TEXT = {check_schema, check_runs, claim_runs, record_runs, read_runs, prune_runs,
              last_runs, unclaim_all, claim_all, acquire_all}

# ---------------------------------------------------------------- TDS encoding
PRELOGIN, LOGIN7, SQL_BATCH, RPC, ATTENTION, REPLY = 0x12, 0x10, 0x01, 0x03, 0x06, 0x04
DONE_MORE, DONE_ERROR, DONE_COUNT, DONE_ATTN = 0x01, 0x02, 0x10, 0x20
COLLATION = bytes([0x09, 0x04, 0xD0, 0x00, 0x34])     # SQL_Latin1_General_CP1_CI_AS


def b_varchar(s):
    b = s.encode("utf-16-le")
    return bytes([len(b) // 2]) + b


def us_varchar(s):
    b = s.encode("utf-16-le")
    return struct.pack("<H", len(b) // 2) + b


def token(kind, body):
    return bytes([kind]) + struct.pack("<H", len(body)) + body


def done(kind, status, count=0):
    return struct.pack("<BHHQ", kind, status, 0, count)


def message(kind, number, cls, text):
    return token(kind, struct.pack("<IBB", number, 1, cls) + us_varchar(text)
                 + b_varchar("leash-tds") + b_varchar("") + struct.pack("<I", 1))


def envchange(kind, new, old):
    return token(0xE3, bytes([kind]) + b_varchar(new) + b_varchar(old))


def colmetadata(cols):
    out = bytearray(b"\x81" + struct.pack("<H", len(cols)))
    for name, kind in cols:
        out += struct.pack("<IH", 0, 0x0001)             # user type, nullable
        if kind == "int":
            out += b"\x26\x08"
        elif kind == "max":                             # NVARCHAR(MAX)
            out += b"\xe7" + struct.pack("<H", 0xFFFF) + COLLATION
        else:                                           # NVARCHAR(200) or (1024)
            out += b"\xe7" + struct.pack("<H", 2048 if kind == "text" else 400) + COLLATION
        out += b_varchar(name)
    return bytes(out)


def row(cols, values):
    out = bytearray(b"\xd1")
    for (_, kind), v in zip(cols, values):
        if kind == "max":                                # PLP: length, chunks, 0
            if v is None:
                out += struct.pack("<Q", 0xFFFFFFFFFFFFFFFF)
            else:
                b = v.encode("utf-16-le", "surrogatepass")
                out += struct.pack("<Q", len(b))
                if b:
                    out += struct.pack("<I", len(b)) + b
                out += struct.pack("<I", 0)
        elif v is None:
            out += b"\x00" if kind == "int" else b"\xff\xff"
        elif kind == "int":
            out += b"\x08" + struct.pack("<q", v)
        else:
            b = v.encode("utf-16-le", "surrogatepass")
            out += struct.pack("<H", len(b)) + b
    return bytes(out)


class Reader:
    def __init__(self, data, pos=0):
        self.data, self.pos = data, pos

    def take(self, n):
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def u8(self):
        return self.take(1)[0]

    def unpack(self, fmt):
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt)))[0]

    def typed(self):
        """One TYPE_INFO and its value, as db-lib sends RPC parameters."""
        t = self.last_type = self.u8()
        if t in (0x26, 0x68, 0x6D):                       # INTN, BITN, FLTN
            self.u8()
            n = self.u8()
            return int.from_bytes(self.take(n), "little", signed=True) if n else None
        fixed = {0x30: 1, 0x34: 2, 0x38: 4, 0x7F: 8, 0x32: 1}
        if t in fixed:
            return int.from_bytes(self.take(fixed[t]), "little", signed=t != 0x30)
        wide = t in (0xE7, 0xEF, 0x63)
        codec = "utf-16-le" if wide else "cp1252"
        if t in (0xE7, 0xEF, 0xA7, 0xAF):                 # (N)VARCHAR, (N)CHAR
            maxlen = self.unpack("H")
            self.take(5)
            if maxlen == 0xFFFF:                          # (max): chunked
                if self.unpack("Q") == 0xFFFFFFFFFFFFFFFF:
                    return None
                parts = []
                while (n := self.unpack("I")):
                    parts.append(self.take(n))
                return b"".join(parts).decode(codec, "surrogatepass")
            n = self.unpack("H")
            return None if n == 0xFFFF else self.take(n).decode(codec, "surrogatepass")
        if t in (0x63, 0x23):                             # NTEXT, TEXT
            self.unpack("I")
            self.take(5)
            n = self.unpack("I")
            return None if n == 0xFFFFFFFF else self.take(n).decode(codec, "surrogatepass")
        raise ValueError(f"parameter type 0x{t:02x} is not supported")


# ---------------------------------------------------------------- the server
class Handler(socketserver.BaseRequestHandler):
    def setup(self):
        self.packet_size = 4096
        self.db = None

    def recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.request.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("client closed")
            buf += chunk
        return buf

    def recv_message(self):
        kind, data = None, b""
        while True:
            head = self.recv_exact(8)
            kind, status, length = head[0], head[1], struct.unpack(">H", head[2:4])[0]
            data += self.recv_exact(length - 8)
            if status & 1:
                return kind, data

    def send(self, payload):
        room = self.packet_size - 8
        chunks = [payload[i:i + room] for i in range(0, len(payload), room)] or [b""]
        for i, chunk in enumerate(chunks):
            last = i == len(chunks) - 1
            self.request.sendall(struct.pack(">BBHHBB", REPLY, 1 if last else 0,
                                             len(chunk) + 8, 0, i + 1 & 0xFF, 0) + chunk)

    def handle(self):
        try:
            while True:
                kind, data = self.recv_message()
                if kind == PRELOGIN:
                    if "stall" in self.server.take_faults(("stall",)):
                        time.sleep(3600)
                    self.prelogin()
                elif kind == LOGIN7:
                    if not self.login(data):
                        return
                elif kind == RPC:
                    if not self.rpc(data):
                        return
                elif kind == SQL_BATCH:
                    self.send(done(0xFD, 0))
                elif kind == ATTENTION:
                    self.send(done(0xFD, DONE_ATTN))
                else:
                    return
        except (ConnectionError, OSError):
            pass
        finally:
            if self.db:
                self.db.close()

    def prelogin(self):
        opts = [(0, bytes([16, 0, 0, 0, 0, 0])),  # version
                (1, b"\x02"),                     # encryption: not supported
                (2, b"\x00"),                     # instance: ok
                (3, b""),                         # thread id
                (4, b"\x00")]                     # no MARS
        head, body = b"", b""
        offset = len(opts) * 5 + 1
        for kind, value in opts:
            head += struct.pack(">BHH", kind, offset + len(body), len(value))
            body += value
        self.send(head + b"\xff" + body)

    def login(self, data):
        def field(at):
            off, n = struct.unpack_from("<HH", data, at)
            return data[off:off + 2 * n]
        self.packet_size = struct.unpack_from("<I", data, 8)[0] or 4096
        user = field(40).decode("utf-16-le")
        pw = bytes(((b ^ 0xA5) >> 4 | ((b ^ 0xA5) & 0x0F) << 4) for b in field(44))
        database = field(68).decode("utf-16-le")
        cfg = self.server.cfg
        if user != cfg.user or pw.decode("utf-16-le") != cfg.password:
            self.send(message(0xAA, 18456, 14, f"Login failed for user '{user}'.")
                      + done(0xFD, DONE_ERROR))
            return False
        if database and database != cfg.database:
            self.send(message(0xAA, 4060, 11, f'Cannot open database "{database}" requested '
                              "by the login. The login failed.")
                      + message(0xAA, 18456, 14, f"Login failed for user '{user}'.")
                      + done(0xFD, DONE_ERROR))
            return False
        self.db = sqlite3.connect(cfg.db, timeout=30, isolation_level=None)
        # Every batch holds the one write lock (BEGIN IMMEDIATE), and its
        # commit's fsyncs held it as long as a busy disk took: the specs'
        # 1 s statement timeouts ran out.  The stand-in's data need not
        # outlive the machine, only the process (the journal stays, and the
        # specs read the file by hand).
        self.db.execute("PRAGMA synchronous = OFF")
        self.server.count_login()
        ack = (bytes([1]) + bytes([0x74, 0, 0, 4]) + b_varchar("Microsoft SQL Server")
               + bytes([16, 0, 0, 0]))
        self.send(envchange(1, cfg.database, "master")
                  + token(0xE3, b"\x07\x05" + COLLATION + b"\x00")
                  + envchange(2, "us_english", "")
                  + token(0xAD, ack)
                  + envchange(4, str(self.packet_size), "4096")
                  + done(0xFD, 0))
        return True

    def rpc(self, data):
        r = Reader(data, struct.unpack_from("<I", data, 0)[0])   # skip ALL_HEADERS
        n = r.unpack("H")
        proc = {10: "sp_executesql"}.get(r.unpack("H")) if n == 0xFFFF else \
            r.take(2 * n).decode("utf-16-le")
        r.unpack("H")                                               # option flags
        params = []
        while r.pos < len(data) and data[r.pos] not in (0x80, 0xFF):
            name = r.take(2 * r.u8()).decode("utf-16-le")
            r.u8()                                                  # status
            params.append((name, r.typed()))
            if self.server.cfg.verbose:
                print(f"param {name} type 0x{r.last_type:02x} len {len(str(params[-1][1]))}",
                      file=sys.stderr, flush=True)
        faults = self.server.take_faults(("drop", "delay", "deaf", "fail", "race", "abort"))
        if "drop" in faults:
            self.request.shutdown(socket.SHUT_RDWR)
            return False
        if "delay" in faults and self.stall(int(faults["delay"]) / 1000, "deaf" in faults):
            return True
        self.send(self.execute(proc, params, faults))
        return True

    def stall(self, secs, deaf):
        """Takes secs before answering, as a slow statement would.  An
        ATTENTION meanwhile abandons the statement (it never runs) and is
        acknowledged, as SQL Server does, by a DONE with DONE_ATTN; unless
        deaf.  True when the statement was abandoned."""
        end = time.monotonic() + secs
        while (left := end - time.monotonic()) > 0:
            if not select.select([self.request], [], [], left)[0]:
                continue
            kind, _ = self.recv_message()
            if kind == ATTENTION and not deaf:
                self.send(done(0xFD, DONE_ATTN))
                return True
        return False

    def execute(self, proc, params, faults):
        """Runs one sp_executesql call; returns the encoded answer."""
        out, failed = bytearray(), False
        try:
            answer = self.answer(proc, params, faults)
        except Exception as e:                    # a bug here is a test failure
            answer = [("error", 50000, 16, f"leash TDS test server: {e}")]
        for item in answer:
            if item[0] == "error":
                failed = True
                out += message(0xAA, item[1], item[2], item[3])
                out += done(0xFF, DONE_MORE | DONE_ERROR)
            else:
                _, cols, rows = item
                out += colmetadata(cols)
                for values in rows:
                    out += row(cols, values)
                out += done(0xFF, DONE_MORE | DONE_COUNT, len(rows))
        out += b"\x79" + struct.pack("<i", 1 if failed else 0)           # RETURNSTATUS
        out += done(0xFE, DONE_ERROR if failed else 0)
        return bytes(out)

    def answer(self, proc, params, faults):
        if len(params) > 2100:
            return [("error", 8003, 16, "The incoming request has too many parameters. "
                     "The server supports a maximum of 2100 parameters.")]
        if "fail" in faults:
            return [("error", int(faults["fail"]), 16, "leash TDS test server: injected error")]
        if proc != "sp_executesql" or not params:
            return [("error", 2812, 16, f"Could not find stored procedure '{proc}'.")]
        stmt = params[0][1]
        decl = params[1][1] if len(params) > 1 else ""
        values = dict(params[2:])
        self.server.log_statement(stmt)
        m = re.match(r"/\* leash:(\w+) \*/", stmt)
        fn = STATEMENTS.get(m.group(1)) if m else None
        table = re.search(r"\[(\w+)\]", stmt)      # the first [name] is the table
        if not fn:
            return [("error", 102, 15, f"leash TDS test server: unknown statement {stmt[:60]!r}")]
        decls = [re.fullmatch(r"(@\w+) (NVARCHAR\((15|200|1024|MAX)\)|BIGINT)", d.strip())
                 for d in decl.split(",") if d.strip()]
        if not all(decls) or sorted(d.group(1) for d in decls) != sorted(values):
            return [("error", 8178, 16, f"parameters {sorted(values)} do not match "
                     f"the declaration {decl[:80]!r}")]
        for d in decls:                 # a longer value is cut to its declared type
            v = values[d.group(1)]
            if d.group(3) not in (None, "MAX") and isinstance(v, str) and \
                    len(utf16(v)) > 2 * int(d.group(3)):
                values[d.group(1)] = utf16(v)[:2 * int(d.group(3))].decode(
                    "utf-16-be", "surrogatepass")
        self.db.execute("BEGIN IMMEDIATE")
        try:
            args = (self.db, table and table.group(1), values, faults)
            result = fn(*args, stmt) if fn in READS_TEXT else fn(*args)
            self.db.execute("COMMIT")
        except TSqlError as e:          # XACT_ABORT ON: the batch is rolled back
            self.db.execute("ROLLBACK")
            return [("error", e.number, e.cls, e.text)]
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return result


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, cfg):
        super().__init__(("127.0.0.1", cfg.port), Handler)
        self.cfg = cfg
        self.lock = threading.Lock()
        self.logins = 0
        self.shapes = set()

    def count_login(self):
        with self.lock:
            self.logins += 1
            with open(self.cfg.ctl + ".logins.tmp", "w") as f:
                f.write(f"{self.logins}\n")
            os.rename(self.cfg.ctl + ".logins.tmp", self.cfg.ctl + ".logins")

    def log_statement(self, stmt):
        """Appends each statement text not seen before (numbers aside) to
        <ctl>.sql, one a line, for the spec that reads what was sent."""
        shape = re.sub(r"\d+", "0", stmt)
        with self.lock:
            if shape in self.shapes:
                return
            self.shapes.add(shape)
            with open(self.cfg.ctl + ".sql", "a") as f:
                f.write(stmt.replace("\n", " ") + "\n")

    def take_faults(self, keys):
        """Removes the control file's lines whose key is in keys; returns them."""
        faults, rest = {}, []
        with self.lock:
            try:
                with open(self.cfg.ctl) as f:
                    lines = f.read().splitlines()
            except FileNotFoundError:
                return faults
            for line in lines:
                key, _, value = line.strip().partition(" ")
                if key in keys and key not in faults:
                    faults[key] = value
                elif key:
                    rest.append(line)
            if faults:
                with open(self.cfg.ctl + ".tmp", "w") as f:
                    f.write("".join(l + "\n" for l in rest))
                os.rename(self.cfg.ctl + ".tmp", self.cfg.ctl)
        return faults


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--db", required=True, help="the SQLite file")
    ap.add_argument("--ctl", required=True, help="the fault control file")
    ap.add_argument("--user", default="leash")
    ap.add_argument("--password", default="leash")
    ap.add_argument("--database", default="leash")
    ap.add_argument("--verbose", action="store_true", help="log requests to stderr")
    cfg = ap.parse_args()
    server = Server(cfg)
    tmp = cfg.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{server.server_address[1]}\n")
    os.rename(tmp, cfg.port_file)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
