/* cmd/check.c - leash check: loads the config and every job file as `leash run` would, and says what is wrong (or when the next fires fall). */
#include <getopt.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
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
#include "core/esc.h"
#include "plan/job.h"
#include "core/log.h"
#include "loop.h"
#include "core/lx.h"
#include "cluster/presence.h"
#include "launch/runner.h"
#include "store/store.h"
#include "web/view.h"
#include "cmd/cmd.h"

struct check {
	lua_State *L;
	struct job **jobs;
	size_t njobs;
	int problems;
};

static void put_stdout(void *arg, const char *s, size_t n)
{
	fwrite(s, 1, n, arg);
}

/* A problem with a job file on a line of its own: what a file or its error
 * holds, escaped (core/esc.h), as the log would show it. */
static void print_problem(const char *file, const char *msg)
{
	if (file) {
		esc_text(put_stdout, stdout, file, strlen(file), SIZE_MAX, ESC_LINE);
		fputs(": ", stdout);
	}
	esc_text(put_stdout, stdout, msg, strlen(msg), SIZE_MAX, ESC_LINE);
	fputc('\n', stdout);
}

static void check_good(void *arg, struct job *j)
{
	struct check *ck = arg;
	struct job **nj = realloc(ck->jobs, (ck->njobs + 1) * sizeof *nj);

	/* Warnings are printed like problems but are none. */
	for (char *w = j->warnings, *nl; w && *w; w = nl ? nl + 1 : w + strlen(w)) {
		if ((nl = strchr(w, '\n')))
			*nl = '\0';    /* one a line */
		print_problem(NULL, w);
		if (nl)
			*nl = '\n';
	}
	if (!nj) {
		job_free(ck->L, j);
		return;
	}
	ck->jobs = nj;
	ck->jobs[ck->njobs++] = j;
}

static void check_bad(void *arg, const char *file, const char *msg)
{
	struct check *ck = arg;

	ck->problems++;
	/* Messages from leash.job start with the file; others get it here. */
	print_problem(strncmp(msg, file, strlen(file)) == 0 ? NULL : file, msg);
}

/* Prints fire time t of j for --next, with what a daylight-saving gap did
 * to it (leash.cron.note), if anything. */
static void print_fire(lua_State *L, struct job *j, int64_t t)
{
	char buf[32];
	int top = lua_gettop(L);
	const char *note = NULL;

	if (j->kind == JOB_CRON) {
		lua_rawgeti(L, LUA_REGISTRYINDEX, j->ref);
		lua_getfield(L, -1, "cron");
		lua_pushinteger(L, t / 1000);
		lua_getfield(L, -3, "tz");
		if (lx_callmod(L, "leash.cron", "note", 3, 1) == LUA_OK && lua_isstring(L, -1))
			note = lua_tostring(L, -1);
	}
	if (note)
		printf("%s %s  (%s)\n", j->name, clock_iso(buf, sizeof buf, t, t % 1000 != 0), note);
	else
		printf("%s %s\n", j->name, clock_iso(buf, sizeof buf, t, t % 1000 != 0));
	lua_settop(L, top);
}

int cmd_check(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "next", required_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = NULL;
	struct check ck = { 0 };
	struct cfg c;
	long next = 0;
	int opt, seen;

	while ((opt = getopt_long(argc, argv, "c:", longopts, NULL)) != -1) {
		if (opt == 'c') {
			path = optarg;
		} else if (opt == 'n') {
			char *end;
			next = strtol(optarg, &end, 10);
			if (*end || next < 1 || next > 10000) {
				fprintf(stderr, "leash check: --next %s: expected a count from 1 to 10000\n",
				        optarg);
				return EXIT_CONFIG;
			}
		} else {
			fputs(cmd_usage, stderr);
			return EXIT_CONFIG;
		}
	}
	if (cmd_setup(path, &ck.L, &c) < 0)
		return EXIT_CONFIG;
	seen = job_load_dir(ck.L, c.jobs, c.load_timeout_ms, check_good, check_bad, &ck);
	if (seen == 0) {
		printf("%s: no job files (a job is a NAME.lua file there)\n", c.jobs);
		ck.problems++;
	}
	for (size_t i = 0; i < ck.njobs && next > 0; i++) {
		struct job *j = ck.jobs[i];
		int64_t t = clock_wall_ms();

		for (long k = 0; k < next && j->kind != JOB_SERVICE; k++) {
			t = job_next_fire(ck.L, j, t);
			if (t < 0)
				break;
			print_fire(ck.L, j, t);
		}
	}
	fprintf(stderr, "%s: %zu job%s ok, %d problem%s\n", c.file, ck.njobs,
	        ck.njobs == 1 ? "" : "s", ck.problems, ck.problems == 1 ? "" : "s");
	for (size_t i = 0; i < ck.njobs; i++)
		job_free(ck.L, ck.jobs[i]);
	free(ck.jobs);
	cfg_free(&c);
	lua_close(ck.L);
	return ck.problems ? EXIT_PROBLEMS : 0;
}
