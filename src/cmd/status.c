/* cmd/status.c - leash status: who holds what, each job's state, --check for monitoring, --watch. */
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

/* leash status without --leases: the jobs view, once or every second. */
static int status_jobs(lua_State *L, const struct cfg *c, int view, int watch, long fail)
{
	struct view_jobs d = { .L = L };
	struct store_opts o;
	struct store *s = NULL;
	char err[2048], oerr[STORE_ERR_MAX + 256];
	int rc = EXIT_PROBLEMS, tty = isatty(STDOUT_FILENO);

	if (store_opts_from(c, &o, err, sizeof err) < 0) {
		if (view == VIEW_CHECK) {
			printf("LEASH UNKNOWN - %s\n", err);
			return EXIT_UNKNOWN;
		}
		fprintf(stderr, "leash status: %s\n", err);
		return EXIT_CONFIG;
	}
	o.mode = STORE_READ;            /* never makes the file or a table */
	if (view != VIEW_LEASES && view != VIEW_LEASES_JSON)
		view_jobs_load(&d, L, c->jobs, c->load_timeout_ms);
	for (;;) {
		int top = lua_gettop(L), got = -1;

		if (!s && !(s = store_open(c->provider, &o, oerr, sizeof oerr)))
			snprintf(err, sizeof err, "cannot open the %s store: %s", c->provider, oerr);
		else
			got = view_jobs(L, c, s, &d, view, fail, err, sizeof err);
		if (watch && tty)
			fputs("\033[H\033[2J", stdout);
		if (got < 0 && view == VIEW_CHECK) {
			lua_pushstring(L, err);
			if (lx_callmod(L, "leash.jobs_view", "unknown", 1, 1) == LUA_OK)
				fputs(lua_tostring(L, -1), stdout);
			rc = EXIT_UNKNOWN;
		} else if (got < 0) {
			fprintf(watch ? stdout : stderr, "leash status: %s\n", err);
			rc = EXIT_PROBLEMS;
		} else {
			fputs(lua_tostring(L, -1), stdout);
			if (view == VIEW_JSON || view == VIEW_LEASES_JSON)
				fputc('\n', stdout);
			rc = got;
		}
		lua_settop(L, top);
		if (got < 0 && s) {             /* open again next time: a new connection */
			store_close(s);
			s = NULL;
		}
		if (!watch)
			break;
		if (!tty)
			fputc('\n', stdout);
		fflush(stdout);
		sleep(1);
	}
	if (s)
		store_close(s);
	view_jobs_free(&d);
	return rc;
}

/* leash status --leases, once: the lease table (and the replicas), as a
 * table or JSON. */
static int status_leases(lua_State *L, const struct cfg *c, int json)
{
	struct store_opts o;
	struct store *s;
	struct lease_row *rows = NULL;
	struct store_replica *reps = NULL;
	size_t n = 0, nreps = 0;
	int64_t now = 0, rnow = 0;
	char err[STORE_ERR_MAX + 256];
	int rc = EXIT_PROBLEMS;

	if (store_opts_from(c, &o, err, sizeof err) < 0) {
		fprintf(stderr, "leash status: %s\n", err);
		return EXIT_CONFIG;
	}
	o.mode = STORE_READ;
	if (!(s = store_open(c->provider, &o, err, sizeof err))) {
		fprintf(stderr, "leash status: cannot open the %s store: %s\n", c->provider, err);
		return EXIT_PROBLEMS;
	}
	if (store_list(s, &rows, &n, &now) != STORE_OK) {
		fprintf(stderr, "leash status: cannot list the leases in the %s store: %s\n",
		        c->provider, s->err);
		store_close(s);
		return EXIT_PROBLEMS;
	}
	/* The replicas' presence rows; a store without them shows none. */
	if (store_replicas(s, &reps, &nreps, &rnow) != STORE_OK) {
		reps = NULL;
		nreps = 0;
	}
	store_close(s);

	if (json)
		lua_pushstring(L, c->provider);
	lx_push_rows(L, rows, n);
	lua_pushinteger(L, now);
	if (json) {
		lx_push_replicas(L, reps, nreps);
		lua_pushinteger(L, c->lease_ms);
	}
	if (lx_callmod(L, "leash.status", json ? "json" : "table", json ? 5 : 2, 1) != LUA_OK)
		goto lua_fail;
	fputs(lua_tostring(L, -1), stdout);
	lua_pop(L, 1);
	if (!json) {
		lx_push_replicas(L, reps, nreps);
		lx_push_rows(L, rows, n);
		lua_pushinteger(L, now);
		lua_pushinteger(L, c->lease_ms);
		if (lx_callmod(L, "leash.status", "replicas_table", 4, 1) != LUA_OK)
			goto lua_fail;
		fputs(lua_tostring(L, -1), stdout);
	} else {
		fputc('\n', stdout);
	}
	rc = 0;
	goto done;
lua_fail:
	fprintf(stderr, "leash status: %s\n", lx_report(L, err, sizeof err));
done:
	free(rows);
	store_free_replicas(reps, nreps);
	return rc;
}

/* leash status's options: the view they ask for (a VIEW_* kind), or -1
 * after saying what is wrong. */
static int status_opts(int argc, char **argv, const char **path, int *watch, long *fail)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "wide", no_argument, NULL, 'W' },
		{ "leases", no_argument, NULL, 'l' },
		{ "watch", no_argument, NULL, 'w' },
		{ "check", no_argument, NULL, 'k' },
		{ "fail", required_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};
	int opt, json = 0, wide = 0, leases = 0, check = 0;
	char *end;

	while ((opt = getopt_long(argc, argv, "c:w", longopts, NULL)) != -1) {
		if (opt == 'c') {
			*path = optarg;
		} else if (opt == 'j' || opt == 'W' || opt == 'l' || opt == 'w' || opt == 'k') {
			*(opt == 'j' ? &json : opt == 'W' ? &wide : opt == 'l' ? &leases
			  : opt == 'w' ? watch : &check) = 1;
		} else if (opt == 'f') {
			*fail = strtol(optarg, &end, 10);
			if (!*optarg || *end || *fail < 1 || *fail > 1000000) {
				fprintf(stderr, "leash status: --fail %s: expected a count of failures in a "
				        "row from 1 to 1000000\n", optarg);
				return -1;
			}
		} else {
			fputs(cmd_usage, stderr);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "leash status: unexpected argument \"%s\"\n%s", argv[optind], cmd_usage);
		return -1;
	}
	if (check && (json || leases || *watch || wide)) {
		fprintf(stderr, "leash status: --check prints a monitor's lines; it goes with neither "
		        "--json, --wide, --leases nor --watch\n");
		return -1;
	}
	if (wide && (json || leases)) {
		fprintf(stderr, "leash status: --wide shows the jobs table whole; it goes with "
		        "neither --json nor --leases\n");
		return -1;
	}
	if (*fail && !check) {
		fprintf(stderr, "leash status: --fail %ld: only with --check\n", *fail);
		return -1;
	}
	return check ? VIEW_CHECK : leases ? (json ? VIEW_LEASES_JSON : VIEW_LEASES)
	       : json ? VIEW_JSON : wide ? VIEW_WIDE : VIEW_TABLE;
}

int cmd_status(int argc, char **argv)
{
	const char *path = NULL;
	int watch = 0, rc, view;
	long fail = 0;
	struct cfg c;
	lua_State *L;

	if ((view = status_opts(argc, argv, &path, &watch, &fail)) < 0)
		return EXIT_CONFIG;
	if (cmd_setup(path, &L, &c) < 0) {
		if (view == VIEW_CHECK)
			printf("LEASH UNKNOWN - the config cannot be read (see leash check)\n");
		return view == VIEW_CHECK ? EXIT_UNKNOWN : EXIT_CONFIG;
	}
	if (!c.singleton && view == VIEW_CHECK) {
		printf("LEASH UNKNOWN - singleton mode is off in %s: there is no store to check\n",
		       c.file);
		rc = EXIT_UNKNOWN;
	} else if (!c.singleton) {
		if (view == VIEW_JSON || view == VIEW_LEASES_JSON)
			printf("%s\n", VIEW_NO_STORE_JSON);
		else
			printf("singleton mode is off in %s ([singleton] enabled = false): every replica "
			       "runs every job and no leases are kept\n", c.file);
		rc = 0;
	} else if (watch || (view != VIEW_LEASES && view != VIEW_LEASES_JSON)) {
		rc = status_jobs(L, &c, view, watch, fail ? fail : 1);
	} else {
		rc = status_leases(L, &c, view == VIEW_LEASES_JSON);
	}
	return cmd_end(NULL, &c, L, rc);
}
