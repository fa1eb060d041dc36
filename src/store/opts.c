/* store/opts.c - what a store is opened with, from the config: the one
 * place that reads the [store], [sqlite], [postgres] and [mssql] sections'
 * values for the store (the store sits above the config, not in it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cfg.h"
#include "store/store.h"

_Static_assert(CFG_DURATION_MAX == STORE_DURATION_MAX, "a duration the config takes, the store takes");

int store_opts_from(const struct cfg *c, struct store_opts *o, char *err, size_t errlen)
{
	memset(o, 0, sizeof *o);
	o->table = c->table;
	o->path = c->sqlite_path;
	o->conninfo = c->pg_conninfo;
	o->host = c->mssql_host;
	o->port = c->mssql_port;
	o->user = c->mssql_user;
	o->database = c->mssql_database;
	o->connect_timeout_ms = (int)c->connect_timeout_ms;
	o->statement_timeout_ms = (int)c->statement_timeout_ms;
	if (strcmp(c->provider, "mssql") == 0) {
		o->password = getenv(c->mssql_password_env);
		if (!o->password) {
			snprintf(err, errlen,
			         "%s: [mssql] password_env: the environment variable %s is not set",
			         c->file, c->mssql_password_env);
			return -1;
		}
	}
	return 0;
}
