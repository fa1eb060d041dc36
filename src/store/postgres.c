/* postgres.c - the lease store on PostgreSQL (libpq, loaded on first use).
 *
 * Every operation is one prepared statement, one round trip, in autocommit;
 * time is clock_timestamp() read once per statement (now() would be the
 * transaction's start), and read again only to tell a refused try_acquire
 * the time.  The single-lease statements are plain (no CTE, no second read
 * of the table), so each costs little more than a bare durable UPDATE.
 * The client enforces its own deadlines with the
 * asynchronous API and poll(), so a server that stops answering (killed,
 * frozen, unplugged) gives an error within the timeout instead of a hang;
 * after a broken connection the next call connects again and re-prepares.
 * A release NOTIFYs the channel named after the table, with the lease name
 * as payload, in the same statement; the connection LISTENs on it.
 *
 * libpq is loaded with dlopen() when the first postgres store is opened, not
 * linked: it pulls in libssl, libcrypto, gssapi and ldap (several MB
 * resident), which a replica on another provider should not pay for.
 * The operations written once (ops.c) reach PostgreSQL through the driver
 * (pg_exec): the dialect table's statements are prepared at connect as
 * leash_s<n> (a few on first use), arrays go as text[] literals, a table
 * of rows as one array per column.  The schema is still this file's own.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "core/clock.h"
#include "store/driver.h"

#define NOW "floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"

/* try_acquire: one upsert, no CTE.  t0.n is the statement's one reading of
 * the clock and reaches the conflict branch as EXCLUDED.acquired_at.  The
 * conflict branch always updates the row, so RETURNING always names the
 * holder; when the lease is held by another owner and not expired it writes
 * the row's own values back (the same row lock and commit a conditional DO
 * UPDATE takes).  The lease is ours iff owner = $2 afterwards; then
 * renewed_at is the statement's now, else the clock is read once more. */
#define EXPIRED "l.expires_at <= EXCLUDED.acquired_at"
#define TAKE "(l.owner = EXCLUDED.owner OR " EXPIRED ")"
/* A sane lease row (store.h): a corrupt one is never taken nor renewed,
 * nor its token grown. */
#define LEASE_OK STORE_SQL_LEASE_OK("l.")
/* Each control grows the controls' version (store.h), in its statement: a
 * CTE that nothing reads, which PostgreSQL runs all the same. */
#define CTL_BUMP \
	"v AS (INSERT INTO \"%1$s\" AS c (name, owner, token, acquired_at, renewed_at," \
	" expires_at) VALUES ('" STORE_CONTROLS "', '', 1, 0, 0, 0)" \
	" ON CONFLICT (name) DO UPDATE SET token = c.token + 1)"
#define ACQUIRE_SQL \
	"INSERT INTO \"%1$s\" AS l (name, owner, token, acquired_at, renewed_at, expires_at)" \
	" SELECT $1, $2, 1, t0.n, t0.n, t0.n + $3::bigint FROM (SELECT " NOW " AS n) t0" \
	" ON CONFLICT (name) DO UPDATE SET" \
	"  owner = CASE WHEN " EXPIRED " AND " LEASE_OK " THEN EXCLUDED.owner ELSE l.owner END," \
	"  token = CASE WHEN " EXPIRED " AND " LEASE_OK " THEN l.token + 1 ELSE l.token END," \
	"  acquired_at = CASE WHEN " EXPIRED " AND " LEASE_OK \
	"   THEN EXCLUDED.acquired_at ELSE l.acquired_at END," \
	"  renewed_at = CASE WHEN " TAKE " AND " LEASE_OK \
	"   THEN EXCLUDED.renewed_at ELSE l.renewed_at END," \
	"  expires_at = CASE WHEN " TAKE " AND " LEASE_OK \
	"   THEN EXCLUDED.expires_at ELSE l.expires_at END" \
	" RETURNING (l.owner = $2 AND " LEASE_OK ")::int, l.owner, l.token, l.expires_at," \
	"  CASE WHEN l.owner = $2 THEN l.renewed_at ELSE " NOW " END, l.last_fire"

/* acquire_all's upsert: the token grows unless the same owner held it
 * unexpired; a lease held by another owner and not expired is left alone. */
#define MINE "l.owner = EXCLUDED.owner AND l.expires_at > EXCLUDED.acquired_at"
#define UPSERT_SET \
	" ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner," \
	"  token = CASE WHEN " MINE " THEN l.token ELSE l.token + 1 END," \
	"  acquired_at = CASE WHEN " MINE " THEN l.acquired_at ELSE EXCLUDED.acquired_at END," \
	"  renewed_at = EXCLUDED.renewed_at, expires_at = EXCLUDED.expires_at" \
	" WHERE (l.owner = EXCLUDED.owner OR l.expires_at <= EXCLUDED.acquired_at) AND " LEASE_OK

/* The ledger's columns in the order the run statements list them. */
#define RUN_COLS \
	"job, scheduled_at, owner, token, claimed_at, started_at, ended_at, outcome," \
	" exit_code, exit_signal, duration_ms, error, actor, recorded_at"
/* The rows as parallel arrays from parameter $N on: scheduled_at, owner,
 * token, claimed_at, started_at, ended_at, outcome, exit_code,
 * exit_signal, duration_ms, error, actor (NULL elements for NULL). */
#define RUN_ARRAYS(a, b, c, d, e, f, g, h, i, j, k, l) \
	"$" a "::bigint[], $" b "::text[], $" c "::bigint[], $" d "::bigint[], $" e "::bigint[]," \
	" $" f "::bigint[], $" g "::text[], $" h "::int[], $" i "::int[], $" j "::bigint[]," \
	" $" k "::text[], $" l "::text[]"
#define RUN_NAMES \
	"scheduled_at, owner, token, claimed_at, started_at, ended_at, outcome, exit_code," \
	" exit_signal, duration_ms, error, actor"
#define KEEP(c) " " c " = coalesce(EXCLUDED." c ", r." c ")"
#define READ_SQL(where) \
	"SELECT t0.now, r.job, r.owner, r.actor, r.outcome, r.error, r.scheduled_at, r.token," \
	" r.claimed_at, r.started_at, r.ended_at, r.duration_ms, r.recorded_at, r.exit_code," \
	" r.exit_signal, r.run_id, r.how FROM (SELECT " NOW " AS now) t0 LEFT JOIN LATERAL" \
	" (SELECT * FROM \"%1$s_runs\" x WHERE " where " AND x.scheduled_at >= $2" \
	"  ORDER BY x.scheduled_at DESC, x.job COLLATE \"C\", x.owner COLLATE \"C\" LIMIT $3) r" \
	" ON true ORDER BY r.scheduled_at DESC, r.job COLLATE \"C\", r.owner COLLATE \"C\""

/* last_runs: d walks the primary key from one job to the next (a loose
 * index scan: one probe per job); per job, h counts and finds what needs an
 * aggregate, and r is the latest row of each class (0 the last run, 1 the
 * last ok, 2 the last failure), its key walked backwards.  A job keeps its
 * class-0 line even without a run (for handled); the outer row is there when
 * the ledger is empty, for now. */
#define FAILS "('failed', 'timeout', 'lost', 'killed')"
#define LAST_RUNS_SQL \
	"WITH RECURSIVE d(job) AS (SELECT (SELECT min(job) FROM \"%1$s_runs\")" \
	"  UNION ALL SELECT (SELECT min(x.job) FROM \"%1$s_runs\" x WHERE x.job > d.job)" \
	"  FROM d WHERE d.job IS NOT NULL)" \
	" SELECT t0.now, j.job, j.owner, j.actor, j.outcome, j.error, j.scheduled_at, j.token," \
	"  j.claimed_at, j.started_at, j.ended_at, j.duration_ms, j.recorded_at, j.exit_code," \
	"  j.exit_signal, j.cls, j.handled, j.fails" \
	" FROM (SELECT " NOW " AS now) t0 LEFT JOIN" \
	" (SELECT d.job, r.owner, r.actor, r.outcome, r.error, r.scheduled_at, r.token," \
	"   r.claimed_at, r.started_at, r.ended_at, r.duration_ms, r.recorded_at, r.exit_code," \
	"   r.exit_signal, c.cls, h.handled, h.fails" \
	"  FROM d CROSS JOIN LATERAL (SELECT" \
	"   (SELECT max(x.scheduled_at) FROM \"%1$s_runs\" x WHERE x.job = d.job" \
	"    AND x.outcome NOT IN ('missed', 'control')) AS handled," \
	"   (SELECT count(*) FROM \"%1$s_runs\" x WHERE x.job = d.job AND x.outcome IN " FAILS \
	"    AND x.scheduled_at > coalesce((SELECT max(o.scheduled_at) FROM \"%1$s_runs\" o" \
	"     WHERE o.job = d.job AND o.outcome = 'ok'), -1)) AS fails) h" \
	"  CROSS JOIN (VALUES (0), (1), (2)) c(cls)" \
	"  LEFT JOIN LATERAL (SELECT * FROM \"%1$s_runs\" x WHERE x.job = d.job AND CASE c.cls" \
	"    WHEN 0 THEN x.outcome NOT IN ('missed', 'skipped-overlap', 'skipped-paused', 'control')" \
	"    WHEN 1 THEN x.outcome = 'ok' ELSE x.outcome IN " FAILS " END" \
	"   ORDER BY x.scheduled_at DESC, x.owner DESC LIMIT 1) r ON true" \
	"  WHERE d.job IS NOT NULL AND (c.cls = 0 OR r.job IS NOT NULL)) j ON true" \
	" ORDER BY j.job COLLATE \"C\", j.cls"

/* Every libpq function this file calls, resolved from libpq.so.5 on first
 * use into pq; libpq-fe.h still gives their exact types. */
#define LIBPQ_FUNCS(X) \
	X(PQlibVersion) X(PQconnectStartParams) X(PQconnectPoll) X(PQsetnonblocking) \
	X(PQsetNoticeProcessor) X(PQstatus) X(PQsocket) X(PQhost) X(PQport) \
	X(PQerrorMessage) X(PQfinish) X(PQbackendPID) X(PQserverVersion) \
	X(PQsendPrepare) X(PQsendQueryPrepared) X(PQsendQuery) X(PQsendQueryParams) \
	X(PQflush) X(PQconsumeInput) X(PQisBusy) X(PQgetResult) X(PQresultStatus) \
	X(PQresultErrorMessage) X(PQresultErrorField) X(PQclear) X(PQntuples) X(PQnfields) X(PQgetisnull) \
	X(PQgetvalue) X(PQgetlength) X(PQnotifies) X(PQfreemem) X(PQconninfoParse) X(PQconninfoFree)

static struct {
#define X(f) __typeof__(f) *f;
	LIBPQ_FUNCS(X)
#undef X
} pq;

#define X(f) #f " "
static struct store_lib lib = { "libpq.so.5", "postgres", "libpq5", LIBPQ_FUNCS(X), &pq,
                                sizeof pq, NULL };
#undef X

/* Loads libpq and fills pq, once (store_lib_load). */
static int load_libpq(char *err, size_t errlen)
{
	int preset, rc;

	if (lib.handle)
		return 0;
	/* libpq brings libldap and, through it, gnutls, whose constructor sets
	 * up the whole library as it loads (0.65 MB resident here) though only
	 * LDAP over TLS would use it, and libldap initialises gnutls itself
	 * when it does.  So gnutls is asked not to, for the load only: the
	 * variable is gone again before any job could inherit it. */
	preset = getenv("GNUTLS_NO_IMPLICIT_INIT") != NULL;
	if (!preset)
		setenv("GNUTLS_NO_IMPLICIT_INIT", "1", 0);
	rc = store_lib_load(&lib, err, errlen);
	if (!preset)
		unsetenv("GNUTLS_NO_IMPLICIT_INIT");
	return rc;
}

/* The provider row's client_version: "15.18". */
static const char *client_version(void)
{
	static char v[32];
	char err[8];
	int n;

	if (load_libpq(err, sizeof err) < 0)
		return NULL;
	n = pq.PQlibVersion();
	snprintf(v, sizeof v, "%d.%d", n / 10000, n % 10000);
	return v;
}

struct pg_store {
	struct store base;
	PGconn *conn;
	char *conninfo;
	char table[64];
	int connect_timeout_ms, statement_timeout_ms;
	int bound_ms;                   /* set_timeout, 0 = none */
	uint64_t prepared;              /* the dialect's statements prepared on this connection */
	int gss_off;                    /* connect with gssencmode=disable */
	enum store_mode mode;           /* STORE_RUN makes the tables, the others check them */
	PGresult *cur;                  /* the answer whose row a callback reads */
	int cur_row;
};

/* Providers never print: libpq's notices (NOTICE, WARNING) go nowhere. */
static void quiet(void *arg, const char *msg)
{
	(void)arg;
	(void)msg;
}

/* The first line of a libpq message, without "ERROR:  " noise. */
static void first_line(char *dst, size_t n, const char *msg)
{
	const char *p = msg ? msg : "unknown error";
	const char *f = strstr(p, " failed: ");
	size_t len;

	if (f)
		p = f + 9;
	if (strncmp(p, "ERROR:  ", 8) == 0 || strncmp(p, "FATAL:  ", 8) == 0)
		p += 8;
	len = strcspn(p, "\n");
	snprintf(dst, n, "%.*s", (int)len, p);
}

static void drop_conn(struct pg_store *ps)
{
	pq.PQfinish(ps->conn);
	ps->conn = NULL;
	ps->prepared = 0;
}

/* Waits until the socket is ready for `events` or the deadline passes:
 * 1 ready, 0 timed out, -1 error. */
static int wait_sock(PGconn *c, short events, int64_t deadline)
{
	struct pollfd p = { .fd = pq.PQsocket(c), .events = events };

	if (p.fd < 0)
		return -1;
	for (;;) {
		int64_t left = deadline - clock_mono_ms();
		int rc;

		if (left <= 0)
			return 0;
		rc = poll(&p, 1, (int)(left > 1000000 ? 1000000 : left));
		if (rc > 0)
			return 1;
		if (rc == 0)
			continue;
		if (errno != EINTR)
			return -1;
	}
}

static int conn_fail(struct pg_store *ps, PGconn *c, const char *why)
{
	char msg[STORE_ERR_MAX];
	const char *host = c ? pq.PQhost(c) : NULL, *port = c ? pq.PQport(c) : NULL;

	if (why)
		snprintf(msg, sizeof msg, "%s", why);
	else
		first_line(msg, sizeof msg, c ? pq.PQerrorMessage(c) : NULL);
	if (host && *host)
		return store_fail_kind(&ps->base, STORE_E_GONE, "postgres: connect to %s:%s: %s", host,
		                       port && *port ? port : "5432", msg);
	return store_fail_kind(&ps->base, STORE_E_GONE, "postgres: connect: %s", msg);
}

/* The one place PostgreSQL's errors become the store's kinds (a timeout
 * of ours, or a connection that broke, are classified where they happen):
 * by SQLSTATE, a unique violation is a duplicate, a cancel or a lock not
 * had in time a timeout, a connection exception or a server shutting down
 * gone. */
static enum store_err_kind pg_kind(const char *state)
{
	if (!state)
		return STORE_E_REFUSED;
	if (strcmp(state, "23505") == 0)
		return STORE_E_DUPLICATE;
	if (strcmp(state, "57014") == 0 || strcmp(state, "55P03") == 0)
		return STORE_E_TIMEOUT;
	if (strncmp(state, "08", 2) == 0 || strncmp(state, "57P", 3) == 0)
		return STORE_E_GONE;
	return STORE_E_REFUSED;
}

/* The error of a statement the server refused (NULL; keep is cleared). */
static PGresult *refused(struct pg_store *ps, PGresult *keep, const char *what)
{
	char msg[STORE_ERR_MAX];
	const char *state = pq.PQresultErrorField(keep, PG_DIAG_SQLSTATE);
	/* A server that takes no writes (a standby, or one read-only by its
	 * config): the fix is named, and the next call connects again, to the
	 * primary a multi-host conninfo finds or to this one once it takes
	 * writes. */
	int ro = state && strcmp(state, "25006") == 0;

	first_line(msg, sizeof msg, pq.PQresultErrorMessage(keep));
	store_fail_kind(&ps->base, pg_kind(state), "postgres: %s: %s%s", what, msg,
	                ro ? " (the server takes no writes: a standby, or "
	                     "default_transaction_read_only is on; point [postgres] conninfo "
	                     "at the primary, e.g. with target_session_attrs=read-write)" : "");
	pq.PQclear(keep);
	if (ro || pq.PQstatus(ps->conn) == CONNECTION_BAD)
		drop_conn(ps);
	return NULL;
}

/* Sends one query (prepared when name is set, else plain SQL text, else a
 * Prepare of sql under name when prep is set) and waits for its results until
 * the deadline.  Returns the last result (the caller clears it) or NULL with
 * s->err set; a dead or timed-out connection is dropped. */
static PGresult *roundtrip(struct pg_store *ps, int prep, const char *name, const char *sql,
                           int nparams, const char *const *vals, int64_t deadline,
                           const char *what)
{
	PGconn *c = ps->conn;
	PGresult *res, *keep = NULL;
	int ok, w;

	if (prep)
		ok = pq.PQsendPrepare(c, name, sql, nparams, NULL);
	else if (name)
		ok = pq.PQsendQueryPrepared(c, name, nparams, vals, NULL, NULL, 0);
	else if (nparams == 0)
		ok = pq.PQsendQuery(c, sql);
	else
		ok = pq.PQsendQueryParams(c, sql, nparams, NULL, vals, NULL, NULL, 0);
	if (!ok)
		goto broken;
	while ((w = pq.PQflush(c)) == 1) {
		int r = wait_sock(c, POLLOUT | POLLIN, deadline);

		if (r == 0)
			goto timeout;
		if (r < 0 || !pq.PQconsumeInput(c))
			goto broken;
	}
	if (w < 0)
		goto broken;
	for (;;) {
		while (pq.PQisBusy(c)) {
			int r = wait_sock(c, POLLIN, deadline);

			if (r == 0)
				goto timeout;
			if (r < 0 || !pq.PQconsumeInput(c))
				goto broken;
		}
		if (!(res = pq.PQgetResult(c)))
			break;
		if (keep && pq.PQresultStatus(keep) == PGRES_FATAL_ERROR) {
			pq.PQclear(res);
			continue;
		}
		pq.PQclear(keep);
		keep = res;
	}
	if (!keep)
		goto broken;
	if (pq.PQresultStatus(keep) != PGRES_TUPLES_OK && pq.PQresultStatus(keep) != PGRES_COMMAND_OK)
		return refused(ps, keep, what);
	return keep;
timeout:
	pq.PQclear(keep);
	store_fail_kind(&ps->base, STORE_E_TIMEOUT, "postgres: %s: no answer within the timeout",
	                what);
	drop_conn(ps);
	return NULL;
broken:
	pq.PQclear(keep);
	{
		char msg[STORE_ERR_MAX];

		first_line(msg, sizeof msg, pq.PQerrorMessage(c));
		store_fail_kind(&ps->base, STORE_E_GONE, "postgres: %s: %s", what, msg);
	}
	drop_conn(ps);
	return NULL;
}

static int run_ok(struct pg_store *ps, int prep, const char *name, const char *sql,
                  int64_t deadline, const char *what)
{
	PGresult *r = roundtrip(ps, prep, name, sql, 0, NULL, deadline, what);

	pq.PQclear(r);
	return r ? STORE_OK : STORE_ERR;
}

/* A CREATE ... IF NOT EXISTS: of two processes making it at once, one
 * loses on the catalog and tries once more. */
static int make_twice(struct pg_store *ps, const char *sql, int64_t deadline, const char *what)
{
	if (run_ok(ps, 0, NULL, sql, deadline, what) == STORE_OK)
		return STORE_OK;
	return ps->conn ? run_ok(ps, 0, NULL, sql, deadline, what) : STORE_ERR;
}

static const char *const run_columns[] = { STORE_RUN_NEEDED };
static const char *const run_added[][2] = { STORE_RUN_ADDED };

/* Creates <table>_runs when missing; one that exists without a column the
 * store needs is left exactly as it is and refused, naming the column; one
 * that lacks only the run_added columns gets them.
 * The indexes are created only when the catalog lacks them (CREATE INDEX
 * locks the table against writes even when the index is there). */
static int setup_runs(struct pg_store *ps, char *sql, size_t len, int64_t deadline)
{
	PGresult *r;
	size_t ncols = sizeof run_columns / sizeof run_columns[0];

	snprintf(sql, len, STORE_SQL_RUNS_TABLE, ps->table);
	if (make_twice(ps, sql, deadline, "create the ledger table") < 0)
		return STORE_ERR;
	snprintf(sql, len,
	         "SELECT attname FROM pg_attribute WHERE attrelid = '\"%s_runs\"'::regclass"
	         " AND attnum > 0 AND NOT attisdropped", ps->table);
	if (!(r = roundtrip(ps, 0, NULL, sql, 0, NULL, deadline, "ledger columns")))
		return STORE_ERR;
	for (size_t i = 0; i < ncols; i++) {
		int found = 0;

		for (int row = 0; row < pq.PQntuples(r) && !found; row++)
			found = strcmp(pq.PQgetvalue(r, row, 0), run_columns[i]) == 0;
		if (!found) {
			pq.PQclear(r);
			return store_fail(&ps->base, "postgres: " STORE_NOT_LEDGER, ps->table,
			                  run_columns[i]);
		}
	}
	for (size_t i = 0; i < sizeof run_added / sizeof run_added[0]; i++) {
		int found = 0;

		for (int row = 0; row < pq.PQntuples(r) && !found; row++)
			found = strcmp(pq.PQgetvalue(r, row, 0), run_added[i][0]) == 0;
		if (found)
			continue;
		/* Asked only when missing: ALTER TABLE locks the table. */
		snprintf(sql, len, "ALTER TABLE \"%s_runs\" ADD COLUMN IF NOT EXISTS %s %s", ps->table,
		         run_added[i][0], run_added[i][1]);
		if (run_ok(ps, 0, NULL, sql, deadline, "add a ledger column") < 0) {
			pq.PQclear(r);
			return STORE_ERR;
		}
	}
	pq.PQclear(r);
	/* Index names stay within 63 bytes: the table name is at most 54. */
	snprintf(sql, len,
	         "DO $$ BEGIN"
	         " IF to_regclass('\"%1$s_runs_at\"') IS NULL THEN"
	         "  CREATE INDEX IF NOT EXISTS \"%1$s_runs_at\" ON \"%1$s_runs\" (scheduled_at);"
	         " END IF;"
	         " IF to_regclass('\"%1$s_runs_run\"') IS NULL THEN"
	         "  CREATE INDEX IF NOT EXISTS \"%1$s_runs_run\" ON \"%1$s_runs\" (job, token)"
	         "  WHERE outcome = 'running';"
	         " END IF; END $$", ps->table);
	if (make_twice(ps, sql, deadline, "ledger indexes") < 0)
		return STORE_ERR;
	return STORE_OK;
}
static int presence_connect(struct pg_store *, int64_t deadline);
static int prepare_dialect(struct pg_store *, int64_t deadline);

/* A READ or WRITE connection's check that leash run made the tables (it
 * makes none): STORE_OK, or STORE_ERR with the no-table text (kind
 * REFUSED) or the database's reason. */
static int check_schema(struct pg_store *ps, char *sql, size_t len, int64_t deadline)
{
	PGresult *r;
	char where[256], missing[80];

	snprintf(sql, len,
	         "SELECT current_database(), (SELECT t FROM unnest(ARRAY['%1$s', '%1$s_runs',"
	         " '%1$s_replicas']) AS t WHERE to_regclass(quote_ident(t)) IS NULL"
	         " ORDER BY t LIMIT 1)", ps->table);
	if (!(r = roundtrip(ps, 0, NULL, sql, 0, NULL, deadline, "check the tables")))
		return STORE_ERR;
	if (pq.PQntuples(r) != 1 || pq.PQgetisnull(r, 0, 1)) {
		pq.PQclear(r);
		return STORE_OK;
	}
	snprintf(missing, sizeof missing, "%s", pq.PQgetvalue(r, 0, 1));
	snprintf(where, sizeof where, "database %s", pq.PQgetvalue(r, 0, 0));
	pq.PQclear(r);
	store_no_table(ps->base.err, sizeof ps->base.err, "postgres", where, missing);
	ps->base.kind = STORE_E_REFUSED;
	return STORE_ERR;
}

/* The columns added since the first table, a group per feature: the last
 * one named is looked for in the catalog. */
static const struct {
	const char *last, *add, *what;
} added[] = {
	{ "last_fire", "ADD COLUMN IF NOT EXISTS last_fire BIGINT", "add last_fire" },
	{ "handoff_at", "ADD COLUMN IF NOT EXISTS paused_until BIGINT,"
	  " ADD COLUMN IF NOT EXISTS trigger_at BIGINT, ADD COLUMN IF NOT EXISTS handoff_at BIGINT",
	  "add the control columns" },
	{ "health", "ADD COLUMN IF NOT EXISTS health INTEGER", "add the health column" },
	{ "handoff_to", "ADD COLUMN IF NOT EXISTS handoff_to VARCHAR(200)",
	  "add the handoff_to column" },
};

/* The lease table, made when missing, and the columns added since, added
 * (NULL in every row).  ALTER TABLE locks the table exclusively even when
 * the column is there, so it runs only when the catalog says the last of a
 * group is missing; IF NOT EXISTS covers two replicas adding them at once. */
static int setup_leases(struct pg_store *ps, char *sql, size_t len, int64_t deadline)
{
	snprintf(sql, len, "CREATE TABLE IF NOT EXISTS \"%s\" (" STORE_SQL_LEASE_COLS, ps->table);
	if (make_twice(ps, sql, deadline, "create table") < 0)
		return STORE_ERR;
	for (size_t i = 0; i < sizeof added / sizeof added[0]; i++) {
		snprintf(sql, len,
		         "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_attribute"
		         " WHERE attrelid = '\"%s\"'::regclass AND attname = '%s'"
		         " AND NOT attisdropped) THEN ALTER TABLE \"%s\" %s; END IF; END $$",
		         ps->table, added[i].last, ps->table, added[i].add);
		if (run_ok(ps, 0, NULL, sql, deadline, added[i].what) < 0)
			return STORE_ERR;
	}
	return STORE_OK;
}

/* Whether to connect with gssencmode=disable.  libpq's default, prefer,
 * asks GSSAPI for a Kerberos credential cache at every connect (krb5.conf
 * parsed, the cache looked for), which leaves 0.6 MB of libkrb5 and
 * libgssapi_krb5 resident in a process that has no ticket, and then
 * behaves as disable.  So leash disables GSSAPI encryption only where
 * Kerberos cannot be meant: no /etc/krb5.conf and no ticket in the default
 * cache on the host, none of the Kerberos or libpq variables below in the
 * environment, and none of the keys gssencmode, krbsrvname, gsslib or
 * service in the conninfo.  Anywhere else libpq decides as usual.  GSSAPI
 * authentication (pg_hba's gss method) works either way. */
static int want_gss_off(const char *conninfo)
{
	static const char *const env[] = { "PGGSSENCMODE", "PGKRBSRVNAME", "PGGSSLIB", "PGSERVICE",
	                                   "KRB5_CONFIG", "KRB5CCNAME", "KRB5_CLIENT_KTNAME" };
	static const char *const keys[] = { "gssencmode", "krbsrvname", "gsslib", "service" };
	PQconninfoOption *opts, *o;
	char cache[64];
	int off = 1;

	for (size_t i = 0; i < sizeof env / sizeof env[0]; i++)
		if (getenv(env[i]))
			return 0;
	/* MIT Kerberos' default cache is FILE:/tmp/krb5cc_%{uid}. */
	snprintf(cache, sizeof cache, "/tmp/krb5cc_%u", (unsigned)getuid());
	if (access("/etc/krb5.conf", F_OK) == 0 || access(cache, F_OK) == 0)
		return 0;
	/* A conninfo PQconninfoParse cannot read (a bare database name, or an
	 * error the connect reports) keeps libpq's default. */
	if (!(opts = pq.PQconninfoParse(conninfo, NULL)))
		return 0;
	for (o = opts; o->keyword; o++)
		for (size_t i = 0; o->val && i < sizeof keys / sizeof keys[0]; i++)
			if (strcmp(o->keyword, keys[i]) == 0)
				off = 0;
	pq.PQconninfoFree(opts);
	return off;
}

/* Connects and sets the session up: statement timeout, the table, LISTEN,
 * the prepared statements.  Leaves ps->conn NULL on failure. */
static int pg_connect(struct pg_store *ps, int64_t deadline)
{
	char secs[32], sql[8192];
	/* Keys before dbname are defaults: the conninfo's own win. */
	const char *keys[] = { "connect_timeout", "application_name", "gssencmode", "dbname", NULL };
	const char *vals[] = { secs, "leash", ps->gss_off ? "disable" : NULL, ps->conninfo, NULL };
	PGconn *c;
	PostgresPollingStatusType st = PGRES_POLLING_WRITING;
	int64_t left = deadline - clock_mono_ms();

	snprintf(secs, sizeof secs, "%lld", (long long)(left < 2000 ? 2 : (left + 999) / 1000));
	c = pq.PQconnectStartParams(keys, vals, 1);
	if (!c)
		return store_fail(&ps->base, "postgres: connect: out of memory");
	if (pq.PQstatus(c) == CONNECTION_BAD)
		goto fail;
	pq.PQsetNoticeProcessor(c, quiet, NULL);
	while (st != PGRES_POLLING_OK) {
		int r;

		if (st == PGRES_POLLING_FAILED)
			goto fail;
		r = wait_sock(c, st == PGRES_POLLING_READING ? POLLIN : POLLOUT, deadline);
		if (r == 0) {
			conn_fail(ps, c, "no answer within the connect timeout");
			pq.PQfinish(c);
			return STORE_ERR;
		}
		if (r < 0)
			goto fail;
		st = pq.PQconnectPoll(c);
	}
	if (pq.PQsetnonblocking(c, 1) != 0)
		goto fail;
	ps->conn = c;
	/* Custom plans only: after five runs of a prepared statement the
	 * server may switch to its generic plan, which knows nothing of how
	 * long the arrays bound to it are (it guesses 10 rows per unnest) and
	 * joins a thousand claims to their ledger rows by nested loops: a claim
	 * of 1,000 fires took 300 ms from its sixth run on, 25-35 ms before. */
	snprintf(sql, sizeof sql,
	         "SET statement_timeout = %d; SET lock_timeout = %d;"
	         " SET idle_in_transaction_session_timeout = %d%s", ps->statement_timeout_ms,
	         ps->statement_timeout_ms, 4 * ps->statement_timeout_ms,
	         pq.PQserverVersion(c) >= 120000 ? "; SET plan_cache_mode = force_custom_plan" : "");
	if (run_ok(ps, 0, NULL, sql, deadline, "connect") < 0)
		goto fail_setup;
	if (ps->mode != STORE_RUN) {
		if (check_schema(ps, sql, sizeof sql, deadline) < 0)
			goto fail_setup;
		goto prepare;
	}
	if (setup_leases(ps, sql, sizeof sql, deadline) < 0 ||
	    setup_runs(ps, sql, sizeof sql, deadline) < 0)
		goto fail_setup;
prepare:
	snprintf(sql, sizeof sql, "LISTEN \"%s\"", ps->table);
	if (run_ok(ps, 0, NULL, sql, deadline, "listen") < 0)
		goto fail_setup;
	if ((ps->mode == STORE_RUN ? presence_connect(ps, deadline)
	                           : prepare_dialect(ps, deadline)) < 0)
		goto fail_setup;
	return STORE_OK;
fail_setup:
	drop_conn(ps);
	return STORE_ERR;
fail:
	conn_fail(ps, c, NULL);
	pq.PQfinish(c);
	return STORE_ERR;
}

/* The connection, connected again when it broke while idle. */
static int ensure_conn(struct pg_store *ps, int64_t *deadline)
{
	int64_t start = clock_mono_ms();

	if (ps->conn && pq.PQstatus(ps->conn) == CONNECTION_OK) {
		struct pollfd p = { .fd = pq.PQsocket(ps->conn), .events = POLLIN };

		/* Data while idle: notifications, or the server saying goodbye. */
		if (poll(&p, 1, 0) > 0 && (!pq.PQconsumeInput(ps->conn) ||
		                           pq.PQstatus(ps->conn) != CONNECTION_OK))
			drop_conn(ps);
	} else if (ps->conn) {
		drop_conn(ps);
	}
	if (!ps->conn) {
		int64_t cd = start + (ps->bound_ms ? ps->bound_ms : ps->connect_timeout_ms);

		if (pg_connect(ps, cd) < 0)
			return STORE_ERR;
	}
	*deadline = ps->bound_ms ? start + ps->bound_ms
	                         : clock_mono_ms() + ps->statement_timeout_ms;
	return STORE_OK;
}

static int64_t col_i64(PGresult *r, int row, int col)
{
	return pq.PQgetisnull(r, row, col) ? 0 : strtoll(pq.PQgetvalue(r, row, col), NULL, 10);
}

/* An array literal under construction ({"a","b\"c"}, {1,NULL}): a list
 * of names, or a column of a table of rows; oom once any append failed. */
struct arr {
	char *p;
	size_t len, cap;
	int oom;
};

static void arr_put(struct arr *a, const char *s, size_t n)
{
	if (a->oom)
		return;
	if (a->len + n + 2 > a->cap) {
		size_t ncap = a->cap ? a->cap : 64;
		char *np;

		while (a->len + n + 2 > ncap)
			ncap *= 2;
		if (!(np = realloc(a->p, ncap))) {
			a->oom = 1;
			return;
		}
		a->p = np;
		a->cap = ncap;
	}
	memcpy(a->p + a->len, s, n);
	a->len += n;
	a->p[a->len] = '\0';
}

static void arr_sep(struct arr *a)
{
	arr_put(a, a->len ? "," : "{", 1);
}

/* A text element, quoted ("a\"b"), or NULL. */
static void arr_text(struct arr *a, const char *v)
{
	arr_sep(a);
	if (!v) {
		arr_put(a, "NULL", 4);
		return;
	}
	arr_put(a, "\"", 1);
	for (const char *p = v; *p; p++) {
		size_t run = strcspn(p, "\"\\");

		arr_put(a, p, run);
		p += run;
		if (!*p)
			break;
		arr_put(a, "\\", 1);
		arr_put(a, p, 1);
	}
	arr_put(a, "\"", 1);
}

/* An integer element, NULL when v == null. */
static void arr_int(struct arr *a, int64_t v, int64_t null)
{
	char b[24];

	arr_sep(a);
	if (v == null)
		arr_put(a, "NULL", 4);
	else
		arr_put(a, b, (size_t)snprintf(b, sizeof b, "%lld", (long long)v));
}

/* The literal, "{}" when empty; NULL when out of memory. */
static const char *arr_end(struct arr *a)
{
	arr_put(a, a->len ? "}" : "{}", a->len ? 1 : 2);
	return a->oom ? NULL : a->p;
}

static int pg_event_fd(struct store *s)
{
	struct pg_store *ps = (struct pg_store *)s;

	return ps->conn ? pq.PQsocket(ps->conn) : -1;
}

static int pg_drain_events(struct store *s, void (*fn)(void *, const char *), void *arg)
{
	struct pg_store *ps = (struct pg_store *)s;
	PGnotify *nf;
	int count = 0;

	if (!ps->conn)
		return 0;
	if (!pq.PQconsumeInput(ps->conn)) {
		char msg[STORE_ERR_MAX];

		first_line(msg, sizeof msg, pq.PQerrorMessage(ps->conn));
		drop_conn(ps);
		return store_fail_kind(s, STORE_E_GONE, "postgres: events: %s", msg);
	}
	while ((nf = pq.PQnotifies(ps->conn))) {
		/* Our own releases come back too; only others' matter. */
		if (nf->be_pid != pq.PQbackendPID(ps->conn)) {
			fn(arg, nf->extra);
			count++;
		}
		pq.PQfreemem(nf);
	}
	return count;
}

static void pg_set_timeout(struct store *s, int ms)
{
	((struct pg_store *)s)->bound_ms = ms > 0 ? ms : 0;
}

static void pg_close(struct store *s)
{
	struct pg_store *ps = (struct pg_store *)s;

	if (!ps)
		return;
	pq.PQfinish(ps->conn);
	free(ps->conninfo);
	free(ps);
}


static const struct store_driver postgres_driver;

static const struct store_ops postgres_ops = {
	STORE_OPS_ONCE,
	.name = "postgres",
	.close = pg_close,
	.event_fd = pg_event_fd,
	.drain_events = pg_drain_events,
	.set_timeout = pg_set_timeout,
};

static struct store *open_postgres(const struct store_opts *o, char *err, size_t errlen)
{
	struct pg_store *ps;

	if (load_libpq(err, errlen) < 0)
		return NULL;
	if (!(ps = calloc(1, sizeof *ps))) {
		snprintf(err, errlen, "postgres: out of memory");
		return NULL;
	}
	ps->base.ops = &postgres_ops;
	ps->base.drv = &postgres_driver;
	snprintf(ps->table, sizeof ps->table, "%s", o->table ? o->table : "leash_leases");
	ps->connect_timeout_ms = o->connect_timeout_ms > 0 ? o->connect_timeout_ms : 5000;
	ps->statement_timeout_ms = o->statement_timeout_ms > 0 ? o->statement_timeout_ms : 5000;
	if (!(ps->conninfo = strdup(o->conninfo ? o->conninfo : ""))) {
		snprintf(err, errlen, "postgres: out of memory");
		goto fail;
	}
	ps->gss_off = want_gss_off(ps->conninfo);
	ps->mode = o->mode;
	if (pg_connect(ps, clock_mono_ms() + ps->connect_timeout_ms) < 0) {
		snprintf(err, errlen, "%s", ps->base.err);
		goto fail;
	}
	return &ps->base;
fail:
	pg_close(&ps->base);
	return NULL;
}

static void unload_libpq(void)
{
	store_lib_unload(&lib);
}

const struct store_provider store_postgres = { "postgres", open_postgres, "libpq",
                                               client_version, unload_libpq };

/* ---- presence: <table>_replicas ---- */

#define PRES_COLS "owner, host, pid, version, started_at, heartbeat, draining, jobs_hash"

/* The beat's upsert (draining as store.h's presence rows say) and
 * prune, as CTEs after t0: $1 owner, $2 host, $3 pid, $4 version, $5 name,
 * $6 hash, $7 jobs, $8 broken, $9 prune. */
#define BEAT_CTES \
	" up AS (INSERT INTO \"%1$s_replicas\" AS r (" PRES_COLS ", jobs, broken)" \
	"  SELECT $1, $2, $3::bigint, $4, t0.now, t0.now, 2 * (EXISTS (SELECT 1 FROM" \
	"  \"%1$s_replicas\" m WHERE m.owner = $5::text AND m.pid = 0))::int, $6, $7, $8::text" \
	"  FROM t0" \
	"  ON CONFLICT (owner) DO UPDATE SET host = EXCLUDED.host, pid = EXCLUDED.pid," \
	"  version = EXCLUDED.version, heartbeat = EXCLUDED.heartbeat," \
	"  draining = CASE WHEN r.draining = 1 THEN 1 ELSE EXCLUDED.draining END," \
	"  jobs_hash = EXCLUDED.jobs_hash," \
	"  jobs = EXCLUDED.jobs, broken = EXCLUDED.broken" \
	"  RETURNING r.owner, r.host, r.pid, r.version, r.started_at, r.heartbeat, r.draining," \
	"  r.jobs_hash, r.broken)," \
	" gone AS (DELETE FROM \"%1$s_replicas\" d USING t0" \
	"  WHERE d.owner <> $1 AND d.pid <> 0 AND d.heartbeat < t0.now - $9::bigint" \
	"  RETURNING d.owner)"
/* The others' rows as the prune leaves them (extra: more columns). */
#define BEAT_OTHERS(extra) \
	"SELECT o.owner, o.host, o.pid, o.version, o.started_at, o.heartbeat," \
	"  o.draining, o.jobs_hash, CASE WHEN o.jobs_hash = $6 THEN NULL ELSE o.jobs END," \
	"  o.broken" extra \
	"  FROM \"%1$s_replicas\" o, t0 WHERE o.owner <> $1 AND o.pid <> 0" \
	"  AND o.heartbeat >= t0.now - $9::bigint"

/* handoff: the row's handoff_to names another owner whose presence row
 * is live (beat within $4 ms) and not draining. */
#define TO_LIVE \
	"(l.handoff_to IS NOT NULL AND l.handoff_to <> $2 AND EXISTS (SELECT 1 FROM" \
	" \"%1$s_replicas\" r WHERE r.owner = l.handoff_to AND r.pid <> 0" \
	" AND r.draining = 0 AND r.heartbeat > t0.n - $4::bigint))"

/* ---- the driver and the dialect (driver.h) ---- */

/* renew_all's UPDATE of the leases $1 holds unexpired, of the names $2. */
#define RENEW_SQL \
	"WITH t0 AS (SELECT " NOW " AS now)" \
	" UPDATE \"%1$s\" l SET renewed_at = t0.now, expires_at = t0.now + $3::bigint FROM t0" \
	" WHERE l.owner = $1 AND l.name = ANY ($2::text[]) AND l.expires_at > t0.now" \
	" AND " LEASE_OK

/* The CLAIMS table's arrays, $2 on. */
#define CLAIMS \
	"unnest($2::bigint[], $3::text[], $4::bigint[], $5::bigint[]) AS c(i, name, token, fire)"

/* Prepared at connect as leash_s<n>.  control NOTIFYs the holder
 * ("control:" name), which renews at once and so reads the control within
 * a round trip, not a renew interval. */
static const char *const dialect[ST_MAX] = {
	/* release_all: release over = ANY ($2), one NOTIFY per row it freed
	 * (all delivered at the one commit). */
	[ST_RELEASE_ALL] =
	"UPDATE \"%1$s\" l SET expires_at = t0.n FROM (SELECT " NOW " AS n) t0"
	" WHERE l.owner = $1 AND l.name = ANY ($2::text[]) AND l.expires_at > t0.n"
	" RETURNING pg_notify('%1$s', l.name)",
	/* drain: $1 the owners, $2 the marker's name (NULL: none), $3 on. */
	[ST_DRAIN] =
	"WITH t0 AS (SELECT " NOW " AS now),"
	" d AS (UPDATE \"%1$s_replicas\" SET draining = $3::int"
	"  WHERE owner = ANY ($1::text[]) AND pid <> 0 RETURNING 1),"
	" m AS (INSERT INTO \"%1$s_replicas\" AS r (" PRES_COLS ", jobs)"
	"  SELECT $2::text, '', 0, '', t0.now, t0.now, 1, '', '' FROM t0"
	"  WHERE $2::text IS NOT NULL AND $3::int = 1"
	"  ON CONFLICT (owner) DO UPDATE SET heartbeat = EXCLUDED.heartbeat WHERE r.pid = 0"
	"  RETURNING 1),"
	" u AS (DELETE FROM \"%1$s_replicas\" WHERE owner = $2::text AND pid = 0"
	"  AND $3::int = 0 RETURNING 1)"
	" SELECT t0.now, (SELECT count(*) FROM d) + (SELECT count(*) FROM m)"
	" + (SELECT count(*) FROM u),"
	/* Every replica hears it and beats at once (a drained one reads
	 * its row): within a round trip, not a renew interval. */
	" pg_notify('%1$s', '" STORE_EVENT_CONTROL STORE_EVENT_DRAIN "') FROM t0",
	/* One job's rows walk its primary key backwards, all jobs' the
	 * scheduled_at index; the outer row is there when none matched, for now. */
	[ST_READ_JOB] = READ_SQL("x.job = $1"),
	[ST_READ_ALL] = READ_SQL("$1::text IS NULL"),
	[ST_LAST_RUNS] = LAST_RUNS_SQL,
	[ST_RENEW_ALL] = RENEW_SQL " RETURNING l.name, l.token",
	/* renew_ctl: renew_all, returning the control columns and the clock. */
	[ST_RENEW_CTL] =
	RENEW_SQL " RETURNING l.name, l.token, l.paused_until, l.trigger_at, l.handoff_at, t0.now",
	/* renew_beat: renew_ctl's UPDATE ($9 names, $10 ms) and the beat's
	 * CTEs in one statement.  Its rows are the beat's, with k = 'R', and
	 * one per renewed lease with k = 'L' in the same columns: name in
	 * owner, token in pid, paused_until in started_at, trigger_at in
	 * heartbeat, handoff_at in h. */
	[ST_RENEW_BEAT] =
	"WITH t0 AS (SELECT " NOW " AS now),"
	" rn AS (UPDATE \"%1$s\" l SET renewed_at = t0.now, expires_at = t0.now + $11::bigint"
	"  FROM t0 WHERE l.owner = $1 AND l.name = ANY ($10::text[]) AND l.expires_at > t0.now"
	"  AND " LEASE_OK
	"  RETURNING l.name, l.token, l.paused_until, l.trigger_at, l.handoff_at)," BEAT_CTES
	" SELECT t0.now, x.* FROM t0 LEFT JOIN ("
	"  SELECT " PRES_COLS ", NULL::text AS jobs, broken, 'R' AS k, NULL::bigint AS h FROM up"
	"  UNION ALL " BEAT_OTHERS(", 'R', NULL")
	"  UNION ALL SELECT rn.name, NULL, rn.token, NULL, rn.paused_until, rn.trigger_at, NULL,"
	"  NULL, NULL, NULL, 'L', rn.handoff_at FROM rn"
	" ) x ON true ORDER BY x.owner COLLATE \"C\"",
	[ST_ACQUIRE] = ACQUIRE_SQL,
	/* acquire_all: every name ($4, $3 their numbers) in one statement. */
	[ST_ACQUIRE_ALL] =
	"WITH t0 AS (SELECT " NOW " AS now),"
	" req AS (SELECT DISTINCT n AS name FROM unnest($3::bigint[], $4::text[]) AS x(i, n)),"
	" up AS (INSERT INTO \"%1$s\" AS l (name, owner, token, acquired_at, renewed_at, expires_at)"
	"  SELECT req.name, $1::text, 1, t0.now, t0.now, t0.now + $2::bigint FROM req CROSS JOIN t0"
	/* A lease another owner holds unexpired (as this statement's snapshot
	 * sees it) is not offered to the upsert at all: ON CONFLICT would lock
	 * its row even to leave it alone, and the holder's renew_all would wait
	 * behind every follower's try. */
	"  WHERE NOT EXISTS (SELECT 1 FROM \"%1$s\" o WHERE o.name = req.name"
	"   AND o.owner <> $1::text AND o.expires_at > t0.now)"
	"  ORDER BY req.name COLLATE \"C\""
	UPSERT_SET
	"  RETURNING l.name, l.owner, l.token, l.expires_at, l.last_fire)"
	" SELECT req.name, (up.token IS NOT NULL)::int, coalesce(up.owner, h.owner, ''),"
	"  coalesce(up.token, h.token, 0), coalesce(up.expires_at, h.expires_at, 0), t0.now,"
	"  CASE WHEN up.token IS NOT NULL THEN up.last_fire ELSE h.last_fire END"
	" FROM req CROSS JOIN t0 LEFT JOIN up ON up.name = req.name"
	" LEFT JOIN \"%1$s\" h ON up.token IS NULL AND h.name = req.name",
	/* renew: the plain UPDATE by key and owner; no row back: lost. */
	[ST_RENEW] =
	"UPDATE \"%1$s\" l SET renewed_at = t0.n, expires_at = t0.n + $3::bigint"
	" FROM (SELECT " NOW " AS n) t0"
	" WHERE l.name = $1 AND l.owner = $2 AND l.expires_at > t0.n AND " LEASE_OK
	" RETURNING 1, l.owner, l.token, l.expires_at, t0.n, l.last_fire",
	/* release: expires_at = now for the holder's unexpired row, and a NOTIFY
	 * (delivered at commit) for each row it freed. */
	[ST_RELEASE] =
	"UPDATE \"%1$s\" l SET expires_at = t0.n FROM (SELECT " NOW " AS n) t0"
	" WHERE l.name = $1 AND l.owner = $2 AND l.expires_at > t0.n"
	" RETURNING pg_notify('%1$s', l.name)",
	[ST_LIST] =
	"SELECT t0.now, l.name, l.owner, l.token, l.acquired_at, l.renewed_at, l.expires_at,"
	" l.last_fire, l.paused_until FROM (SELECT " NOW " AS now) t0 LEFT JOIN \"%1$s\" l ON true"
	" ORDER BY l.name COLLATE \"C\"",
	[ST_CTL_PAUSE] =
	"WITH u AS (INSERT INTO \"%1$s\" AS l (name, owner, token, acquired_at, renewed_at,"
	" expires_at, paused_until) VALUES ($1, '', 0, 0, 0, 0, $2::bigint)"
	" ON CONFLICT (name) DO UPDATE SET paused_until = EXCLUDED.paused_until"
	" RETURNING " NOW " AS now), " CTL_BUMP
	" SELECT u.now, pg_notify('%1$s', '" STORE_EVENT_CONTROL "' || $1) FROM u",
	[ST_CTL_SET] =
	"WITH t0 AS (SELECT " NOW " AS now),"
	" u AS (UPDATE \"%1$s\" l SET"
	" paused_until = CASE WHEN $2::int = 2 THEN NULL ELSE l.paused_until END,"
	" trigger_at = CASE WHEN $2::int = 3 THEN t0.now ELSE l.trigger_at END,"
	" handoff_at = CASE WHEN $2::int = 4 THEN t0.now ELSE l.handoff_at END,"
	" handoff_to = CASE WHEN $2::int = 4 THEN $3::text ELSE l.handoff_to END"
	" FROM t0 WHERE l.name = $1 RETURNING t0.now), " CTL_BUMP
	" SELECT u.now, pg_notify('%1$s', '" STORE_EVENT_CONTROL "' || $1) FROM u",
	[ST_CTL_VERSION] =
	"SELECT " NOW ", (SELECT token FROM \"%1$s\" WHERE name = '" STORE_CONTROLS "')",
	[ST_HEALTH] =
	"WITH t0 AS (SELECT " NOW " AS now)"
	" UPDATE \"%1$s\" l SET health = $4::int FROM t0"
	" WHERE l.name = $1 AND l.owner = $2 AND l.token = $3::bigint AND l.expires_at > t0.now"
	" AND COALESCE(l.health, 0) <> $4::int RETURNING l.name",
	/* handoff: every SET reads the row as it was, so TO_LIVE is judged
	 * once on the old row; the NOTIFY wakes the new holder (every
	 * follower looks once: STORE_EVENT_HANDOFF), or the next in line when
	 * the lease was freed. */
	[ST_HANDOFF] =
	"WITH t0 AS (SELECT " NOW " AS n),"
	" u AS (UPDATE \"%1$s\" l SET"
	"  owner = CASE WHEN " TO_LIVE " THEN l.handoff_to ELSE l.owner END,"
	"  token = CASE WHEN " TO_LIVE " THEN l.token + 1 ELSE l.token END,"
	"  acquired_at = CASE WHEN " TO_LIVE " THEN t0.n ELSE l.acquired_at END,"
	"  renewed_at = CASE WHEN " TO_LIVE " THEN t0.n ELSE l.renewed_at END,"
	"  expires_at = CASE WHEN " TO_LIVE " THEN t0.n + $3::bigint ELSE t0.n END,"
	"  handoff_to = NULL"
	"  FROM t0 WHERE l.name = $1 AND l.owner = $2 AND l.expires_at > t0.n"
	"  RETURNING l.name, CASE WHEN l.owner = $2 THEN '' ELSE l.owner END AS to_owner, t0.n)"
	" SELECT u.to_owner, u.n, pg_notify('%1$s', CASE WHEN u.to_owner = '' THEN u.name"
	"  ELSE '" STORE_EVENT_HANDOFF "' || u.name END) FROM u",
	[ST_HELD] =
	"SELECT l.name, l.token FROM \"%1$s\" l WHERE l.owner = $1 AND l.name = ANY ($2::text[])"
	" AND l.expires_at > " NOW,
	[ST_LEAVE] = "DELETE FROM \"%1$s_replicas\" WHERE owner = $1",
	[ST_REPLICAS] =
	"SELECT t0.now, o." PRES_COLS ", o.jobs, o.broken FROM (SELECT " NOW " AS now) t0"
	" LEFT JOIN \"%1$s_replicas\" o ON o.pid <> 0 ORDER BY o.owner COLLATE \"C\"",
	/* The upsert, the prune and the read in one statement.  The outer
	 * SELECT sees the table as it was before the statement, so my row
	 * comes from the upsert's RETURNING and the others are filtered as the
	 * prune leaves them. */
	[ST_BEAT] =
	"WITH t0 AS (SELECT " NOW " AS now)," BEAT_CTES
	" SELECT t0.now, x.* FROM t0 LEFT JOIN ("
	"  SELECT " PRES_COLS ", NULL::text AS jobs, broken FROM up"
	"  UNION ALL " BEAT_OTHERS("")
	" ) x ON true ORDER BY x.owner COLLATE \"C\"",
	/* repair: the row as it was (o), the new token (top: one above every
	 * sane one of the table and the job's ledger rows), the lease row's
	 * reset and the ledger rows' delete, in one statement; a NOTIFY wakes
	 * the followers. */
	[ST_REPAIR] =
	"WITH t0 AS (SELECT " NOW " AS now),"
	" o AS (SELECT l.token, l.last_fire, NOT " LEASE_OK " AS bad FROM \"%1$s\" l"
	"  WHERE l.name = $1::text),"
	" top AS (SELECT GREATEST((SELECT max(x.token) FROM \"%1$s\" x WHERE "
	STORE_SQL_TOKEN_OK("x.token") "),"
	"  (SELECT max(r.token) FROM \"%1$s_runs\" r WHERE r.job = $1::text AND "
	STORE_SQL_TOKEN_OK("r.token") "), 0) + 1 AS t),"
	" up AS (UPDATE \"%1$s\" l SET token = top.t, owner = '', expires_at = t0.now,"
	"  last_fire = CASE WHEN " STORE_SQL_FIRE_OK("l.last_fire") " THEN l.last_fire END"
	"  FROM t0, top WHERE l.name = $1::text AND NOT " LEASE_OK " RETURNING l.token),"
	" del AS (DELETE FROM \"%1$s_runs\" r WHERE r.job = $1::text AND NOT "
	STORE_SQL_RUN_OK("r.") " RETURNING 1)"
	" SELECT t0.now, (o.token IS NOT NULL)::int, o.token, o.last_fire,"
	" coalesce(o.bad, false)::int, coalesce((SELECT up.token FROM up), o.token),"
	" (SELECT count(*) FROM del), pg_notify('%1$s', $1::text)"
	" FROM t0 LEFT JOIN o ON true",
	[ST_CORRUPT_RUNS] =
	"SELECT job, scheduled_at FROM \"%1$s_runs\" WHERE " STORE_SQL_RUN_AT_BAD
	" ORDER BY job COLLATE \"C\", scheduled_at LIMIT " STORE_SQL_STR(STORE_BAD_RUNS_MAX),
	/* claim_all: one UPDATE over the claims' arrays ($2 i, $3 name, $4
	 * token, $5 fire); t0 is the statement's one reading of the clock, and the
	 * outer SELECT answers it even when no claim was accepted.  A row that
	 * another transaction changes meanwhile is judged again on its new
	 * version (READ COMMITTED re-checks the WHERE), so a claim never lands
	 * on a lease that passed to another owner or token. */
	[ST_CLAIM_ALL] =
	"WITH t0 AS (SELECT " NOW " AS now),"
	" up AS (UPDATE \"%1$s\" l SET last_fire = c.fire FROM t0, " CLAIMS
	"  WHERE l.name = c.name AND l.owner = $1 AND l.token = c.token"
	"  AND l.expires_at > t0.now AND (l.last_fire IS NULL OR l.last_fire < c.fire)"
	"  RETURNING c.i)"
	" SELECT t0.now, up.i FROM t0 LEFT JOIN up ON true",
	/* claim_runs: claim_all's UPDATE, its RETURNING feeding the INSERT of
	 * the rows ($6 on) whose claim (by its i) it accepted, in one statement:
	 * the cursor moves iff the rows are written.  claimed_at is t0.now; a
	 * row whose key exists is replaced whole.  Inserts go in key order, so
	 * two writers of the same rows lock them in the same order. */
	[ST_CLAIM_RUNS] =
	"WITH t0 AS (SELECT " NOW " AS now),"
	" c AS (SELECT * FROM " CLAIMS "),"
	" up AS (UPDATE \"%1$s\" l SET last_fire = c.fire FROM t0, c"
	"  WHERE l.name = c.name AND l.owner = $1 AND l.token = c.token"
	"  AND l.expires_at > t0.now AND (l.last_fire IS NULL OR l.last_fire < c.fire)"
	"  RETURNING l.name, c.i),"
	" ins AS (INSERT INTO \"%1$s_runs\" AS r (" RUN_COLS ")"
	"  SELECT up.name, x.scheduled_at, x.owner, x.token, t0.now, x.started_at, x.ended_at,"
	"   x.outcome, x.exit_code, x.exit_signal, x.duration_ms, x.error, x.actor, t0.now"
	"  FROM unnest($6::bigint[], " RUN_ARRAYS("7", "8", "9", "10", "11", "12", "13", "14",
	                                          "15", "16", "17", "18") ")"
	"   AS x(claim, " RUN_NAMES ")"
	"  JOIN up ON up.i = x.claim CROSS JOIN t0"
	"  ORDER BY up.name COLLATE \"C\", x.scheduled_at, x.owner COLLATE \"C\""
	"  ON CONFLICT (job, scheduled_at, owner) DO UPDATE SET token = EXCLUDED.token,"
	"   claimed_at = EXCLUDED.claimed_at, started_at = EXCLUDED.started_at,"
	"   ended_at = EXCLUDED.ended_at, outcome = EXCLUDED.outcome,"
	"   exit_code = EXCLUDED.exit_code, exit_signal = EXCLUDED.exit_signal,"
	"   duration_ms = EXCLUDED.duration_ms, error = EXCLUDED.error, actor = EXCLUDED.actor,"
	"   recorded_at = EXCLUDED.recorded_at)"
	" SELECT t0.now, up.i FROM t0 LEFT JOIN up ON true",
	/* record_runs: one upsert over the rows as arrays ($1 job, then as
	 * claim_runs, then $14 run_id, $15 how); a NULL field keeps the stored
	 * value. */
	[ST_RECORD_RUNS] =
	"INSERT INTO \"%1$s_runs\" AS r (" RUN_COLS ", run_id, how)"
	" SELECT x.job, x.scheduled_at, x.owner, x.token, x.claimed_at, x.started_at, x.ended_at,"
	"  x.outcome, x.exit_code, x.exit_signal, x.duration_ms, x.error, x.actor, t0.now,"
	"  x.run_id, x.how"
	" FROM (SELECT " NOW " AS now) t0,"
	"  unnest($1::text[], " RUN_ARRAYS("2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12",
	                                   "13") ", $14::bigint[], $15::text[])"
	"  AS x(job, " RUN_NAMES ", run_id, how)"
	" ORDER BY x.job COLLATE \"C\", x.scheduled_at, x.owner COLLATE \"C\""
	" ON CONFLICT (job, scheduled_at, owner) DO UPDATE SET token = EXCLUDED.token,"
	"  outcome = EXCLUDED.outcome, recorded_at = EXCLUDED.recorded_at,"
	KEEP("claimed_at") "," KEEP("started_at") "," KEEP("ended_at") "," KEEP("exit_code") ","
	KEEP("exit_signal") "," KEEP("duration_ms") "," KEEP("error") "," KEEP("actor") ","
	KEEP("run_id") "," KEEP("how"),
	/* prune_runs, one statement: $1 keep ms, $2 keep_per_job, $3 max_rows,
	 * shared by the three steps in order (each LIMIT is what the earlier
	 * ones left).  Every step sees the statement's one snapshot, and they
	 * touch disjoint rows: lost marks only rows the age step keeps, and the
	 * per-job step deletes neither those (running in the snapshot) nor any
	 * running row (a run still going keeps its row).
	 * lost: running rows (their partial index) below their lease's token.
	 * aged: the old end of the scheduled_at index.
	 * per job: each lease's keep_per_job-th newest row, found by an OFFSET
	 * inside that job's primary key (never a window over the table), and
	 * that job's rows below it, oldest first, by the same key.
	 * Each step picks its rows' ctids and changes them by a TID scan: a
	 * join back on the key let the planner hash the whole table.  The
	 * cutoff is a scalar subquery (an index bound, not a join filter), and
	 * the per-job bounds are row comparisons led by job, which only the
	 * primary key can serve (the planner liked scheduled_at's index and a
	 * filter on job: every job's rows in the range). */
	[ST_PRUNE_RUNS] =
	"WITH t0 AS (SELECT " NOW " AS now),"
	" c AS (SELECT now - $1::bigint AS cut, now FROM t0),"
	" lost AS (UPDATE \"%1$s_runs\" r SET outcome = 'lost', recorded_at = (SELECT now FROM c),"
	"  error = coalesce(r.error, " STORE_SQL_LOST_WHY ")"
	"  WHERE r.ctid = ANY (ARRAY(SELECT x.ctid FROM \"%1$s_runs\" x"
	"   JOIN \"%1$s\" l ON l.name = x.job"
	"   WHERE x.outcome = 'running' AND x.token < l.token"
	"   AND x.scheduled_at >= (SELECT cut FROM c) LIMIT $3))"
	"  AND r.outcome = 'running' RETURNING 1),"
	" aged AS (DELETE FROM \"%1$s_runs\" r WHERE r.ctid = ANY (ARRAY("
	"  SELECT x.ctid FROM \"%1$s_runs\" x WHERE x.scheduled_at < (SELECT cut FROM c)"
	"  ORDER BY x.scheduled_at LIMIT greatest(0, $3 - (SELECT count(*) FROM lost))))"
	"  RETURNING 1),"
	" per_job AS (DELETE FROM \"%1$s_runs\" r WHERE r.ctid = ANY (ARRAY("
	"  SELECT v.ctid FROM \"%1$s\" l"
	"   CROSS JOIN LATERAL (SELECT k.scheduled_at, k.owner FROM \"%1$s_runs\" k"
	"    WHERE k.job = l.name ORDER BY k.scheduled_at DESC, k.owner DESC"
	"    OFFSET $2::bigint - 1 LIMIT 1) k"
	"   CROSS JOIN LATERAL (SELECT v.ctid FROM \"%1$s_runs\" v WHERE v.job = l.name"
	"    AND (v.job, v.scheduled_at, v.owner) < (l.name, k.scheduled_at, k.owner)"
	"    AND (v.job, v.scheduled_at) >= (l.name, (SELECT cut FROM c))"
	"    AND v.outcome <> 'running'"
	"    ORDER BY v.scheduled_at, v.owner LIMIT $3) v"
	"   LIMIT greatest(0, $3 - (SELECT count(*) FROM lost) - (SELECT count(*) FROM aged))))"
	"  RETURNING 1)"
	" SELECT (SELECT count(*) FROM lost) + (SELECT count(*) FROM aged)"
	"  + (SELECT count(*) FROM per_job)",
	/* unclaim_all: the cursor's step back and the ledger row's delete in
	 * one statement.  Prepared on first use: it runs once in a replica's
	 * life at most (a stop). */
	[ST_UNCLAIM_ALL] =
	"WITH up AS (UPDATE \"%1$s\" l SET last_fire = CASE WHEN c.fire > 0 THEN c.fire - 1 END"
	"  FROM " CLAIMS " WHERE l.name = c.name AND l.owner = $1 AND l.token = c.token"
	"  AND l.last_fire = c.fire RETURNING l.name, c.fire, c.i),"
	" del AS (DELETE FROM \"%1$s_runs\" r USING up WHERE r.job = up.name"
	"  AND r.scheduled_at = up.fire AND r.owner = $1 AND r.outcome = 'running'"
	"  AND r.started_at IS NULL)"
	" SELECT NULL::bigint, up.i FROM (SELECT 1) t0 LEFT JOIN up ON true",
	[ST_FLOOR_SELECT] = "SELECT 1",
	/* A side table shaped like the lease table, one row updated by its
	 * primary key (bound, as the lease statements bind theirs), in
	 * autocommit: the least a durable lease write costs.  Made on first
	 * use (sent as text: two statements), its UPDATE prepared then. */
	[ST_FLOOR_MAKE] =
	FLOOR_TABLE
	" INSERT INTO \"%1$s_floor_row\" VALUES ('floor', 'floor', 1, 0, 0, 0)"
	" ON CONFLICT DO NOTHING",
	[ST_FLOOR_UPDATE] =
	"UPDATE \"%1$s_floor_row\" SET expires_at = expires_at + 1 WHERE name = $1",
};

static void stmt_name(char *buf, size_t n, int st)
{
	snprintf(buf, n, "leash_s%d", st);
}

/* Entries prepared on first use, not at connect: the floor's (its table
 * is made on first use) and unclaim_all's (one use at a stop).  The
 * floor's making is two statements, sent as text each time. */
static int lazy(int st)
{
	return st == ST_FLOOR_MAKE || st == ST_FLOOR_UPDATE || st == ST_UNCLAIM_ALL;
}

_Static_assert(ST_MAX <= 64, "pg_store.prepared has a bit per statement");

/* Prepares statement st on this connection (once). */
static int prepare_one(struct pg_store *ps, int st, int64_t deadline)
{
	char sql[8192], name[32];

	if (ps->prepared & (UINT64_C(1) << st))
		return STORE_OK;
	snprintf(sql, sizeof sql, dialect[st], ps->table);
	stmt_name(name, sizeof name, st);
	if (run_ok(ps, 1, name, sql, deadline, "prepare") < 0)
		return STORE_ERR;
	ps->prepared |= UINT64_C(1) << st;
	return STORE_OK;
}

static int prepare_dialect(struct pg_store *ps, int64_t deadline)
{
	for (int i = 0; i < ST_MAX; i++)
		if (!lazy(i) && prepare_one(ps, i, deadline) < 0)
			return STORE_ERR;
	return STORE_OK;
}

#define PARAMS_MAX 32

/* Parameter p as text into vals[*nv] (and on, a table's columns as one
 * array each); what it allocated goes into a[*na]. */
static int bind_param(const struct store_param *p, const char **vals, int *nv, char *num,
                      struct arr *a, int *na)
{
	if (p->kind == SP_INT) {
		snprintf(num, 24, "%lld", (long long)p->i);
		vals[(*nv)++] = num;
	} else if (p->kind == SP_TEXTS) {
		for (size_t k = 0; k < p->n; k++)
			arr_text(&a[*na], p->v[k]);
		if (!(vals[(*nv)++] = arr_end(&a[(*na)++])))
			return -1;
	} else if (p->kind == SP_ROWS) {
		for (int c = 0; c < p->cols; c++, (*na)++) {
			for (size_t r = 0; r < p->n; r++) {
				const struct store_param *x = &p->r[r * (size_t)p->cols + c];

				if (x->kind == SP_INT)
					arr_int(&a[*na], x->i, x->i ^ 1);
				else
					arr_text(&a[*na], x->kind == SP_TEXT ? x->s : NULL);
			}
			if (!(vals[(*nv)++] = arr_end(&a[*na])))
				return -1;
		}
	} else {
		vals[(*nv)++] = p->kind == SP_TEXT ? p->s : NULL;
	}
	return 0;
}

static int pg_exec(struct store *s, int st, const struct store_param *p, int np,
                   store_row_fn row, void *arg)
{
	struct pg_store *ps = (struct pg_store *)s;
	char nums[PARAMS_MAX][24], name[32], sql[8192];
	const char *vals[PARAMS_MAX];
	struct arr a[PARAMS_MAX];
	int64_t deadline;
	PGresult *r = NULL;
	int rc = STORE_OK, nv = 0, na = 0;

	memset(a, 0, sizeof a);
	for (int i = 0; i < np && rc == STORE_OK; i++)
		if (nv + (p[i].kind == SP_ROWS ? p[i].cols : 1) > PARAMS_MAX)
			rc = store_fail(s, "postgres: %s: too many parameters", store_stmt_what[st]);
		else if (bind_param(&p[i], vals, &nv, nums[nv], a, &na) < 0)
			rc = store_fail(s, "postgres: %s: out of memory", store_stmt_what[st]);
	stmt_name(name, sizeof name, st);
	if (rc == STORE_OK && ensure_conn(ps, &deadline) == STORE_OK) {
		if (st == ST_FLOOR_MAKE) {
			snprintf(sql, sizeof sql, dialect[st], ps->table);
			r = roundtrip(ps, 0, NULL, sql, 0, NULL, deadline, store_stmt_what[st]);
		} else if (prepare_one(ps, st, deadline) == STORE_OK) {
			r = roundtrip(ps, 0, name, NULL, nv, vals, deadline, store_stmt_what[st]);
		}
	}
	for (int i = 0; i < na; i++)
		free(a[i].p);
	if (!r)
		return STORE_ERR;
	ps->cur = r;
	for (ps->cur_row = 0; row && ps->cur_row < pq.PQntuples(r) && rc == STORE_OK; ps->cur_row++)
		if (row(s, arg, 0) < 0)
			rc = STORE_ERR;
	ps->cur = NULL;
	pq.PQclear(r);
	return rc;
}

static int pg_is_null(struct store *s, int c)
{
	struct pg_store *ps = (struct pg_store *)s;

	return pq.PQgetisnull(ps->cur, ps->cur_row, c);
}

static int64_t pg_col_int(struct store *s, int c)
{
	struct pg_store *ps = (struct pg_store *)s;

	return col_i64(ps->cur, ps->cur_row, c);
}

static const char *pg_col_text(struct store *s, int c, size_t *len)
{
	struct pg_store *ps = (struct pg_store *)s;

	if (pq.PQgetisnull(ps->cur, ps->cur_row, c))
		return NULL;
	*len = (size_t)pq.PQgetlength(ps->cur, ps->cur_row, c);
	return pq.PQgetvalue(ps->cur, ps->cur_row, c);
}

static const struct store_driver postgres_driver = { pg_exec, pg_is_null, pg_col_int,
                                                     pg_col_text, 0 };

static int presence_connect(struct pg_store *ps, int64_t deadline)
{
	char sql[4096];

	snprintf(sql, sizeof sql, STORE_SQL_REPLICAS_TABLE, ps->table);
	if (make_twice(ps, sql, deadline, "create replicas table") < 0)
		return STORE_ERR;
	/* A table of a version before the broken files gets the column (as
	 * the lease table's are added, only when the catalog lacks it). */
	snprintf(sql, sizeof sql,
	         "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_attribute"
	         " WHERE attrelid = '\"%1$s_replicas\"'::regclass AND attname = 'broken'"
	         " AND NOT attisdropped) THEN ALTER TABLE \"%1$s_replicas\""
	         " ADD COLUMN IF NOT EXISTS broken TEXT; END IF; END $$", ps->table);
	if (run_ok(ps, 0, NULL, sql, deadline, "add the replicas' broken column") < 0)
		return STORE_ERR;
	return prepare_dialect(ps, deadline);
}

