/* cmd/history.c - leash history: the run ledger, a job's or every job's. */
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

/* leash history's options and JOB: the view they ask for (VIEW_TABLE,
 * VIEW_WIDE or VIEW_JSON), or -1 after saying what is wrong. */
static int history_opts(int argc, char **argv, const char **path, const char **job,
                        const char **since, const char **limit)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "wide", no_argument, NULL, 'W' },
		{ "since", required_argument, NULL, 's' },
		{ "limit", required_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	int opt, json = 0, wide = 0;

	while ((opt = getopt_long(argc, argv, "c:", longopts, NULL)) != -1) {
		if (opt == 'c') {
			*path = optarg;
		} else if (opt == 'j') {
			json = 1;
		} else if (opt == 'W') {
			wide = 1;
		} else if (opt == 's') {
			*since = optarg;
		} else if (opt == 'n') {
			*limit = optarg;
		} else {
			fputs(cmd_usage, stderr);
			return -1;
		}
	}
	if (optind < argc)
		*job = argv[optind++];
	if (optind < argc) {
		fprintf(stderr, "leash history: unexpected argument \"%s\" (one JOB at most)\n%s",
		        argv[optind], cmd_usage);
		return -1;
	}
	if (json && wide) {
		fprintf(stderr, "leash history: --wide shows the table whole; it does not go with "
		        "--json\n");
		return -1;
	}
	return json ? VIEW_JSON : wide ? VIEW_WIDE : VIEW_TABLE;
}

/* The store of c opened in *s, and job (when not NULL) known to it or to
 * the jobs/ directory.  Returns 0, or the exit code after saying why not. */
static int history_store(const struct cfg *c, const char *job, struct store **s)
{
	struct store_opts o;
	char err[STORE_ERR_MAX + 256];

	if (!c->singleton) {
		fprintf(stderr, "leash history: singleton mode is off in %s ([singleton] enabled = "
		        "false): there is no store and so no run ledger\n", c->file);
		return EXIT_PROBLEMS;
	}
	if (store_opts_from(c, &o, err, sizeof err) < 0) {
		fprintf(stderr, "leash history: %s\n", err);
		return EXIT_CONFIG;
	}
	o.mode = STORE_READ;            /* never makes the file or a table */
	if (!(*s = store_open(c->provider, &o, err, sizeof err))) {
		fprintf(stderr, "leash history: cannot open the %s store: %s\n", c->provider, err);
		return EXIT_PROBLEMS;
	}
	/* A job nobody knows is an error, as for the controls (a typo read
	 * as "no runs" would hide it). */
	switch (job ? cmd_job_known(*s, c, job) : 1) {
	case 1:
		return 0;
	case 0:
		fprintf(stderr, "leash history: no job %s in the store or in %s/\n", job, c->jobs);
		return EXIT_PROBLEMS;
	default:
		fprintf(stderr, "leash history: cannot read the leases of the %s store: %s\n",
		        c->provider, (*s)->err);
		return EXIT_PROBLEMS;
	}
}

int cmd_history(int argc, char **argv)
{
	const char *path = NULL, *since = NULL, *limit = NULL, *job = NULL;
	struct store *s = NULL;
	struct cfg c;
	lua_State *L;
	char err[STORE_ERR_MAX + 256];
	int64_t since_at = STORE_NO_TIME;
	size_t lim = 0;
	int view, rc;

	if ((view = history_opts(argc, argv, &path, &job, &since, &limit)) < 0)
		return EXIT_CONFIG;
	if (cmd_setup(path, &L, &c) < 0)
		return EXIT_CONFIG;
	/* The arguments are checked by leash.history, against the local clock. */
	rc = view_history_args(L, job, since, limit, &since_at, &lim, err, sizeof err);
	if (rc != 0) {
		fprintf(stderr, "leash history: %s\n", err);
		return cmd_end(s, &c, L, rc > 0 ? EXIT_CONFIG : EXIT_PROBLEMS);
	}
	if ((rc = history_store(&c, job, &s)) != 0)
		return cmd_end(s, &c, L, rc);
	if (view_history(L, &c, s, job, since_at, lim, view, err, sizeof err) < 0) {
		fprintf(stderr, "leash history: %s\n", err);
		return cmd_end(s, &c, L, EXIT_PROBLEMS);
	}
	fputs(lua_tostring(L, -1), stdout);
	if (view == VIEW_JSON)
		fputc('\n', stdout);
	return cmd_end(s, &c, L, 0);
}
