/* sqlite.c - the lease store on SQLite.
 *
 * Time is SQLite's own clock ('now' is fixed for the length of one
 * statement), so the provider never reads the process clock itself; a test
 * VFS can shift that clock (see lstore.c).  Each operation is one statement
 * in autocommit: a write statement takes the WAL write lock before it reads,
 * so several processes sharing the file serialise on busy_timeout.
 * acquire_all is one transaction: BEGIN IMMEDIATE, the try_acquire upsert
 * per name, COMMIT: one write lock, one fsync.  claim_all is one such
 * transaction too: it reads the clock once under the write lock, then
 * judges each claim by that reading.
 * No transaction outlives the call that began it (none spans a sleep, a
 * poll or a run): the write lock is a lock on the file, and a process
 * stopped while it holds it stops every other replica's writes until it
 * resumes (docs/stores.md, "SQLite").
 * The operations written once (ops.c) reach SQLite through the driver at
 * the end of this file: its dialect table holds their statements, an entry
 * of several statements running in one BEGIN IMMEDIATE transaction, a
 * statement over a table of rows once per row.  The schema is still this
 * file's own.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "store/driver.h"

/* libsqlite3 is loaded with dlopen() when the first sqlite store is opened,
 * as libpq and libsybdb are by theirs: a replica on PostgreSQL or SQL
 * Server maps none of it (0.3 MB of its resident set). */
#define SQLITE_FUNCS(X) \
	X(sqlite3_open_v2) X(sqlite3_close_v2) X(sqlite3_busy_timeout) X(sqlite3_exec) \
	X(sqlite3_errmsg) X(sqlite3_free) X(sqlite3_prepare_v2) X(sqlite3_prepare_v3) \
	X(sqlite3_reset) X(sqlite3_clear_bindings) X(sqlite3_finalize) X(sqlite3_step) \
	X(sqlite3_changes) X(sqlite3_get_autocommit) X(sqlite3_bind_text) \
	X(sqlite3_bind_int64) X(sqlite3_bind_int) X(sqlite3_bind_null) X(sqlite3_column_int64) \
	X(sqlite3_column_int) X(sqlite3_column_text) X(sqlite3_column_bytes) \
	X(sqlite3_column_type) X(sqlite3_stricmp) X(sqlite3_libversion) X(sqlite3_vfs_find) \
	X(sqlite3_vfs_register) X(sqlite3_bind_parameter_count) X(sqlite3_column_count) \
	X(sqlite3_extended_errcode) X(sqlite3_db_readonly)

static struct {
#define X(f) __typeof__(f) *f;
	SQLITE_FUNCS(X)
#undef X
} sq;

#define X(f) #f " "
static struct store_lib lib = { "libsqlite3.so.0", "sqlite", "libsqlite3-0", SQLITE_FUNCS(X),
                                &sq, sizeof sq, NULL };
#undef X

struct sqlite3_vfs *store_sqlite_vfs_find(char *err, size_t errlen)
{
	return store_lib_load(&lib, err, errlen) < 0 ? NULL : sq.sqlite3_vfs_find(NULL);
}

int store_sqlite_vfs_register(struct sqlite3_vfs *v)
{
	return lib.handle && sq.sqlite3_vfs_register(v, 1) == SQLITE_OK ? 0 : -1;
}

/* Milliseconds since the Unix epoch on SQLite's clock. */
#define NOW "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)"
/* handoff: the row's handoff_to names another owner whose presence row
 * is live (beat within ?4 ms) and not draining. */
#define TO_LIVE \
	"(handoff_to IS NOT NULL AND handoff_to <> ?2 AND EXISTS (SELECT 1 FROM" \
	" \"%1$s_replicas\" r WHERE r.owner = \"%1$s\".handoff_to AND r.pid <> 0" \
	" AND r.draining = 0 AND r.heartbeat > " NOW " - ?4))"

enum { Q_BEGIN, Q_COMMIT, Q_ROLLBACK, Q_MAX };

/* The ledger row's columns, in the order every run statement binds them. */
#define RUN_COLS \
	"job, scheduled_at, owner, token, claimed_at, started_at, ended_at, outcome," \
	" exit_code, exit_signal, duration_ms, error, actor, recorded_at"
/* A field given as NULL keeps the stored value. */
#define KEEP(c) " " c " = coalesce(excluded." c ", r." c ")"
/* read_runs: newest first, of the rows where says. */
#define READ_SQL(where) \
	"SELECT n.now, r.* FROM (SELECT " NOW " AS now) n LEFT JOIN (SELECT job, owner, actor," \
	" outcome, error, scheduled_at, token, claimed_at, started_at, ended_at, duration_ms," \
	" recorded_at, exit_code, exit_signal, run_id, how FROM \"%1$s_runs\"" \
	" WHERE " where "scheduled_at >= ?2 ORDER BY scheduled_at DESC, job, owner LIMIT ?3) r" \
	" ON 1 ORDER BY r.scheduled_at DESC, r.job, r.owner"

/* The most statements one entry of the catalogue runs in its transaction,
 * and the most parameters it takes (a table's columns each counted). */
#define CHAIN_MAX 10
#define PARAMS_MAX 32


struct sq_store {
	struct store base;
	sqlite3 *db;
	sqlite3_stmt *q[Q_MAX];
	sqlite3_stmt *st[ST_MAX][CHAIN_MAX];    /* the catalogue, each a chain of statements */
	int nst[ST_MAX];
	sqlite3_stmt *cur;              /* the statement whose row a callback reads */
	char table[64];
	int timeout_ms;
	char *path;                     /* a READ open's, to open again (else NULL) */
	int immutable;                  /* ... the file read as immutable (open_read) */
};

static const char *const sql_text[Q_MAX] = {
	[Q_BEGIN] = "BEGIN IMMEDIATE",
	[Q_COMMIT] = "COMMIT",
	[Q_ROLLBACK] = "ROLLBACK",
};

/* The one place SQLite's errors become the store's kinds: the write lock
 * not had within busy_timeout is a timeout; a file that cannot be read or
 * written is gone. */
static enum store_err_kind sq_kind(int code)
{
	switch (code & 0xff) {
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return STORE_E_TIMEOUT;
	case SQLITE_IOERR:
	case SQLITE_CANTOPEN:
	case SQLITE_NOTADB:
	case SQLITE_CORRUPT:
		return STORE_E_GONE;
	case SQLITE_CONSTRAINT:
		return code == SQLITE_CONSTRAINT_PRIMARYKEY || code == SQLITE_CONSTRAINT_UNIQUE
		       ? STORE_E_DUPLICATE : STORE_E_REFUSED;
	default:
		return STORE_E_REFUSED;
	}
}

static int sq_fail(struct sq_store *ss, const char *what)
{
	return store_fail_kind(&ss->base, sq_kind(sq.sqlite3_extended_errcode(ss->db)),
	                       "sqlite: %s: %s", what, sq.sqlite3_errmsg(ss->db));
}

/* Runs one of the transaction statements: SQLITE_DONE or an error. */
static int run_tx(struct sq_store *ss, int q, const char *what)
{
	sqlite3_stmt *st = ss->q[q];
	int step;

	sq.sqlite3_reset(st);
	step = sq.sqlite3_step(st);
	sq.sqlite3_reset(st);
	return step == SQLITE_DONE ? STORE_OK : sq_fail(ss, what);
}

/* Ends the transaction that Q_BEGIN opened: COMMIT when rc is STORE_OK,
 * else ROLLBACK, keeping the first error's message (the rollback's own is
 * moot).  Returns rc, or STORE_ERR when the COMMIT fails. */
static int end_tx(struct sq_store *ss, int rc, const char *what)
{
	if (rc == STORE_OK && (rc = run_tx(ss, Q_COMMIT, what)) == STORE_OK)
		return rc;
	if (sq.sqlite3_get_autocommit(ss->db) == 0) {
		sq.sqlite3_reset(ss->q[Q_ROLLBACK]);
		sq.sqlite3_step(ss->q[Q_ROLLBACK]);
		sq.sqlite3_reset(ss->q[Q_ROLLBACK]);
	}
	return STORE_ERR;
}

/* names as a JSON array, for json_each(). */
static char *json_names(const char *const *names, size_t n)
{
	size_t cap = 3, len = 0;
	char *buf;

	for (size_t i = 0; i < n; i++)
		cap += strlen(names[i]) * 6 + 3;
	if (!(buf = malloc(cap)))
		return NULL;
	buf[len++] = '[';
	for (size_t i = 0; i < n; i++) {
		if (i)
			buf[len++] = ',';
		buf[len++] = '"';
		for (const unsigned char *p = (const unsigned char *)names[i]; *p; p++) {
			if (*p == '"' || *p == '\\') {
				buf[len++] = '\\';
				buf[len++] = (char)*p;
			} else if (*p < 0x20) {
				len += (size_t)sprintf(buf + len, "\\u%04x", *p);
			} else {
				buf[len++] = (char)*p;
			}
		}
		buf[len++] = '"';
	}
	buf[len++] = ']';
	buf[len] = '\0';
	return buf;
}

static void sq_set_timeout(struct store *s, int ms)
{
	struct sq_store *ss = (struct sq_store *)s;

	if (ss->db)
		sq.sqlite3_busy_timeout(ss->db, ms > 0 ? ms : ss->timeout_ms);
}

/* ---- the driver and the dialect (driver.h) ---- */

/* The beat's upsert (draining as store.h says) and prune: ?1 owner, ?2
 * host, ?3 pid, ?4 version, ?5 name, ?6 hash, ?7 jobs, ?8 broken, ?9 prune. */
#define BEAT_WRITE \
	"INSERT INTO \"%1$s_replicas\" (owner, host, pid, version, started_at, heartbeat," \
	" draining, jobs_hash, jobs, broken) VALUES (?1, ?2, ?3, ?4, " NOW ", " NOW "," \
	" 2 * EXISTS (SELECT 1 FROM \"%1$s_replicas\" m WHERE m.owner = ?5 AND m.pid = 0), ?6, ?7," \
	" ?8) ON CONFLICT (owner) DO UPDATE SET host = excluded.host, pid = excluded.pid," \
	" version = excluded.version, heartbeat = excluded.heartbeat," \
	" draining = CASE WHEN draining = 1 THEN 1 ELSE excluded.draining END," \
	" jobs_hash = excluded.jobs_hash, jobs = excluded.jobs, broken = excluded.broken;" \
	"DELETE FROM \"%1$s_replicas\" WHERE owner <> ?1 AND pid <> 0" \
	" AND heartbeat < " NOW " - ?9;"

/* The rows after the beat's writes (extra: more columns). */
#define BEAT_READ(extra) \
	"SELECT n.now, r.owner, r.host, r.pid, r.version, r.started_at, r.heartbeat, r.draining," \
	" r.jobs_hash, CASE WHEN r.jobs_hash = ?6 THEN NULL ELSE r.jobs END, r.broken" extra \
	" FROM (SELECT " NOW " AS now) n LEFT JOIN \"%1$s_replicas\" r ON r.pid <> 0" \
	" ORDER BY r.owner"
/* renew_all's UPDATE of the leases owner (?1) holds unexpired, names and
 * ms the parameters that hold them. */
#define RENEW_SQL(names, ms) \
	"UPDATE \"%1$s\" SET renewed_at = " NOW ", expires_at = " NOW " + " ms \
	" WHERE owner = ?1 AND expires_at > " NOW " AND " LEASE_OK \
	" AND name IN (SELECT value FROM json_each(" names "))"
/* A sane lease row (store.h); try_acquire's conditions on the row before
 * it: free (expired) and sane, or also ours. */
#define LEASE_OK STORE_SQL_LEASE_OK("")
/* Each control grows the controls' version (store.h), in its transaction. */
#define CTL_BUMP \
	"INSERT INTO \"%1$s\" (name, owner, token, acquired_at, renewed_at, expires_at)" \
	" VALUES ('" STORE_CONTROLS "', '', 1, 0, 0, 0)" \
	" ON CONFLICT (name) DO UPDATE SET token = token + 1"
/* try_acquire's upsert, its parameters named, the answer's columns after
 * what answer lists. */
#define ACQUIRE_SQL(name, owner, ms, answer) \
	"INSERT INTO \"%1$s\" AS l (name, owner, token, acquired_at, renewed_at, expires_at)" \
	" VALUES (" name ", " owner ", 1, " NOW ", " NOW ", " NOW " + " ms ")" \
	" ON CONFLICT (name) DO UPDATE SET" \
	"  owner = CASE WHEN " ACQ_FREE " THEN excluded.owner ELSE l.owner END," \
	"  token = CASE WHEN " ACQ_FREE " THEN l.token + 1 ELSE l.token END," \
	"  acquired_at = CASE WHEN " ACQ_FREE " THEN excluded.acquired_at ELSE l.acquired_at END," \
	"  renewed_at = CASE WHEN " ACQ_TAKE " THEN excluded.renewed_at ELSE l.renewed_at END," \
	"  expires_at = CASE WHEN " ACQ_TAKE " THEN excluded.expires_at ELSE l.expires_at END" \
	" RETURNING " answer "owner = " owner " AND " LEASE_OK ", owner, token, expires_at, " NOW \
	", last_fire"
#define ACQ_FREE "(l.expires_at <= excluded.acquired_at AND " STORE_SQL_LEASE_OK("l.") ")"
#define ACQ_TAKE \
	"((l.expires_at <= excluded.acquired_at OR l.owner = excluded.owner) AND " \
	STORE_SQL_LEASE_OK("l.") ")"
/* repair's new token: one above every sane one of the table and the job's
 * ledger rows. */
#define REPAIR_TOP \
	"(max(coalesce((SELECT max(token) FROM \"%1$s\" WHERE " STORE_SQL_TOKEN_OK("token") "), 0)," \
	" coalesce((SELECT max(token) FROM \"%1$s_runs\" WHERE job = ?1 AND " \
	STORE_SQL_TOKEN_OK("token") "), 0)) + 1)"
/* The claims' steps: the clock, each claim the lease takes (row i), the
 * cursors moved; the answer (now, i) per claim taken, or (now, NULL). */
#define CLAIMS_JUDGED \
	"DELETE FROM temp.leash_w;" \
	"INSERT INTO temp.leash_w (i, now) VALUES (0, " NOW ");" \
	"INSERT INTO temp.leash_w (i, name) SELECT ?2, ?3 FROM \"%1$s\"" \
	" WHERE name = ?3 AND owner = ?1 AND token = ?4" \
	" AND expires_at > (SELECT now FROM temp.leash_w WHERE i = 0)" \
	" AND (last_fire IS NULL OR last_fire < ?5);"
#define CLAIMS_MOVED \
	"UPDATE \"%1$s\" SET last_fire = ?5" \
	" WHERE name = ?3 AND EXISTS (SELECT 1 FROM temp.leash_w WHERE i = ?2);"
#define CLAIMS_ANSWER \
	"SELECT z.now, o.i FROM temp.leash_w z LEFT JOIN temp.leash_w o ON o.i > 0" \
	" WHERE z.i = 0 ORDER BY o.i"
/* prune's clock, age cutoff, rows left to change, and the count's update. */
#define W_NOW "(SELECT now FROM temp.leash_w WHERE i = 0)"
#define W_CUT "(SELECT now - ?1 FROM temp.leash_w WHERE i = 0)"
#define W_LEFT "max(0, ?3 - (SELECT n FROM temp.leash_w WHERE i = 0))"
#define W_COUNT "UPDATE temp.leash_w SET n = n + changes() WHERE i = 0;"

/* Each entry: one statement, or several separated by ';' that run in one
 * BEGIN IMMEDIATE transaction.  ?n is the n-th parameter in every one. */
static const char *const dialect[ST_MAX] = {
	/* release_all: release's UPDATE over every listed name, one statement
	 * however many (json_each takes one parameter). */
	[ST_RELEASE_ALL] =
	"UPDATE \"%1$s\" SET expires_at = " NOW
	" WHERE owner = ?1 AND expires_at > " NOW
	" AND name IN (SELECT value FROM json_each(?2))",
	/* drain: each step's count read before it writes (the marker's after
	 * its upsert: 1 iff the name's row is a marker), summed by the caller. */
	[ST_DRAIN] =
	"SELECT " NOW ", count(*) FROM \"%1$s_replicas\""
	" WHERE owner IN (SELECT value FROM json_each(?1)) AND pid <> 0;"
	"UPDATE \"%1$s_replicas\" SET draining = ?3"
	" WHERE owner IN (SELECT value FROM json_each(?1)) AND pid <> 0;"
	"SELECT " NOW ", count(*) FROM \"%1$s_replicas\" WHERE owner = ?2 AND pid = 0 AND ?3 = 0;"
	"DELETE FROM \"%1$s_replicas\" WHERE owner = ?2 AND pid = 0 AND ?3 = 0;"
	"INSERT INTO \"%1$s_replicas\" (owner, host, pid, version, started_at, heartbeat,"
	" draining, jobs_hash, jobs) SELECT ?2, '', 0, '', " NOW ", " NOW ", 1, '', ''"
	" WHERE ?2 IS NOT NULL AND ?3 = 1"
	" ON CONFLICT (owner) DO UPDATE SET heartbeat = excluded.heartbeat WHERE pid = 0;"
	"SELECT " NOW ", count(*) FROM \"%1$s_replicas\" WHERE owner = ?2 AND pid = 0 AND ?3 = 1",
	/* One job's rows walk its primary key (job, scheduled_at, owner)
	 * backwards; all jobs' walk the scheduled_at index. */
	[ST_READ_JOB] = READ_SQL("job = ?1 AND "),
	[ST_READ_ALL] = READ_SQL(""),
	/* last_runs: d walks the primary key from one job to the next (a
	 * skip scan: one probe per job), k finds each job's latest rows of each
	 * class by walking its key backwards; a job keeps its class-0 line even
	 * without a run (for handled_at). */
	[ST_LAST_RUNS] =
	"WITH RECURSIVE d(job) AS (SELECT (SELECT min(job) FROM \"%1$s_runs\")"
	"  UNION ALL SELECT (SELECT min(x.job) FROM \"%1$s_runs\" x WHERE x.job > d.job)"
	"  FROM d WHERE d.job IS NOT NULL),"
	" k AS (SELECT d.job,"
	"  (SELECT x.rowid FROM \"%1$s_runs\" x WHERE x.job = d.job AND x.outcome NOT IN"
	"   ('missed', 'skipped-overlap', 'skipped-paused', 'control')"
	"   ORDER BY x.scheduled_at DESC, x.owner DESC LIMIT 1) AS r0,"
	"  (SELECT x.rowid FROM \"%1$s_runs\" x WHERE x.job = d.job AND x.outcome = 'ok'"
	"   ORDER BY x.scheduled_at DESC, x.owner DESC LIMIT 1) AS r1,"
	"  (SELECT x.rowid FROM \"%1$s_runs\" x WHERE x.job = d.job AND x.outcome IN"
	"   ('failed', 'timeout', 'lost', 'killed')"
	"   ORDER BY x.scheduled_at DESC, x.owner DESC LIMIT 1) AS r2,"
	"  (SELECT max(x.scheduled_at) FROM \"%1$s_runs\" x WHERE x.job = d.job"
	"   AND x.outcome NOT IN ('missed', 'control')) AS handled"
	"  FROM d WHERE d.job IS NOT NULL),"
	" j AS (SELECT k.job, r.owner, r.actor, r.outcome, r.error, r.scheduled_at, r.token, r.claimed_at,"
	"  r.started_at, r.ended_at, r.duration_ms, r.recorded_at, r.exit_code, r.exit_signal,"
	"  c.cls, k.handled AS handled,"
	"  (SELECT count(*) FROM \"%1$s_runs\" x WHERE x.job = k.job"
	"   AND x.outcome IN ('failed', 'timeout', 'lost', 'killed') AND x.scheduled_at >"
	"   coalesce((SELECT o.scheduled_at FROM \"%1$s_runs\" o WHERE o.rowid = k.r1), -1)) AS fails"
	" FROM k JOIN (SELECT 0 AS cls UNION ALL SELECT 1 UNION ALL SELECT 2) c"
	" LEFT JOIN \"%1$s_runs\" r ON r.rowid = CASE c.cls WHEN 0 THEN k.r0 WHEN 1 THEN k.r1"
	"  ELSE k.r2 END"
	" WHERE c.cls = 0 OR r.rowid IS NOT NULL)"
	" SELECT n.now, j.* FROM (SELECT " NOW " AS now) n LEFT JOIN j ON 1 ORDER BY j.job, j.cls",
	[ST_RENEW_ALL] = RENEW_SQL("?2", "?3") " RETURNING name, token",
	/* renew_ctl: renew_all, returning the control columns too. */
	[ST_RENEW_CTL] =
	RENEW_SQL("?2", "?3") " RETURNING name, token, paused_until, trigger_at, handoff_at, " NOW,
	/* renew_ctl's UPDATE, then the beat's statements, its rows of kind 'R'. */
	[ST_RENEW_BEAT] =
	RENEW_SQL("?10", "?11") " RETURNING " NOW ", name, NULL, token, NULL, paused_until, trigger_at, NULL, NULL, NULL,"
	" NULL, 'L', handoff_at;"
	BEAT_WRITE BEAT_READ(", 'R', NULL"),
	/* try_acquire: one upsert that always touches the row, so RETURNING
	 * always tells the holder; a refused attempt writes the same values.
	 * A corrupt row (store.h) is never taken, nor its token grown. */
	[ST_ACQUIRE] = ACQUIRE_SQL("?1", "?2", "?3", ""),
	/* acquire_all: try_acquire's upsert once per name (?3 its number, ?4
	 * the name), all in one BEGIN IMMEDIATE transaction: one write lock,
	 * one fsync. */
	[ST_ACQUIRE_ALL] = ACQUIRE_SQL("?4", "?1", "?2", "name, "),
	[ST_RENEW] =
	"UPDATE \"%1$s\" SET renewed_at = " NOW ", expires_at = " NOW " + ?3"
	" WHERE name = ?1 AND owner = ?2 AND expires_at > " NOW " AND " LEASE_OK
	" RETURNING 1, owner, token, expires_at, " NOW ", last_fire",
	[ST_RELEASE] =
	"UPDATE \"%1$s\" SET expires_at = " NOW
	" WHERE name = ?1 AND owner = ?2 AND expires_at > " NOW,
	[ST_LIST] =
	"SELECT n.now, l.name, l.owner, l.token, l.acquired_at, l.renewed_at, l.expires_at,"
	" l.last_fire, l.paused_until"
	" FROM (SELECT " NOW " AS now) n LEFT JOIN \"%1$s\" l ON 1 ORDER BY l.name",
	[ST_CTL_PAUSE] =
	"INSERT INTO \"%1$s\" (name, owner, token, acquired_at, renewed_at, expires_at,"
	" paused_until) VALUES (?1, '', 0, 0, 0, 0, ?2)"
	" ON CONFLICT (name) DO UPDATE SET paused_until = excluded.paused_until RETURNING " NOW ";"
	CTL_BUMP,
	[ST_CTL_SET] =
	"UPDATE \"%1$s\" SET"
	" paused_until = CASE ?2 WHEN 2 THEN NULL ELSE paused_until END,"
	" trigger_at = CASE ?2 WHEN 3 THEN " NOW " ELSE trigger_at END,"
	" handoff_at = CASE ?2 WHEN 4 THEN " NOW " ELSE handoff_at END,"
	" handoff_to = CASE ?2 WHEN 4 THEN ?3 ELSE handoff_to END"
	" WHERE name = ?1 RETURNING " NOW ";"
	CTL_BUMP,
	[ST_CTL_VERSION] =
	"SELECT " NOW ", (SELECT token FROM \"%1$s\" WHERE name = '" STORE_CONTROLS "')",
	[ST_HEALTH] =
	"UPDATE \"%1$s\" SET health = ?4"
	" WHERE name = ?1 AND owner = ?2 AND token = ?3 AND expires_at > " NOW
	" AND COALESCE(health, 0) <> ?4 RETURNING name",
	/* handoff: every SET reads the row as it was, so TO_LIVE is judged
	 * once on the old row. */
	[ST_HANDOFF] =
	"UPDATE \"%1$s\" SET"
	" owner = CASE WHEN " TO_LIVE " THEN handoff_to ELSE owner END,"
	" token = CASE WHEN " TO_LIVE " THEN token + 1 ELSE token END,"
	" acquired_at = CASE WHEN " TO_LIVE " THEN " NOW " ELSE acquired_at END,"
	" renewed_at = CASE WHEN " TO_LIVE " THEN " NOW " ELSE renewed_at END,"
	" expires_at = CASE WHEN " TO_LIVE " THEN " NOW " + ?3 ELSE " NOW " END,"
	" handoff_to = NULL"
	" WHERE name = ?1 AND owner = ?2 AND expires_at > " NOW
	" RETURNING CASE WHEN owner = ?2 THEN '' ELSE owner END, " NOW,
	[ST_HELD] =
	"SELECT name, token FROM \"%1$s\" WHERE owner = ?1 AND expires_at > " NOW
	" AND name IN (SELECT value FROM json_each(?2))",
	[ST_LEAVE] = "DELETE FROM \"%1$s_replicas\" WHERE owner = ?1",
	[ST_REPLICAS] =
	"SELECT n.now, r.owner, r.host, r.pid, r.version, r.started_at, r.heartbeat, r.draining,"
	" r.jobs_hash, r.jobs, r.broken FROM (SELECT " NOW " AS now) n"
	" LEFT JOIN \"%1$s_replicas\" r ON r.pid <> 0 ORDER BY r.owner",
	/* The upsert (draining as store.h says), the prune, the read. */
	[ST_BEAT] =
	BEAT_WRITE BEAT_READ(""),
	/* repair: the read, then the writes, in one transaction. */
	[ST_REPAIR] =
	"SELECT " NOW ", l.name IS NOT NULL, l.token, l.last_fire,"
	" coalesce(NOT " STORE_SQL_LEASE_OK("l.") ", 0),"
	" CASE WHEN NOT " STORE_SQL_LEASE_OK("l.") " THEN " REPAIR_TOP " ELSE l.token END,"
	" (SELECT count(*) FROM \"%1$s_runs\" r WHERE r.job = ?1 AND NOT " STORE_SQL_RUN_OK("r.") ")"
	" FROM (SELECT 1) o LEFT JOIN \"%1$s\" l ON l.name = ?1;"
	"UPDATE \"%1$s\" SET token = " REPAIR_TOP ", owner = '', expires_at = " NOW ","
	" last_fire = CASE WHEN " STORE_SQL_FIRE_OK("last_fire") " THEN last_fire END"
	" WHERE name = ?1 AND NOT " LEASE_OK ";"
	"DELETE FROM \"%1$s_runs\" WHERE job = ?1 AND NOT " STORE_SQL_RUN_OK("") ,
	[ST_CORRUPT_RUNS] =
	"SELECT job, scheduled_at FROM \"%1$s_runs\" WHERE " STORE_SQL_RUN_AT_BAD
	" ORDER BY job, scheduled_at LIMIT " STORE_SQL_STR(STORE_BAD_RUNS_MAX),
	/* The claims (?1 owner, ?2 i, ?3 name, ?4 token, ?5 fire): the clock
	 * read once into leash_w's row 0, each claim the lease takes noted in
	 * its row i (with the name), then the cursors moved.  BEGIN IMMEDIATE
	 * holds the write lock throughout, so nobody renews or takes a lease
	 * between the judging and the writing. */
	[ST_CLAIM_ALL] = CLAIMS_JUDGED CLAIMS_MOVED CLAIMS_ANSWER,
	/* claim_all's, then each run (?6 its claim .. ?18 actor) of a claim
	 * noted, replacing any row of its key whole. */
	[ST_CLAIM_RUNS] = CLAIMS_JUDGED CLAIMS_MOVED
	"INSERT INTO \"%1$s_runs\" AS r (" RUN_COLS ")"
	" SELECT o.name, ?7, ?8, ?9, z.now, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, z.now"
	" FROM temp.leash_w o, temp.leash_w z WHERE o.i = ?6 AND z.i = 0"
	" ON CONFLICT (job, scheduled_at, owner) DO UPDATE SET token = excluded.token,"
	" claimed_at = excluded.claimed_at, started_at = excluded.started_at,"
	" ended_at = excluded.ended_at, outcome = excluded.outcome, exit_code = excluded.exit_code,"
	" exit_signal = excluded.exit_signal, duration_ms = excluded.duration_ms,"
	" error = excluded.error, actor = excluded.actor, recorded_at = excluded.recorded_at;"
	CLAIMS_ANSWER,
	/* Each claim whose cursor is still its fire noted, the cursor stepped
	 * back, and the fire's row that never started deleted. */
	[ST_UNCLAIM_ALL] =
	"DELETE FROM temp.leash_w;"
	"INSERT INTO temp.leash_w (i, name) SELECT ?2, ?3 FROM \"%1$s\""
	" WHERE name = ?3 AND owner = ?1 AND token = ?4 AND last_fire = ?5;"
	"UPDATE \"%1$s\" SET last_fire = CASE WHEN ?5 > 0 THEN ?5 - 1 END"
	" WHERE name = ?3 AND EXISTS (SELECT 1 FROM temp.leash_w WHERE i = ?2);"
	"DELETE FROM \"%1$s_runs\" WHERE job = ?3 AND owner = ?1 AND scheduled_at = ?5"
	" AND outcome = 'running' AND started_at IS NULL"
	" AND EXISTS (SELECT 1 FROM temp.leash_w WHERE i = ?2);"
	"SELECT NULL, o.i FROM (SELECT 1) t LEFT JOIN temp.leash_w o ON 1",
	/* Each row (?1 job .. ?13 actor, ?14 run_id, ?15 how) upserted; a NULL
	 * keeps the stored field. */
	[ST_RECORD_RUNS] =
	"INSERT INTO \"%1$s_runs\" AS r (" RUN_COLS ", run_id, how)"
	" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, " NOW ", ?14, ?15)"
	" ON CONFLICT (job, scheduled_at, owner) DO UPDATE SET token = excluded.token,"
	" outcome = excluded.outcome, recorded_at = excluded.recorded_at,"
	KEEP("claimed_at") "," KEEP("started_at") "," KEEP("ended_at") "," KEEP("exit_code") ","
	KEEP("exit_signal") "," KEEP("duration_ms") "," KEEP("error") "," KEEP("actor") ","
	KEEP("run_id") "," KEEP("how"),
	/* prune (?1 keep, ?2 keep_per_job, ?3 max_rows), in one transaction:
	 * the clock read once (row 0), each step limited to what the earlier
	 * left (n counts what they changed).  The steps touch disjoint rows:
	 * "lost" marks only rows the age step keeps, and the per-job step
	 * deletes neither those nor running rows (a run still going keeps its
	 * row; a dead one becomes lost first).
	 * lost: the partial index of running rows (named: without statistics
	 * the planner would rather walk scheduled_at over every row), each
	 * joined to its lease by the lease's primary key.
	 * age: the oldest end of the scheduled_at index.
	 * per job: for each lease, the keep_per_job-th newest row is found by
	 * walking that job's primary key backwards (an OFFSET inside one job,
	 * never a window over the table), and the job's rows below it in
	 * (scheduled_at, owner) order go, by the same key. */
	[ST_PRUNE_RUNS] =
	"DELETE FROM temp.leash_w;"
	"INSERT INTO temp.leash_w (i, now, n) VALUES (0, " NOW ", 0);"
	"UPDATE \"%1$s_runs\" SET outcome = 'lost', recorded_at = " W_NOW ","
	" error = coalesce(error, " STORE_SQL_LOST_WHY ") WHERE rowid IN"
	" (SELECT r.rowid FROM \"%1$s_runs\" r INDEXED BY \"%1$s_runs_run\""
	"  JOIN \"%1$s\" l ON l.name = r.job"
	"  WHERE r.outcome = 'running' AND r.token < l.token AND r.scheduled_at >= " W_CUT
	"  LIMIT " W_LEFT ");"
	W_COUNT
	"DELETE FROM \"%1$s_runs\" WHERE rowid IN"
	" (SELECT rowid FROM \"%1$s_runs\" WHERE scheduled_at < " W_CUT
	"  ORDER BY scheduled_at LIMIT " W_LEFT ");"
	W_COUNT
	"DELETE FROM \"%1$s_runs\" WHERE rowid IN"
	" (SELECT r.rowid FROM"
	"  (SELECT (SELECT x.rowid FROM \"%1$s_runs\" x WHERE x.job = l.name"
	"    ORDER BY x.scheduled_at DESC, x.owner DESC LIMIT 1 OFFSET ?2 - 1) AS cut"
	"   FROM \"%1$s\" l) k"
	"  JOIN \"%1$s_runs\" c ON c.rowid = k.cut"
	"  JOIN \"%1$s_runs\" r ON r.job = c.job"
	"   AND (r.scheduled_at, r.owner) < (c.scheduled_at, c.owner)"
	"  WHERE r.scheduled_at >= " W_CUT " AND r.outcome <> 'running' LIMIT " W_LEFT ");"
	W_COUNT
	"SELECT n FROM temp.leash_w WHERE i = 0",
	[ST_FLOOR_SELECT] = "SELECT 1",
	/* A side table shaped like the lease table, one row updated by its
	 * (bound) primary key: the least a durable lease write costs. */
	[ST_FLOOR_MAKE] =
	FLOOR_TABLE
	"INSERT OR IGNORE INTO \"%1$s_floor_row\" VALUES ('floor', 'floor', 1, 0, 0, 0)",
	[ST_FLOOR_UPDATE] =
	"UPDATE \"%1$s_floor_row\" SET expires_at = expires_at + 1 WHERE name = ?1",
};

/* Entries prepared on first use, not at open: the floor's, whose side
 * table is made on first use. */
static int lazy(int q)
{
	return q == ST_FLOOR_MAKE || q == ST_FLOOR_UPDATE;
}

/* Prepares the next statement of entry q's chain from *at: 1 prepared, 0
 * none left, STORE_ERR. */
static int prepare_next(struct sq_store *ss, int q, const char **at)
{
	while (**at) {
		const char *tail = NULL;
		sqlite3_stmt *st = NULL;

		if (ss->nst[q] == CHAIN_MAX)
			return store_fail(&ss->base, "sqlite: %s: too many statements", store_stmt_what[q]);
		if (sq.sqlite3_prepare_v3(ss->db, *at, -1, SQLITE_PREPARE_PERSISTENT, &st, &tail) !=
		    SQLITE_OK)
			return sq_fail(ss, store_stmt_what[q]);
		*at = tail ? tail : "";
		if (st) {
			ss->st[q][ss->nst[q]++] = st;
			return 1;
		}
	}
	return 0;
}

/* Entry q's text with the table name; NULL (s->err set) when too long. */
static const char *entry_text(struct sq_store *ss, int q, char *sql, size_t size)
{
	if ((size_t)snprintf(sql, size, dialect[q], ss->table) >= size) {
		store_fail(&ss->base, "sqlite: %s: statement too long", store_stmt_what[q]);
		return NULL;
	}
	return sql;
}

/* Every entry of the dialect but the lazy ones, each statement of a chain
 * apart, and the connection's scratch table: entries that run in one
 * transaction keep their clock reading (row 0: now), a count (n) and what
 * they found (a row per claim i) in it. */
static int prepare_dialect(struct sq_store *ss, char *err, size_t errlen)
{
	char sql[8192];

	if (sq.sqlite3_exec(ss->db, "CREATE TEMP TABLE IF NOT EXISTS leash_w (i INTEGER PRIMARY KEY,"
	                 " now INTEGER, name TEXT, n INTEGER)", NULL, NULL, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "sqlite: scratch table: %s", sq.sqlite3_errmsg(ss->db));
		return -1;
	}
	for (int i = 0; i < ST_MAX; i++) {
		const char *at = lazy(i) ? "" : entry_text(ss, i, sql, sizeof sql);
		int r = 0;

		while (at && (r = prepare_next(ss, i, &at)) > 0)
			;
		if (!at || r < 0) {
			snprintf(err, errlen, "%s", ss->base.err);
			return -1;
		}
	}
	return 0;
}

static int bind_one(sqlite3_stmt *st, int n, const struct store_param *p, const char *json)
{
	return p->kind == SP_INT ? sq.sqlite3_bind_int64(st, n, p->i)
	     : p->kind == SP_TEXT ? sq.sqlite3_bind_text(st, n, p->s, -1, SQLITE_STATIC)
	     : p->kind == SP_TEXTS ? sq.sqlite3_bind_text(st, n, json, -1, SQLITE_STATIC)
	     : sq.sqlite3_bind_null(st, n);
}

/* Runs st once with p bound (base[i] + 1: p[i]'s first number; json[i]:
 * p[i] as JSON when an array; row r of table t), its rows to row(). */
static int step_one(struct sq_store *ss, sqlite3_stmt *st, const struct store_param *p, int np,
                    const int *base, char *const *json, int t, size_t r, store_row_fn row,
                    void *arg, int set, const char *what)
{
	int top = sq.sqlite3_bind_parameter_count(st), rc = SQLITE_OK, step, stop = 0;

	sq.sqlite3_reset(st);
	sq.sqlite3_clear_bindings(st);
	for (int i = 0; i < np && rc == SQLITE_OK; i++)
		if (p[i].kind != SP_ROWS && base[i] < top)
			rc = bind_one(st, base[i] + 1, &p[i], json[i]);
		else if (i == t)
			for (int c = 0; c < p[i].cols && base[i] + c < top && rc == SQLITE_OK; c++)
				rc = bind_one(st, base[i] + c + 1, &p[i].r[r * (size_t)p[i].cols + c], NULL);
	if (rc != SQLITE_OK) {
		sq.sqlite3_reset(st);
		return sq_fail(ss, what);
	}
	ss->cur = st;
	while (!stop && (step = sq.sqlite3_step(st)) == SQLITE_ROW)
		stop = row && row(&ss->base, arg, set) < 0;
	ss->cur = NULL;
	if (!stop && step != SQLITE_DONE)
		sq_fail(ss, what);
	sq.sqlite3_reset(st);
	return stop || step != SQLITE_DONE ? STORE_ERR : STORE_OK;
}

/* One chain's statements in order, each step's rows to row().  A statement
 * whose highest parameter is a table's runs once per row of it.  A lazy
 * entry is prepared statement by statement as it runs (a statement may
 * need what the one before made). */
static int run_chain(struct sq_store *ss, int q, const struct store_param *p, int np,
                     const int *base, char *const *json, store_row_fn row, void *arg)
{
	char sql[8192];
	int fresh = ss->nst[q] == 0, set = 0, rc = STORE_OK;
	const char *at = fresh ? entry_text(ss, q, sql, sizeof sql) : "";

	for (int k = 0; at && rc == STORE_OK; k++) {
		sqlite3_stmt *st;
		int top, t = -1, r;
		size_t rows;

		if (k == ss->nst[q] && (r = prepare_next(ss, q, &at)) <= 0) {
			rc = r < 0 ? STORE_ERR : STORE_OK;
			break;
		}
		st = ss->st[q][k];
		top = sq.sqlite3_bind_parameter_count(st);
		for (int i = 0; i < np; i++)
			if (p[i].kind == SP_ROWS && top > base[i] && top <= base[i] + p[i].cols)
				t = i;
		rows = t < 0 ? 1 : p[t].n;
		for (size_t j = 0; j < rows && rc == STORE_OK; j++)
			rc = step_one(ss, st, p, np, base, json, t, j, row, arg, set, store_stmt_what[q]);
		set += sq.sqlite3_column_count(st) > 0;
	}
	if (!at)
		rc = STORE_ERR;
	if (rc != STORE_OK && fresh) {
		for (int k = 0; k < ss->nst[q]; k++)
			sq.sqlite3_finalize(ss->st[q][k]);
		ss->nst[q] = 0;
	}
	return rc;
}

/* The connection and its statements gone, the handle kept. */
static void disconnect(struct sq_store *ss)
{
	for (int i = 0; i < Q_MAX; i++)
		sq.sqlite3_finalize(ss->q[i]);
	for (int i = 0; i < ST_MAX; i++)
		for (int k = 0; k < ss->nst[i]; k++)
			sq.sqlite3_finalize(ss->st[i][k]);
	sq.sqlite3_close_v2(ss->db);
	memset(ss->q, 0, sizeof ss->q);
	memset(ss->st, 0, sizeof ss->st);
	memset(ss->nst, 0, sizeof ss->nst);
	ss->db = NULL;
}

static int open_read(struct sq_store *ss, const char *path, char *err, size_t errlen);
static int prepare_all(struct sq_store *ss, const char *path, char *err, size_t errlen);

/* A file read as immutable is only right while nothing writes it: once a
 * leash run has made its -wal file, the file is opened again to read
 * through it.  A failed open leaves no connection, and the next call
 * tries again. */
static int reopen_read(struct sq_store *ss)
{
	char wal[4200], err[STORE_ERR_MAX];
	struct stat st;

	if (ss->db && !ss->immutable)
		return STORE_OK;
	snprintf(wal, sizeof wal, "%s-wal", ss->path);
	if (ss->db && stat(wal, &st) < 0)
		return STORE_OK;
	disconnect(ss);
	if (open_read(ss, ss->path, err, sizeof err) < 0 ||
	    prepare_all(ss, ss->path, err, sizeof err) < 0) {
		disconnect(ss);
		return store_fail_kind(&ss->base, STORE_E_GONE, "%s", err);
	}
	return STORE_OK;
}

static int sq_exec(struct store *s, int q, const struct store_param *p, int np,
                   store_row_fn row, void *arg)
{
	struct sq_store *ss = (struct sq_store *)s;
	char *json[PARAMS_MAX] = { NULL };
	int base[PARAMS_MAX + 1] = { 0 }, rc = STORE_OK, tx;

	if (ss->path && reopen_read(ss) != STORE_OK)
		return STORE_ERR;
	tx = ss->nst[q] != 1;
	for (int i = 0; i < np && i < PARAMS_MAX; i++) {
		base[i + 1] = base[i] + (p[i].kind == SP_ROWS ? p[i].cols : 1);
		tx |= p[i].kind == SP_ROWS;
	}
	if (np > PARAMS_MAX || base[np] > PARAMS_MAX)
		return store_fail(s, "sqlite: %s: too many parameters", store_stmt_what[q]);
	for (int i = 0; i < np && rc == STORE_OK; i++)
		if (p[i].kind == SP_TEXTS && !(json[i] = json_names(p[i].v, p[i].n)))
			rc = store_fail(s, "sqlite: %s: out of memory", store_stmt_what[q]);
	if (rc == STORE_OK && !tx)
		rc = run_chain(ss, q, p, np, base, json, row, arg);
	else if (rc == STORE_OK && (rc = run_tx(ss, Q_BEGIN, store_stmt_what[q])) == STORE_OK)
		rc = end_tx(ss, run_chain(ss, q, p, np, base, json, row, arg), store_stmt_what[q]);
	for (int i = 0; i < np; i++)
		free(json[i]);
	return rc;
}

static int sq_is_null(struct store *s, int c)
{
	return sq.sqlite3_column_type(((struct sq_store *)s)->cur, c) == SQLITE_NULL;
}

static int64_t sq_col_int(struct store *s, int c)
{
	return sq.sqlite3_column_int64(((struct sq_store *)s)->cur, c);
}

static const char *sq_col_text(struct store *s, int c, size_t *len)
{
	sqlite3_stmt *st = ((struct sq_store *)s)->cur;
	const char *t = (const char *)sq.sqlite3_column_text(st, c);

	*len = t ? (size_t)sq.sqlite3_column_bytes(st, c) : 0;
	return t;
}

static const struct store_driver sqlite_driver = { sq_exec, sq_is_null, sq_col_int,
                                                   sq_col_text, 0 };

static void sq_close(struct store *s)
{
	struct sq_store *ss = (struct sq_store *)s;

	if (!ss)
		return;
	disconnect(ss);
	free(ss->path);
	free(ss);
}

static int presence_setup(struct sq_store *, char *err, size_t errlen);

static const struct store_ops sqlite_ops = {
	STORE_OPS_ONCE,
	.name = "sqlite",
	.close = sq_close,
	.set_timeout = sq_set_timeout,
};

/* 1 when the table has column col, 0 when not, -1 on error. */
static int has_column(struct sq_store *ss, const char *suffix, const char *col)
{
	char sql[160];
	sqlite3_stmt *st = NULL;
	int found = 0, step;

	snprintf(sql, sizeof sql, "SELECT name FROM pragma_table_info('%s%s')", ss->table, suffix);
	if (sq.sqlite3_prepare_v2(ss->db, sql, -1, &st, NULL) != SQLITE_OK)
		return -1;
	while ((step = sq.sqlite3_step(st)) == SQLITE_ROW)
		if (sq.sqlite3_stricmp((const char *)sq.sqlite3_column_text(st, 0), col) == 0)
			found = 1;
	sq.sqlite3_finalize(st);
	return step == SQLITE_DONE ? found : -1;
}

/* A table made before the fire cursor (or the controls) existed gets the
 * column, NULL in every row (rows and tokens stay).  Two replicas opening
 * at once may both try; the one that loses finds the column there. */
static int add_column(struct sq_store *ss, const char *suffix, const char *col,
                      const char *type, char *err, size_t errlen)
{
	char sql[200];
	int has = has_column(ss, suffix, col);

	if (has == 0) {
		snprintf(sql, sizeof sql, "ALTER TABLE \"%s%s\" ADD COLUMN %s %s", ss->table, suffix,
		         col, type);
		if (sq.sqlite3_exec(ss->db, sql, NULL, NULL, NULL) != SQLITE_OK)
			has = has_column(ss, suffix, col);
		else
			has = 1;
	}
	if (has == 1)
		return 0;
	snprintf(err, errlen, "sqlite: %s%s: cannot add the %s column: %s", ss->table, suffix, col,
	         sq.sqlite3_errmsg(ss->db));
	return -1;
}

static int add_last_fire(struct sq_store *ss, char *err, size_t errlen)
{
	static const char *const cols[] = { "last_fire", "paused_until", "trigger_at",
	                                    "handoff_at", "health", "handoff_to" };

	for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++)
		if (add_column(ss, "", cols[i],
		               strcmp(cols[i], "handoff_to") == 0 ? "VARCHAR(200)" : "BIGINT", err,
		               errlen) < 0)
			return -1;
	return 0;
}

static const char *const run_columns[] = { STORE_RUN_NEEDED };
static const char *const run_added[][2] = { STORE_RUN_ADDED };

/* Creates <table>_runs and its indexes when missing.  One that exists
 * without a column the store needs is left exactly as it is (no index is
 * added to it either) and the open fails naming the column; one that lacks
 * only the run_added columns gets them. */
static int setup_runs(struct sq_store *ss, char *err, size_t errlen)
{
	char sql[2048];

	snprintf(sql, sizeof sql, STORE_SQL_RUNS_TABLE, ss->table);
	if (sq.sqlite3_exec(ss->db, sql, NULL, NULL, NULL) != SQLITE_OK)
		goto fail;
	for (size_t i = 0; i < sizeof run_columns / sizeof run_columns[0]; i++) {
		int has = has_column(ss, "_runs", run_columns[i]);

		if (has < 0)
			goto fail;
		if (!has) {
			snprintf(err, errlen, "sqlite: " STORE_NOT_LEDGER, ss->table, run_columns[i]);
			return -1;
		}
	}
	for (size_t i = 0; i < sizeof run_added / sizeof run_added[0]; i++)
		if (add_column(ss, "_runs", run_added[i][0], run_added[i][1], err, errlen) < 0)
			return -1;
	/* Index names stay within 63 bytes: the table name is at most 54. */
	snprintf(sql, sizeof sql,
	         "CREATE INDEX IF NOT EXISTS \"%1$s_runs_at\" ON \"%1$s_runs\" (scheduled_at);"
	         "CREATE INDEX IF NOT EXISTS \"%1$s_runs_run\" ON \"%1$s_runs\" (job, token)"
	         " WHERE outcome = 'running'", ss->table);
	if (sq.sqlite3_exec(ss->db, sql, NULL, NULL, NULL) != SQLITE_OK)
		goto fail;
	return 0;
fail:
	snprintf(err, errlen, "sqlite: %s_runs: %s", ss->table, sq.sqlite3_errmsg(ss->db));
	return -1;
}

/* ---- who may write the file ---- */

/* "user (uid N)" of this process. */
static void me(char *buf, size_t len)
{
	struct passwd *pw = getpwuid(geteuid());

	if (pw)
		snprintf(buf, len, "%s", pw->pw_name);
	else
		snprintf(buf, len, "uid %u", (unsigned)geteuid());
}

/* "owner root, group leash, mode 0640" of st. */
static void owned(const struct stat *st, char *buf, size_t len)
{
	struct passwd *pw = getpwuid(st->st_uid);
	struct group *gr = getgrgid(st->st_gid);
	char u[32], g[32];

	snprintf(u, sizeof u, "%u", (unsigned)st->st_uid);
	snprintf(g, sizeof g, "%u", (unsigned)st->st_gid);
	snprintf(buf, len, "owner %s, group %s, mode %04o", pw ? pw->pw_name : u,
	         gr ? gr->gr_name : g, (unsigned)(st->st_mode & 07777));
}

/* Why this process cannot write the database at path (write 1) or read it
 * (write 0): the file, its -wal and -shm files, or the directory SQLite
 * makes those in, each named with its owner and mode and the fix.  0 with
 * the text in err, or -1 when every one of them looks fine (SQLite's own
 * reason is then the best there is). */
static int why_not(const char *path, enum store_mode mode, char *err, size_t errlen)
{
	int write = mode != STORE_READ;
	static const char *const suffix[] = { "", "-wal", "-shm" };
	char dir[4096], file[4200], who[64], how[160];
	const char *slash = strrchr(path, '/');
	struct stat st;
	int missing = 0;

	me(who, sizeof who);
	for (size_t i = 0; i < sizeof suffix / sizeof suffix[0]; i++) {
		snprintf(file, sizeof file, "%s%s", path, suffix[i]);
		if (stat(file, &st) < 0) {
			missing = 1;
		} else if (faccessat(AT_FDCWD, file, write ? R_OK | W_OK : R_OK, AT_EACCESS) < 0) {
			struct passwd *pw = getpwuid(st.st_uid);
			char fix[4300];

			if (mode == STORE_WRITE)      /* a control: the service's files stay its own */
				snprintf(fix, sizeof fix, "run the command as the service's user (sudo -u %s "
				         "leash ...) or root", pw ? pw->pw_name : "OWNER");
			else if (write)
				snprintf(fix, sizeof fix, "fix: chown %s: %s*", who, path);
			else
				snprintf(fix, sizeof fix, "fix: add user %s to the file's group, and chmod "
				         "g+r %s*", who, path);
			owned(&st, how, sizeof how);
			snprintf(err, errlen, "sqlite: %s: user %s cannot %s it (%s); %s", file, who,
			         write ? "write" : "read", how, fix);
			return 0;
		}
	}
	if (!slash)
		snprintf(dir, sizeof dir, ".");
	else
		snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
	if (write && missing && stat(dir, &st) < 0 && errno == ENOENT) {
		snprintf(err, errlen, "sqlite: %s: the directory %s does not exist; fix: mkdir -p %s "
		         "(owned by the user leash run runs as)", path, dir, dir);
		return 0;
	}
	if (write && missing && stat(dir, &st) == 0 &&
	    faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) < 0) {
		owned(&st, how, sizeof how);
		snprintf(err, errlen, "sqlite: %s: user %s cannot make files in %s (%s), where SQLite "
		         "keeps the database's -wal and -shm files; fix: chown %s: %s", path, who, dir,
		         how, who, dir);
		return 0;
	}
	return -1;
}

/* Why path cannot be looked at (errno): the directory in the way, with
 * its owner and mode. */
static void unreachable(const char *path, char *err, size_t errlen)
{
	char dir[4096], who[64], how[160];
	int e = errno;
	struct stat st;

	me(who, sizeof who);
	snprintf(dir, sizeof dir, "%s", path);
	/* The deepest directory this process cannot search. */
	for (char *slash; (slash = strrchr(dir, '/')) && slash != dir;) {
		*slash = '\0';
		if (stat(dir, &st) == 0 && faccessat(AT_FDCWD, dir, X_OK, AT_EACCESS) < 0) {
			owned(&st, how, sizeof how);
			snprintf(err, errlen, "sqlite: %s: user %s cannot reach it: %s (directory %s: %s); "
			         "fix: add user %s to the directory's group", path, who, strerror(e), dir,
			         how, who);
			return;
		}
	}
	snprintf(err, errlen, "sqlite: %s: user %s cannot reach it: %s", path, who, strerror(e));
}

/* The tables a READ or WRITE open needs, all made by leash run: 0, or -1
 * with the no-table text or SQLite's reason in err. */
static int tables_there(struct sq_store *ss, const char *path, char *err, size_t errlen)
{
	static const char *const suffix[] = { "", "_runs", "_replicas" };
	char sql[256], name[80];

	for (size_t i = 0; i < sizeof suffix / sizeof suffix[0]; i++) {
		sqlite3_stmt *st = NULL;
		int step;

		snprintf(name, sizeof name, "%s%s", ss->table, suffix[i]);
		snprintf(sql, sizeof sql, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
		         "name = '%s'", name);
		if (sq.sqlite3_prepare_v2(ss->db, sql, -1, &st, NULL) != SQLITE_OK) {
			snprintf(err, errlen, "sqlite: %s: %s", path, sq.sqlite3_errmsg(ss->db));
			return -1;
		}
		step = sq.sqlite3_step(st);
		sq.sqlite3_finalize(st);
		if (step == SQLITE_DONE) {
			store_no_table(err, errlen, "sqlite", path, name);
			return -1;
		}
		if (step != SQLITE_ROW) {
			snprintf(err, errlen, "sqlite: %s: %s", path, sq.sqlite3_errmsg(ss->db));
			return -1;
		}
	}
	return 0;
}

/* path as an SQLite URI with immutable=1: a read of a database whose
 * directory this process cannot write, when no -wal and -shm files are
 * there to share (the service is not running).  NULL when too long. */
static char *immutable_uri(const char *path, char *buf, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t k = 0;

	k += (size_t)snprintf(buf, len, "file:");
	for (const unsigned char *p = (const unsigned char *)path; *p && k + 4 < len; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		    strchr("/._-", *p)) {
			buf[k++] = (char)*p;
		} else {
			buf[k++] = '%';
			buf[k++] = hex[*p >> 4];
			buf[k++] = hex[*p & 15];
		}
	}
	if (k + sizeof "?immutable=1" > len)
		return NULL;
	memcpy(buf + k, "?immutable=1", sizeof "?immutable=1");
	return buf;
}

/* A READ open: the file read-only; it makes no file.  While leash run
 * has the database open its -wal and -shm files are there, and SQLite
 * reads through them (a reader that cannot write the -shm file reads
 * without it).  Without them SQLite would make them, owned by whoever
 * runs the command (root's would be files the service cannot write), so
 * the file is read as immutable: nothing else writes it then, or only
 * from the moment a leash run starts, which one status read may miss. */
static int open_read(struct sq_store *ss, const char *path, char *err, size_t errlen)
{
	char uri[8192], side[4200];
	const char *name = path;
	int flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX;
	struct stat st;

	snprintf(side, sizeof side, "%s-wal", path);
	if (stat(side, &st) == 0)
		snprintf(side, sizeof side, "%s-shm", path);
	if (stat(side, &st) < 0) {
		if (!(name = immutable_uri(path, uri, sizeof uri))) {
			snprintf(err, errlen, "sqlite: %s: the path is too long", path);
			return -1;
		}
		flags |= SQLITE_OPEN_URI;
	}
	ss->immutable = name != path;
	if (sq.sqlite3_open_v2(name, &ss->db, flags, NULL) != SQLITE_OK) {
		if (why_not(path, STORE_READ, err, errlen) < 0)
			snprintf(err, errlen, "sqlite: open %s: %s", path,
			         ss->db ? sq.sqlite3_errmsg(ss->db) : "out of memory");
		return -1;
	}
	sq.sqlite3_busy_timeout(ss->db, ss->timeout_ms);
	if (tables_there(ss, path, err, errlen) < 0) {
		int code = sq.sqlite3_extended_errcode(ss->db) & 0xff;

		if ((code == SQLITE_CANTOPEN || code == SQLITE_PERM || code == SQLITE_READONLY) &&
		    strncmp(err, "no lease table yet", 18) != 0)
			why_not(path, STORE_READ, err, errlen);
		return -1;
	}
	return 0;
}

/* A RUN or WRITE open: read-write, or an error that says what to fix (a
 * file SQLite could only open read-only would fail every write, and keep
 * failing after the fix: the connection stays read-only). */
static int open_write(struct sq_store *ss, const struct store_opts *o, char *err,
                      size_t errlen)
{
	char *msg = NULL;
	char sql[2048];
	int run = o->mode == STORE_RUN;

	if (sq.sqlite3_open_v2(o->path, &ss->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX |
	                    (run ? SQLITE_OPEN_CREATE : 0), NULL) != SQLITE_OK)
		goto unwritable;
	if (strcmp(o->path, ":memory:") != 0 && sq.sqlite3_db_readonly(ss->db, "main") == 1)
		goto unwritable;
	sq.sqlite3_busy_timeout(ss->db, ss->timeout_ms);
	if (!run && sq.sqlite3_exec(ss->db, "PRAGMA synchronous = FULL", NULL, NULL, NULL) !=
	    SQLITE_OK) {
		snprintf(err, errlen, "sqlite: %s: %s", o->path, sq.sqlite3_errmsg(ss->db));
		return -1;
	}
	if (!run)
		return tables_there(ss, o->path, err, errlen);
	snprintf(sql, sizeof sql,
	         "PRAGMA journal_mode = WAL;"
	         "PRAGMA synchronous = FULL;"
	         "CREATE TABLE IF NOT EXISTS \"%s\" ("
	         STORE_SQL_LEASE_COLS, ss->table);
	if (sq.sqlite3_exec(ss->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		int code = sq.sqlite3_extended_errcode(ss->db) & 0xff;

		if ((code == SQLITE_CANTOPEN || code == SQLITE_READONLY || code == SQLITE_PERM) &&
		    why_not(o->path, o->mode, err, errlen) == 0) {
			sq.sqlite3_free(msg);
			return -1;
		}
		snprintf(err, errlen, "sqlite: %s: %s", o->path, msg ? msg : "setup failed");
		sq.sqlite3_free(msg);
		return -1;
	}
	if (add_last_fire(ss, err, errlen) < 0 || setup_runs(ss, err, errlen) < 0 ||
	    presence_setup(ss, err, errlen) < 0)
		return -1;
	return 0;
unwritable:
	if (why_not(o->path, o->mode, err, errlen) == 0)
		return -1;
	if (!run && access(o->path, F_OK) < 0)
		store_no_table(err, errlen, "sqlite", o->path, ss->table);
	else if (ss->db && sq.sqlite3_db_readonly(ss->db, "main") == 1)
		snprintf(err, errlen, "sqlite: %s: opened read-only (a read-only file system?): "
		         "leash needs to write it", o->path);
	else
		snprintf(err, errlen, "sqlite: open %s: %s", o->path,
		         ss->db ? sq.sqlite3_errmsg(ss->db) : "out of memory");
	return -1;
}

/* The dialect's statements and the transaction's own, on a new connection. */
static int prepare_all(struct sq_store *ss, const char *path, char *err, size_t errlen)
{
	char sql[256];

	if (prepare_dialect(ss, err, errlen) < 0)
		return -1;
	for (int i = 0; i < Q_MAX; i++) {
		snprintf(sql, sizeof sql, sql_text[i], ss->table);
		if (sq.sqlite3_prepare_v3(ss->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &ss->q[i],
		                       NULL) != SQLITE_OK) {
			snprintf(err, errlen, "sqlite: %s: prepare: %s", path, sq.sqlite3_errmsg(ss->db));
			return -1;
		}
	}
	return 0;
}

static struct store *open_sqlite(const struct store_opts *o, char *err, size_t errlen)
{
	struct sq_store *ss;
	const char *table = o->table ? o->table : "leash_leases";
	struct stat st;

	if (store_lib_load(&lib, err, errlen) < 0)
		return NULL;
	if (!(ss = calloc(1, sizeof *ss))) {
		snprintf(err, errlen, "sqlite: out of memory");
		return NULL;
	}
	ss->base.ops = &sqlite_ops;
	ss->base.drv = &sqlite_driver;
	snprintf(ss->table, sizeof ss->table, "%s", table);
	ss->timeout_ms = o->statement_timeout_ms > 0 ? o->statement_timeout_ms : 5000;
	if (!o->path || !*o->path) {
		snprintf(err, errlen, "sqlite: no database path given");
		goto fail;
	}
	/* Only leash run makes the file: a reading command or a control that
	 * made it (as root, before the service started) would leave the
	 * service a file it cannot write. */
	if (o->mode != STORE_RUN && strcmp(o->path, ":memory:") != 0 && stat(o->path, &st) < 0) {
		if (errno == ENOENT)
			store_no_table(err, errlen, "sqlite", o->path, table);
		else
			unreachable(o->path, err, errlen);
		goto fail;
	}
	/* A new database is leash's, readable by its group (SQLite would make
	 * it 0644, and its -wal and -shm files take the database's mode).
	 * Only a new one: a close(2) of any descriptor of a file drops every
	 * POSIX lock this process holds on it, another handle's SQLite locks
	 * among them (SQLite's os_unix.c), so an existing file is never opened
	 * here. */
	if (o->mode == STORE_RUN && strcmp(o->path, ":memory:") != 0) {
		int fd = open(o->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0640);

		if (fd >= 0)
			close(fd);
	}
	if (o->mode == STORE_READ && !(ss->path = strdup(o->path))) {
		snprintf(err, errlen, "sqlite: out of memory");
		goto fail;
	}
	if ((o->mode == STORE_READ ? open_read(ss, o->path, err, errlen)
	                           : open_write(ss, o, err, errlen)) < 0 ||
	    prepare_all(ss, o->path, err, errlen) < 0)
		goto fail;
	return &ss->base;
fail:
	sq_close(&ss->base);
	return NULL;
}

/* The provider row's client_version: "3.40.1", or NULL when libsqlite3
 * cannot be loaded. */
static const char *client_version(void)
{
	char err[8];

	return store_lib_load(&lib, err, sizeof err) < 0 ? NULL : sq.sqlite3_libversion();
}

static void unload_sqlite(void)
{
	store_lib_unload(&lib);
}

const struct store_provider store_sqlite = { "sqlite", open_sqlite, "SQLite", client_version,
                                            unload_sqlite };

/* ---- presence: <table>_replicas ---- */

static int presence_setup(struct sq_store *ss, char *err, size_t errlen)
{
	char sql[1024];
	char *msg = NULL;

	snprintf(sql, sizeof sql, STORE_SQL_REPLICAS_TABLE, ss->table);
	if (sq.sqlite3_exec(ss->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		snprintf(err, errlen, "sqlite: %s_replicas: %s", ss->table, msg ? msg : "setup failed");
		sq.sqlite3_free(msg);
		return -1;
	}
	/* A table of a version before the broken files gets the column. */
	return add_column(ss, "_replicas", "broken", "TEXT", err, errlen);
}

