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

int cmd_history(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "since", required_argument, NULL, 's' },
		{ "limit", required_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = NULL, *since = NULL, *limit = NULL, *job = NULL;
	struct store_opts o;
	struct store *s = NULL;
	struct cfg c;
	lua_State *L;
	char err[STORE_ERR_MAX + 256];
	int64_t since_at = STORE_NO_TIME;
	size_t lim = 0;
	int opt, json = 0, rc = EXIT_PROBLEMS;

	while ((opt = getopt_long(argc, argv, "c:", longopts, NULL)) != -1) {
		if (opt == 'c') {
			path = optarg;
		} else if (opt == 'j') {
			json = 1;
		} else if (opt == 's') {
			since = optarg;
		} else if (opt == 'n') {
			limit = optarg;
		} else {
			fputs(cmd_usage, stderr);
			return EXIT_CONFIG;
		}
	}
	if (optind < argc)
		job = argv[optind++];
	if (optind < argc) {
		fprintf(stderr, "leash history: unexpected argument \"%s\" (one JOB at most)\n%s",
		        argv[optind], cmd_usage);
		return EXIT_CONFIG;
	}
	if (cmd_setup(path, &L, &c) < 0)
		return EXIT_CONFIG;
	/* The arguments are checked by leash.history, against the local clock. */
	switch (view_history_args(L, job, since, limit, &since_at, &lim, err, sizeof err)) {
	case 0:
		break;
	case 1:
		fprintf(stderr, "leash history: %s\n", err);
		rc = EXIT_CONFIG;
		goto done;
	default:
		fprintf(stderr, "leash history: %s\n", err);
		goto done;
	}
	if (!c.singleton) {
		fprintf(stderr, "leash history: singleton mode is off in %s ([singleton] enabled = "
		        "false): there is no store and so no run ledger\n", c.file);
		goto done;
	}
	if (store_opts_from(&c, &o, err, sizeof err) < 0) {
		fprintf(stderr, "leash history: %s\n", err);
		rc = EXIT_CONFIG;
		goto done;
	}
	o.mode = STORE_READ;            /* never makes the file or a table */
	if (!(s = store_open(c.provider, &o, err, sizeof err))) {
		fprintf(stderr, "leash history: cannot open the %s store: %s\n", c.provider, err);
		goto done;
	}
	/* A job nobody knows is an error, as for the controls (a typo read
	 * as "no runs" would hide it). */
	switch (job ? cmd_job_known(s, &c, job) : 1) {
	case 1:
		break;
	case 0:
		fprintf(stderr, "leash history: no job %s in the store or in %s/\n", job, c.jobs);
		goto done;
	default:
		fprintf(stderr, "leash history: cannot read the leases of the %s store: %s\n",
		        c.provider, s->err);
		goto done;
	}
	if (view_history(L, &c, s, job, since_at, lim, json, err, sizeof err) < 0) {
		fprintf(stderr, "leash history: %s\n", err);
		goto done;
	}
	fputs(lua_tostring(L, -1), stdout);
	if (json)
		fputc('\n', stdout);
	rc = 0;
done:
	return cmd_end(s, &c, L, rc);
}
