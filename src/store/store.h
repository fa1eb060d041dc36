/* store.h - the lease store: one contract, one provider per database.
 *
 * A lease is a row (name, owner, token, acquired_at, renewed_at, expires_at,
 * last_fire).  last_fire is the job's fire cursor: the scheduled time (ms)
 * of the latest fire claimed with claim_all, NULL while none was.  A table
 * made before the column existed gets it, NULL in every row, at open.
 * All times are integer milliseconds since the Unix epoch on the DATABASE's
 * clock; no provider ever reads the local clock.  Every operation is one
 * atomic statement (or batch) and one round trip, in autocommit.
 *
 * Answers: STORE_OK (taken / renewed / done), STORE_NO (held by someone else,
 * or lost), STORE_ERR (the database did not answer as it should: the reason
 * is in store->err).  "No" and "error" are different answers.
 *
 * The core calls providers only through the store_*() wrappers below: they
 * check arguments before any SQL runs, count calls, and clear store->err.
 */
#ifndef LEASH_STORE_H
#define LEASH_STORE_H

#include <stddef.h>
#include <stdint.h>

#define STORE_NAME_MAX 200                       /* bytes, names and owners */
/* An owner is the replica's name, ":" pid (pid_max is at most 2^22) ":" 8
 * hex (src/cluster/owner.c): a replica's name leaves room for that. */
#define STORE_OWNER_SUFFIX_MAX 17
#define STORE_REPLICA_MAX (STORE_NAME_MAX - STORE_OWNER_SUFFIX_MAX)
#define STORE_DURATION_MAX (24LL * 3600 * 1000)  /* ms */
#define STORE_IDENT_MAX 54                       /* bytes, the table name: the store
                                                 * adds "_runs" and "_replicas" to it,
                                                 * and identifiers stop at 63 */
#define STORE_ERR_MAX 512

enum { STORE_ERR = -1, STORE_NO = 0, STORE_OK = 1 };

/* What kind of error a STORE_ERR was (store->kind), so that a caller can
 * tell a database that did not answer in time (TIMEOUT) or at all (GONE:
 * no connection, or it broke) from one that refused the statement
 * (REFUSED) or found the key taken (DUPLICATE).  Each driver maps its
 * client's errors to these in one place; an injected fault (below) sets
 * the kind it names.  STORE_E_OTHER: the store's own (a bad argument, out
 * of memory, an answer it could not read). */
enum store_err_kind {
	STORE_E_OTHER, STORE_E_TIMEOUT, STORE_E_GONE, STORE_E_REFUSED, STORE_E_DUPLICATE
};

/* last_fire when the column is NULL (no fire claimed yet).  A claimed fire
 * is >= 0, so "no fire" compares below every fire. */
#define STORE_NO_FIRE (-1LL)

/* What a provider knows about one lease after an acquire or renew.  On
 * STORE_OK it is the caller's own lease.  On STORE_NO from try_acquire it is
 * the current holder; from renew (lost) it names no holder: every field is
 * zero (owner "") and last_fire is STORE_NO_FIRE, on every provider. */
struct lease_info {
	char owner[STORE_NAME_MAX + 1];
	int64_t token;
	int64_t expires_at;
	int64_t now;                             /* the database's clock */
	int64_t last_fire;                       /* the cursor, or STORE_NO_FIRE */
};

struct lease_row {
	char name[STORE_NAME_MAX + 1];
	char owner[STORE_NAME_MAX + 1];
	int64_t token, acquired_at, renewed_at, expires_at;
	int64_t last_fire;                       /* the cursor, or STORE_NO_FIRE */
	int64_t paused_until;                    /* leash pause, or STORE_NO_TIME */
};

/* ---- controls (leash pause / resume / trigger / handoff) ----
 *
 * More columns of the lease row, NULL until a control sets them (a table
 * made before they existed gets them at open, as last_fire): paused_until
 * (db ms; STORE_PAUSED_FOREVER for a pause without --for), trigger_at and
 * handoff_at (the db clock of the latest request), and handoff_to (the
 * owner id leash handoff --to named, NULL for a plain handoff).  The
 * holder reads the times on its renew (renew_ctl) and acts on a request
 * newer than its acquire; handoff_to is read by the handoff op alone. */
#define STORE_PAUSED_FOREVER (INT64_C(1) << 62)
/* The controls' version: a reserved lease row of this name (no job name
 * starts with '@'), free (owner "", expired), whose token every control
 * grows by one in the control's own statement or transaction, on every
 * provider.  A replica without release events reads it (ctl_version) once
 * a second and renews at once when it changed, so a control takes effect
 * within about a second, not a renew interval.  No listing of leases
 * shows it (store_list leaves it out) and no control names it. */
#define STORE_CONTROLS "@controls"
enum { STORE_CTL_PAUSE = 1, STORE_CTL_RESUME, STORE_CTL_TRIGGER, STORE_CTL_HANDOFF };
struct store_ctl {
	int64_t paused_until, trigger_at, handoff_at;   /* or STORE_NO_TIME (NULL) */
};

/* ---- the bounds of a sane row ----
 *
 * A lease row's token is 0 (a free row a pause made) up to below
 * STORE_TOKEN_LIMIT (2^62): an acquire adds one to it, so it never comes
 * near the end of a 64-bit integer.  Its fire cursor is NULL or -1 (no
 * fire) up to STORE_TIME_MAX.  A ledger row's scheduled_at is 0 up to
 * STORE_TIME_MAX, its token as a lease's, and its other times NULL or 0 up
 * to STORE_TIME_MAX.  STORE_TIME_MAX is 9999-12-31T23:59:59.999Z, the last
 * instant a browser's Date and an ISO 8601 timestamp of four-digit years
 * can show.  Leash writes nothing outside them; a row outside them was
 * written by hand or by a broken tool, and is corrupt: no acquire takes a
 * corrupt lease row and no renew keeps one, so its job runs nowhere until
 * leash repair (the repair op) resets it. */
#define STORE_TOKEN_LIMIT 4611686018427387904            /* 2^62 */
#define STORE_TIME_MAX 253402300799999

/* The column of a lease row out of bounds ("token", "last_fire", with its
 * value in *value), or NULL when the row is sane.  last_fire as read:
 * STORE_NO_FIRE for NULL. */
const char *store_lease_corrupt(int64_t token, int64_t last_fire, int64_t *value);
/* 1 when t may be a ledger row's time (0 to STORE_TIME_MAX), else 0. */
int store_time_sane(int64_t t);
/* The column of a ledger row read back that is out of bounds, with its
 * value in *value, or NULL when the row is sane. */
struct store_run_row;
const char *store_run_corrupt(const struct store_run_row *r, int64_t *value);
/* "column = value" of a corrupt lease row, or of the first corrupt one of a
 * job's latest ledger rows and handled_at (prefixed "ledger "), into buf;
 * NULL when sane. */
struct store_job_runs;
const char *store_runs_corrupt_text(const struct store_job_runs *j, char *buf, size_t len);

/* A ledger row whose scheduled_at is out of bounds, as the replicas'
 * upkeep finds them (the corrupt_runs op). */
#define STORE_BAD_RUNS_MAX 16
struct store_bad_run {
	char job[STORE_NAME_MAX + 1];
	int64_t scheduled_at;
};

/* What leash repair found and did (the repair op). */
struct store_repair {
	int found;                      /* the lease row is there */
	int lease_bad;                  /* ... and was corrupt: it is now free
	                                 * (owner "", expired), its token new_token,
	                                 * its cursor NULL when that was corrupt */
	int64_t token, last_fire;       /* the row as found (last_fire STORE_NO_FIRE
	                                 * for NULL) */
	int64_t new_token;              /* the token it has now */
	int64_t dropped;                /* the job's corrupt ledger rows deleted */
	int64_t now;                    /* the database's clock */
};

/* One fire to claim: lease name, the token the caller holds it with, and the
 * fire's scheduled time (ms since the epoch, >= 0). */
struct store_claim {
	const char *name;
	int64_t token;
	int64_t fire;
};

/* ---- the run ledger: table <table>_runs ----
 *
 * One row per fire that was claimed, skipped or missed, per service start,
 * per run of an unelected job and per manual run.  A row's key is (job,
 * scheduled_at, owner).  Times are ms on the DATABASE's clock, STORE_NO_TIME
 * when unknown (NULL).  outcome is one of STORE_OUTCOMES.  The ledger table
 * is created at open beside the lease table; one that exists without a
 * column the store needs is refused at open, naming the column (nothing is
 * dropped).  The columns later versions added (run_id, how) are added at
 * open to a ledger that lacks them, NULL in its old rows. */
#define STORE_NO_TIME (-1LL)
#define STORE_EVENT_CONTROL "control:"          /* drain_events: a control, not a release */
#define STORE_EVENT_DRAIN "@drain"              /* ... of the replicas (leash drain), not a job */
#define STORE_EVENT_HANDOFF "handoff:"          /* ... a lease handed to a named replica */
#define STORE_NO_CODE (-1)                       /* exit_code / exit_signal NULL */
#define STORE_RUN_ERROR_MAX 1024                 /* bytes of error text kept */
#define STORE_OUTCOME_MAX 15
/* How a run came, when not by its fire: a missed fire run late, or asked
 * for (leash trigger). */
#define STORE_HOWS "catch-up", "manual"
#define STORE_HOW_MAX 15
#define STORE_RUNS_MAX 10000                     /* rows one read returns at most */
/* "running": claimed or started, no end recorded yet. */
#define STORE_OUTCOMES "running", "ok", "failed", "timeout", "lost", "killed", \
	"skipped-overlap", "skipped-paused", "missed", "manual", "control", "handed-off", "stopped"

/* A row to write.  Strings are borrowed for the call. */
struct store_run {
	const char *job;                /* 1-200 bytes */
	int64_t scheduled_at;           /* >= 0: the fire, the start of a service or manual run */
	const char *owner;              /* 1-200 bytes: the replica's owner id */
	int64_t token;                  /* the lease token it ran under; 0 when unelected */
	int64_t claimed_at, started_at, ended_at;       /* or STORE_NO_TIME */
	const char *outcome;            /* one of STORE_OUTCOMES */
	int exit_code, exit_signal;     /* or STORE_NO_CODE */
	int64_t duration_ms;            /* or STORE_NO_TIME */
	const char *error;              /* NULL, or text (the wrapper cuts it at
	                                 * STORE_RUN_ERROR_MAX bytes on a UTF-8
	                                 * character boundary and replaces each
	                                 * invalid byte with '?') */
	const char *actor;              /* NULL, or user@host of a control or manual run */
	int64_t run_id;                 /* the run's number on its replica (the log's
	                                 * `[job run N]`), or 0 when none; record_runs only */
	const char *how;                /* NULL (a fire, or kept), or one of STORE_HOWS;
	                                 * record_runs only */
	size_t claim;                   /* claim_runs only: the index of the claim
	                                 * the row is written with */
};

/* A row read back. */
struct store_run_row {
	char job[STORE_NAME_MAX + 1];
	char owner[STORE_NAME_MAX + 1];
	char actor[STORE_NAME_MAX + 1];                 /* "" when NULL */
	char outcome[STORE_OUTCOME_MAX + 1];
	char error[STORE_RUN_ERROR_MAX + 1];            /* "" when NULL */
	int64_t scheduled_at, token, claimed_at, started_at, ended_at, duration_ms;
	int64_t recorded_at;                            /* db clock of the last write */
	int exit_code, exit_signal;
	int64_t run_id;                                 /* 0 when NULL (read_runs only) */
	char how[STORE_HOW_MAX + 1];                    /* "" when NULL (read_runs only) */
};

/* ---- presence: table <table>_replicas ----
 *
 * One row per running replica: its owner id (the key), host, pid, version,
 * started_at and heartbeat (db clock), draining (0, 1 or 2, below), and its job
 * definitions, as a hash (jobs_hash, free text up to STORE_HASH_MAX bytes)
 * and as their names, one per line (jobs), and its broken job files
 * (broken, nullable: a table of an older version gets the column at open,
 * NULL in every row, and its replicas keep writing rows without it).  Whoever reads the rows judges
 * them: a garbled hash or an unknown version is shown, never refused.
 *
 * draining is leash drain's (the drain op), never the replica's own.  A
 * drain by name that outlives restarts is kept as a drain marker, a row
 * keyed by the bare name with pid 0, which no read returns and no prune
 * deletes.  The column holds 0 (not drained), 1 (the drain op listed the
 * owner: a beat keeps it until an undrain) or 2 (a beat of a replica of
 * that name, me->name, found the marker; each beat reads the marker
 * again).  So a beat that read the marker before an undrain removed it
 * drains its replica until its next beat, never for good: on PostgreSQL
 * its upsert sees the undrain's row but the marker as its own snapshot had
 * it.  Read back, draining is nonzero or 0. */
#define STORE_VERSION_MAX 32
#define STORE_HASH_MAX 32
struct store_replica {
	char owner[STORE_NAME_MAX + 1];
	char host[STORE_NAME_MAX + 1];
	char version[STORE_VERSION_MAX + 1];
	char jobs_hash[STORE_HASH_MAX + 1];
	int64_t pid, started_at, heartbeat;
	int draining;                   /* written: ignored (the store keeps its own) */
	char name[STORE_NAME_MAX + 1];  /* written: the replica's name, whose drain
	                                 * marker the beat obeys ("" none); read: "" */
	char *jobs;                     /* written: borrowed, may be NULL (kept as "");
	                                 * read: malloc'd, or NULL when not read */
	char *broken;                   /* the job files that failed to load, as
	                                 * STORE_BROKEN_MAX bytes of text at most
	                                 * (plan/job.h's job_broken_text) written:
	                                 * borrowed, NULL or "" for none (kept as
	                                 * NULL); read: malloc'd, NULL for none (a
	                                 * row of a version without the column) */
};
#define STORE_BROKEN_MAX 8192

/* One job's latest ledger rows, for leash status: the latest run (any
 * outcome but "missed" and the "skipped-..." ones), the latest "ok" and the
 * latest failure ("failed", "timeout", "lost", "killed"), each by
 * (scheduled_at, owner) descending.  A row that is not there has job "". */
#define STORE_FAIL_OUTCOMES "failed", "timeout", "lost", "killed"
struct store_job_runs {
	char job[STORE_NAME_MAX + 1];
	struct store_run_row last, ok, failed;
	int64_t fails;                  /* failures scheduled after `ok` (all of
	                                 * the job's when it has none): the streak */
	int64_t handled_at;             /* the latest scheduled_at of any row but
	                                 * "missed" (a fire some holder took care
	                                 * of), or STORE_NO_TIME */
};

/* What an open may do to the database (store_opts.mode).  STORE_RUN
 * (leash run) makes the file, the tables and their missing columns.
 * STORE_READ (status, history, the page) changes nothing: no file, no
 * table, no row; SQLite opens the file read-only (as immutable while no
 * -wal file is there to read through, and again once one is).
 * STORE_WRITE (the controls, drain, repair) writes rows, but makes
 * neither a file nor a table.  A READ or WRITE open of a store whose tables leash run has not
 * made yet fails with the text of store_no_table (the file, the
 * connection and the tables are left as found). */
enum store_mode { STORE_RUN, STORE_READ, STORE_WRITE };

/* How to reach a database.  Each provider reads the fields it knows. */
struct store_opts {
	const char *table;              /* default "leash_leases" */
	const char *path;               /* sqlite */
	const char *conninfo;           /* postgres */
	const char *host;               /* mssql */
	int port;
	const char *user, *password, *database;
	int connect_timeout_ms;         /* default 5000 */
	int statement_timeout_ms;       /* default 5000 */
	enum store_mode mode;           /* default STORE_RUN */
};

struct store;
struct store_driver;

/* The provider's table.  It only grows at the end; optional entries may be
 * NULL and the wrappers then fall back to the single-name operations. */
struct store_ops {
	const char *name;

	/* Takes the lease if it is free, expired, or already held by owner (then
	 * extends it).  The token grows by one when the lease passes to an owner
	 * that did not hold it unexpired; it never changes otherwise. */
	int (*try_acquire)(struct store *, const char *name, const char *owner,
	                   int64_t ms, struct lease_info *out);

	/* Extends a lease that owner holds unexpired.  STORE_NO: lost (moved or
	 * expired): the caller must drop the job. */
	int (*renew)(struct store *, const char *name, const char *owner,
	             int64_t ms, struct lease_info *out);

	/* Makes the lease free at once (expires_at = db now) and keeps the row and
	 * its token.  Does nothing when owner is not the holder. */
	int (*release)(struct store *, const char *name, const char *owner);

	/* Renews, in one statement, every listed lease that owner holds
	 * unexpired.  tokens[i] is the token of names[i] when renewed, else -1. */
	int (*renew_all)(struct store *, const char *owner, const char *const *names,
	                 size_t n, int64_t ms, int64_t *tokens);

	/* Every row, sorted by name, and the database's now.  *rows is malloc'd
	 * (free() it), NULL when there are none. */
	int (*list)(struct store *, struct lease_row **rows, size_t *n, int64_t *now);

	/* Frees the connection and the handle. */
	void (*close)(struct store *);

	/* Optional.  try_acquire for many names in one statement: got[i] is 1
	 * when names[i] was taken (out[i] is then ours), 0 when held by another
	 * (out[i] names the holder). */
	int (*acquire_all)(struct store *, const char *owner, const char *const *names,
	                   size_t n, int64_t ms, struct lease_info *out, int *got);

	/* Optional.  A descriptor that becomes readable when another replica
	 * released a lease (PostgreSQL LISTEN), or -1. */
	int (*event_fd)(struct store *);

	/* Optional.  Drains pending events, calling fn for each: a lease name
	 * released, or STORE_EVENT_CONTROL and a lease name whose controls
	 * changed (leash pause, trigger, ...).  Returns the count, or STORE_ERR. */
	int (*drain_events)(struct store *, void (*fn)(void *arg, const char *name),
	                    void *arg);

	/* Optional.  Bounds every following call to ms (0 = the configured
	 * statement timeout), so a call never answers after it stops mattering. */
	void (*set_timeout)(struct store *, int ms);

	/* Optional, for the benchmarks: one bare round trip on the store's own
	 * connection, kind STORE_FLOOR_SELECT (SELECT 1) or STORE_FLOOR_UPDATE (a
	 * durable single-row UPDATE of a side table).  STORE_OK or STORE_ERR. */
	int (*floor)(struct store *, int kind);

	/* Optional.  release for many names, in one statement per chunk (a
	 * provider may bound how many names one statement takes): each listed
	 * lease that owner holds is freed (expires_at = db now, row and token
	 * kept); a name owner does not hold is left alone. */
	int (*release_all)(struct store *, const char *owner, const char *const *names,
	                   size_t n);

	/* Claims fires, in one statement (or one transaction) per chunk: the
	 * cursor of claims[i].name becomes claims[i].fire, and ok[i] is 1, iff
	 * that row is held by owner with claims[i].token, unexpired on the
	 * database's clock (expires_at > db now), and its last_fire is NULL or
	 * below the fire; else ok[i] is 0 and the row is left alone (refused:
	 * someone else holds the lease now, or the token is stale, or the fire
	 * or a later one was claimed already).  *now is the database clock the
	 * (last) statement judged expiry by.  Names are distinct (the wrapper
	 * refuses repeats).  Optional: a provider without it answers STORE_ERR. */
	int (*claim_all)(struct store *, const char *owner, const struct store_claim *claims,
	                 size_t n, int *ok, int64_t *now);

	/* claim_all, and in the same statement or transaction (per chunk) the
	 * ledger rows that ride on the claims: runs[k] is written iff claim
	 * runs[k].claim succeeded, with claimed_at = the database's now (the
	 * row's own claimed_at is ignored).  So a fire's cursor advances iff its
	 * rows are written: the holder that advances a cursor past fires writes
	 * their rows (the run, or "missed", "skipped-...").  runs[k].job is
	 * claims[runs[k].claim].name; a row whose key exists is replaced. */
	int (*claim_runs)(struct store *, const char *owner, const struct store_claim *claims,
	                  size_t n, const struct store_run *runs, size_t nruns, int *ok,
	                  int64_t *now);

	/* Writes rows in one statement or transaction (per chunk): a row whose
	 * key (job, scheduled_at, owner) exists is updated, each field given as
	 * STORE_NO_TIME / STORE_NO_CODE / NULL keeping the stored value (outcome
	 * and token always replace it); else the row is inserted.  recorded_at
	 * becomes the database's now. */
	int (*record_runs)(struct store *, const struct store_run *runs, size_t n);

	/* Rows newest first (scheduled_at descending, then job, then owner):
	 * of one job, or of all when job is NULL; scheduled_at >= since (or
	 * every row when since is STORE_NO_TIME); at most limit (1 to
	 * STORE_RUNS_MAX).  *rows is malloc'd (free() it), NULL when none;
	 * *now is the database's clock. */
	int (*read_runs)(struct store *, const char *job, int64_t since, size_t limit,
	                 struct store_run_row **rows, size_t *n, int64_t *now);

	/* The ledger's upkeep, each step touching at most max_rows rows and
	 * using indexes only (no scan of the whole table): a "running" row whose
	 * token is below its job's lease token now (its holder died or lost the
	 * lease without recording an end) becomes "lost"; rows scheduled before
	 * db now - keep_ms are deleted; and of each job that has a lease row,
	 * the rows beyond its keep_per_job newest (by scheduled_at, then owner
	 * descending) are deleted.  A "running" row is never deleted by that
	 * last rule (a run still going keeps its row).  The three rules share
	 * max_rows: one call changes at most max_rows rows in all, and touches
	 * no row twice.  *changed: rows marked or deleted; call again until it
	 * is 0 to finish. */
	int (*prune_runs)(struct store *, int64_t keep_ms, int64_t keep_per_job, size_t max_rows,
	                  int64_t *changed);

	/* Presence (table <table>_replicas, created at open): one statement or
	 * transaction that writes me's row (inserted with started_at = db now,
	 * else every field but started_at and draining replaced; heartbeat = db
	 * now; draining kept when 1, else 2 when me->name's drain marker is
	 * there, else 0),
	 * deletes the other rows (never a marker) whose heartbeat is older than
	 * db now - prune_ms, and
	 * reads what is left, sorted by owner, me's row included.  A row's jobs
	 * text is read (malloc'd) only when its jobs_hash differs from me's, else
	 * it is NULL: a replica with me's hash defines me's jobs.  Optional. */
	int (*beat)(struct store *, const struct store_replica *me, int64_t prune_ms,
	            struct store_replica **rows, size_t *n, int64_t *now);

	/* Deletes owner's presence row (a clean stop).  Optional. */
	int (*leave)(struct store *, const char *owner);

	/* Every presence row, sorted by owner, each with its jobs text; writes
	 * nothing (leash status).  Optional. */
	int (*replicas)(struct store *, struct store_replica **rows, size_t *n, int64_t *now);
	/* One statement, reading only: for every job with a ledger row, its
	 * latest rows (struct store_job_runs), sorted by job (bytewise).  The
	 * jobs are found by walking the (job, ...) key from one job to the next
	 * and each job's rows by its key backwards, so the cost grows with the
	 * number of jobs, not of rows.  *rows is malloc'd (free() it), NULL when
	 * none; *now is the database's clock. */
	int (*last_runs)(struct store *, struct store_job_runs **rows, size_t *n, int64_t *now);

	/* renew_all, and in the same statement each renewed lease's control
	 * columns: ctl[i] for names[i] (all STORE_NO_TIME when not renewed),
	 * and *now, the database's clock.  Optional: the wrapper falls back to
	 * renew_all (no controls). */
	int (*renew_ctl)(struct store *, const char *owner, const char *const *names, size_t n,
	                 int64_t ms, int64_t *tokens, struct store_ctl *ctl, int64_t *now);

	/* Sets a control on lease name, whoever holds it (one statement or
	 * transaction): STORE_CTL_PAUSE sets paused_until = until (a db clock
	 * time, or STORE_PAUSED_FOREVER), RESUME clears it, TRIGGER and HANDOFF
	 * set trigger_at / handoff_at to the db's now, HANDOFF also handoff_to
	 * = to (NULL: none).  A pause of a name with no row inserts a free one
	 * (owner "", token 0, expired); the others answer STORE_NO then.
	 * *now: the database's clock.  Optional. */
	int (*control)(struct store *, const char *name, int what, int64_t until, const char *to,
	               int64_t *now);

	/* The job's health for its failure hooks (column health: NULL or 0 ok,
	 * 1 failing): set to failing (0 or 1) iff lease name is held by owner
	 * with token, unexpired on the database's clock, and its health differs
	 * (NULL counting as ok), in one statement.  *changed is 1 when this call
	 * changed it: the caller, and no other replica, then runs the hook of
	 * that change.  Optional. */
	int (*health)(struct store *, const char *owner, const char *name, int64_t token,
	              int failing, int *changed);

	/* leash drain / undrain, in one statement or transaction: the presence
	 * rows of owners[0..n) get draining = on (a marker is never one of
	 * them); and when name is given, its drain marker is written (on) or
	 * deleted (off).  *changed: the rows that matched, the marker counted
	 * (an undrain of a name with neither rows nor marker changes 0); *now:
	 * the database's clock.  Optional. */
	int (*drain)(struct store *, const char *name, const char *const *owners, size_t n,
	             int on, int64_t *changed, int64_t *now);

	/* renew_ctl and beat on one round trip: one statement on PostgreSQL,
	 * one transaction on SQLite, one batch on SQL Server.  The leases are
	 * renewed (tokens, ctl) as renew_ctl does and me's presence row written
	 * and the rows read (rows, *nrows) as beat does; me->owner is owner.
	 * *now: the database's clock the rows were read at (the renew's, within
	 * the same statement or transaction).  On an error neither counts: the
	 * caller treats it as a failed renew and a failed beat.  Optional: the
	 * wrapper falls back to renew_ctl, then beat. */
	int (*renew_beat)(struct store *, const char *owner, const char *const *names, size_t n,
	                  int64_t ms, int64_t *tokens, struct store_ctl *ctl,
	                  const struct store_replica *me, int64_t prune_ms,
	                  struct store_replica **rows, size_t *nrows, int64_t *now);

	/* Gives claimed fires back, in one statement or transaction (per
	 * chunk): for each claims[i] whose row is held by owner with
	 * claims[i].token and whose cursor is still claims[i].fire, the cursor
	 * goes back to just before the fire (fire - 1; NULL for fire 0) and the
	 * fire's own ledger row (job, fire, owner) goes with it when it is
	 * "running" and never started; ok[i] is 1.  Else ok[i] is 0 and nothing
	 * changes (the lease passed on, or a later fire was claimed).  Expiry
	 * is not judged: a token nobody took over is still the caller's to give
	 * back.  For a clean stop between a fire's claim, which goes out ahead
	 * of the fire, and its start: the next holder finds the fire after the
	 * cursor and runs it, as a fire or as a catch-up.  Optional. */
	int (*unclaim_all)(struct store *, const char *owner, const struct store_claim *claims,
	                   size_t n, int *ok);

	/* leash repair, in one statement or transaction: when lease name's row
	 * is corrupt (the bounds above), it becomes free (owner "", expires_at
	 * = db now), its cursor NULL when that was out of bounds, and its
	 * token one above every sane token of the lease table and of the job's
	 * ledger rows; and the job's corrupt ledger rows are deleted.  *out
	 * says what was found and done.  Optional. */
	int (*repair)(struct store *, const char *name, struct store_repair *out);

	/* Reads, in one statement, up to STORE_BAD_RUNS_MAX ledger rows whose
	 * scheduled_at is out of bounds (below 0 or past STORE_TIME_MAX: the
	 * two ends of the scheduled_at index), sorted by job, then
	 * scheduled_at.  Optional. */
	int (*corrupt_runs)(struct store *, struct store_bad_run *rows, size_t *n);

	/* leash handoff, in one statement or transaction: lease name, held by
	 * owner unexpired, passes to the replica its handoff_to names when
	 * that is another owner whose presence row is there, not draining, and
	 * beat within live_ms (db clock): the row becomes that owner's as an
	 * acquire would make it (token + 1, acquired_at = renewed_at = now,
	 * expires_at = now + ms, last_fire kept); else it is freed as release
	 * frees it.  handoff_to is cleared either way.  to (STORE_NAME_MAX + 1
	 * bytes): the new holder, "" when freed.  STORE_NO: owner does not hold
	 * it (nothing changed).  PostgreSQL NOTIFYs STORE_EVENT_HANDOFF name for
	 * a lease passed on, name for one freed.  Optional: the wrapper falls
	 * back to release. */
	int (*handoff)(struct store *, const char *name, const char *owner, int64_t ms,
	               int64_t live_ms, char *to);

	/* Reads, in one statement (per chunk), which listed leases owner holds
	 * unexpired: tokens[i] their token, else -1.  Writes nothing (a
	 * follower's probe for a lease passed to it).  Optional: the wrapper
	 * falls back to renew_all with ms. */
	int (*held)(struct store *, const char *owner, const char *const *names, size_t n,
	            int64_t *tokens);

	/* Reads, in one statement, the controls' version (the token of the
	 * STORE_CONTROLS row, 0 while there is none) and the database's clock.
	 * Writes nothing.  Optional. */
	int (*ctl_version)(struct store *, int64_t *version, int64_t *now);
};

enum { STORE_FLOOR_SELECT = 0, STORE_FLOOR_UPDATE = 1 };

/* Every provider's handle starts with this. */
struct store {
	const struct store_ops *ops;
	char err[STORE_ERR_MAX];
	uint64_t calls;                 /* statements sent, for the benchmarks: the
	                                 * wrappers count one per call, a provider
	                                 * that splits a batch counts the others */
	const struct store_driver *drv; /* the driver under the operations written
	                                 * once (store/driver.h), NULL for a store
	                                 * without one (a test's fake) */
	enum store_err_kind kind;       /* the last STORE_ERR's (the wrappers clear it) */
};

/* A provider: opens a handle or returns NULL with the reason in err.  The
 * row only grows at the end. */
struct store_provider {
	const char *name;
	struct store *(*open)(const struct store_opts *, char *err, size_t errlen);

	/* Optional: the client library the provider uses ("libpq"), and its
	 * version ("15.18"), or NULL when it cannot be loaded.  client_version
	 * loads the library (once) when not yet loaded. */
	const char *client;
	const char *(*client_version)(void);
	/* Optional: closes the client library loaded (dlopen) for the stores
	 * opened, in a process that opens none again (store_unload). */
	void (*unload)(void);
};

/* core.sqlite_test_clock's VFS (src/bind/store.c): loads libsqlite3 and
 * returns its default VFS (NULL, with the reason in err, when it cannot be
 * loaded); registers v as the default (0, or -1). */
struct sqlite3_vfs;
struct sqlite3_vfs *store_sqlite_vfs_find(char *err, size_t errlen);
int store_sqlite_vfs_register(struct sqlite3_vfs *v);

/* Registers a provider.  A registration made before the built-ins are
 * consulted wins over a built-in of the same name.  Returns 0, or -1 when
 * the registry is full. */
int store_register(const struct store_provider *);

/* In a process that makes no more store calls (the spawner, a copy of the
 * parent): every provider's client library is closed, and goes with the
 * libraries it pulled in (the loader keeps any that something else in the
 * process still uses).  The stores still open must not be used again. */
void store_unload(void);

/* The provider of that name, or NULL. */
const struct store_provider *store_find(const char *name);

/* The i-th provider (from 0) in the order store_find consults them, leaving
 * out those a registration of the same name shadows; NULL past the last. */
const struct store_provider *store_provider_at(int i);

/* Opens provider `name`; NULL with the reason in err. */
struct store *store_open(const char *name, const struct store_opts *, char *err,
                         size_t errlen);

/* "no lease table yet: has `leash run` started? (...)": a READ or WRITE
 * open's error when the tables are missing; where names the database (the
 * SQLite file, "database leash", "host:port database leash") and missing
 * the table.  Into err; returns err. */
char *store_no_table(char *err, size_t errlen, const char *provider, const char *where,
                     const char *missing);

/* 1 when s is a valid table name ([A-Za-z_][A-Za-z0-9_]*, at most STORE_IDENT_MAX
 * bytes). */
int store_valid_table(const char *s);

/* The wrappers: each checks its arguments (name and owner 1-200 bytes,
 * 0 < ms <= 24 h) and returns STORE_ERR with the reason in s->err before
 * any SQL when one is bad. */
int store_try_acquire(struct store *, const char *name, const char *owner,
                      int64_t ms, struct lease_info *out);
int store_renew(struct store *, const char *name, const char *owner, int64_t ms,
                struct lease_info *out);
int store_release(struct store *, const char *name, const char *owner);
int store_renew_all(struct store *, const char *owner, const char *const *names,
                    size_t n, int64_t ms, int64_t *tokens);
int store_acquire_all(struct store *, const char *owner, const char *const *names,
                      size_t n, int64_t ms, struct lease_info *out, int *got);
/* Falls back to one release per name, stopping at the first error (a store
 * that does not answer costs one timeout, not one per name). */
int store_release_all(struct store *, const char *owner, const char *const *names,
                      size_t n);
/* Also checks each claim (name 1-200 bytes, token > 0, fire 0 to STORE_TIME_MAX, no name
 * twice) and refuses the call ("not supported") when the provider has no
 * claim_all: a claim is never silently accepted.  n == 0 sends nothing and
 * sets *now to 0. */
int store_claim_all(struct store *, const char *owner, const struct store_claim *claims,
                    size_t n, int *ok, int64_t *now);
/* Checks as claim_all; refused ("not supported") when the provider lacks it.
 * n == 0 sends nothing. */
int store_unclaim_all(struct store *, const char *owner, const struct store_claim *claims,
                      size_t n, int *ok);
/* The ledger.  Each checks every row (job and owner 1-200 bytes, a known
 * outcome, scheduled_at 0 to STORE_TIME_MAX, token 0 to below
 * STORE_TOKEN_LIMIT, times and duration 0 to STORE_TIME_MAX or
 * STORE_NO_TIME, codes >= 0 or STORE_NO_CODE, actor NULL or 1-200 bytes,
 * run_id 0 to STORE_TIME_MAX, how NULL or one of STORE_HOWS;
 * for claim_runs claim < n and job == that claim's name), refuses a key
 * (job, scheduled_at, owner) listed twice in one call, cuts and cleans error
 * text into a copy of its own (the caller's rows are only read), and refuses
 * the call ("not supported") when the provider lacks the operation.  n == 0
 * (claim_runs: no claims) sends nothing.  read_runs: job NULL or 1-200
 * bytes, since >= 0 or STORE_NO_TIME, 1 <= limit <= STORE_RUNS_MAX.
 * prune_runs: keep_ms > 0, keep_per_job >= 1, 1 <= max_rows <= STORE_RUNS_MAX. */
int store_claim_runs(struct store *, const char *owner, const struct store_claim *claims,
                     size_t n, const struct store_run *runs, size_t nruns, int *ok,
                     int64_t *now);
int store_record_runs(struct store *, const struct store_run *runs, size_t n);
int store_read_runs(struct store *, const char *job, int64_t since, size_t limit,
                    struct store_run_row **rows, size_t *n, int64_t *now);
int store_prune_runs(struct store *, int64_t keep_ms, int64_t keep_per_job, size_t max_rows,
                     int64_t *changed);
/* Presence.  beat checks me (owner and host 1-200 bytes, version and hash
 * at most their limits, 0 < prune_ms <= 24 h); each refuses the call ("not
 * supported") when the provider lacks the operation.  Rows are freed with
 * store_free_replicas. */
int store_beat(struct store *, const struct store_replica *me, int64_t prune_ms,
               struct store_replica **rows, size_t *n, int64_t *now);
int store_leave(struct store *, const char *owner);
int store_replicas(struct store *, struct store_replica **rows, size_t *n, int64_t *now);
void store_free_replicas(struct store_replica *rows, size_t n);
/* last_runs: refused ("not supported") when the provider lacks it. */
int store_last_runs(struct store *, struct store_job_runs **rows, size_t *n, int64_t *now);
/* Controls.  renew_ctl checks as renew_all and falls back to it (ctl all
 * STORE_NO_TIME, *now 0) when the provider has no renew_ctl; control
 * checks name (never STORE_CONTROLS), what, (for a pause) until > 0 and
 * to (NULL, or 1-200 bytes with a handoff only), and is refused ("not
 * supported") when the provider lacks it. */
int store_renew_ctl(struct store *, const char *owner, const char *const *names, size_t n,
                    int64_t ms, int64_t *tokens, struct store_ctl *ctl, int64_t *now);
int store_control(struct store *, const char *name, int what, int64_t until, const char *to,
                  int64_t *now);
/* ctl_version: refused ("not supported") when the provider lacks it. */
int store_ctl_version(struct store *, int64_t *version, int64_t *now);
/* held: checks as renew_all. */
int store_held(struct store *, const char *owner, const char *const *names, size_t n,
               int64_t ms, int64_t *tokens);
/* handoff: checks name, owner, 0 < ms <= 24 h, 0 < live_ms <= 24 h; falls
 * back to store_release (to "") when the provider has none. */
int store_handoff(struct store *, const char *name, const char *owner, int64_t ms,
                  int64_t live_ms, char *to);
/* health: checks owner, name, token > 0 and failing 0 or 1; refused ("not
 * supported") when the provider lacks it. */
int store_health(struct store *, const char *owner, const char *name, int64_t token,
                 int failing, int *changed);
/* renew_beat checks as renew_ctl and beat do, and me->owner == owner. */
int store_renew_beat(struct store *, const char *owner, const char *const *names, size_t n,
                     int64_t ms, int64_t *tokens, struct store_ctl *ctl,
                     const struct store_replica *me, int64_t prune_ms,
                     struct store_replica **rows, size_t *nrows, int64_t *now);
/* drain: name NULL or 1-200 bytes, each owner 1-200 bytes, on 0 or 1;
 * refused ("not supported") when the provider lacks it. */
int store_drain(struct store *, const char *name, const char *const *owners, size_t n, int on,
                int64_t *changed, int64_t *now);
/* repair: checks name; refused ("not supported") when the provider lacks it. */
int store_repair(struct store *, const char *name, struct store_repair *out);
/* corrupt_runs: rows[STORE_BAD_RUNS_MAX]; a provider without it finds none. */
int store_corrupt_runs(struct store *, struct store_bad_run *rows, size_t *n);
/* Faults, for the specs: plan is "op:n:kind[,op:n:kind...]": the n-th
 * call (from 1) of operation op (try_acquire, renew_beat, claim_runs, ...)
 * in this process fails before it reaches the provider, STORE_ERR with the
 * reason "<provider>: <op>: <what> (injected fault)", kind timeout, gone
 * or refused.  NULL or "" injects none.  Without a call to it the plan is
 * the environment's LEASH_STORE_FAULT, read at the first call (a plan that
 * cannot be read fails every call, saying why).  0, or -1 with the reason
 * in err. */
int store_fault_plan(const char *plan, char *err, size_t errlen);
/* 1 when s is one of STORE_OUTCOMES. */
int store_valid_outcome(const char *s);
int store_list(struct store *, struct lease_row **rows, size_t *n, int64_t *now);
int store_event_fd(struct store *);
int store_drain_events(struct store *, void (*fn)(void *, const char *), void *arg);
void store_set_timeout(struct store *, int ms);
/* The benchmarks' floor op; STORE_ERR when kind is unknown or the provider
 * has none. */
int store_floor(struct store *, int kind);
void store_close(struct store *);

/* For providers: formats into s->err and returns STORE_ERR. */
int store_fail(struct store *, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* store_fail, and s->kind = kind. */
int store_fail_kind(struct store *, enum store_err_kind kind, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* "timeout", "gone", "refused", "duplicate" or "other". */
const char *store_kind_name(enum store_err_kind kind);

struct cfg;
/* Fills the store options from the config.  Returns 0, or -1 with the reason
 * (a password variable that is not set) in err. */
int store_opts_from(const struct cfg *c, struct store_opts *o, char *err, size_t errlen);

#endif
