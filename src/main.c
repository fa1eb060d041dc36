/* main.c - the command line: run, status, history, check, the controls
 * (pause, resume, trigger, handoff, drain, undrain), version. */
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
#include "cfg.h"
#include "http.h"
#include "clock.h"
#include "esc.h"
#include "job.h"
#include "log.h"
#include "loop.h"
#include "lx.h"
#include "presence.h"
#include "runner.h"
#include "store/store.h"
#include "view.h"

#define EXIT_PROBLEMS 1
#define EXIT_CONFIG 2
#define EXIT_UNKNOWN 3          /* status --check: the store cannot be read */

static const char usage[] =
	"usage: leash run [-c FILE]\n"
	"       leash status [-c FILE] [--json] [--leases] [-w|--watch] [--check [--fail N]]\n"
	"       leash history [-c FILE] [JOB] [--since D] [--limit N] [--json]\n"
	"       leash check [-c FILE] [--next N]\n"
	"       leash pause [-c FILE] JOB [--for D]\n"
	"       leash resume [-c FILE] JOB\n"
	"       leash trigger [-c FILE] JOB\n"
	"       leash handoff [-c FILE] JOB\n"
	"       leash drain [-c FILE] REPLICA [--until-restart]\n"
	"       leash undrain [-c FILE] REPLICA\n"
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

/* -c FILE, then fn with the Lua state and the checked config: `leash run`,
 * and `leash _http`, the HTTP server process that `leash run` starts
 * (http.c) and nothing else does (not in the usage). */
static int with_config(int argc, char **argv, int (*fn)(lua_State *, const struct cfg *))
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
	rc = fn(L, &c);
	cfg_free(&c);
	lua_close(L);
	return rc;
}

static int cmd_run(int argc, char **argv)
{
	return with_config(argc, argv, loop_run);
}

static int cmd_http(int argc, char **argv)
{
	return with_config(argc, argv, httpd_serve);
}

/* ---- check ---- */

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
 * holds, escaped (esc.h), as the log would show it. */
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

/* leash status without --leases: the jobs view, once or every second. */
static int status_jobs(lua_State *L, const struct cfg *c, int view, int watch, long fail)
{
	struct view_jobs d = { L, NULL, 0 };
	struct store_opts o;
	struct store *s = NULL;
	char err[2048], oerr[STORE_ERR_MAX + 256];
	int rc = EXIT_PROBLEMS, tty = isatty(STDOUT_FILENO);

	if (cfg_store_opts(c, &o, err, sizeof err) < 0) {
		if (view == VIEW_CHECK) {
			printf("LEASH UNKNOWN - %s\n", err);
			return EXIT_UNKNOWN;
		}
		fprintf(stderr, "leash status: %s\n", err);
		return EXIT_CONFIG;
	}
	if (view != VIEW_LEASES && view != VIEW_LEASES_JSON)
		view_jobs_load(&d, L, c->jobs);
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

static int cmd_status(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "leases", no_argument, NULL, 'l' },
		{ "watch", no_argument, NULL, 'w' },
		{ "check", no_argument, NULL, 'k' },
		{ "fail", required_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = NULL;
	int leases = 0, watch = 0, check = 0;
	long fail = 0;
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

	while ((opt = getopt_long(argc, argv, "c:w", longopts, NULL)) != -1) {
		if (opt == 'c') {
			path = optarg;
		} else if (opt == 'j') {
			json = 1;
		} else if (opt == 'l') {
			leases = 1;
		} else if (opt == 'w') {
			watch = 1;
		} else if (opt == 'k') {
			check = 1;
		} else if (opt == 'f') {
			char *end;
			fail = strtol(optarg, &end, 10);
			if (!*optarg || *end || fail < 1 || fail > 1000000) {
				fprintf(stderr, "leash status: --fail %s: expected a count of failures in a "
				        "row from 1 to 1000000\n", optarg);
				return EXIT_CONFIG;
			}
		} else {
			fputs(usage, stderr);
			return EXIT_CONFIG;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "leash status: unexpected argument \"%s\"\n%s", argv[optind], usage);
		return EXIT_CONFIG;
	}
	if (check && (json || leases || watch)) {
		fprintf(stderr, "leash status: --check prints a monitor's lines; it goes with neither "
		        "--json, --leases nor --watch\n");
		return EXIT_CONFIG;
	}
	if (fail && !check) {
		fprintf(stderr, "leash status: --fail %ld: only with --check\n", fail);
		return EXIT_CONFIG;
	}
	if (setup(path, &L, &c) < 0) {
		if (check)
			printf("LEASH UNKNOWN - the config cannot be read (see leash check)\n");
		return check ? EXIT_UNKNOWN : EXIT_CONFIG;
	}
	if (!c.singleton && check) {
		printf("LEASH UNKNOWN - singleton mode is off in %s: there is no store to check\n",
		       c.file);
		rc = EXIT_UNKNOWN;
		goto done;
	}
	if (c.singleton && (!leases || watch)) {
		int view = check ? VIEW_CHECK : leases ? (json ? VIEW_LEASES_JSON : VIEW_LEASES)
		           : json ? VIEW_JSON : VIEW_TABLE;

		rc = status_jobs(L, &c, view, watch, fail ? fail : 1);
		goto done;
	}
	if (!c.singleton) {
		if (json)
			printf("%s\n", VIEW_NO_STORE_JSON);
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

/* ---- history ---- */

static int cmd_history(int argc, char **argv)
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
			fputs(usage, stderr);
			return EXIT_CONFIG;
		}
	}
	if (optind < argc)
		job = argv[optind++];
	if (optind < argc) {
		fprintf(stderr, "leash history: unexpected argument \"%s\" (one JOB at most)\n%s",
		        argv[optind], usage);
		return EXIT_CONFIG;
	}
	if (setup(path, &L, &c) < 0)
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
	if (cfg_store_opts(&c, &o, err, sizeof err) < 0) {
		fprintf(stderr, "leash history: %s\n", err);
		rc = EXIT_CONFIG;
		goto done;
	}
	if (!(s = store_open(c.provider, &o, err, sizeof err))) {
		fprintf(stderr, "leash history: cannot open the %s store: %s\n", c.provider, err);
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
	if (s)
		store_close(s);
	cfg_free(&c);
	lua_close(L);
	return rc;
}

/* ---- controls: pause, resume, trigger, handoff ---- */

/* Who runs the command, for the ledger: user@host. */
static void actor_of(char *out, size_t len)
{
	const char *user = getenv("USER");
	struct passwd *pw;
	char host[256] = "";

	if ((!user || !*user) && (pw = getpwuid(getuid())))
		user = pw->pw_name;
	if (gethostname(host, sizeof host - 1) < 0 || !host[0])
		snprintf(host, sizeof host, "localhost");
	snprintf(out, len, "%.80s@%.100s", user && *user ? user : "?", host);
}

/* Whether jobs/NAME.lua exists (a job only this host's jobs/ knows). */
static int local_job(const struct cfg *c, const char *job)
{
	char file[4096];

	if (strchr(job, '/') || job[0] == '.')
		return 0;
	snprintf(file, sizeof file, "%s/%s.lua", c->jobs, job);
	return access(file, F_OK) == 0;
}

/* The ledger's "control" row of a control on job at db time at: owner and
 * actor user@host, the action (text) in the error column.  0, or -1 with
 * the reason printed. */
static int record_control(struct store *s, const char *cmd, const char *job, int64_t at,
                          int64_t token, const char *text)
{
	char actor[STORE_NAME_MAX + 1];
	struct store_run r = {
		.job = job, .scheduled_at = at, .owner = actor, .token = token,
		.claimed_at = STORE_NO_TIME, .started_at = STORE_NO_TIME,
		.ended_at = STORE_NO_TIME, .outcome = "control", .exit_code = STORE_NO_CODE,
		.exit_signal = STORE_NO_CODE, .duration_ms = STORE_NO_TIME, .error = text,
		.actor = actor,
	};

	actor_of(actor, sizeof actor);
	if (store_record_runs(s, &r, 1) == STORE_OK)
		return 0;
	fprintf(stderr, "leash %s: done, but not recorded in the run ledger: %s\n", cmd, s->err);
	return -1;
}

/* A control's store, from the checked config c: NULL with the reason
 * printed and *rc the exit code when singleton mode is off or it cannot
 * be opened. */
static struct store *control_store(const char *cmd, const struct cfg *c, int *rc)
{
	char err[STORE_ERR_MAX + 256];
	struct store_opts o;
	struct store *s;

	*rc = EXIT_PROBLEMS;
	if (!c->singleton) {
		fprintf(stderr, "leash %s: singleton mode is off in %s ([singleton] enabled = false): "
		        "there is no store to keep controls in\n", cmd, c->file);
		return NULL;
	}
	if (cfg_store_opts(c, &o, err, sizeof err) < 0) {
		fprintf(stderr, "leash %s: %s\n", cmd, err);
		*rc = EXIT_CONFIG;
		return NULL;
	}
	if (!(s = store_open(c->provider, &o, err, sizeof err)))
		fprintf(stderr, "leash %s: cannot open the %s store: %s\n", cmd, c->provider, err);
	return s;
}

/* One control on JOB: written to its lease row, and recorded in the run
 * ledger as a "control" row (owner and actor user@host, error the action). */
static int control(int argc, char **argv, const char *cmd, int what)
{
	static const struct option longopts[] = {
		{ "for", required_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = NULL, *job = NULL, *dur = NULL;
	struct store *s = NULL;
	struct lease_row *rows = NULL, *row = NULL;
	struct cfg c;
	lua_State *L;
	char err[STORE_ERR_MAX + 256], text[160], at[32];
	size_t n = 0;
	int64_t now = 0, at_db = 0, for_ms = 0, until = 0;
	int opt, rc = EXIT_PROBLEMS, held;

	while ((opt = getopt_long(argc, argv, "c:", longopts, NULL)) != -1) {
		if (opt == 'c') {
			path = optarg;
		} else if (opt == 'f' && what == STORE_CTL_PAUSE) {
			dur = optarg;
		} else {
			fputs(usage, stderr);
			return EXIT_CONFIG;
		}
	}
	if (optind < argc)
		job = argv[optind++];
	if (!job || optind < argc) {
		fprintf(stderr, "leash %s: %s\n%s", cmd, job ? "one JOB only" : "which JOB?", usage);
		return EXIT_CONFIG;
	}
	if (setup(path, &L, &c) < 0)
		return EXIT_CONFIG;
	if (dur) {
		lua_pushstring(L, dur);
		if (lx_callmod(L, "leash.duration", "parse", 1, 2) != LUA_OK)
			goto lua_fail;
		if (!lua_isinteger(L, -2) || lua_tointeger(L, -2) <= 0) {
			fprintf(stderr, "leash %s: --for: %s\n", cmd, lua_isstring(L, -1)
			        ? lua_tostring(L, -1) : "a pause must last more than 0s");
			rc = EXIT_CONFIG;
			goto done;
		}
		for_ms = lua_tointeger(L, -2);
		lua_settop(L, 0);
	}
	if (!(s = control_store(cmd, &c, &rc)))
		goto done;
	if (store_list(s, &rows, &n, &now) != STORE_OK) {
		fprintf(stderr, "leash %s: cannot read the leases of the %s store: %s\n", cmd,
		        c.provider, s->err);
		goto done;
	}
	for (size_t i = 0; i < n && !row; i++)
		if (strcmp(rows[i].name, job) == 0)
			row = &rows[i];
	if (!row && !local_job(&c, job)) {
		fprintf(stderr, "leash %s: no job %s in the store or in %s/\n", cmd, job, c.jobs);
		goto done;
	}
	held = row && row->owner[0] && row->expires_at > now;
	if ((what == STORE_CTL_TRIGGER || what == STORE_CTL_HANDOFF) && !held) {
		fprintf(stderr, "leash %s: no replica holds %s now: nothing to %s\n", cmd, job, cmd);
		goto done;
	}
	if (what == STORE_CTL_PAUSE)
		until = for_ms ? now + for_ms : STORE_PAUSED_FOREVER;
	rc = store_control(s, job, what, until, &at_db);
	if (rc != STORE_OK) {
		fprintf(stderr, "leash %s: %s\n", cmd, rc == STORE_NO ? "the job's lease row is gone"
		        : s->err);
		rc = EXIT_PROBLEMS;
		goto done;
	}
	rc = EXIT_PROBLEMS;
	if (what == STORE_CTL_PAUSE && for_ms)
		snprintf(text, sizeof text, "pause for %s (until %s)", dur,
		         clock_iso(at, sizeof at, until, 1));
	else
		snprintf(text, sizeof text, "%s", cmd);
	if (record_control(s, cmd, job, at_db, row ? row->token : 0, text) < 0)
		goto done;
	if (what == STORE_CTL_PAUSE)
		printf("paused %s%s%s: %s\n", job, for_ms ? " until " : "",
		       for_ms ? clock_iso(at, sizeof at, until, 1) : "",
		       held ? "its holder skips its fires from its next renew" : "no replica holds it now");
	else if (what == STORE_CTL_RESUME)
		printf("resumed %s\n", job);
	else if (what == STORE_CTL_TRIGGER)
		printf("triggered %s: %s runs it once at its next renew\n", job, row->owner);
	else
		printf("handoff of %s asked: %s releases it at its next safe point\n", job, row->owner);
	rc = 0;
	goto done;
lua_fail:
	fprintf(stderr, "leash %s: %s\n", cmd, lx_report(L, err, sizeof err));
done:
	if (s)
		store_close(s);
	free(rows);
	cfg_free(&c);
	lua_close(L);
	return rc;
}

static int cmd_pause(int argc, char **argv)
{
	return control(argc, argv, "pause", STORE_CTL_PAUSE);
}

static int cmd_resume(int argc, char **argv)
{
	return control(argc, argv, "resume", STORE_CTL_RESUME);
}

static int cmd_trigger(int argc, char **argv)
{
	return control(argc, argv, "trigger", STORE_CTL_TRIGGER);
}

static int cmd_handoff(int argc, char **argv)
{
	return control(argc, argv, "handoff", STORE_CTL_HANDOFF);
}

/* ---- drain, undrain ---- */

/* The presence rows REPLICA means: the row whose owner id it is, else
 * every row of that replica name (live ones only, when live_ms > 0).
 * Their owners into owners (borrowed from rows); *by_name says which. */
static size_t replica_rows(const struct store_replica *rows, size_t n, const char *replica,
                           int64_t now, int64_t live_ms, const char **owners, int *by_name)
{
	char name[STORE_NAME_MAX + 1];
	size_t k = 0;

	*by_name = 0;
	for (size_t i = 0; i < n; i++)
		if (strcmp(rows[i].owner, replica) == 0) {
			owners[0] = rows[i].owner;
			return 1;
		}
	*by_name = 1;
	for (size_t i = 0; i < n; i++) {
		presence_name_of(rows[i].owner, name, sizeof name);
		if (strcmp(name, replica) == 0 && (live_ms <= 0 || now - rows[i].heartbeat < live_ms))
			owners[k++] = rows[i].owner;
	}
	return k;
}

/* leash drain / undrain REPLICA: the presence rows' draining column (and,
 * for a drain by name without --until-restart, the name's drain marker,
 * so that the name's later processes start drained), and a "control" row
 * in the ledger under the job "@REPLICA" (owner and actor user@host). */
static int drain(int argc, char **argv, const char *cmd, int on)
{
	static const struct option longopts[] = {
		{ "until-restart", no_argument, NULL, 'u' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = NULL, *replica = NULL, **owners = NULL;
	struct store *s = NULL;
	struct store_replica *rows = NULL;
	struct cfg c;
	lua_State *L;
	char job[STORE_NAME_MAX + 1], text[STORE_NAME_MAX + 160];
	size_t n = 0, k;
	int64_t now = 0, at_db = 0, changed = 0;
	int opt, rc = EXIT_PROBLEMS, until_restart = 0, by_name;

	while ((opt = getopt_long(argc, argv, "c:", longopts, NULL)) != -1) {
		if (opt == 'c') {
			path = optarg;
		} else if (opt == 'u' && on) {
			until_restart = 1;
		} else {
			fputs(usage, stderr);
			return EXIT_CONFIG;
		}
	}
	if (optind < argc)
		replica = argv[optind++];
	if (!replica || optind < argc) {
		fprintf(stderr, "leash %s: %s\n%s", cmd, replica ? "one REPLICA only" : "which REPLICA? "
		        "(a replica's name or a full owner id, as leash status shows them)", usage);
		return EXIT_CONFIG;
	}
	if (!*replica || strlen(replica) > STORE_NAME_MAX) {
		fprintf(stderr, "leash %s: REPLICA \"%s\": expected 1 to %d bytes\n", cmd, replica,
		        STORE_NAME_MAX);
		return EXIT_CONFIG;
	}
	if (setup(path, &L, &c) < 0)
		return EXIT_CONFIG;
	if (!(s = control_store(cmd, &c, &rc)))
		goto done;
	if (store_replicas(s, &rows, &n, &now) != STORE_OK) {
		fprintf(stderr, "leash %s: cannot read the replicas of the %s store: %s\n", cmd,
		        c.provider, s->err);
		goto done;
	}
	if (!(owners = malloc((n ? n : 1) * sizeof *owners))) {
		fprintf(stderr, "leash %s: out of memory\n", cmd);
		goto done;
	}
	/* A drain is for the live processes; an undrain clears any row. */
	k = replica_rows(rows, n, replica, now, on ? c.lease_ms : 0, owners, &by_name);
	if (on && k == 0) {
		fprintf(stderr, "leash %s: no live replica %s in the store (give a replica's name or a "
		        "full owner id, as leash status shows them)\n", cmd, replica);
		goto done;
	}
	if (store_drain(s, by_name && !(on && until_restart) ? replica : NULL, owners, k, on,
	                &changed, &at_db) != STORE_OK) {
		fprintf(stderr, "leash %s: %s\n", cmd, s->err);
		goto done;
	}
	if (!on && changed == 0) {
		fprintf(stderr, "leash %s: no replica %s in the store, and no drain of that name\n",
		        cmd, replica);
		goto done;
	}
	snprintf(job, sizeof job, "@%.*s", STORE_NAME_MAX - 1, replica);
	snprintf(text, sizeof text, "%s %s%s", cmd, replica,
	         on && until_restart && by_name ? " --until-restart" : "");
	if (record_control(s, cmd, job, at_db, 0, text) < 0)
		goto done;
	if (on)
		printf("draining %s: %zu replica%s hand%s every lease off at the next safe point and "
		       "take%s none%s\n", replica, k, k == 1 ? "" : "s", k == 1 ? "s" : "",
		       k == 1 ? "s" : "", !by_name ? " until it restarts"
		       : until_restart ? " until they restart" : " (its new processes too, until leash "
		       "undrain)");
	else
		printf("undrained %s: %zu replica%s take%s leases again\n", replica, k,
		       k == 1 ? "" : "s", k == 1 ? "s" : "");
	rc = 0;
done:
	if (s)
		store_close(s);
	free(owners);
	store_free_replicas(rows, n);
	cfg_free(&c);
	lua_close(L);
	return rc;
}

static int cmd_drain(int argc, char **argv)
{
	return drain(argc, argv, "drain", 1);
}

static int cmd_undrain(int argc, char **argv)
{
	return drain(argc, argv, "undrain", 0);
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
	{ "history", cmd_history },
	{ "check", cmd_check },
	{ "pause", cmd_pause },
	{ "resume", cmd_resume },
	{ "trigger", cmd_trigger },
	{ "handoff", cmd_handoff },
	{ "drain", cmd_drain },
	{ "undrain", cmd_undrain },
	{ "version", cmd_version },
	{ "help", cmd_help },
	{ "_http", cmd_http },
	{ "--help", cmd_help },
	{ "--version", cmd_version },
};

/* `leash run` binds every library's symbols at start-up, its own and those
 * it dlopens: it runs itself again once with LD_BIND_NOW, which the dynamic
 * linker reads only when a program starts.  With lazy binding every run's
 * process resolved, and wrote into its copy of the tables, the functions
 * the parent had never called (Lua's own calls into liblua and libc above
 * all): 10 of a run's ~56 page faults and a tenth of its CPU.  The variable
 * goes again at once, so nothing a run starts inherits it.  Left alone when
 * it is set already, under valgrind (the second program would escape it),
 * and when the exec fails (then binding stays lazy). */
#define BIND_MARK "LEASH_BOUND_NOW"

static void bind_now(char **argv)
{
	const char *preload = getenv("LD_PRELOAD");
	char exe[PATH_MAX];
	ssize_t n;

	if (getenv(BIND_MARK)) {
		unsetenv(BIND_MARK);
		unsetenv("LD_BIND_NOW");
		return;
	}
	if (getenv("LD_BIND_NOW") || (preload && strstr(preload, "vgpreload")))
		return;
	/* The binary's own path, not /proc/self/exe: the process is named
	 * after the file it runs ("leash" in ps, not "exe"). */
	n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n > 0 && (size_t)n < sizeof exe - 1) {
		exe[n] = '\0';
		if (setenv("LD_BIND_NOW", "1", 1) == 0 && setenv(BIND_MARK, "1", 1) == 0)
			execv(exe, argv);
	}
	unsetenv(BIND_MARK);
	unsetenv("LD_BIND_NOW");
}

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "run") == 0)
		bind_now(argv);
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
