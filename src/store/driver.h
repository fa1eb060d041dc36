/* driver.h - what an operation written once needs of a database.
 *
 * An operation (ops.c) names a statement of the catalogue below, gives its
 * parameters typed and in the catalogue's order, and reads the rows back
 * through a callback, by column number, with the store_col_*() readers.  A
 * provider is a driver (the struct below, over its client library) and a
 * dialect (the text of each statement, in one table).  Every dialect's text
 * of a statement takes the same parameters and answers the same columns in
 * the same order; that is the whole contract between ops.c and a provider.
 *
 * A statement is one round trip and atomic on every provider: one statement
 * on PostgreSQL, one batch (its own transaction where it writes twice) on
 * SQL Server, and on SQLite one statement, or several separated by ';' run
 * in one BEGIN IMMEDIATE transaction (SQLite's dialect hook).  The one
 * exception: a table of more rows than SQL Server's 2,100 parameters bind
 * goes in several batches, each atomic (store.h: "per chunk").
 */
#ifndef LEASH_STORE_DRIVER_H
#define LEASH_STORE_DRIVER_H

#include "store/store.h"

/* The catalogue: X(id, what).  what names the operation in error text.
 * Parameters ($n on PostgreSQL, ?n on SQLite, the declared @names in order
 * on SQL Server) and answers: */
#define STORE_STATEMENTS(X) \
	/* name, owner, ms -> LEASE: one row, the holder after the attempt */ \
	X(ACQUIRE, "try_acquire") \
	/* name, owner, ms -> LEASE when renewed, no row when lost */ \
	X(RENEW, "renew") \
	/* owner, ms, NAMES -> (name, LEASE columns) of each name (a name listed \
	 * twice may be answered once); several statements, each atomic, where \
	 * the names need more than one */ \
	X(ACQUIRE_ALL, "acquire_all") \
	/* name, owner -> anything */ \
	X(RELEASE, "release") \
	/* owner, names (texts) -> anything */ \
	X(RELEASE_ALL, "release_all") \
	/* owner, names (texts), ms -> (name, token) of each renewed lease */ \
	X(RENEW_ALL, "renew_all") \
	/* owner, names, ms -> (name, token, paused_until, trigger_at, handoff_at, \
	 * now) of each renewed lease */ \
	X(RENEW_CTL, "renew_ctl") \
	/* BEAT's parameters, then names, ms -> BEAT's PRESENCE rows with two more \
	 * columns (11 and 12), kind 'R' and NULL, and a row of kind 'L' per renewed lease: \
	 * name in owner, token in pid, paused_until in started_at, trigger_at \
	 * in heartbeat, handoff_at in the last column */ \
	X(RENEW_BEAT, "renew_beat") \
	/* job, since, limit -> READ rows of that job */ \
	X(READ_JOB, "read_runs") \
	/* job (NULL), since, limit -> READ rows of every job */ \
	X(READ_ALL, "read_runs") \
	/* -> (now, RUN columns, cls, handled, fails) per job and class (0 the \
	 * latest run, 1 ok, 2 failure): job always, outcome NULL when the class \
	 * has no row (class 0 only); sorted by job (bytewise), then cls; one \
	 * row with job NULL (the clock only) when the ledger is empty */ \
	X(LAST_RUNS, "last_runs") \
	/* -> (now, name, owner, token, acquired_at, renewed_at, expires_at, \
	 * last_fire, paused_until) sorted by name (bytewise), one row with name \
	 * NULL (the clock only) when there is none */ \
	X(LIST, "list") \
	/* name, until -> (now): the row is made free when missing */ \
	X(CTL_PAUSE, "control") \
	/* name, what (2 resume, 3 trigger, 4 handoff), to (NULL: none) -> (now) \
	 * iff the row is there */ \
	X(CTL_SET, "control") \
	/* -> one row (now, token of the STORE_CONTROLS row, NULL when none) */ \
	X(CTL_VERSION, "ctl_version") \
	/* name, owner, token, failing -> a row iff this call changed it */ \
	X(HEALTH, "health") \
	/* owner -> nothing */ \
	X(LEAVE, "leave") \
	/* -> PRESENCE rows, every row's jobs */ \
	X(REPLICAS, "replicas") \
	/* owner, host, pid, version, name, hash, jobs, broken, prune -> PRESENCE rows, \
	 * jobs NULL where jobs_hash = hash */ \
	X(BEAT, "beat") \
	/* owners (texts), name (NULL: none), on -> (now, n): changed is the sum \
	 * of n over the rows, now the last row's */ \
	X(DRAIN, "drain") \
	/* name -> one row (now, found, token, last_fire, lease_bad, new_token, \
	 * dropped), read before the writes (store.h's repair): found 0 and \
	 * token, last_fire NULL when there is no lease row; new_token the \
	 * token the row has afterwards */ \
	X(REPAIR, "repair") \
	/* -> (job, scheduled_at) of each ledger row whose scheduled_at is out \
	 * of bounds, at most STORE_BAD_RUNS_MAX, sorted by job (bytewise), \
	 * then scheduled_at */ \
	X(CORRUPT_RUNS, "corrupt_runs") \
	/* name, owner, ms, live_ms -> (to, now) iff owner held it: to the new \
	 * holder, '' when freed (PostgreSQL: a third column, the NOTIFY) */ \
	X(HANDOFF, "handoff") \
	/* owner, names (texts) -> (name, token) of each lease owner holds \
	 * unexpired; writes nothing */ \
	X(HELD, "held") \
	/* owner, CLAIMS -> (now, i) per claim i accepted, and a row (now, NULL) \
	 * for the clock when none was */ \
	X(CLAIM_ALL, "claim_all") \
	/* owner, CLAIMS -> (anything, i) per claim i given back (and maybe a \
	 * row whose i is NULL) */ \
	X(UNCLAIM_ALL, "unclaim_all") \
	/* owner, CLAIMS, RUNS led by their claim's i -> as CLAIM_ALL */ \
	X(CLAIM_RUNS, "claim_runs") \
	/* RUNS led by their job -> nothing */ \
	X(RECORD_RUNS, "record_runs") \
	/* keep ms, keep_per_job, max_rows -> (rows changed) */ \
	X(PRUNE_RUNS, "prune_runs") \
	/* -> anything: SELECT 1 */ \
	X(FLOOR_SELECT, "floor") \
	/* -> nothing: makes the floor's side table, one row keyed 'floor' */ \
	X(FLOOR_MAKE, "floor") \
	/* key -> nothing: a durable UPDATE of that row (an error while the \
	 * side table is missing) */ \
	X(FLOOR_UPDATE, "floor")

/* RUN columns: job, owner, actor, outcome, error, scheduled_at, token,
 * claimed_at, started_at, ended_at, duration_ms, recorded_at, exit_code,
 * exit_signal.  READ rows: (now, RUN columns, run_id, how) newest first
 * (scheduled_at descending, then job, then owner), one row with job NULL
 * (the clock only) when there is none.
 * LEASE: (got 1 when owner holds it, owner, token, expires_at, now,
 * last_fire).
 * NAMES: a table (SP_R) of (i, name), i the name's number from 1.
 * CLAIMS: a table (SP_R) of (i, name, token, fire), i the claim's number
 * from 1.  RUNS: a table of (lead, scheduled_at, owner, token, claimed_at,
 * started_at, ended_at, outcome, exit_code, exit_signal, duration_ms,
 * error, actor), NULL cells for unknown; RECORD_RUNS's rows have run_id
 * and how after actor.
 * PRESENCE rows: (now, owner, host, pid, version, started_at, heartbeat,
 * draining, jobs_hash, jobs, broken) sorted by owner (bytewise), drain markers left
 * out, and one row with owner NULL (the clock only) when there is none. */

/* The error prune_runs gives a row it marks lost (one it has none), the
 * same text in every dialect (tests/support/tds_server.py's LOST_WHY). */
#define STORE_SQL_LOST_WHY \
	"'no end was recorded before the lease moved on (its replica died or lost the lease)'"

/* The bounds of store.h as SQL, the same text in every dialect: a lease
 * row that is sane, its columns prefixed with p ("l." or ""); a time
 * column c that is NULL or sane; a ledger row that is sane. */
#define STORE_SQL_STR_(x) #x
#define STORE_SQL_STR(x) STORE_SQL_STR_(x)
#define STORE_SQL_TOKEN_OK(c) \
	"(" c " >= 0 AND " c " < " STORE_SQL_STR(STORE_TOKEN_LIMIT) ")"
#define STORE_SQL_TIME_OK(c) "(" c " IS NULL OR " c " BETWEEN 0 AND " STORE_SQL_STR(STORE_TIME_MAX) ")"
#define STORE_SQL_FIRE_OK(c) \
	"(" c " IS NULL OR " c " BETWEEN -1 AND " STORE_SQL_STR(STORE_TIME_MAX) ")"
#define STORE_SQL_LEASE_OK(p) \
	"(" STORE_SQL_TOKEN_OK(p "token") " AND " STORE_SQL_FIRE_OK(p "last_fire") ")"
/* The lease table's first columns, as SQLite and PostgreSQL make it (a
 * table made before the later columns gets them added at open). */
#define STORE_SQL_LEASE_COLS \
	" name VARCHAR(200) PRIMARY KEY, owner VARCHAR(200) NOT NULL, token BIGINT NOT NULL," \
	" acquired_at BIGINT NOT NULL, renewed_at BIGINT NOT NULL, expires_at BIGINT NOT NULL," \
	" last_fire BIGINT)"
/* The ledger and presence tables as SQLite and PostgreSQL make them (%1$s
 * the lease table's name). */
#define STORE_SQL_RUNS_TABLE \
	"CREATE TABLE IF NOT EXISTS \"%1$s_runs\" ( job VARCHAR(200) NOT NULL," \
	" scheduled_at BIGINT NOT NULL, owner VARCHAR(200) NOT NULL, token BIGINT NOT NULL," \
	" claimed_at BIGINT, started_at BIGINT, ended_at BIGINT, outcome VARCHAR(15) NOT NULL," \
	" exit_code INTEGER, exit_signal INTEGER, duration_ms BIGINT, error TEXT," \
	" actor VARCHAR(200), recorded_at BIGINT NOT NULL, run_id BIGINT, how VARCHAR(15)," \
	" PRIMARY KEY (job, scheduled_at, owner))"
#define STORE_SQL_REPLICAS_TABLE \
	"CREATE TABLE IF NOT EXISTS \"%1$s_replicas\" ( owner VARCHAR(200) PRIMARY KEY," \
	" host VARCHAR(200) NOT NULL, pid BIGINT NOT NULL, version VARCHAR(32) NOT NULL," \
	" started_at BIGINT NOT NULL, heartbeat BIGINT NOT NULL," \
	" draining INTEGER NOT NULL DEFAULT 0, jobs_hash VARCHAR(32) NOT NULL, jobs TEXT NOT NULL)"
/* The columns every leash ledger has had: a table of that name that lacks
 * one is refused at open (STORE_NOT_LEDGER: the table, the column), never
 * altered; and those added since, with their types, added to a ledger that
 * lacks them (NULL in its old rows). */
#define STORE_RUN_NEEDED \
	"job", "scheduled_at", "owner", "token", "claimed_at", "started_at", "ended_at", \
	"outcome", "exit_code", "exit_signal", "duration_ms", "error", "actor", "recorded_at"
#define STORE_RUN_ADDED { "run_id", "BIGINT" }, { "how", "VARCHAR(15)" }
#define STORE_NOT_LEDGER "table %s_runs has no column %s: it is not leash's run ledger" \
	" (nothing was changed; rename or drop it, or use another table)"
/* A ledger row's scheduled_at out of bounds, as the scheduled_at index
 * finds it. */
#define STORE_SQL_RUN_AT_BAD \
	"(scheduled_at < 0 OR scheduled_at > " STORE_SQL_STR(STORE_TIME_MAX) ")"
#define STORE_SQL_RUN_OK(p) \
	"(" p "scheduled_at BETWEEN 0 AND " STORE_SQL_STR(STORE_TIME_MAX) " AND " \
	STORE_SQL_TOKEN_OK(p "token") " AND " STORE_SQL_TIME_OK(p "claimed_at") " AND " \
	STORE_SQL_TIME_OK(p "started_at") " AND " STORE_SQL_TIME_OK(p "ended_at") " AND " \
	STORE_SQL_TIME_OK(p "recorded_at") ")"

enum store_stmt {
#define X(id, what) ST_##id,
	STORE_STATEMENTS(X)
#undef X
	ST_MAX
};

/* The operation's name for a statement ("health"), for error text. */
extern const char *const store_stmt_what[ST_MAX];

/* A typed parameter.  Text is borrowed for the call. */
enum store_param_kind { SP_NULL, SP_INT, SP_TEXT, SP_TEXTS, SP_ROWS };
struct store_param {
	enum store_param_kind kind;
	int64_t i;
	const char *s;
	const char *const *v;           /* SP_TEXTS: v[0..n) */
	size_t n;                       /* SP_TEXTS: elements; SP_ROWS: rows */
	const struct store_param *r;    /* SP_ROWS: n rows of cols cells, row after row */
	int cols;
};
#define SP_I(v) ((struct store_param){ .kind = SP_INT, .i = (v) })
/* Text, or NULL when v is NULL. */
#define SP_T(v) ((struct store_param){ .kind = (v) ? SP_TEXT : SP_NULL, .s = (v) })
/* An array of text: a text[] on PostgreSQL, JSON for json_each() on
 * SQLite, a list of parameters on SQL Server (@n1, @n2, ... where the
 * statement says @n). */
#define SP_A(vs, len) ((struct store_param){ .kind = SP_TEXTS, .v = (vs), .n = (len) })
/* A table: rows of ncols cells, each SP_INT, SP_TEXT or SP_NULL.  A
 * statement takes its tables after its other parameters.  PostgreSQL
 * binds a table as one array per column ($k, $k+1, ... in the column's
 * order); SQLite as ?k, ?k+1, ... and runs each statement of the entry
 * whose highest parameter is a table's once per row of it, in the one
 * transaction; SQL Server inserts the rows into the table variable of the
 * parameter's name where the batch says {@name}, in as many batches as its
 * 2,100 parameters need.  Of two tables, the first's first cell is its
 * row's number from 1, each row of the second names the row of the first
 * it goes with by that number in its own first cell, and a batch never
 * parts them. */
#define SP_R(cells, rows, ncols) \
	((struct store_param){ .kind = SP_ROWS, .r = (cells), .n = (rows), .cols = (ncols) })

/* Called for each row of each result set (set counts the sets that had
 * columns, from 0).  Returns 0, or -1 to fail the call (with the reason in
 * s->err: out of memory). */
typedef int (*store_row_fn)(struct store *s, void *arg, int set);

struct store_driver {
	/* Runs statement st of the catalogue with p[0..np), calling row for
	 * each row.  STORE_OK, or STORE_ERR with the reason in s->err (a
	 * connection that broke is made again by the next call). */
	int (*exec)(struct store *, int st, const struct store_param *p, int np, store_row_fn row,
	            void *arg);
	/* Inside row(): column c (from 0) of the current row. */
	int (*is_null)(struct store *, int c);
	int64_t (*col_int)(struct store *, int c);              /* 0 for NULL */
	const char *(*col_text)(struct store *, int c, size_t *len);  /* NULL for NULL */
	/* The most parameters one statement binds, an array's elements each
	 * counted (0: no bound).  An operation splits a longer array into
	 * statements of that many, counting each further one in s->calls. */
	size_t params_max;
};

/* FLOOR_MAKE's table, as SQLite and PostgreSQL both take it: shaped like
 * the lease table, so that its UPDATE costs what a lease write does. */
#define FLOOR_TABLE \
	"CREATE TABLE IF NOT EXISTS \"%1$s_floor_row\" (" \
	" name VARCHAR(200) PRIMARY KEY, owner VARCHAR(200) NOT NULL," \
	" token BIGINT NOT NULL, acquired_at BIGINT NOT NULL," \
	" renewed_at BIGINT NOT NULL, expires_at BIGINT NOT NULL);"

/* A client library, loaded with dlopen() when the first store of its
 * provider is opened (a replica on another provider maps none of it).
 * names lists the functions, each followed by a space, in the order of the
 * function pointers at fns (size bytes) that the load fills. */
struct store_lib {
	const char *file, *who, *package;      /* "libpq.so.5", "postgres", "libpq5" */
	const char *names;
	void *fns;
	size_t size;
	void *handle;                          /* once loaded */
};
/* Loads l once.  A failure is not remembered (the loop retries store_open,
 * so installing the package fixes a running replica): 0, or -1 with the
 * reason and the package to install in err. */
int store_lib_load(struct store_lib *l, char *err, size_t errlen);
void store_lib_unload(struct store_lib *l);

/* A provider's ops table: these entries, written once (ops.c), then its
 * name, close, set_timeout and events. */
#define STORE_OPS_ONCE \
	.try_acquire = store_op_try_acquire, .renew = store_op_renew, .release = store_op_release, \
	.renew_all = store_op_renew_all, .list = store_op_list, .acquire_all = store_op_acquire_all, \
	.floor = store_op_floor, .release_all = store_op_release_all, \
	.claim_all = store_op_claim_all, .claim_runs = store_op_claim_runs, \
	.record_runs = store_op_record_runs, .read_runs = store_op_read_runs, \
	.prune_runs = store_op_prune_runs, .beat = store_op_beat, .leave = store_op_leave, \
	.replicas = store_op_replicas, .last_runs = store_op_last_runs, \
	.renew_ctl = store_op_renew_ctl, .control = store_op_control, .health = store_op_health, \
	.drain = store_op_drain, .renew_beat = store_op_renew_beat, \
	.unclaim_all = store_op_unclaim_all, .repair = store_op_repair, \
	.corrupt_runs = store_op_corrupt_runs, .handoff = store_op_handoff, .held = store_op_held, \
	.ctl_version = store_op_ctl_version

/* The readers, for row callbacks. */
int64_t store_col_int(struct store *, int c);
/* NULL reads as `null` (STORE_NO_TIME, STORE_NO_FIRE, ...). */
int64_t store_col_or(struct store *, int c, int64_t null);
/* Copies at most size - 1 bytes of column c into dst ("" for NULL). */
void store_col_copy(struct store *, int c, char *dst, size_t size);
/* A malloc'd copy of column c, NULL when the column is NULL; *oom set when
 * out of memory. */
char *store_col_dup(struct store *, int c, int *oom);

/* The one door to the drivers: runs st on s->drv. */
int store_exec(struct store *, int st, const struct store_param *p, int np, store_row_fn row,
               void *arg);

/* The operations written once (ops.c), for the providers' tables. */
int store_op_try_acquire(struct store *, const char *name, const char *owner, int64_t ms,
                         struct lease_info *out);
int store_op_renew(struct store *, const char *name, const char *owner, int64_t ms,
                   struct lease_info *out);
int store_op_release(struct store *, const char *name, const char *owner);
int store_op_acquire_all(struct store *, const char *owner, const char *const *names, size_t n,
                         int64_t ms, struct lease_info *out, int *got);
int store_op_list(struct store *, struct lease_row **rows, size_t *n, int64_t *now);
int store_op_read_runs(struct store *, const char *job, int64_t since, size_t limit,
                       struct store_run_row **rows, size_t *n, int64_t *now);
int store_op_last_runs(struct store *, struct store_job_runs **rows, size_t *n, int64_t *now);
int store_op_release_all(struct store *, const char *owner, const char *const *names,
                         size_t n);
int store_op_drain(struct store *, const char *name, const char *const *owners, size_t n,
                   int on, int64_t *changed, int64_t *now);
int store_op_renew_all(struct store *, const char *owner, const char *const *names, size_t n,
                       int64_t ms, int64_t *tokens);
int store_op_renew_ctl(struct store *, const char *owner, const char *const *names, size_t n,
                       int64_t ms, int64_t *tokens, struct store_ctl *ctl, int64_t *now);
int store_op_renew_beat(struct store *, const char *owner, const char *const *names, size_t n,
                        int64_t ms, int64_t *tokens, struct store_ctl *ctl,
                        const struct store_replica *me, int64_t prune_ms,
                        struct store_replica **rows, size_t *nrows, int64_t *now);
int store_op_control(struct store *, const char *name, int what, int64_t until, const char *to,
                     int64_t *now);
int store_op_ctl_version(struct store *, int64_t *version, int64_t *now);
int store_op_held(struct store *, const char *owner, const char *const *names, size_t n,
                  int64_t *tokens);
int store_op_handoff(struct store *, const char *name, const char *owner, int64_t ms,
                     int64_t live_ms, char *to);
int store_op_health(struct store *, const char *owner, const char *name, int64_t token,
                    int failing, int *changed);
int store_op_leave(struct store *, const char *owner);
int store_op_replicas(struct store *, struct store_replica **rows, size_t *n, int64_t *now);
int store_op_beat(struct store *, const struct store_replica *me, int64_t prune_ms,
                  struct store_replica **rows, size_t *n, int64_t *now);
int store_op_repair(struct store *, const char *name, struct store_repair *out);
int store_op_corrupt_runs(struct store *, struct store_bad_run *rows, size_t *n);
int store_op_claim_all(struct store *, const char *owner, const struct store_claim *claims,
                       size_t n, int *ok, int64_t *now);
int store_op_unclaim_all(struct store *, const char *owner, const struct store_claim *claims,
                         size_t n, int *ok);
int store_op_claim_runs(struct store *, const char *owner, const struct store_claim *claims,
                        size_t n, const struct store_run *runs, size_t nruns, int *ok,
                        int64_t *now);
int store_op_record_runs(struct store *, const struct store_run *runs, size_t n);
int store_op_prune_runs(struct store *, int64_t keep_ms, int64_t keep_per_job, size_t max_rows,
                        int64_t *changed);
int store_op_floor(struct store *, int kind);

#endif
