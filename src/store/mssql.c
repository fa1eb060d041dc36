/* mssql.c - the lease store on SQL Server through FreeTDS db-lib.
 *
 * Every statement is an RPC call to sp_executesql with typed parameters; the
 * table name (checked as an identifier) is the only thing formatted into SQL
 * text.  Each operation is one batch and one round trip, timed by the
 * database clock (SYSUTCDATETIME in ms since the epoch).
 *
 * db-lib's error and message handlers are process-global: they find the
 * handle through dbgetuserdata(), or through `opening` while dbopen() runs
 * (db-lib calls them with no usable DBPROCESS during a login).  db-lib counts
 * timeouts in whole seconds, so millisecond timeouts are rounded up.  A
 * statement timeout cancels the statement and keeps the connection (see
 * err_handler); only a cancel left unacknowledged drops it.
 *
 * libsybdb is loaded with dlopen() when the first mssql store is opened, not
 * linked: it pulls in gnutls and friends (about 2.5 MB resident, initialised
 * at load), which a replica on another provider should not pay for.
 * The operations written once (ops.c) reach SQL Server through the driver
 * at the end of this file (ms_exec): the dialect table's batches with their
 * declared parameters, an array bound as @n1, @n2, ... where the batch says
 * @n, a table of rows in multi-row VALUES lists where it says {@name}, in
 * batches within 2,100 parameters.  The schema is still this file's own.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sybfront.h>
#include <sybdb.h>

#include "store/driver.h"

#define CHUNK 2000              /* names per renew_all/release_all batch (< 2,100 parameters) */
#define ROWS_MAX 1000           /* rows per INSERT ... VALUES (SQL Server's limit) */
#define SQL_MAX 2048

/* The database clock, in ms since the Unix epoch. */
#define NOW "DATEDIFF_BIG(millisecond, '19700101', SYSUTCDATETIME())"
/* NVARCHAR, so that any UTF-8 name of at most 200 bytes (at most 200 UTF-16
 * units) survives; BIN2, so that names compare and sort by code point and
 * case matters, as on the other providers. */
#define VC "NVARCHAR(200)"
/* Each control grows the controls' version (store.h), inside its
 * transaction; the row is made under a range lock when missing. */
#define CTL_BUMP \
	"IF NOT EXISTS (SELECT 1 FROM [%1$s] WITH (UPDLOCK, HOLDLOCK) " \
	"WHERE name = N'" STORE_CONTROLS "') " \
	"INSERT INTO [%1$s] (name, owner, token, acquired_at, renewed_at, expires_at) " \
	"VALUES (N'" STORE_CONTROLS "', N'', 0, 0, 0, 0); " \
	"UPDATE [%1$s] SET token = token + 1 WHERE name = N'" STORE_CONTROLS "'; "
/* A sane lease row (store.h): a corrupt one is never taken nor renewed,
 * nor its token grown. */
#define LEASE_OK STORE_SQL_LEASE_OK("")
/* try_acquire's and acquire_all's UPDATE, up to its WHERE: the row taken
 * (its token grown unless @owner held it unexpired), its name into @r. */
#define ACQ_UPDATE \
	"UPDATE [%1$s] WITH (UPDLOCK, HOLDLOCK) SET " \
	"token = CASE WHEN owner = @owner AND expires_at > @now THEN token ELSE token + 1 END, " \
	"acquired_at = CASE WHEN owner = @owner AND expires_at > @now " \
	"THEN acquired_at ELSE @now END, " \
	"owner = @owner, renewed_at = @now, expires_at = @now + @ms " \
	"OUTPUT inserted.name INTO @r "
/* The ledger's outcome and error text: at most STORE_RUN_ERROR_MAX bytes of
 * UTF-8 are at most as many UTF-16 units. */
#define OC "NVARCHAR(15)"
#define EC "NVARCHAR(1024)"
/* The ledger has a filtered index, and a statement that writes such a table
 * fails (1934) unless these are set as below; db-lib's sessions start with
 * most of them off.  Each ledger batch sets them for itself. */
#define ISO "SET ANSI_NULLS, ANSI_PADDING, ANSI_WARNINGS, ARITHABORT, " \
	"CONCAT_NULL_YIELDS_NULL, QUOTED_IDENTIFIER ON; SET NUMERIC_ROUNDABORT OFF; "

struct ms_store {
	struct store base;
	DBPROCESS *db;
	char *host, *user, *password, *database;
	int port;
	int connect_s, stmt_s, cur_s;   /* timeouts in seconds */
	int wait_s;                     /* the one in force, for messages */
	int failed;                     /* an error was reported during this call */
	int cancelling;                 /* this call timed out and sent a cancel */
	int dupkey;                     /* the server reported a duplicate key */
	char table[64];
	char *text[ST_MAX];             /* the dialect, formatted with the table */
};

/* One bound parameter: a string when s is set, else a BIGINT. */
struct param {
	const char *name;
	const char *s;
	int64_t i;
};

/* Every db-lib function this file calls, resolved from libsybdb.so.5 on
 * first use into sybdb.  The DBSETL* macros expand to dbsetlname and dbsetlversion, and
 * dbopen to tdsdbopen, so those are what is resolved. */
#define DBLIB_FUNCS(X) \
	X(dbinit) X(dberrhandle) X(dbmsghandle) X(dbversion) \
	X(dblogin) X(dbloginfree) X(dbsetlname) X(dbsetlversion) X(dbsetlogintime) \
	X(tdsdbopen) X(dbclose) X(dbdead) X(dbcancel) X(dbsetopt) \
	X(dbgetuserdata) X(dbsetuserdata) \
	X(dbrpcinit) X(dbrpcparam) X(dbrpcsend) X(dbsqlok) X(dbresults) \
	X(dbnumcols) X(dbnextrow) X(dbdata) X(dbdatlen) X(dbcoltype) X(dbconvert)

static struct {
#define X(f) __typeof__(f) *f;
	DBLIB_FUNCS(X)
#undef X
} sybdb;

/* The calls below name the table (sybdb.dbdata); sybdb.h's DBSETL* and
 * dbopen macros expand to dbsetlname, dbsetlversion and tdsdbopen, which
 * reach it under their own names. */
#define dbsetlname sybdb.dbsetlname
#define dbsetlversion sybdb.dbsetlversion
#define tdsdbopen sybdb.tdsdbopen

#define X(f) #f " "
static struct store_lib lib = { "libsybdb.so.5", "mssql", "libsybdb5", DBLIB_FUNCS(X), &sybdb,
                                sizeof sybdb, NULL };
#undef X

/* The provider row's client_version: "1.3.17", from "freetds v1.3.17". */
static const char *client_version(void)
{
	const char *v;
	char err[8];

	if (store_lib_load(&lib, err, sizeof err) < 0 || !(v = sybdb.dbversion()))
		return NULL;
	return strncmp(v, "freetds v", 9) == 0 ? v + 9 : v;
}

static struct ms_store *opening;

static struct ms_store *handle_of(DBPROCESS *db)
{
	struct ms_store *st = db ? (struct ms_store *)sybdb.dbgetuserdata(db) : NULL;

	return st ? st : opening;
}

/* Records the first error of a call, and its kind; later ones only mark
 * it failed.  With the handlers below, the one place db-lib's errors become
 * the store's kinds: a server error is a refusal (a duplicate key is
 * caught where it is expected), a timeout one, and every other db-lib
 * error (no connection, a dead one, an answer cut short) gone. */
static void note(struct ms_store *st, enum store_err_kind kind, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void note(struct ms_store *st, enum store_err_kind kind, const char *fmt, ...)
{
	va_list ap;

	st->failed = 1;
	if (st->base.err[0])
		return;
	st->base.kind = kind;
	va_start(ap, fmt);
	vsnprintf(st->base.err, sizeof st->base.err, fmt, ap);
	va_end(ap);
}

static int msg_handler(DBPROCESS *db, DBINT no, int state, int severity, char *text,
                       char *server, char *proc, int line)
{
	struct ms_store *st = handle_of(db);

	if (!st || severity <= 10)      /* informational: "changed database context" */
		return 0;
	if (no == 2627 || no == 2601) { /* duplicate key: someone else inserted first */
		st->dupkey = 1;
		return 0;
	}
	/* 3906: the database takes no writes (READ_ONLY, or an availability
	 * group's secondary): the fix is named. */
	note(st, STORE_E_REFUSED, "mssql %s:%d: server error %d: %s%s", st->host, st->port, (int)no,
	     text, no == 3906 ? " (the database takes no writes: ALTER DATABASE ... SET READ_WRITE, "
	                        "or point [mssql] host at the primary, an availability group's "
	                        "listener)" : "");
	return 0;
}

static int err_handler(DBPROCESS *db, int severity, int dberr, int oserr, char *dberrstr,
                       char *oserrstr)
{
	struct ms_store *st = handle_of(db);
	const char *lost;
	int ours;

	if (!st || dberr == SYBESMSG)   /* SYBESMSG only points at msg_handler's news */
		return INT_CANCEL;
	/* A handle's connection (not one being opened): it may be kept. */
	ours = db && sybdb.dbgetuserdata(db);
	if (dberr == SYBETIME && ours && !st->cancelling) {
		/* A statement timeout.  INT_TIMEOUT makes db-lib send an attention
		 * and go on reading until the server acknowledges it (a DONE with
		 * DONE_ATTN): the statement is cancelled and the connection kept.
		 * (Reconnecting instead costs a new login, and against a real
		 * server the first statements on a new connection take 0.4-1 s:
		 * a timeout could then follow every reconnect.) */
		st->cancelling = 1;
		note(st, STORE_E_TIMEOUT,
		     "mssql %s:%d: no answer within %d s (statement timeout); cancelled",
		     st->host, st->port, st->wait_s);
		return INT_TIMEOUT;
	}
	if (dberr == SYBETIME && ours) {
		/* The cancel went unanswered as long: drop the connection (INT_CANCEL
		 * closes it); the next call reconnects. */
		st->failed = 1;
		st->base.kind = STORE_E_TIMEOUT;
		snprintf(st->base.err, sizeof st->base.err,
		         "mssql %s:%d: no answer within %d s (statement timeout), nor to the "
		         "cancel: connection dropped", st->host, st->port, st->wait_s);
		return INT_CANCEL;
	}
	lost = ours && sybdb.dbdead(db) ? "connection lost: " : "";
	if (dberr == SYBETIME)
		note(st, STORE_E_TIMEOUT, "mssql %s:%d: no answer within %d s (timeout)", st->host, st->port,
		     st->wait_s);
	else if (oserr != DBNOERR && oserr != 0 && oserrstr)
		note(st, STORE_E_GONE, "mssql %s:%d: %s%s (%s)", st->host, st->port, lost, dberrstr, oserrstr);
	else
		note(st, STORE_E_GONE, "mssql %s:%d: %s%s", st->host, st->port, lost, dberrstr);
	return INT_CANCEL;
}

static int init_dblib(char *err, size_t errlen)
{
	static int done;

	if (done)
		return 0;
	if (store_lib_load(&lib, err, errlen) < 0)
		return -1;
	if (sybdb.dbinit() == FAIL) {
		snprintf(err, errlen, "mssql: sybdb.dbinit() failed");
		return -1;
	}
	sybdb.dberrhandle(err_handler);
	sybdb.dbmsghandle(msg_handler);
	done = 1;
	return 0;
}

static void apply_timeout(struct ms_store *st)
{
	char buf[16];

	snprintf(buf, sizeof buf, "%d", st->cur_s);
	st->wait_s = st->cur_s;
	sybdb.dbsetopt(st->db, DBSETTIME, buf, 0);
}

static void disconnect(struct ms_store *st)
{
	if (st->db) {
		sybdb.dbsetuserdata(st->db, NULL);
		sybdb.dbclose(st->db);
		st->db = NULL;
	}
}

static int connect_db(struct ms_store *st)
{
	LOGINREC *login;
	char server[300];
	int secs = st->connect_s < st->cur_s ? st->connect_s : st->cur_s;

	disconnect(st);
	login = sybdb.dblogin();
	if (!login) {
		note(st, STORE_E_OTHER, "mssql: out of memory");
		goto fail;
	}
	DBSETLUSER(login, st->user);
	DBSETLPWD(login, st->password);
	DBSETLDBNAME(login, st->database);
	DBSETLAPP(login, "leash");
	DBSETLCHARSET(login, "UTF-8");
	DBSETLVERSION(login, DBVERSION_74);
	sybdb.dbsetlogintime(secs);
	st->wait_s = secs;
	/* host:port needs no freetds.conf entry. */
	snprintf(server, sizeof server, "%s:%d", st->host, st->port);
	opening = st;
	st->db = dbopen(login, server);
	opening = NULL;
	sybdb.dbloginfree(login);
	if (!st->db) {
		note(st, STORE_E_GONE, "mssql %s:%d: could not connect", st->host, st->port);
		goto fail;
	}
	if (st->failed) {               /* a login error the server reported anyway */
		disconnect(st);
		goto fail;
	}
	sybdb.dbsetuserdata(st->db, (BYTE *)st);
	apply_timeout(st);
	return STORE_OK;
fail:
	return STORE_ERR;
}

/* Queues and sends one sp_executesql call.  SYBNTEXT: db-lib sends it as
 * NVARCHAR, NVARCHAR(MAX) when long, as sp_executesql wants (SYBVARCHAR
 * would be cut at 8,000 bytes); so does a parameter longer than LONG_TEXT
 * (record_runs' packed rows).  db-lib sends an empty string as NULL, so a
 * statement without parameters goes without @params. */
#define LONG_TEXT 4000

static int send_rpc(DBPROCESS *db, const char *stmt, const char *decl,
                    const struct param *p, int np)
{
	if (sybdb.dbrpcinit(db, "sp_executesql", 0) == FAIL ||
	    sybdb.dbrpcparam(db, "@stmt", 0, SYBNTEXT, -1, (DBINT)strlen(stmt), (BYTE *)stmt) == FAIL ||
	    (np > 0 && sybdb.dbrpcparam(db, "@params", 0, SYBNTEXT, -1, (DBINT)strlen(decl),
	                          (BYTE *)decl) == FAIL))
		return STORE_ERR;
	for (int i = 0; i < np; i++) {
		size_t len = p[i].s ? strlen(p[i].s) : 0;
		int rc = p[i].s ? sybdb.dbrpcparam(db, p[i].name, 0, len > LONG_TEXT ? SYBNTEXT : SYBVARCHAR,
		                             -1, (DBINT)len, (BYTE *)p[i].s)
		                : sybdb.dbrpcparam(db, p[i].name, 0, SYBINT8, -1, -1, (BYTE *)&p[i].i);
		if (rc == FAIL)
			return STORE_ERR;
	}
	return sybdb.dbrpcsend(db) == FAIL ? STORE_ERR : STORE_OK;
}

/* Reads every result, calling row() for each row of the resno-th result set
 * that has columns.  A statement that failed inside the batch (a duplicate
 * key) makes dbresults() answer FAIL once and go on.  -1 when the answer
 * could not be read to its end. */
static int read_results(struct ms_store *st,
                        void (*row)(struct ms_store *, int resno, void *arg), void *arg)
{
	int rc, resno = 0, fails = 0;

	sybdb.dbsqlok(st->db);                /* errors arrive through the handlers */
	while (!sybdb.dbdead(st->db) && (rc = sybdb.dbresults(st->db)) != NO_MORE_RESULTS) {
		if (rc == FAIL) {
			if (++fails > 16)
				return -1;
			continue;
		}
		if (sybdb.dbnumcols(st->db) == 0)
			continue;
		while ((rc = sybdb.dbnextrow(st->db)) != NO_MORE_ROWS) {
			if (rc == FAIL)
				return -1;
			if (row)
				row(st, resno, arg);
		}
		resno++;
	}
	return sybdb.dbdead(st->db) ? -1 : 0;
}

/* One operation: (re)connects when needed, sends, reads.  Any error leaves
 * the connection usable (a timed-out statement is cancelled) or drops it,
 * and a dropped one is made again by the next call. */
static int call(struct ms_store *st, const char *stmt, const char *decl,
                const struct param *p, int np,
                void (*row)(struct ms_store *, int resno, void *arg), void *arg)
{
	st->failed = 0;
	st->dupkey = 0;
	st->cancelling = 0;
	if ((!st->db || sybdb.dbdead(st->db)) && connect_db(st) != STORE_OK)
		goto fail;
	if (send_rpc(st->db, stmt, decl, p, np) != STORE_OK) {
		note(st, STORE_E_GONE, "mssql %s:%d: could not send the request", st->host, st->port);
		goto fail;
	}
	if (read_results(st, row, arg) < 0)
		note(st, STORE_E_GONE, "mssql %s:%d: %s", st->host, st->port,
		     sybdb.dbdead(st->db) ? "connection lost" : "could not read the answer");
	if (st->failed)
		goto fail;
	return STORE_OK;
fail:
	if (st->db && sybdb.dbdead(st->db))
		disconnect(st);
	else if (st->db)
		sybdb.dbcancel(st->db);       /* flushes what is left of the answer (none after
		                         * an acknowledged cancel: the connection is idle) */
	return STORE_ERR;
}

static int64_t col_i64(DBPROCESS *db, int c)
{
	BYTE *p = sybdb.dbdata(db, c);
	DBINT len = sybdb.dbdatlen(db, c);
	DBBIGINT v = 0;

	if (!p || len <= 0)
		return 0;
	if (sybdb.dbconvert(db, sybdb.dbcoltype(db, c), p, len, SYBINT8, (BYTE *)&v, sizeof v) < 0)
		return 0;
	return v;
}

static void col_str(DBPROCESS *db, int c, char *buf, size_t size)
{
	BYTE *p = sybdb.dbdata(db, c);
	DBINT len = sybdb.dbdatlen(db, c);
	size_t n = len > 0 ? (size_t)len : 0;

	if (!p)
		n = 0;
	if (n >= size)
		n = size - 1;
	if (n)
		memcpy(buf, p, n);
	buf[n] = '\0';
}


static int secs_of(int ms)
{
	return ms <= 0 ? 1 : (ms + 999) / 1000;
}

static void ms_set_timeout(struct store *s, int ms)
{
	struct ms_store *st = (struct ms_store *)s;

	st->cur_s = ms > 0 ? secs_of(ms) : st->stmt_s;
	if (st->db)
		apply_timeout(st);
}

static void ms_free(struct ms_store *st)
{
	disconnect(st);
	free(st->host);
	free(st->user);
	free(st->password);
	free(st->database);
	for (int i = 0; i < ST_MAX; i++)
		free(st->text[i]);
	free(st);
}

static void ms_close(struct store *s)
{
	ms_free((struct ms_store *)s);
}


static const struct store_driver ms_driver;
static int build_dialect(struct ms_store *st);

static const struct store_ops ms_ops = {
	STORE_OPS_ONCE,
	.name = "mssql",
	.close = ms_close,
	.set_timeout = ms_set_timeout,
};

/* The tables, made when missing, and the columns older versions lack, added
 * (NULL in every row): one batch, in one transaction that first takes an
 * application lock on the table's name, so that replicas opening a new
 * table at once make it one after another and each later one finds it
 * made.  (Racing instead and catching "already there" is not enough: some
 * engines report it under other numbers, or let no TRY...CATCH catch an
 * ALTER TABLE's error.)  One column per ALTER TABLE ... ADD, as every
 * engine takes it.  Whether a column is there is asked of sys.columns:
 * inside a transaction Babelfish's COL_LENGTH answers from before it, blind
 * to a column another replica added meanwhile.  The lock waits at most @wait ms, a little less than the
 * statement timeout, so that a stuck holder makes a clear error.  The
 * ledger's indexes are made with it, so a replica that finds the ledger
 * finds its indexes too.  A job's rows newest first (read_runs,
 * prune_runs' per-job cutoff) are its range of the clustered key walked
 * backwards. */
#define ADD_COLUMN_TO(tbl, col, type) \
	"IF NOT EXISTS (SELECT 1 FROM sys.columns WHERE object_id = OBJECT_ID(N'[" tbl "]') " \
	"AND name = N'" col "') ALTER TABLE [" tbl "] ADD " col " " type " NULL; "
#define ADD_COLUMN(col, type) ADD_COLUMN_TO("%1$s", col, type)
/* The 14 columns every leash ledger has had. */
#define RUN_NEEDED "N'job', N'scheduled_at', N'owner', N'token', N'claimed_at', " \
	"N'started_at', N'ended_at', N'outcome', N'exit_code', N'exit_signal', N'duration_ms', " \
	"N'error', N'actor', N'recorded_at'"
static int make_schema(struct ms_store *st)
{
	const char *t = st->table;
	struct param p[] = { { "@wait", NULL, st->cur_s * 1000 > 1000 ? st->cur_s * 1000 - 500 : 500 } };
	char sql[4 * SQL_MAX];

	snprintf(sql, sizeof sql,
	    "/* leash:schema */ SET NOCOUNT ON; SET XACT_ABORT ON; " ISO
	    "BEGIN TRANSACTION; "
	    "DECLARE @lock INT; "
	    "EXEC @lock = sp_getapplock @Resource = N'leash:schema:%1$s', @LockMode = 'Exclusive', "
	    "@LockOwner = 'Transaction', @LockTimeout = @wait; "
	    "IF @lock < 0 THROW 51000, N'leash: the schema lock of table %1$s was not granted "
	    "in time (another replica is making or changing the tables)', 1; "
	    "IF OBJECT_ID(N'[%1$s]', N'U') IS NULL "
	    "CREATE TABLE [%1$s] ("
	    "name " VC " COLLATE Latin1_General_BIN2 NOT NULL PRIMARY KEY, "
	    "owner " VC " COLLATE Latin1_General_BIN2 NOT NULL, "
	    "token BIGINT NOT NULL, acquired_at BIGINT NOT NULL, "
	    "renewed_at BIGINT NOT NULL, expires_at BIGINT NOT NULL, last_fire BIGINT NULL, "
	    "paused_until BIGINT NULL, trigger_at BIGINT NULL, handoff_at BIGINT NULL, "
	    "health INT NULL, handoff_to " VC " COLLATE Latin1_General_BIN2 NULL) "
	    "ELSE BEGIN "
	    ADD_COLUMN("last_fire", "BIGINT") ADD_COLUMN("paused_until", "BIGINT")
	    ADD_COLUMN("trigger_at", "BIGINT") ADD_COLUMN("handoff_at", "BIGINT")
	    ADD_COLUMN("health", "INT")
	    ADD_COLUMN("handoff_to", VC " COLLATE Latin1_General_BIN2")
	    "END; "
	    "IF OBJECT_ID(N'[%1$s_runs]', N'U') IS NULL BEGIN "
	    "CREATE TABLE [%1$s_runs] ("
	    "job " VC " COLLATE Latin1_General_BIN2 NOT NULL, "
	    "scheduled_at BIGINT NOT NULL, "
	    "owner " VC " COLLATE Latin1_General_BIN2 NOT NULL, "
	    "token BIGINT NOT NULL, claimed_at BIGINT NULL, started_at BIGINT NULL, "
	    "ended_at BIGINT NULL, outcome " OC " NOT NULL, exit_code INT NULL, "
	    "exit_signal INT NULL, duration_ms BIGINT NULL, error " EC " NULL, "
	    "actor " VC " NULL, recorded_at BIGINT NOT NULL, run_id BIGINT NULL, "
	    "how " OC " NULL, "
	    "PRIMARY KEY (job, scheduled_at, owner)); "
	    "CREATE INDEX [%1$s_runs_at] ON [%1$s_runs] (scheduled_at); "
	    "CREATE INDEX [%1$s_runs_running] ON [%1$s_runs] (job, token) "
	    "WHERE outcome = N'running'; END "
	    /* A ledger of an older leash (one with every column check_runs
	     * asks for; it refuses any other, left as it was) gets the columns
	     * added since. */
	    "ELSE IF (SELECT COUNT(*) FROM sys.columns WHERE object_id = "
	    "OBJECT_ID(N'[%1$s_runs]') AND name IN (" RUN_NEEDED ")) = 14 BEGIN "
	    ADD_COLUMN_TO("%1$s_runs", "run_id", "BIGINT") ADD_COLUMN_TO("%1$s_runs", "how", OC)
	    "END; "
	    "IF OBJECT_ID(N'[%1$s_replicas]', N'U') IS NULL "
	    "CREATE TABLE [%1$s_replicas] ("
	    "owner " VC " COLLATE Latin1_General_BIN2 NOT NULL PRIMARY KEY, "
	    "host " VC " NOT NULL, pid BIGINT NOT NULL, version NVARCHAR(32) NOT NULL, "
	    "started_at BIGINT NOT NULL, heartbeat BIGINT NOT NULL, "
	    "draining INT NOT NULL DEFAULT 0, jobs_hash NVARCHAR(32) NOT NULL, "
	    "jobs NVARCHAR(MAX) NOT NULL); "
	    "IF NOT EXISTS (SELECT 1 FROM sys.columns WHERE object_id = OBJECT_ID(N'[%1$s_replicas]') "
	    "AND name = N'broken') ALTER TABLE [%1$s_replicas] ADD broken NVARCHAR(MAX) NULL; "
	    "COMMIT;", t);
	return call(st, sql, "@wait BIGINT", p, 1, NULL, NULL);
}

static void first_row(struct ms_store *st, int resno, void *arg)
{
	if (!*(char *)arg)
		col_str(st->db, 1, arg, 64);
}

/* The first name a check's batch answers, into missing[64] ("" when none). */
static int first_missing(struct ms_store *st, const char *sql, char *missing)
{
	missing[0] = '\0';
	return call(st, sql, "", NULL, 0, first_row, missing);
}

/* A READ or WRITE open's check that leash run made the tables (it makes
 * none, and takes no schema lock): the first missing one is the no-table
 * error (kind REFUSED). */
static int check_schema(struct ms_store *st)
{
	char sql[SQL_MAX], where[512], missing[64];

	snprintf(sql, sizeof sql,
	    "/* leash:check_schema */ SET NOCOUNT ON; "
	    "SELECT c.name FROM (VALUES (1, N'[%1$s]'), (2, N'[%1$s_runs]'), "
	    "(3, N'[%1$s_replicas]')) AS c (i, name) "
	    "WHERE OBJECT_ID(c.name, N'U') IS NULL ORDER BY c.i;", st->table);
	if (first_missing(st, sql, missing) != STORE_OK)
		return STORE_ERR;
	if (!missing[0])
		return STORE_OK;
	snprintf(where, sizeof where, "%s:%d database %s", st->host, st->port, st->database);
	missing[strcspn(missing, "]")] = '\0';             /* [name] -> name */
	store_no_table(st->base.err, sizeof st->base.err, "mssql", where,
	               missing + (missing[0] == '['));
	st->base.kind = STORE_E_REFUSED;
	return STORE_ERR;
}

/* Refuses a ledger table that lacks a column, naming the first: a table
 * someone else made is refused, never altered. */
static int check_runs(struct ms_store *st)
{
	char sql[SQL_MAX], missing[64];

	snprintf(sql, sizeof sql,
	    "/* leash:check_runs */ SET NOCOUNT ON; "
	    "SELECT c.name FROM (VALUES (1, N'job'), (2, N'scheduled_at'), (3, N'owner'), "
	    "(4, N'token'), (5, N'claimed_at'), (6, N'started_at'), (7, N'ended_at'), "
	    "(8, N'outcome'), (9, N'exit_code'), (10, N'exit_signal'), (11, N'duration_ms'), "
	    "(12, N'error'), (13, N'actor'), (14, N'recorded_at')) AS c (i, name) "
	    "WHERE COL_LENGTH(N'[%s_runs]', c.name) IS NULL ORDER BY c.i;", st->table);
	if (first_missing(st, sql, missing) != STORE_OK)
		return STORE_ERR;
	if (missing[0])
		return store_fail(&st->base, "mssql %s:%d: the ledger table %s_runs has no column "
		                  "%s; it was made by something else (nothing was changed: rename or "
		                  "drop it, or use another table)", st->host, st->port, st->table,
		                  missing);
	return STORE_OK;
}

static char *dup_or(const char *s, const char *dflt)
{
	return strdup(s ? s : dflt);
}

static struct store *open_mssql(const struct store_opts *o, char *err, size_t errlen)
{
	struct ms_store *st = NULL;
	const char *table = o->table ? o->table : "leash_leases";

	if (init_dblib(err, errlen) < 0)
		goto fail;
	if (!o->user || !*o->user || !o->database || !*o->database) {
		snprintf(err, errlen, "mssql: user and database are required");
		goto fail;
	}
	if (o->port < 0 || o->port > 65535) {
		snprintf(err, errlen, "mssql: port %d is out of range", o->port);
		goto fail;
	}
	if (!store_valid_table(table)) {
		snprintf(err, errlen, "mssql: table \"%s\" is not a valid identifier", table);
		goto fail;
	}
	st = calloc(1, sizeof *st);
	if (!st) {
		snprintf(err, errlen, "mssql: out of memory");
		goto fail;
	}
	st->base.ops = &ms_ops;
	st->base.drv = &ms_driver;
	st->host = dup_or(o->host, "127.0.0.1");
	st->user = dup_or(o->user, "");
	st->password = dup_or(o->password, "");
	st->database = dup_or(o->database, "");
	if (!st->host || !st->user || !st->password || !st->database) {
		snprintf(err, errlen, "mssql: out of memory");
		goto fail;
	}
	st->port = o->port ? o->port : 1433;
	st->connect_s = secs_of(o->connect_timeout_ms > 0 ? o->connect_timeout_ms : 5000);
	st->stmt_s = secs_of(o->statement_timeout_ms > 0 ? o->statement_timeout_ms : 5000);
	st->cur_s = st->stmt_s;
	snprintf(st->table, sizeof st->table, "%s", table);
	if (build_dialect(st) < 0) {
		snprintf(err, errlen, "mssql: out of memory");
		goto fail;
	}
	if ((o->mode == STORE_RUN ? make_schema(st) : check_schema(st)) != STORE_OK ||
	    check_runs(st) != STORE_OK) {
		snprintf(err, errlen, "%s", st->base.err);
		goto fail;
	}
	st->base.err[0] = '\0';
	return &st->base;
fail:
	if (st)
		ms_free(st);
	return NULL;
}

static void unload_dblib(void)
{
	store_lib_unload(&lib);
}

const struct store_provider store_mssql = { "mssql", open_mssql, "FreeTDS", client_version,
                                            unload_dblib };

/* ---- presence: <table>_replicas ---- */


/* The beat's writes after "DECLARE @now": one transaction for the upsert
 * (draining as store.h's presence rows say) and the prune.  Its parameters
 * are @owner and BEAT_DECL's.  An empty string may arrive as NULL (db-lib),
 * hence the ISNULLs. */
#define BEAT_WRITE \
	"BEGIN TRAN; " \
	"DECLARE @marked INT = CASE WHEN EXISTS (SELECT 1 FROM [%1$s_replicas] " \
	"WHERE owner = @name AND pid = 0) THEN 2 ELSE 0 END; " \
	"UPDATE [%1$s_replicas] WITH (UPDLOCK, HOLDLOCK) SET host = @host, pid = @pid, " \
	"version = ISNULL(@version, N''), heartbeat = @now, " \
	"draining = CASE WHEN draining = 1 THEN 1 ELSE @marked END, " \
	"jobs_hash = ISNULL(@hash, N''), jobs = ISNULL(@jobs, N''), broken = @broken " \
	"WHERE owner = @owner; " \
	"IF @@ROWCOUNT = 0 INSERT INTO [%1$s_replicas] (owner, host, pid, version, started_at, " \
	"heartbeat, draining, jobs_hash, jobs, broken) VALUES (@owner, @host, @pid, " \
	"ISNULL(@version, N''), @now, @now, @marked, ISNULL(@hash, N''), ISNULL(@jobs, N''), " \
	"@broken); " \
	"DELETE FROM [%1$s_replicas] WHERE owner <> @owner AND pid <> 0 " \
	"AND heartbeat < @now - @prune; " \
	"COMMIT; "
#define BEAT_DECL "@host " VC ", @pid BIGINT, @version " VC ", @name " VC ", @hash " VC ", " \
	"@jobs NVARCHAR(MAX), @broken NVARCHAR(MAX), @prune BIGINT"

/* ---- the driver and the dialect (driver.h) ---- */

/* The presence rows after the beat's writes (extra: more columns). */
#define BEAT_READ(extra) \
	"SELECT @now, r.owner, r.host, r.pid, r.version, r.started_at, r.heartbeat, " \
	"r.draining, r.jobs_hash, CASE WHEN r.jobs_hash = ISNULL(@hash, N'') THEN NULL " \
	"ELSE r.jobs END, r.broken" extra " FROM (SELECT 1 AS one) t " \
	"LEFT JOIN [%1$s_replicas] r ON r.pid <> 0 ORDER BY r.owner;"

#define MS_FAILS "(N'failed', N'timeout', N'lost', N'killed')"
/* The RUN columns (driver.h) of r. */
#define READ_COLS "r.job, r.owner, r.actor, r.outcome, r.error, r.scheduled_at, r.token, " \
	"r.claimed_at, r.started_at, r.ended_at, r.duration_ms, r.recorded_at, r.exit_code, " \
	"r.exit_signal, r.run_id, r.how"

/* renew_all's UPDATE of the leases @owner holds unexpired, of the names
 * @n, its OUTPUT the columns listed. */
#define RENEW_SQL(output) \
	"DECLARE @now BIGINT = " NOW "; " \
	"UPDATE [%1$s] SET renewed_at = @now, expires_at = @now + @ms " \
	"OUTPUT " output "WHERE owner = @owner AND expires_at > @now AND " LEASE_OK \
	" AND name IN (@n);"
/* read_runs: newest first, of the rows where says. */
#define READ_SQL(where) \
	"/* leash:read_runs */ SET NOCOUNT ON; " ISO "DECLARE @now BIGINT = " NOW "; " \
	"SELECT @now, " READ_COLS " FROM (SELECT 1 AS one) t LEFT JOIN (SELECT TOP (@limit) * " \
	"FROM [%1$s_runs] WHERE " where "scheduled_at >= @since " \
	"ORDER BY scheduled_at DESC, job, owner) r ON 1 = 1 " \
	"ORDER BY r.scheduled_at DESC, r.job, r.owner;"

/* The CLAIMS table (driver.h) keyed by name, and the names of the claims
 * taken; the answer: (now, i) per claim taken, or (now, NULL). */
#define CLAIMS_DECL \
	"DECLARE @c TABLE (i INT NOT NULL UNIQUE, " \
	"name " VC " COLLATE Latin1_General_BIN2 NOT NULL PRIMARY KEY, " \
	"token BIGINT NOT NULL, fire BIGINT NOT NULL); " \
	"DECLARE @r TABLE (name " VC " COLLATE Latin1_General_BIN2 NOT NULL PRIMARY KEY); "
#define CLAIMS_ANSWER \
	"SELECT @now, x.i FROM (SELECT 1 AS one) t LEFT JOIN (SELECT c.i FROM @c AS c " \
	"INNER JOIN @r AS r ON r.name = c.name) AS x ON 1 = 1;"
/* The UPDATE of the claims' leases: a lease row takes its claim's fire
 * when @owner holds it unexpired with the claim's token and its cursor is
 * below the fire; the names it took go into @r.  An UPDATE ... OUTPUT
 * names its target by the table's name, not in FROM: Babelfish refuses
 * the target joined in FROM (INNER JOIN) and runs it, comma-joined, as a
 * cross product with the whole table (the claims times the leases). */
#define CLAIM_UPDATE \
	"UPDATE [%1$s] SET last_fire = c.fire OUTPUT inserted.name INTO @r FROM @c AS c " \
	"WHERE c.name = [%1$s].name AND [%1$s].owner = @owner AND [%1$s].token = c.token " \
	"AND [%1$s].expires_at > @now AND ([%1$s].last_fire IS NULL OR [%1$s].last_fire < c.fire)"
/* The ledger's columns, in the order the batches write and read them, and
 * @w's columns after its key. */
#define RUN_COLS "job, scheduled_at, owner, token, claimed_at, started_at, ended_at, outcome, " \
	"exit_code, exit_signal, duration_ms, error, actor, recorded_at"
#define W_COLS "token BIGINT NOT NULL, claimed_at BIGINT NULL, started_at BIGINT NULL, " \
	"ended_at BIGINT NULL, outcome " OC " NOT NULL, exit_code INT NULL, " \
	"exit_signal INT NULL, duration_ms BIGINT NULL, error " EC " NULL, actor " VC " NULL"

/* Each statement: its batch (%1$s the table) and its parameters, declared
 * in the catalogue's order.  A batch that writes twice is one transaction
 * (XACT_ABORT ON).  An empty string may arrive as NULL (db-lib), hence the
 * ISNULLs. */
static const struct {
	const char *text, *decl;
} dialect[ST_MAX] = {
	[ST_RELEASE_ALL] = {
	"/* leash:release_all */ SET NOCOUNT ON; "
	"DECLARE @now BIGINT = " NOW "; "
	"UPDATE [%1$s] SET expires_at = @now "
	"WHERE owner = @owner AND expires_at > @now AND name IN (@n);",
	"@owner " VC ", @n " VC },
	/* One transaction: the owners' rows, then the marker, counting what
	 * matched. */
	[ST_DRAIN] = {
	"/* leash:drain */ SET NOCOUNT ON; SET XACT_ABORT ON; "
	"DECLARE @now BIGINT = " NOW ", @c BIGINT = 0; "
	"BEGIN TRAN; "
	"UPDATE [%1$s_replicas] SET draining = @on WHERE pid <> 0 AND owner IN (@n); "
	"SET @c = @@ROWCOUNT; "
	"IF @name IS NOT NULL AND @on = 1 BEGIN "
	"UPDATE [%1$s_replicas] WITH (UPDLOCK, HOLDLOCK) SET heartbeat = @now "
	"WHERE owner = @name AND pid = 0; "
	"IF @@ROWCOUNT > 0 BEGIN SET @c = @c + 1 END "
	"ELSE IF NOT EXISTS (SELECT 1 FROM [%1$s_replicas] WHERE owner = @name) BEGIN "
	"INSERT INTO [%1$s_replicas] (owner, host, pid, version, started_at, heartbeat, "
	"draining, jobs_hash, jobs) VALUES (@name, N'', 0, N'', @now, @now, 1, N'', N''); "
	"SET @c = @c + 1; END END; "
	"IF @name IS NOT NULL AND @on = 0 BEGIN "
	"DELETE FROM [%1$s_replicas] WHERE owner = @name AND pid = 0; "
	"SET @c = @c + @@ROWCOUNT; END; "
	"COMMIT; SELECT @now, @c;",
	"@n " VC ", @name " VC ", @on BIGINT" },
	/* One job's rows are a range of the clustered key (job, scheduled_at,
	 * owner), walked backwards; all jobs' go by the scheduled_at index. */
	[ST_READ_JOB] = { READ_SQL("job = @job AND "), "@job " VC ", @since BIGINT, @limit BIGINT" },
	[ST_READ_ALL] = { READ_SQL(""), "@job " VC ", @since BIGINT, @limit BIGINT" },
	/* d walks the clustered key from one job to the next (a recursive CTE: the
	 * anchor is the smallest job, NULL on an empty ledger; the recursive part,
	 * which may hold neither TOP nor MIN, takes the next with ROW_NUMBER: one
	 * seek per job); per job h holds the aggregates and r, per class (0 the last
	 * run, 1 the last ok, 2 the last failure), the latest row, the job's range
	 * of the key walked backwards. */
	[ST_LAST_RUNS] = {
	"/* leash:last_runs */ SET NOCOUNT ON; " ISO "DECLARE @now BIGINT = " NOW "; "
	"WITH d (job) AS (SELECT MIN(job) FROM [%1$s_runs] "
	"UNION ALL SELECT z.job FROM (SELECT x.job, ROW_NUMBER() OVER (ORDER BY x.job) AS rn "
	"FROM [%1$s_runs] AS x INNER JOIN d ON x.job > d.job) AS z WHERE z.rn = 1), "
	"j AS (SELECT d.job, r.owner, r.actor, r.outcome, r.error, r.scheduled_at, r.token, "
	"r.claimed_at, r.started_at, r.ended_at, r.duration_ms, r.recorded_at, r.exit_code, "
	"r.exit_signal, c.cls, h.handled, h.fails "
	"FROM d CROSS APPLY (SELECT "
	"(SELECT MAX(x.scheduled_at) FROM [%1$s_runs] AS x WHERE x.job = d.job "
	"AND x.outcome NOT IN (N'missed', N'control')) AS handled, "
	"(SELECT COUNT_BIG(*) FROM [%1$s_runs] AS x WHERE x.job = d.job AND x.outcome IN " MS_FAILS
	" AND x.scheduled_at > COALESCE((SELECT MAX(o.scheduled_at) FROM [%1$s_runs] AS o "
	"WHERE o.job = d.job AND o.outcome = N'ok'), -1)) AS fails) AS h "
	"CROSS JOIN (VALUES (0), (1), (2)) AS c (cls) "
	"OUTER APPLY (SELECT TOP (1) x.* FROM [%1$s_runs] AS x WHERE x.job = d.job AND "
	"((c.cls = 0 AND x.outcome NOT IN (N'missed', N'skipped-overlap', N'skipped-paused', "
	"N'control')) "
	"OR (c.cls = 1 AND x.outcome = N'ok') OR (c.cls = 2 AND x.outcome IN " MS_FAILS ")) "
	"ORDER BY x.scheduled_at DESC, x.owner DESC) AS r "
	"WHERE d.job IS NOT NULL AND (c.cls = 0 OR r.job IS NOT NULL)) "
	"SELECT @now, j.* FROM (SELECT 1 AS one) t LEFT JOIN j ON 1 = 1 "
	"ORDER BY j.job, j.cls OPTION (MAXRECURSION 0);",
	"" },
	/* Take it when free, expired or ours; insert when missing.  Between the
	 * UPDATE and the INSERT another replica may insert first: its duplicate
	 * key error (2627) ends only the INSERT, and the last SELECT then names
	 * the holder.  @r only says whether this batch wrote the row; the answer
	 * is read from the row: under a concurrent write Babelfish's OUTPUT
	 * gives the values as computed before it waited for the other writer
	 * (a token one too low), while the row has the ones it wrote.  Should
	 * the lease pass to another between the UPDATE and that read, the
	 * answer names the other. */
	[ST_ACQUIRE] = {
	"/* leash:try_acquire */ SET NOCOUNT ON; SET XACT_ABORT OFF; "
	"DECLARE @now BIGINT = " NOW "; "
	"DECLARE @r TABLE (name " VC " NOT NULL); "
	ACQ_UPDATE
	"WHERE name = @name AND (owner = @owner OR expires_at <= @now) AND " LEASE_OK "; "
	"IF NOT EXISTS (SELECT 1 FROM @r) AND NOT EXISTS (SELECT 1 FROM [%1$s] WHERE name = @name) "
	"INSERT INTO [%1$s] (name, owner, token, acquired_at, renewed_at, expires_at) "
	"OUTPUT inserted.name INTO @r VALUES (@name, @owner, 1, @now, @now, @now + @ms); "
	"DECLARE @wrote INT = CASE WHEN EXISTS (SELECT 1 FROM @r) THEN 1 ELSE 0 END; "
	"SELECT CASE WHEN @wrote = 1 AND MAX(owner) = @owner THEN 1 ELSE 0 END, "
	"ISNULL(MAX(owner), N''), ISNULL(MAX(token), 0), ISNULL(MAX(expires_at), 0), @now, "
	"MAX(last_fire) FROM [%1$s] WHERE name = @name;",
	"@name " VC ", @owner " VC ", @ms BIGINT" },
	/* acquire_all: the names into @names, the same UPDATE for every listed
	 * row, then an INSERT for each name that still has no row, one at a
	 * time so that a duplicate key (another replica inserted first) is
	 * caught and fails only that name, which the last SELECT then shows
	 * held by the other.  Any other error is thrown.  @names is keyed by
	 * name first so that the UPDATE meets the rows in key order whatever
	 * order the caller listed them in: two replicas locking the same rows
	 * in opposite orders would deadlock.  @r only names the rows this batch
	 * wrote; the answer is read from the rows, as try_acquire's is. */
	[ST_ACQUIRE_ALL] = {
	"/* leash:acquire_all */ SET NOCOUNT ON; SET XACT_ABORT OFF; "
	"DECLARE @now BIGINT = " NOW "; "
	"DECLARE @names TABLE (i INT NOT NULL UNIQUE, "
	"name " VC " COLLATE Latin1_General_BIN2 NOT NULL, PRIMARY KEY (name, i)); "
	"DECLARE @r TABLE (name " VC " COLLATE Latin1_General_BIN2 NOT NULL PRIMARY KEY); "
	"DECLARE @i INT = 0, @nm " VC "; {@names}"
	ACQ_UPDATE
	"WHERE name IN (SELECT name FROM @names) AND (owner = @owner OR expires_at <= @now) "
	"AND " LEASE_OK "; "
	"WHILE 1 = 1 BEGIN "
	"SELECT TOP (1) @i = n.i, @nm = n.name FROM @names n WHERE n.i > @i "
	"AND NOT EXISTS (SELECT 1 FROM [%1$s] x WHERE x.name = n.name) ORDER BY n.i; "
	"IF @@ROWCOUNT = 0 BREAK; "
	"BEGIN TRY "
	"INSERT INTO [%1$s] (name, owner, token, acquired_at, renewed_at, expires_at) "
	"OUTPUT inserted.name INTO @r VALUES (@nm, @owner, 1, @now, @now, @now + @ms); "
	"END TRY BEGIN CATCH IF ERROR_NUMBER() NOT IN (2627, 2601) THROW; END CATCH "
	"END; "
	"SELECT n.name, CASE WHEN r.name IS NOT NULL AND t.owner = @owner THEN 1 ELSE 0 END, "
	"ISNULL(t.owner, N''), ISNULL(t.token, 0), ISNULL(t.expires_at, 0), @now, "
	"t.last_fire FROM @names n LEFT JOIN @r r ON r.name = n.name "
	"LEFT JOIN [%1$s] t ON t.name = n.name;",
	"@owner " VC ", @ms BIGINT, @names ROWS" },
	/* renew: one UPDATE by key and owner; a row back means renewed, none
	 * means lost, and a lost renew names no holder, as on every provider. */
	[ST_RENEW] = {
	"/* leash:renew */ SET NOCOUNT ON; "
	"DECLARE @now BIGINT = " NOW "; "
	"UPDATE [%1$s] SET renewed_at = @now, expires_at = @now + @ms "
	"OUTPUT 1, inserted.owner, inserted.token, inserted.expires_at, @now, "
	"inserted.last_fire "
	"WHERE name = @name AND owner = @owner AND expires_at > @now AND " LEASE_OK ";",
	"@name " VC ", @owner " VC ", @ms BIGINT" },
	[ST_RELEASE] = {
	"/* leash:release */ SET NOCOUNT ON; "
	"DECLARE @now BIGINT = " NOW "; "
	"UPDATE [%1$s] SET expires_at = @now "
	"WHERE name = @name AND owner = @owner AND expires_at > @now;",
	"@name " VC ", @owner " VC },
	[ST_LIST] = {
	"/* leash:list */ SET NOCOUNT ON; "
	"SELECT " NOW ", l.name, l.owner, l.token, l.acquired_at, l.renewed_at, l.expires_at, "
	"l.last_fire, l.paused_until FROM (SELECT 1 AS one) t LEFT JOIN [%1$s] l ON 1 = 1 "
	"ORDER BY l.name;",
	"" },
	/* A pause inserts a free row when there is none (under a range lock,
	 * so two pauses do not both insert), then sets the column. */
	[ST_CTL_PAUSE] = {
	"/* leash:control */ SET NOCOUNT ON; SET XACT_ABORT ON; "
	"DECLARE @now BIGINT = " NOW "; "
	"BEGIN TRANSACTION; "
	"IF NOT EXISTS (SELECT 1 FROM [%1$s] WITH (UPDLOCK, HOLDLOCK) WHERE name = @name) "
	"INSERT INTO [%1$s] (name, owner, token, acquired_at, renewed_at, expires_at) "
	"VALUES (@name, N'', 0, 0, 0, 0); "
	"UPDATE [%1$s] SET paused_until = @until OUTPUT @now, inserted.name WHERE name = @name; "
	CTL_BUMP
	"COMMIT TRANSACTION;",
	"@name " VC ", @until BIGINT" },
	[ST_CTL_SET] = {
	"/* leash:control */ SET NOCOUNT ON; SET XACT_ABORT ON; "
	"DECLARE @now BIGINT = " NOW "; "
	"BEGIN TRANSACTION; "
	"UPDATE [%1$s] SET "
	"paused_until = CASE WHEN @what = 2 THEN NULL ELSE paused_until END, "
	"trigger_at = CASE WHEN @what = 3 THEN @now ELSE trigger_at END, "
	"handoff_at = CASE WHEN @what = 4 THEN @now ELSE handoff_at END, "
	"handoff_to = CASE WHEN @what = 4 THEN @to ELSE handoff_to END "
	"OUTPUT @now, inserted.name WHERE name = @name; "
	CTL_BUMP
	"COMMIT TRANSACTION;",
	"@name " VC ", @what BIGINT, @to " VC },
	[ST_CTL_VERSION] = {
	"/* leash:ctl_version */ SET NOCOUNT ON; "
	"SELECT " NOW ", (SELECT token FROM [%1$s] WHERE name = N'" STORE_CONTROLS "');",
	"" },
	/* handoff: the target read under the row's update lock, then the one
	 * UPDATE; the answer is a row iff the UPDATE wrote (OUTPUT INTO @r: its
	 * values are not read, as in try_acquire). */
	[ST_HANDOFF] = {
	"/* leash:handoff */ SET NOCOUNT ON; SET XACT_ABORT ON; "
	"DECLARE @now BIGINT = " NOW "; "
	"DECLARE @r TABLE (name " VC " NOT NULL); "
	"BEGIN TRANSACTION; "
	"DECLARE @to " VC " = (SELECT l.handoff_to FROM [%1$s] AS l WITH (UPDLOCK, HOLDLOCK) "
	"WHERE l.name = @name AND l.owner = @owner AND l.expires_at > @now "
	"AND l.handoff_to <> @owner AND EXISTS (SELECT 1 FROM [%1$s_replicas] AS r "
	"WHERE r.owner = l.handoff_to AND r.pid <> 0 AND r.draining = 0 "
	"AND r.heartbeat > @now - @live)); "
	"UPDATE [%1$s] SET owner = COALESCE(@to, owner), "
	"token = CASE WHEN @to IS NULL THEN token ELSE token + 1 END, "
	"acquired_at = CASE WHEN @to IS NULL THEN acquired_at ELSE @now END, "
	"renewed_at = CASE WHEN @to IS NULL THEN renewed_at ELSE @now END, "
	"expires_at = CASE WHEN @to IS NULL THEN @now ELSE @now + @ms END, "
	"handoff_to = NULL OUTPUT inserted.name INTO @r "
	"WHERE name = @name AND owner = @owner AND expires_at > @now; "
	"COMMIT TRANSACTION; "
	"SELECT ISNULL(@to, N''), @now FROM @r;",
	"@name " VC ", @owner " VC ", @ms BIGINT, @live BIGINT" },
	[ST_HEALTH] = {
	"/* leash:health */ SET NOCOUNT ON; "
	"DECLARE @now BIGINT = " NOW "; "
	"UPDATE [%1$s] SET health = @failing OUTPUT inserted.name "
	"WHERE name = @name AND owner = @owner AND token = @token AND expires_at > @now "
	"AND COALESCE(health, 0) <> @failing;",
	"@name " VC ", @owner " VC ", @token BIGINT, @failing BIGINT" },
	[ST_LEAVE] = {
	"/* leash:leave */ SET NOCOUNT ON; DELETE FROM [%1$s_replicas] WHERE owner = @owner;",
	"@owner " VC },
	[ST_REPLICAS] = {
	"/* leash:replicas */ SET NOCOUNT ON; "
	"SELECT " NOW ", r.owner, r.host, r.pid, r.version, r.started_at, r.heartbeat, "
	"r.draining, r.jobs_hash, r.jobs, r.broken FROM (SELECT 1 AS one) t "
	"LEFT JOIN [%1$s_replicas] r ON r.pid <> 0 ORDER BY r.owner;",
	"" },
	[ST_BEAT] = {
	"/* leash:beat */ SET NOCOUNT ON; SET XACT_ABORT ON; "
	"DECLARE @now BIGINT = " NOW "; "
	BEAT_WRITE BEAT_READ(""),
	"@owner " VC ", " BEAT_DECL },
	[ST_HELD] = {
	"/* leash:held */ SET NOCOUNT ON; "
	"SELECT name, token FROM [%1$s] "
	"WHERE owner = @owner AND expires_at > " NOW " AND name IN (@n);",
	"@owner " VC ", @n " VC },
	[ST_RENEW_ALL] = {
	"/* leash:renew_all */ SET NOCOUNT ON; "
	RENEW_SQL("inserted.name, inserted.token "),
	"@owner " VC ", @n " VC ", @ms BIGINT" },
	[ST_RENEW_CTL] = {
	"/* leash:renew_ctl */ SET NOCOUNT ON; "
	RENEW_SQL("inserted.name, inserted.token, inserted.paused_until, inserted.trigger_at, "
	          "inserted.handoff_at, @now "),
	"@owner " VC ", @n " VC ", @ms BIGINT" },
	/* renew_ctl's UPDATE, then the beat (its own transaction), so a failed
	 * beat fails the call and the renew counts for nothing. */
	[ST_RENEW_BEAT] = {
	"/* leash:renew_beat */ SET NOCOUNT ON; SET XACT_ABORT ON; "
	RENEW_SQL("@now, inserted.name, NULL, inserted.token, NULL, inserted.paused_until, "
	          "inserted.trigger_at, NULL, NULL, NULL, NULL, 'L', inserted.handoff_at ") " "
	BEAT_WRITE BEAT_READ(", 'R', NULL"),
	"@owner " VC ", " BEAT_DECL ", @n " VC ", @ms BIGINT" },
	/* repair: the row as it was, under an update lock kept to the end;
	 * the new token (one above every sane one of the table and the job's
	 * ledger rows); the row's reset and the ledger rows' delete; then the
	 * answer. */
	[ST_REPAIR] = {
	"/* leash:repair */ SET NOCOUNT ON; SET XACT_ABORT ON; "
	"DECLARE @now BIGINT = " NOW "; "
	"DECLARE @found INT = 0, @token BIGINT = NULL, @fire BIGINT = NULL, @bad INT = 0, "
	"@top BIGINT, @dropped BIGINT = 0; "
	"BEGIN TRANSACTION; "
	"SELECT @found = 1, @token = token, @fire = last_fire, "
	"@bad = CASE WHEN " LEASE_OK " THEN 0 ELSE 1 END "
	"FROM [%1$s] WITH (UPDLOCK, HOLDLOCK) WHERE name = @name; "
	"SELECT @top = ISNULL(MAX(x.t), 0) + 1 FROM (SELECT token AS t FROM [%1$s] WHERE "
	STORE_SQL_TOKEN_OK("token") " UNION ALL SELECT token FROM [%1$s_runs] "
	"WHERE job = @name AND " STORE_SQL_TOKEN_OK("token") ") AS x; "
	"IF @bad = 1 UPDATE [%1$s] SET token = @top, owner = N'', expires_at = @now, "
	"last_fire = CASE WHEN " STORE_SQL_FIRE_OK("last_fire") " THEN last_fire ELSE NULL END "
	"WHERE name = @name; "
	"DELETE FROM [%1$s_runs] WHERE job = @name AND NOT " STORE_SQL_RUN_OK("") "; "
	"SET @dropped = @@ROWCOUNT; "
	"COMMIT TRANSACTION; "
	"SELECT @now, @found, @token, @fire, @bad, CASE WHEN @bad = 1 THEN @top ELSE @token END, "
	"@dropped;",
	"@name " VC },
	[ST_CORRUPT_RUNS] = {
	"/* leash:corrupt_runs */ SET NOCOUNT ON; "
	"SELECT TOP (" STORE_SQL_STR(STORE_BAD_RUNS_MAX) ") job, scheduled_at FROM [%1$s_runs] "
	"WHERE " STORE_SQL_RUN_AT_BAD " ORDER BY job, scheduled_at;",
	"" },
	/* Claims: @c keyed by name (so the UPDATE meets the lease rows in key
	 * order, whatever order the caller listed them in), one UPDATE of the
	 * leases it takes (their names into @r), and the answer with the
	 * batch's one clock reading. */
	[ST_CLAIM_ALL] = {
	"/* leash:claim_all */ SET NOCOUNT ON; SET XACT_ABORT ON; "
	"DECLARE @now BIGINT = " NOW "; " CLAIMS_DECL "{@c}" CLAIM_UPDATE "; " CLAIMS_ANSWER,
	"@owner " VC ", @c ROWS 650" },
	/* The cursors step back and the fires' unstarted rows go, in one
	 * transaction. */
	[ST_UNCLAIM_ALL] = {
	"/* leash:unclaim_all */ SET NOCOUNT ON; SET XACT_ABORT ON; " ISO
	"DECLARE @now BIGINT = " NOW "; " CLAIMS_DECL "{@c}"
	"BEGIN TRANSACTION; "
	"UPDATE [%1$s] SET last_fire = CASE WHEN c.fire > 0 THEN c.fire - 1 END "
	"OUTPUT inserted.name INTO @r FROM @c AS c WHERE c.name = [%1$s].name "
	"AND [%1$s].owner = @owner AND [%1$s].token = c.token "
	"AND [%1$s].last_fire = c.fire; "
	"DELETE x FROM [%1$s_runs] AS x INNER JOIN @c AS c ON c.name = x.job "
	"INNER JOIN @r AS r ON r.name = c.name "
	"WHERE x.scheduled_at = c.fire AND x.owner = @owner "
	"AND x.outcome = 'running' AND x.started_at IS NULL; "
	"COMMIT; " CLAIMS_ANSWER,
	"@owner " VC ", @c ROWS 650" },
	/* claim_all's UPDATE and, in the same transaction, the rows of the
	 * claims it took: those whose key exists replaced whole, the others
	 * inserted; claimed_at is @now. */
	[ST_CLAIM_RUNS] = {
	"/* leash:claim_runs */ SET NOCOUNT ON; SET XACT_ABORT ON; " ISO
	"DECLARE @now BIGINT = " NOW "; " CLAIMS_DECL
	"DECLARE @w TABLE (i INT NOT NULL, scheduled_at BIGINT NOT NULL, "
	"owner " VC " COLLATE Latin1_General_BIN2 NOT NULL, " W_COLS ", "
	"PRIMARY KEY (i, scheduled_at, owner)); "
	"{@c}{@w}BEGIN TRANSACTION; " CLAIM_UPDATE "; "
	"UPDATE x SET token = w.token, claimed_at = @now, started_at = w.started_at, "
	"ended_at = w.ended_at, outcome = w.outcome, exit_code = w.exit_code, "
	"exit_signal = w.exit_signal, duration_ms = w.duration_ms, error = w.error, "
	"actor = w.actor, recorded_at = @now "
	"FROM [%1$s_runs] AS x, @c AS c, @r AS r, @w AS w WHERE c.name = x.job "
	"AND r.name = c.name AND w.i = c.i AND w.scheduled_at = x.scheduled_at "
	"AND w.owner = x.owner; "
	"INSERT INTO [%1$s_runs] (" RUN_COLS ") "
	"SELECT c.name, w.scheduled_at, w.owner, w.token, @now, w.started_at, "
	"w.ended_at, w.outcome, w.exit_code, w.exit_signal, w.duration_ms, w.error, "
	"w.actor, @now FROM @w AS w INNER JOIN @c AS c ON c.i = w.i "
	"INNER JOIN @r AS r ON r.name = c.name "
	"WHERE NOT EXISTS (SELECT 1 FROM [%1$s_runs] AS x WITH (UPDLOCK, HOLDLOCK) "
	"WHERE x.job = c.name AND x.scheduled_at = w.scheduled_at AND x.owner = w.owner); "
	"COMMIT; " CLAIMS_ANSWER,
	"@owner " VC ", @c ROWS 650, @w ROWS" },
	/* The rows into @w, then one UPDATE of those that exist (a NULL keeps
	 * the stored field) and one INSERT of the others, in one transaction. */
	[ST_RECORD_RUNS] = {
	"/* leash:record_runs */ SET NOCOUNT ON; SET XACT_ABORT ON; " ISO
	"DECLARE @now BIGINT = " NOW "; "
	"DECLARE @w TABLE (job " VC " COLLATE Latin1_General_BIN2 NOT NULL, "
	"scheduled_at BIGINT NOT NULL, owner " VC " COLLATE Latin1_General_BIN2 NOT NULL, "
	W_COLS ", run_id BIGINT NULL, how " OC " NULL, PRIMARY KEY (job, scheduled_at, owner)); "
	"{@w}BEGIN TRANSACTION; "
	"UPDATE x SET token = w.token, outcome = w.outcome, "
	"claimed_at = COALESCE(w.claimed_at, x.claimed_at), "
	"started_at = COALESCE(w.started_at, x.started_at), "
	"ended_at = COALESCE(w.ended_at, x.ended_at), "
	"exit_code = COALESCE(w.exit_code, x.exit_code), "
	"exit_signal = COALESCE(w.exit_signal, x.exit_signal), "
	"duration_ms = COALESCE(w.duration_ms, x.duration_ms), "
	"error = COALESCE(w.error, x.error), actor = COALESCE(w.actor, x.actor), "
	"run_id = COALESCE(w.run_id, x.run_id), how = COALESCE(w.how, x.how), "
	"recorded_at = @now "
	"FROM [%1$s_runs] AS x WITH (UPDLOCK, HOLDLOCK), @w AS w "
	"WHERE w.job = x.job AND w.scheduled_at = x.scheduled_at AND w.owner = x.owner; "
	"INSERT INTO [%1$s_runs] (" RUN_COLS ", run_id, how) "
	"SELECT w.job, w.scheduled_at, w.owner, w.token, w.claimed_at, w.started_at, "
	"w.ended_at, w.outcome, w.exit_code, w.exit_signal, w.duration_ms, w.error, "
	"w.actor, @now, w.run_id, w.how FROM @w AS w "
	"WHERE NOT EXISTS (SELECT 1 FROM [%1$s_runs] AS x WITH (UPDLOCK, HOLDLOCK) "
	"WHERE x.job = w.job AND x.scheduled_at = w.scheduled_at AND x.owner = w.owner); "
	"COMMIT;",
	"@w ROWS" },
	/* Three steps sharing max_rows (each TOP of what the earlier left), each by
	 * an index, as on the other providers:
	 * lost: running rows below their lease's token (the filtered index on
	 * (job, token)), unless old enough for the age step;
	 * age: rows scheduled before db now - keep (the scheduled_at index);
	 * per job: for each lease, its keep_per_job-th newest row (scheduled_at
	 * DESC, owner DESC: its range of the primary key walked backwards, an
	 * OFFSET inside one job, never a window over the table), and that job's
	 * rows below it by the same key, but no running row (a run still going
	 * keeps its row) and none this call marked lost. */
	[ST_PRUNE_RUNS] = {
	"/* leash:prune_runs */ SET NOCOUNT ON; SET XACT_ABORT ON; " ISO
	"DECLARE @now BIGINT = " NOW "; "
	"DECLARE @cut BIGINT = @now - @keep, @n BIGINT = 0; "
	"DECLARE @lost TABLE (job " VC " COLLATE Latin1_General_BIN2 NOT NULL, "
	"scheduled_at BIGINT NOT NULL, owner " VC " COLLATE Latin1_General_BIN2 NOT NULL, "
	"PRIMARY KEY (job, scheduled_at, owner)); "
	"UPDATE TOP (@max) [%1$s_runs] SET outcome = N'lost', recorded_at = @now, "
	"error = COALESCE([%1$s_runs].error, N" STORE_SQL_LOST_WHY ") "
	"OUTPUT inserted.job, inserted.scheduled_at, inserted.owner INTO @lost "
	"FROM [%1$s] AS l WHERE l.name = [%1$s_runs].job "
	"AND [%1$s_runs].outcome = N'running' AND [%1$s_runs].token < l.token "
	"AND [%1$s_runs].scheduled_at >= @cut; "
	"SET @n = @@ROWCOUNT; "
	"IF @n < @max BEGIN "
	"DELETE TOP (@max - @n) FROM [%1$s_runs] WHERE scheduled_at < @cut; "
	"SET @n = @n + @@ROWCOUNT; END; "
	"IF @n < @max BEGIN "
	"DELETE TOP (@max - @n) x FROM [%1$s_runs] AS x INNER JOIN "
	"(SELECT l.name, k.scheduled_at, k.owner FROM [%1$s] AS l CROSS APPLY "
	"(SELECT r.scheduled_at, r.owner FROM [%1$s_runs] AS r WHERE r.job = l.name "
	"ORDER BY r.scheduled_at DESC, r.owner DESC "
	"OFFSET @per_job - 1 ROWS FETCH NEXT 1 ROWS ONLY) AS k) AS cut "
	"ON x.job = cut.name AND (x.scheduled_at < cut.scheduled_at "
	"OR (x.scheduled_at = cut.scheduled_at AND x.owner < cut.owner)) "
	"WHERE x.scheduled_at >= @cut AND x.outcome <> N'running' "
	"AND NOT EXISTS (SELECT 1 FROM @lost AS d WHERE d.job = x.job "
	"AND d.scheduled_at = x.scheduled_at AND d.owner = x.owner); "
	"SET @n = @n + @@ROWCOUNT; END; "
	"SELECT @n;",
	"@keep BIGINT, @per_job BIGINT, @max BIGINT" },
	/* The benchmark's floors: a bare round trip through sp_executesql, and a
	 * durable one-row UPDATE of a side table made on first use. */
	[ST_FLOOR_SELECT] = { "/* leash:floor_select */ SELECT 1;", "" },
	[ST_FLOOR_MAKE] = {
	"/* leash:floor_create */ IF OBJECT_ID(N'[%1$s_floor]', N'U') IS NULL "
	"BEGIN BEGIN TRY CREATE TABLE [%1$s_floor] (id INT NOT NULL PRIMARY KEY, "
	"v BIGINT NOT NULL); INSERT INTO [%1$s_floor] VALUES (1, 0); END TRY "
	"BEGIN CATCH IF ERROR_NUMBER() NOT IN (2714, 2627) THROW; END CATCH END;",
	"" },
	[ST_FLOOR_UPDATE] = {
	"/* leash:floor_update */ UPDATE [%1$s_floor] SET v = v + 1 WHERE id = 1;",
	"@key " VC },
};

static int build_dialect(struct ms_store *st)
{
	for (int i = 0; i < ST_MAX; i++) {
		size_t n = (size_t)snprintf(NULL, 0, dialect[i].text, st->table) + 1;

		if (!(st->text[i] = malloc(n)))
			return -1;
		snprintf(st->text[i], n, dialect[i].text, st->table);
	}
	return 0;
}

#define PARAMS_MAX 16
#define PNAME_MAX 32                    /* a declared parameter's name */
#define ENAME_MAX (PNAME_MAX + 21)      /* an array element's: the name and a number */

/* The callback under call()'s: the first failure stops the others. */
struct exec_rows {
	store_row_fn row;
	void *arg;
	int failed;
};

static void exec_row(struct ms_store *st, int resno, void *arg)
{
	struct exec_rows *x = arg;

	if (!x->failed && x->row(&st->base, x->arg, resno) < 0)
		x->failed = 1;
}

/* Appends to *buf (at *len of *cap bytes) n bytes of src; -1 when out of
 * memory. */
static int put(char **buf, size_t *len, size_t *cap, const char *src, size_t n)
{
	if (*len + n + 1 > *cap) {
		size_t c = (*len + n + 1) * 2;
		char *p = realloc(*buf, c);

		if (!p)
			return -1;
		*buf = p;
		*cap = c;
	}
	memcpy(*buf + *len, src, n);
	*len += n;
	(*buf)[*len] = '\0';
	return 0;
}

/* src with each name (not followed by more of a name) as "name1, ...,
 * nameN", each followed by type when given, which the name is in src too
 * (a declaration); NULL when out of memory. */
static char *expand(const char *src, const char *name, size_t n, const char *type)
{
	size_t len = 0, cap = 0, nl = strlen(name);
	char *out = NULL, item[2 * PNAME_MAX + 32];
	int bad = put(&out, &len, &cap, "", 0);

	while (!bad && *src) {
		const char *hit = strstr(src, name);
		char c;

		if (!hit) {
			bad = put(&out, &len, &cap, src, strlen(src));
			break;
		}
		c = hit[nl];
		bad = put(&out, &len, &cap, src, (size_t)(hit - src));
		src = hit + nl;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '_') {
			bad = bad || put(&out, &len, &cap, name, nl);
			continue;
		}
		if (type && *src == ' ')        /* the declaration: "@n TYPE" */
			src += 1 + strcspn(src + 1, ",");
		for (size_t k = 0; k < n && !bad; k++) {
			int m = snprintf(item, sizeof item, "%s%s%zu%s%s", k ? ", " : "", name, k + 1,
			                 type ? " " : "", type ? type : "");

			bad = put(&out, &len, &cap, item, (size_t)m);
		}
	}
	if (bad) {
		free(out);
		return NULL;
	}
	return out;
}

/* ---- tables (SP_ROWS): multi-row VALUES lists in batches ----
 *
 * A table's rows go into the table variable of its name, which the batch
 * declares, where the batch says {@name}: INSERT ... VALUES lists of at
 * most ROWS_MAX rows.  A row's first cell, when a number (a row number),
 * is written as it is; every other value is a parameter bound once per
 * batch however many rows share it: the distinct strings as @s<k>
 * (NVARCHAR(1024)), the distinct numbers as @v<k> (BIGINT), a NULL as the
 * word NULL.  The batch's text grows with its rows and nothing in it is
 * read more than once, so the cost is linear in the rows.  A batch ends
 * where the next row (of two tables: the next row of the first with the
 * rows of the second that name it) could need more parameters than SQL
 * Server's 2,100 allow, or past BATCH_ROWS rows, or past the rows of the
 * first table its declaration allows a batch ("@c ROWS 650": the claims'
 * batches stay the size they were measured at).  No MERGE (its races and
 * bugs are well known) and no OPENJSON (not on every server we support). */
#define PARAM_BUDGET 2000       /* parameters per batch (< 2,100, with @stmt and @params) */
#define BATCH_ROWS 5000         /* rows per batch, whatever they share */
#define POOL_CAP PARAM_BUDGET   /* distinct values per batch */
#define POOL_SLOTS 4096         /* > 2 * POOL_CAP: each kind's hash table */

/* One batch being built: its text, its declarations and its parameters
 * (their names, 8 bytes each, in names). */
struct batch {
	char *sql, *decl, *names;
	size_t sl, sqlmax, dl, declmax;
	struct param *p;
	int np, maxp;
};

static void app(char *buf, size_t *len, size_t max, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void app(char *buf, size_t *len, size_t max, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*len >= max)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf + *len, max - *len, fmt, ap);
	va_end(ap);
	*len = n < 0 ? max : *len + (size_t)n < max ? *len + (size_t)n : max;
}

static int batch_init(struct batch *b, size_t sqlmax, int maxp)
{
	b->sqlmax = sqlmax;
	b->declmax = 64 + (size_t)maxp * 32;
	b->maxp = maxp;
	b->sql = malloc(b->sqlmax);
	b->decl = malloc(b->declmax);
	b->names = malloc((size_t)maxp * 8);
	b->p = malloc((size_t)maxp * sizeof *b->p);
	b->sl = b->dl = 0;
	b->np = 0;
	return b->sql && b->decl && b->names && b->p ? 0 : -1;
}

static void batch_free(struct batch *b)
{
	free(b->sql);
	free(b->decl);
	free(b->names);
	free(b->p);
}

static void batch_reset(struct batch *b)
{
	b->sl = b->dl = 0;
	b->np = 0;
	b->decl[0] = '\0';
}

/* The distinct values of one kind: an open-addressing table of 1-based
 * indexes; pos[i] is value i's slot, so that the values added last can be
 * taken back (no earlier value's probe runs through them). */
struct valset {
	int n;
	int pos[POOL_CAP];
	int slot[POOL_SLOTS];
};

/* The distinct values of one batch.  mark_s/mark_v: the counts to go back to
 * (pool_undo). */
struct pool {
	struct valset s, v;
	const char *strs[POOL_CAP];
	int64_t nums[POOL_CAP];
	int mark_s, mark_v;
};

static void pool_clear(struct pool *pl)
{
	memset(pl->s.slot, 0, sizeof pl->s.slot);
	memset(pl->v.slot, 0, sizeof pl->v.slot);
	pl->s.n = pl->v.n = 0;
}

static int pool_size(const struct pool *pl)
{
	return pl->s.n + pl->v.n;
}

static void pool_mark(struct pool *pl)
{
	pl->mark_s = pl->s.n;
	pl->mark_v = pl->v.n;
}

/* Takes back the values added since pool_mark(). */
static void pool_undo(struct pool *pl)
{
	while (pl->s.n > pl->mark_s)
		pl->s.slot[pl->s.pos[--pl->s.n]] = 0;
	while (pl->v.n > pl->mark_v)
		pl->v.slot[pl->v.pos[--pl->v.n]] = 0;
}

/* String v's index (1-based), added when missing; 0 for NULL ("" too:
 * db-lib sends it as NULL).  The caller keeps room for it (POOL_CAP). */
static int pool_str(struct pool *pl, const char *v)
{
	uint32_t h = 2166136261u;
	size_t at;

	if (!v || !*v)
		return 0;
	for (const char *c = v; *c; c++)
		h = (h ^ (unsigned char)*c) * 16777619u;
	for (at = h % POOL_SLOTS; pl->s.slot[at]; at = (at + 1) % POOL_SLOTS)
		if (strcmp(pl->strs[pl->s.slot[at] - 1], v) == 0)
			return pl->s.slot[at];
	pl->strs[pl->s.n] = v;
	pl->s.pos[pl->s.n++] = (int)at;
	pl->s.slot[at] = pl->s.n;
	return pl->s.n;
}

/* Number v's index (1-based), added when missing; 0 for -1 when nullable
 * (STORE_NO_TIME, STORE_NO_CODE: NULL). */
static int pool_num(struct pool *pl, int64_t v, int nullable)
{
	uint64_t h = (uint64_t)v * 0x9E3779B97F4A7C15u;
	size_t at;

	if (nullable && v == -1)
		return 0;
	for (at = (size_t)(h >> 40) % POOL_SLOTS; pl->v.slot[at]; at = (at + 1) % POOL_SLOTS)
		if (pl->nums[pl->v.slot[at] - 1] == v)
			return pl->v.slot[at];
	pl->nums[pl->v.n] = v;
	pl->v.pos[pl->v.n++] = (int)at;
	pl->v.slot[at] = pl->v.n;
	return pl->v.n;
}

/* Adds row r of table t to the pool (every value but a numeric first
 * cell); -1 when it might not fit (what it added stays: see pool_group). */
static int pool_row(struct pool *pl, const struct store_param *t, size_t r)
{
	const struct store_param *c = &t->r[r * (size_t)t->cols];

	if (pool_size(pl) + t->cols > POOL_CAP)
		return -1;
	for (int k = 0; k < t->cols; k++)
		if (c[k].kind == SP_TEXT)
			pool_str(pl, c[k].s);
		else if (c[k].kind == SP_INT && k > 0)
			pool_num(pl, c[k].i, 0);
	return 0;
}

/* The rows of the second table grouped by the row of the first they name
 * (first[c] .. first[c + 1] in order[]); -1 when one names none. */
struct groups {
	size_t *first, *order;
};

static int group_rows(struct groups *g, const struct store_param *t1, const struct store_param *t2)
{
	size_t n = t1->n, *fill = malloc((n + 1) * sizeof *fill);
	int rc = -1;

	g->first = calloc(n + 2, sizeof *g->first);
	g->order = malloc((t2->n ? t2->n : 1) * sizeof *g->order);
	if (!fill || !g->first || !g->order)
		goto out;
	for (size_t k = 0; k < t2->n; k++) {
		const struct store_param *c = &t2->r[k * (size_t)t2->cols];

		if (c->kind != SP_INT || c->i < 1 || (uint64_t)c->i > n)
			goto out;
		g->first[c->i]++;
	}
	for (size_t c = 0; c < n; c++)
		g->first[c + 1] += g->first[c];
	memcpy(fill, g->first, (n + 1) * sizeof *fill);
	for (size_t k = 0; k < t2->n; k++)
		g->order[fill[t2->r[k * (size_t)t2->cols].i - 1]++] = k;
	rc = 0;
out:
	free(fill);
	return rc;
}

/* Adds row c of t1 and its rows of t2 to the pool: 0 when they fit with
 * nscal other parameters, else -1 with the pool as it was. */
static int pool_group(struct pool *pl, const struct store_param *t1, const struct store_param *t2,
                      const struct groups *g, size_t c, int nscal)
{
	pool_mark(pl);
	if (pool_row(pl, t1, c) < 0)
		goto undo;
	for (size_t q = t2 ? g->first[c] : 0; t2 && q < g->first[c + 1]; q++)
		if (pool_row(pl, t2, g->order[q]) < 0)
			goto undo;
	if (nscal + pool_size(pl) <= PARAM_BUDGET)
		return 0;
undo:
	pool_undo(pl);
	return -1;
}

/* Appends one cell: its value, or the pool's parameter that holds it. */
static void app_cell(struct batch *b, struct pool *pl, const struct store_param *c, int k)
{
	const char *sep = k ? ", " : "(";
	int i;

	if (c->kind == SP_INT && k == 0)
		app(b->sql, &b->sl, b->sqlmax, "(%lld", (long long)c->i);
	else if (c->kind == SP_INT)
		app(b->sql, &b->sl, b->sqlmax, "%s@v%d", sep, pool_num(pl, c->i, 0));
	else if (c->kind == SP_TEXT && (i = pool_str(pl, c->s)))
		app(b->sql, &b->sl, b->sqlmax, "%s@s%d", sep, i);
	else
		app(b->sql, &b->sl, b->sqlmax, "%sNULL", sep);
}

/* Appends the INSERTs of k rows of table t into @name: rows idx[at..], or
 * at.. when idx is NULL. */
static void app_rows(struct batch *b, struct pool *pl, const char *name,
                     const struct store_param *t, const size_t *idx, size_t at, size_t k)
{
	for (size_t j = 0; j < k; j++) {
		const struct store_param *c = &t->r[(idx ? idx[at + j] : at + j) * (size_t)t->cols];

		app(b->sql, &b->sl, b->sqlmax, j % ROWS_MAX ? ", " : "INSERT INTO %s VALUES ", name);
		for (int x = 0; x < t->cols; x++)
			app_cell(b, pl, &c[x], x);
		app(b->sql, &b->sl, b->sqlmax, ")%s", j % ROWS_MAX == ROWS_MAX - 1 || j == k - 1
		                                       ? "; " : "");
	}
}

/* Binds the pool's values: @s<k> and @v<k>. */
static void bind_pool(struct batch *b, const struct pool *pl)
{
	for (int i = 0; i < pl->s.n; i++) {
		char *pn = b->names + (size_t)b->np * 8;

		snprintf(pn, 8, "@s%hu", (unsigned short)(i + 1));   /* < 2,100 */
		b->p[b->np++] = (struct param){ pn, pl->strs[i], 0 };
		app(b->decl, &b->dl, b->declmax, "%s%s " EC, b->dl ? ", " : "", pn);
	}
	for (int i = 0; i < pl->v.n; i++) {
		char *pn = b->names + (size_t)b->np * 8;

		snprintf(pn, 8, "@v%hu", (unsigned short)(i + 1));
		b->p[b->np++] = (struct param){ pn, NULL, pl->nums[i] };
		app(b->decl, &b->dl, b->declmax, "%s%s BIGINT", b->dl ? ", " : "", pn);
	}
}

/* The text of one batch: the entry's, each {@name} of a table replaced by
 * its rows of the batch (of t1 rows [c0, c1), of t2 their groups'). */
static void table_text(struct batch *b, struct pool *pl, const char *text, const char *n1,
                       const struct store_param *t1, const char *n2,
                       const struct store_param *t2, const struct groups *g, size_t c0,
                       size_t c1)
{
	while (*text) {
		const char *open = strchr(text, '{'), *close;

		if (!open || !(close = strchr(open, '}'))) {
			app(b->sql, &b->sl, b->sqlmax, "%s", text);
			return;
		}
		app(b->sql, &b->sl, b->sqlmax, "%.*s", (int)(open - text), text);
		if (strncmp(open + 1, n1, (size_t)(close - open - 1)) == 0)
			app_rows(b, pl, n1, t1, NULL, c0, c1 - c0);
		else if (t2 && strncmp(open + 1, n2, (size_t)(close - open - 1)) == 0)
			app_rows(b, pl, n2, t2, g->order, g->first[c0], g->first[c1] - g->first[c0]);
		text = close + 1;
	}
}

/* ms_exec for an entry that takes tables (after its other parameters,
 * par[0..nscal) with their declaration decl): as many batches as the
 * rows need, each its own round trip. */
static int exec_tables(struct ms_store *st, int q, const struct param *par, int nscal,
                       const char *decl, const struct store_param *p, int np,
                       char names[][32], struct exec_rows *x)
{
	const struct store_param *t1 = NULL, *t2 = NULL;
	const char *n1 = NULL, *n2 = NULL, *what = store_stmt_what[q];
	struct groups g = { NULL, NULL };
	struct pool *pl = malloc(sizeof *pl);
	struct batch b = { 0 };
	size_t rows, row_text, most = SIZE_MAX;
	const char *cap;
	int rc = STORE_ERR;

	for (int i = 0; i < np; i++)
		if (p[i].kind == SP_ROWS && !t1)
			t1 = &p[i], n1 = names[i];
		else if (p[i].kind == SP_ROWS)
			t2 = &p[i], n2 = names[i];
	/* "@c ROWS 650": at most 650 rows of it a batch. */
	if ((cap = strstr(dialect[q].decl, n1)) && strncmp(cap + strlen(n1), " ROWS ", 6) == 0)
		most = strtoul(cap + strlen(n1) + 6, NULL, 10);
	rows = t1->n + (t2 ? t2->n : 0);
	row_text = 24 * (size_t)(t1->cols > (t2 ? t2->cols : 0) ? t1->cols : t2->cols) + 8;
	if (rows > BATCH_ROWS + 1)
		rows = 2 * BATCH_ROWS;
	if (!pl || batch_init(&b, strlen(st->text[q]) + rows * row_text + 64 * (rows / ROWS_MAX + 4),
	                      nscal + POOL_CAP) < 0 || (t2 && group_rows(&g, t1, t2) < 0)) {
		store_fail(&st->base, "mssql: %s: out of memory, or a row of no row", what);
		goto fail;
	}
	/* A row whose rows cannot go with it in one batch is refused before
	 * any batch goes: nothing is written when the call cannot be whole. */
	for (size_t c = 0; t2 && c < t1->n; c++) {
		const struct store_param *name = &t1->r[c * (size_t)t1->cols + 1];

		pool_clear(pl);
		if (g.first[c + 1] - g.first[c] > BATCH_ROWS || pool_group(pl, t1, t2, &g, c, nscal) < 0) {
			store_fail(&st->base, "mssql %s:%d: %s: \"%s\" carries %zu rows (with their values, "
			           "more than one batch of SQL Server's 2,100 parameters holds)", st->host,
			           st->port, what, name->kind == SP_TEXT ? name->s : "?",
			           g.first[c + 1] - g.first[c]);
			goto fail;
		}
	}
	for (size_t c0 = 0, batches = 0; c0 < t1->n || batches == 0; batches++) {
		size_t c1 = c0, k = 0;

		pool_clear(pl);
		while (c1 < t1->n && c1 - c0 < most) {
			size_t more = t2 ? g.first[c1 + 1] - g.first[c1] : 1;

			if (k + more > BATCH_ROWS || pool_group(pl, t1, t2, &g, c1, nscal) < 0)
				break;          /* this row goes with the next batch */
			k += more;
			c1++;
		}
		if (batches > 0)
			st->base.calls++;
		batch_reset(&b);
		app(b.decl, &b.dl, b.declmax, "%s", decl);
		memcpy(b.p, par, (size_t)nscal * sizeof *par);
		b.np = nscal;
		table_text(&b, pl, st->text[q], n1, t1, n2, t2, &g, c0, c1);
		bind_pool(&b, pl);
		if (b.sl >= b.sqlmax || b.dl >= b.declmax) {    /* app() cut it */
			store_fail(&st->base, "mssql: %s: batch text too long", what);
			goto fail;
		}
		if (call(st, b.sql, b.decl, b.p, b.np, x->row ? exec_row : NULL, x) != STORE_OK ||
		    x->failed)
			goto fail;
		c0 = c1;
	}
	rc = STORE_OK;
fail:
	batch_free(&b);
	free(pl);
	free(g.first);
	free(g.order);
	return rc;
}

/* The names of q's parameters, in order, from its declaration ("@a BIGINT,
 * @b NVARCHAR(200), ..."); an array's element type goes to type and its
 * index to *arr; how many values they all take to *npar; whether one is a
 * table to *tables.  STORE_OK, or the error said. */
static int param_names(struct store *s, int q, const struct store_param *p, int np,
                       char names[][PNAME_MAX], char *type, size_t *arr, size_t *npar,
                       int *tables)
{
	const char *d = dialect[q].decl;

	for (int i = 0; i < np; i++) {
		size_t len;

		*tables |= p[i].kind == SP_ROWS;
		while (*d == ' ' || *d == ',')
			d++;
		len = strcspn(d, " ");
		if (i >= PARAMS_MAX || *d != '@' || len >= PNAME_MAX)
			return store_fail(s, "mssql: %s: parameter %d is not declared",
			                  store_stmt_what[q], i + 1);
		memcpy(names[i], d, len);
		names[i][len] = '\0';
		d += len;
		if (p[i].kind == SP_TEXTS) {
			size_t tl = strcspn(d + 1, ",");

			snprintf(type, PNAME_MAX, "%.*s", (int)tl, d + 1);
			*arr = (size_t)i;
		}
		d += strcspn(d, ",");
		*npar += p[i].kind == SP_TEXTS && p[i].n ? p[i].n : 1;
	}
	return STORE_OK;
}

/* A statement with tables of rows: its scalars bound as they are, the
 * tables (which come last) by exec_tables. */
static int exec_with_tables(struct ms_store *st, int q, const struct store_param *p, int np,
                            char names[][PNAME_MAX], struct param *par, struct exec_rows *x)
{
	/* The tables come last: the declaration's part before them. */
	const char *all = dialect[q].decl, *cut = strstr(all, " ROWS");
	size_t dl = (size_t)(cut - all);
	char *decl;
	int nscal = 0, rc;

	while (dl > 0 && all[dl] != '@')
		dl--;
	while (dl > 0 && (all[dl - 1] == ' ' || all[dl - 1] == ','))
		dl--;
	if (!(decl = strndup(all, dl)))
		return store_fail(&st->base, "mssql: %s: out of memory", store_stmt_what[q]);
	for (int i = 0; i < np; i++)
		if (p[i].kind != SP_ROWS)
			par[nscal++] = (struct param){ names[i], p[i].kind == SP_TEXT ? p[i].s
			                               : p[i].kind == SP_NULL ? "" : NULL, p[i].i };
	rc = exec_tables(st, q, par, nscal, decl, p, np, names, x);
	free(decl);
	return rc;
}

static int ms_exec(struct store *s, int q, const struct store_param *p, int np,
                   store_row_fn row, void *arg)
{
	struct ms_store *st = (struct ms_store *)s;
	char names[PARAMS_MAX][PNAME_MAX], type[PNAME_MAX] = "", *text = NULL, *decl = NULL;
	char *elems = NULL;
	struct param *par = NULL;
	struct exec_rows x = { row, arg, 0 };
	size_t npar = 0, arr = (size_t)-1;
	int rc = STORE_ERR, tables = 0;

	if (param_names(s, q, p, np, names, type, &arr, &npar, &tables) != STORE_OK)
		return STORE_ERR;
	if (!(par = malloc((npar ? npar : 1) * sizeof *par)))
		goto oom;
	if (tables) {
		rc = exec_with_tables(st, q, p, np, names, par, &x);
		goto done;
	}
	if (arr != (size_t)-1) {
		/* The array's elements are @n1, @n2, ...: the text lists them
		 * where it says @n, the declaration declares each.  No element is
		 * one NULL: IN (NULL) is nothing. */
		size_t n = p[arr].n ? p[arr].n : 1;

		if (!(elems = malloc(n * ENAME_MAX)) ||
		    !(text = expand(st->text[q], names[arr], n, NULL)) ||
		    !(decl = expand(dialect[q].decl, names[arr], n, type)))
			goto oom;
	}
	npar = 0;
	for (int i = 0; i < np; i++) {
		if (p[i].kind == SP_TEXTS) {
			for (size_t k = 0; k < (p[i].n ? p[i].n : 1); k++) {
				char *en = elems + k * ENAME_MAX;

				snprintf(en, ENAME_MAX, "%.31s%zu", names[i], k + 1);
				par[npar++] = (struct param){ en, p[i].n ? p[i].v[k] : "", 0 };
			}
			continue;
		}
		/* db-lib sends an empty string as NULL. */
		par[npar++] = (struct param){ names[i], p[i].kind == SP_TEXT ? p[i].s
		                                      : p[i].kind == SP_NULL ? "" : NULL, p[i].i };
	}
	rc = call(st, text ? text : st->text[q], decl ? decl : dialect[q].decl, par, (int)npar,
	          row ? exec_row : NULL, &x);
	if (rc == STORE_OK && x.failed)
		rc = STORE_ERR;
	goto done;
oom:
	store_fail(s, "mssql: %s: out of memory", store_stmt_what[q]);
done:
	free(par);
	free(elems);
	free(text);
	free(decl);
	return rc;
}

static int ms_is_null(struct store *s, int c)
{
	struct ms_store *st = (struct ms_store *)s;
	int t = sybdb.dbcoltype(st->db, c + 1);

	if (!sybdb.dbdata(st->db, c + 1))
		return 1;
	/* A number has a length; db-lib may give NULL's data as empty. */
	return sybdb.dbdatlen(st->db, c + 1) <= 0 && (t == SYBINT1 || t == SYBINT2 || t == SYBINT4 ||
	                                        t == SYBINT8 || t == SYBINTN);
}

static int64_t ms_col_int(struct store *s, int c)
{
	return col_i64(((struct ms_store *)s)->db, c + 1);
}

static const char *ms_col_text(struct store *s, int c, size_t *len)
{
	struct ms_store *st = (struct ms_store *)s;
	BYTE *p = sybdb.dbdata(st->db, c + 1);
	DBINT n = sybdb.dbdatlen(st->db, c + 1);

	*len = p && n > 0 ? (size_t)n : 0;
	return (const char *)p;
}

static const struct store_driver ms_driver = { ms_exec, ms_is_null, ms_col_int, ms_col_text,
                                               CHUNK + 2 };
