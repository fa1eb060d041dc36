/* cfg.h - the config file: read with inih, checked by lua/leash/config.lua. */
#ifndef LEASH_CFG_H
#define LEASH_CFG_H

#include <stdint.h>
#include <lua.h>

#include "store/store.h"

struct cfg {
	char *file;                     /* as given */
	char *jobs, *replica;
	int log_json, log_level;
	int64_t grace_ms;
	int singleton;
	int64_t lease_ms, renew_ms, retry_ms, margin_ms;
	char *provider, *table;
	int64_t connect_timeout_ms, statement_timeout_ms;
	char *sqlite_path, *pg_conninfo;
	char *mssql_host, *mssql_user, *mssql_password_env, *mssql_database;
	int mssql_port;
};

/* The file to read: path if given, else $LEASH_CONFIG, config/leash.ini,
 * /etc/leash/leash.ini (the first that exists; the last when none does). */
const char *cfg_locate(const char *path);

/* Reads and checks the file.  Returns 0, or -1 with every problem (one per
 * line, each naming file, line and key) written to errs. */
int cfg_load(lua_State *L, const char *file, struct cfg *c, char *errs, size_t errlen);

/* Fills the store options from the config.  Returns 0, or -1 with the reason
 * (a password variable that is not set) in err. */
int cfg_store_opts(const struct cfg *c, struct store_opts *o, char *err, size_t errlen);

void cfg_free(struct cfg *c);

#endif
