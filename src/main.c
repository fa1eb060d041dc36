/* main.c - the command line: run, status, check, version. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>
#include <sqlite3.h>

#include "bind/bind.h"
#include "cfg.h"
#include "clock.h"
#include "job.h"
#include "log.h"
#include "loop.h"
#include "lx.h"
#include "runner.h"
#include "store/store.h"

#define EXIT_PROBLEMS 1
#define EXIT_CONFIG 2

static const char usage[] =
	"usage: leash run [-c FILE]\n"
	"       leash status [-c FILE] [--json]\n"
	"       leash check [-c FILE] [--next N]\n"
	"       leash version\n";

/* Everything a command needs: the Lua state and the checked config. */
static int setup(const char *path, lua_State **L, struct cfg *c)
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
	return 0;
}

static int cmd_run(int argc, char **argv)
{
	const char *path = NULL;
	struct cfg c;
	lua_State *L;
	int opt, rc;

	while ((opt = getopt(argc, argv, "c:")) != -1) {
		if (opt != 'c') {
			fputs(usage, stderr);
			return EXIT_CONFIG;
		}
		path = optarg;
	}
	if (setup(path, &L, &c) < 0)
		return EXIT_CONFIG;
	rc = loop_run(L, &c);
	cfg_free(&c);
	lua_close(L);
	return rc;
}

/* ---- check ---- */

struct check {
	lua_State *L;
	struct job **jobs;
	size_t njobs;
	int problems;
};

static void check_good(void *arg, struct job *j)
{
	struct check *ck = arg;
	struct job **nj = realloc(ck->jobs, (ck->njobs + 1) * sizeof *nj);

	/* Warnings are printed like problems but are none. */
	if (j->warnings)
		printf("%s\n", j->warnings);
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
	if (strncmp(msg, file, strlen(file)) == 0)
		printf("%s\n", msg);
	else
		printf("%s: %s\n", file, msg);
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

static int cmd_check(int argc, char **argv)
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
			fputs(usage, stderr);
			return EXIT_CONFIG;
		}
	}
	if (setup(path, &ck.L, &c) < 0)
		return EXIT_CONFIG;
	seen = job_load_dir(ck.L, c.jobs, check_good, check_bad, &ck);
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

/* ---- status ---- */

static int cmd_status(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = NULL;
	struct store_opts o;
	struct store *s;
	struct lease_row *rows = NULL;
	struct store_replica *reps = NULL;
	size_t nreps = 0;
	int64_t rnow = 0;
	struct cfg c;
	lua_State *L;
	char err[STORE_ERR_MAX + 256];
	size_t n = 0;
	int64_t now = 0;
	int opt, json = 0, rc = EXIT_PROBLEMS;

	while ((opt = getopt_long(argc, argv, "c:", longopts, NULL)) != -1) {
		if (opt == 'c') {
			path = optarg;
		} else if (opt == 'j') {
			json = 1;
		} else {
			fputs(usage, stderr);
			return EXIT_CONFIG;
		}
	}
	if (setup(path, &L, &c) < 0)
		return EXIT_CONFIG;
	if (!c.singleton) {
		if (json)
			printf("{\"provider\":null,\"singleton\":false,\"leases\":[]}\n");
		else
			printf("singleton mode is off in %s ([singleton] enabled = false): every replica "
			       "runs every job and no leases are kept\n", c.file);
		rc = 0;
		goto done;
	}
	if (cfg_store_opts(&c, &o, err, sizeof err) < 0) {
		fprintf(stderr, "leash status: %s\n", err);
		rc = EXIT_CONFIG;
		goto done;
	}
	s = store_open(c.provider, &o, err, sizeof err);
	if (!s) {
		fprintf(stderr, "leash status: cannot open the %s store: %s\n", c.provider, err);
		goto done;
	}
	if (store_list(s, &rows, &n, &now) != STORE_OK) {
		fprintf(stderr, "leash status: cannot list the leases in the %s store: %s\n",
		        c.provider, s->err);
		store_close(s);
		goto done;
	}
	/* The replicas' presence rows; a store without them shows none. */
	if (store_replicas(s, &reps, &nreps, &rnow) != STORE_OK) {
		reps = NULL;
		nreps = 0;
	}
	store_close(s);

	if (json)
		lua_pushstring(L, c.provider);
	lx_push_rows(L, rows, n);
	lua_pushinteger(L, now);
	if (json) {
		lx_push_replicas(L, reps, nreps);
		lua_pushinteger(L, c.lease_ms);
	}
	if (lx_callmod(L, "leash.status", json ? "json" : "table", json ? 5 : 2, 1) != LUA_OK)
		goto lua_fail;
	fputs(lua_tostring(L, -1), stdout);
	lua_pop(L, 1);
	if (!json) {
		lx_push_replicas(L, reps, nreps);
		lx_push_rows(L, rows, n);
		lua_pushinteger(L, now);
		lua_pushinteger(L, c.lease_ms);
		if (lx_callmod(L, "leash.status", "replicas_table", 4, 1) != LUA_OK)
			goto lua_fail;
		fputs(lua_tostring(L, -1), stdout);
	}
	if (json)
		fputc('\n', stdout);
	rc = 0;
	goto done;
lua_fail:
	fprintf(stderr, "leash status: %s\n", lx_report(L, err, sizeof err));
done:
	free(rows);
	store_free_replicas(reps, nreps);
	cfg_free(&c);
	lua_close(L);
	return rc;
}

/* ---- version ---- */

static int cmd_version(int argc, char **argv)
{
	const struct store_provider *p;

	(void)argc;
	(void)argv;
	printf("leash %s\n", LEASH_VERSION);
	printf("%s\n", LUA_RELEASE);
	/* One line per provider's client library: SQLite, libpq, FreeTDS. */
	for (int i = 0; (p = store_provider_at(i)); i++) {
		const char *v;

		if (!p->client)
			continue;
		v = p->client_version ? p->client_version() : NULL;
		printf("%s %s\n", p->client, v ? v : "not installed");
	}
	return 0;
}

static int cmd_help(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fputs(usage, stdout);
	return 0;
}

static const struct command {
	const char *name;
	int (*fn)(int, char **);
} commands[] = {
	{ "run", cmd_run },
	{ "status", cmd_status },
	{ "check", cmd_check },
	{ "version", cmd_version },
	{ "help", cmd_help },
	{ "--help", cmd_help },
	{ "--version", cmd_version },
};

int main(int argc, char **argv)
{
	if (argc < 2) {
		fputs(usage, stderr);
		return EXIT_CONFIG;
	}
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "leash: unknown command \"%s\"\n%s", argv[1], usage);
	return EXIT_CONFIG;
}
