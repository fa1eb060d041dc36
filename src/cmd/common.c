/* cmd/common.c - what every command shares: the usage, the config and
 * the Lua state, `leash run` and the HTTP process it starts. */
#include <getopt.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <limits.h>
#include <unistd.h>

#include <lauxlib.h>
#include <sqlite3.h>

#include "bind/bind.h"
#include "core/cfg.h"
#include "launch/child.h"
#include "web/http.h"
#include "core/clock.h"
#include "plan/job.h"
#include "core/log.h"
#include "loop.h"
#include "core/lx.h"
#include "cluster/presence.h"
#include "launch/runner.h"
#include "store/store.h"
#include "web/view.h"
#include "cmd/cmd.h"

const char cmd_usage[] =
	"usage: leash run [-c FILE] [-o KEY=VALUE]\n"
	"       leash status [-c FILE] [-o KEY=VALUE] [--json|--wide] [--leases] [-w|--watch] [--check [--fail N]]\n"
	"       leash history [-c FILE] [-o KEY=VALUE] [JOB] [--since D] [--limit N] [--json|--wide]\n"
	"       leash check [-c FILE] [-o KEY=VALUE] [--next N]\n"
	"       leash pause [-c FILE] [-o KEY=VALUE] JOB [--for D] [--no-wait] [--force]\n"
	"       leash resume [-c FILE] [-o KEY=VALUE] JOB [--no-wait] [--force]\n"
	"       leash trigger [-c FILE] [-o KEY=VALUE] JOB [--no-wait] [--force]\n"
	"       leash handoff [-c FILE] [-o KEY=VALUE] JOB [--to REPLICA] [--force]\n"
	"       leash repair [-c FILE] [-o KEY=VALUE] JOB\n"
	"       leash drain [-c FILE] [-o KEY=VALUE] REPLICA [--until-restart]\n"
	"       leash undrain [-c FILE] [-o KEY=VALUE] REPLICA\n"
	"       leash version\n"
	"       leash COMMAND -h|--help\n";

int cmd_end(struct store *s, struct cfg *c, lua_State *L, int rc)
{
	if (s)
		store_close(s);
	cfg_free(c);
	lua_close(L);
	return rc;
}

/* Everything a command needs: the Lua state and the checked config. */
int cmd_setup(const char *path, lua_State **L, struct cfg *c)
{
	char err[8192];
	const char *file = cfg_locate(path);

	*L = lx_new(luaopen_leash_core, err, sizeof err);
	if (!*L) {
		fprintf(stderr, "leash: %s\n", err);
		return -1;
	}
	if (cfg_load(*L, file, c, err, sizeof err) < 0) {
		fprintf(stderr, "%s\n", err);
		lua_close(*L);
		*L = NULL;
		return -1;
	}
	log_setup(c->log_json, c->log_level);
	child_hide_env(c);              /* from job files too, which every command may load */
	return 0;
}

int cmd_job_known(struct store *s, const struct cfg *c, const char *job)
{
	struct lease_row *rows = NULL;
	size_t n = 0;
	int64_t now;
	int known = 0;

	if (store_list(s, &rows, &n, &now) != STORE_OK)
		return -1;
	for (size_t i = 0; i < n && !known; i++)
		known = strcmp(rows[i].name, job) == 0;
	free(rows);
	return known || cmd_local_job(c, job);
}

/* -c FILE, then fn with the Lua state and the checked config: `leash run`,
 * and `leash _http`, the HTTP server process that `leash run` starts
 * (http.c) and nothing else does (not in the cmd_usage). */
int cmd_with_config(int argc, char **argv, int (*fn)(lua_State *, const struct cfg *))
{
	const char *path = NULL;
	struct cfg c;
	lua_State *L;
	int opt, rc;

	while ((opt = getopt(argc, argv, "c:")) != -1) {
		if (opt != 'c') {
			fputs(cmd_usage, stderr);
			return EXIT_CONFIG;
		}
		path = optarg;
	}
	if (cmd_setup(path, &L, &c) < 0)
		return EXIT_CONFIG;
	rc = fn(L, &c);
	cfg_free(&c);
	lua_close(L);
	return rc;
}

/* The scheduler, its runs as [leash] run_as. */
static int run_as(lua_State *L, const struct cfg *c)
{
	char err[1024];
	int root = child_run_as(c, err, sizeof err);

	if (root < 0) {
		fprintf(stderr, "%s\n", err);
		return EXIT_CONFIG;
	}
	if (root)
		log_msg(LOG_WARN, NULL, 0, "job processes run as root: set [leash] run_as in %s "
		        "(the package's user is leash-jobs)", c->file);
	return loop_run(L, c);
}

int cmd_run(int argc, char **argv)
{
	return cmd_with_config(argc, argv, run_as);
}

int cmd_http(int argc, char **argv)
{
	return cmd_with_config(argc, argv, httpd_serve);
}
