/* cfg_keys.h - every key of leash.ini, once.
 *
 * CFG_KEYS(X) calls X(section, key, kind, words, default, min, max, field, meaning)
 * for each key, in the order the docs list them:
 *   kind     how the value is read, and so the C type of its field (CFG_TYPE_<kind>):
 *            PATH (relative to the config file), STRING, IDENT (a table name),
 *            REPLICA, WORD (one of words, kept as the word), INDEX (one of words,
 *            kept as its position from 0), BOOL, PORT, DURATION (ms), COUNT (an
 *            integer), LISTEN (HOST:PORT or empty), ENVNAME (the name of an
 *            environment variable or empty), USER (the name of a user of this
 *            host or empty), NAMES (host names, space or comma separated,
 *            kept lower-case and space separated);
 *   words    "a|b|c" for WORD and INDEX, else NULL;
 *   default  as it would be written in the file, or NULL when it is derived
 *            from other keys (leash.config's timing());
 *   min, max the inclusive bounds of a DURATION (ms), a PORT or a COUNT, else 0;
 *   field    the member of struct cfg, and its name in core.config_load's table;
 *   meaning  one line, for the docs and the specs.
 * struct cfg, cfg.c's copy and free, core.config_load and core.config_keys
 * are all generated from this list; lua/leash/config.lua reads and checks the
 * values by it.  A new key is one line here (and its docs).
 */
#ifndef LEASH_CFG_KEYS_H
#define LEASH_CFG_KEYS_H


/* The floors below which a timing setting makes leash spin or fail: a
 * follower retrying, or a holder renewing, faster than a store round trip;
 * a lease too short to renew in time; a store call that may not take any
 * time at all. */
#define CFG_LEASE_MIN 100               /* ms */
#define CFG_RENEW_MIN 10                /* ms */
#define CFG_RETRY_MIN 50                /* ms */
#define CFG_TIMEOUT_MIN 1               /* ms, connect_timeout and statement_timeout */
#define CFG_DURATION_MAX (24LL * 3600 * 1000)  /* ms: a day (the store's STORE_DURATION_MAX) */
/* The ledger keeps rows at least a day (longer than any missed_within, at
 * most 24h, so that a catch-up never walks fires the ledger dropped), at most
 * ten years. */
#define CFG_KEEP_MIN (24LL * 3600 * 1000)
#define CFG_KEEP_MAX (3650LL * 24 * 3600 * 1000)
#define CFG_KEEP_PER_JOB_MAX 1000000

#define CFG_TYPE_PATH char *
#define CFG_TYPE_STRING char *
#define CFG_TYPE_IDENT char *
#define CFG_TYPE_REPLICA char *
#define CFG_TYPE_WORD char *
#define CFG_TYPE_INDEX int
#define CFG_TYPE_BOOL int
#define CFG_TYPE_PORT int
#define CFG_TYPE_DURATION int64_t
#define CFG_TYPE_COUNT int64_t
#define CFG_TYPE_LISTEN char *
#define CFG_TYPE_ENVNAME char *
#define CFG_TYPE_USER char *
#define CFG_TYPE_NAMES char *

#define CFG_KEYS(X) \
	X(leash, jobs, PATH, NULL, "jobs", 0, 0, jobs, \
	  "directory of job files") \
	X(leash, replica, REPLICA, NULL, "auto", 0, 0, replica, \
	  "the readable part of the owner id <replica>:<pid>:<8 random hex>; auto = the hostname") \
	X(leash, log_format, INDEX, "text|json", "text", 0, 0, log_json, \
	  "log line format") \
	/* log_level's words are in the order of enum log_level. */ \
	X(leash, log_level, INDEX, "debug|info|warn|error", "info", 0, 0, log_level, \
	  "lowest level logged") \
	X(leash, grace, DURATION, NULL, "5s", 0, CFG_DURATION_MAX, grace_ms, \
	  "time between SIGTERM and SIGKILL when a run is stopped") \
	X(leash, prefork, BOOL, NULL, "true", 0, 0, prefork, \
	  "fork a fire's process ahead of the fire, in a spawner process (src/launch/prefork/): " \
	  "starts on time under bursts; false forks each run at its start, nothing else changes") \
	X(leash, load_timeout, DURATION, NULL, "1s", 10, 60000, load_timeout_ms, \
	  "how long loading one job file may take, then it is a load error") \
	X(leash, run_as, USER, NULL, "", 0, 0, run_as, \
	  "the user job processes run as (empty = leash's own); leash needs CAP_SETUID, CAP_SETGID and CAP_KILL to switch") \
	X(singleton, enabled, BOOL, NULL, "false", 0, 0, singleton, \
	  "elect one replica per job through the lease store") \
	X(singleton, lease, DURATION, NULL, "15s", CFG_LEASE_MIN, CFG_DURATION_MAX, lease_ms, \
	  "lease duration asked for on acquire and renew") \
	X(singleton, renew, DURATION, NULL, NULL, CFG_RENEW_MIN, CFG_DURATION_MAX, renew_ms, \
	  "how often the holder renews (default lease/3)") \
	X(singleton, retry, DURATION, NULL, "2s", CFG_RETRY_MIN, CFG_DURATION_MAX, retry_ms, \
	  "how often a follower tries to acquire (plus jitter)") \
	X(singleton, margin, DURATION, NULL, NULL, 0, CFG_DURATION_MAX, margin_ms, \
	  "the body stops this long before the lease could expire (default lease/5)") \
	X(singleton, spread, BOOL, NULL, "true", 0, 0, spread, \
	  "spread the leases over the live replicas (false: the first to ask holds)") \
	X(store, provider, WORD, "sqlite|postgres|mssql", "sqlite", 0, 0, provider, \
	  "lease store provider") \
	X(store, table, IDENT, NULL, "leash_leases", 0, 0, table, \
	  "lease table name") \
	X(store, connect_timeout, DURATION, NULL, "5s", CFG_TIMEOUT_MIN, CFG_DURATION_MAX, \
	  connect_timeout_ms, "time allowed to connect to the database") \
	X(store, statement_timeout, DURATION, NULL, "5s", CFG_TIMEOUT_MIN, CFG_DURATION_MAX, \
	  statement_timeout_ms, "time allowed for one statement") \
	X(ledger, keep, DURATION, NULL, "14d", CFG_KEEP_MIN, CFG_KEEP_MAX, ledger_keep_ms, \
	  "how long the run ledger keeps a row") \
	X(ledger, keep_per_job, COUNT, NULL, "1000", 1, CFG_KEEP_PER_JOB_MAX, ledger_keep_per_job, \
	  "the most rows the run ledger keeps per job (whichever of keep and this keeps fewer)") \
	X(http, listen, LISTEN, NULL, "", 0, 0, http_listen, \
	  "HOST:PORT serving /metrics, /healthz, /api and the status page (empty = off)") \
	X(http, token_env, ENVNAME, NULL, "", 0, 0, http_token_env, \
	  "environment variable holding the bearer token every request must bring (empty = none)") \
	X(http, public, BOOL, NULL, "false", 0, 0, http_public, \
	  "serve a listen address that is not loopback without token_env (else check and run refuse it)") \
	X(http, hosts, NAMES, NULL, "", 0, 0, http_hosts, \
	  "names and addresses a request's Host header may give, besides localhost and loopback addresses") \
	X(http, cert, PATH, NULL, "", 0, 0, http_cert, \
	  "PEM certificate (chain) file: serve HTTPS (with key; empty = plain HTTP)") \
	X(http, key, PATH, NULL, "", 0, 0, http_key, \
	  "PEM private key file of cert") \
	X(http, access_log, BOOL, NULL, "false", 0, 0, http_access_log, \
	  "log one line per request: client, method, path, status, bytes, time") \
	X(sqlite, path, PATH, NULL, "/var/lib/leash/leash.db", 0, 0, sqlite_path, \
	  "SQLite database file") \
	X(postgres, conninfo, STRING, NULL, "", 0, 0, pg_conninfo, \
	  "libpq connection string") \
	X(mssql, host, STRING, NULL, "127.0.0.1", 0, 0, mssql_host, \
	  "SQL Server host") \
	X(mssql, port, PORT, NULL, "1433", 1, 65535, mssql_port, \
	  "SQL Server port") \
	X(mssql, user, STRING, NULL, "leash", 0, 0, mssql_user, \
	  "SQL Server login") \
	X(mssql, password_env, STRING, NULL, "LEASH_MSSQL_PASSWORD", 0, 0, mssql_password_env, \
	  "environment variable holding the password") \
	X(mssql, database, STRING, NULL, "leash", 0, 0, mssql_database, \
	  "SQL Server database")

#endif
