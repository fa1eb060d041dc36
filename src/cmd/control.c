/* cmd/control.c - the controls: pause, resume, trigger, handoff (a row in the store each replica reads). */
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

/* Who runs the command, for the ledger: user@host, the user the system
 * says (never $USER, which anyone sets), or the uid it has no name for. */
static void actor_of(char *out, size_t len)
{
	struct passwd *pw = getpwuid(geteuid());
	char host[256] = "", uid[32];

	snprintf(uid, sizeof uid, "uid %u", (unsigned)geteuid());
	if (gethostname(host, sizeof host - 1) < 0 || !host[0])
		snprintf(host, sizeof host, "localhost");
	snprintf(out, len, "%.80s@%.100s", pw && pw->pw_name[0] ? pw->pw_name : uid, host);
}

int cmd_local_job(const struct cfg *c, const char *job)
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
int cmd_record_control(struct store *s, const char *cmd, const char *job, int64_t at,
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
struct store *cmd_control_store(const char *cmd, const struct cfg *c, int *rc)
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
	if (store_opts_from(c, &o, err, sizeof err) < 0) {
		fprintf(stderr, "leash %s: %s\n", cmd, err);
		*rc = EXIT_CONFIG;
		return NULL;
	}
	o.mode = STORE_WRITE;           /* rows, but neither the file nor a table */
	if (!(s = store_open(c->provider, &o, err, sizeof err)))
		fprintf(stderr, "leash %s: cannot open the %s store: %s\n", cmd, c->provider, err);
	return s;
}

/* Whether a presence row's jobs text (a job a line, "name" or "name
 * weight") lists job. */
static int lists_job(const char *jobs, const char *job)
{
	size_t n = strlen(job);

	for (const char *l = jobs; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : "")
		if (strncmp(l, job, n) == 0 && (l[n] == '\n' || l[n] == ' ' || !l[n]))
			return 1;
	return 0;
}

/* The replica leash handoff --to names (a replica name or an owner id), for
 * job held by holder: the one live replica of that name (beat within two
 * renew intervals, as the holder judges it), not draining, that defines
 * job.  0 with its owner id in out; 1 when it is the holder (nothing to
 * do, said); EXIT_CONFIG or EXIT_PROBLEMS with the reason printed. */
static int resolve_to(struct store *s, const struct cfg *c, const char *job, const char *to,
                      const char *holder, char *out)
{
	struct store_replica *rows = NULL;
	size_t n = 0, named = 0, live = 0, ready = 0, found = 0;
	int64_t now, age = -1;
	char name[STORE_NAME_MAX + 1];
	int rc = EXIT_CONFIG;

	presence_name_of(holder, name, sizeof name);
	if (strcmp(holder, to) == 0 || strcmp(name, to) == 0) {
		printf("%s is held by %s already: nothing to hand off\n", job, holder);
		return 1;
	}
	if (store_replicas(s, &rows, &n, &now) != STORE_OK) {
		fprintf(stderr, "leash handoff: cannot read the replicas of the %s store: %s\n",
		        c->provider, s->err);
		return EXIT_PROBLEMS;
	}
	for (size_t i = 0; i < n; i++) {
		presence_name_of(rows[i].owner, name, sizeof name);
		if (strcmp(rows[i].owner, to) != 0 && strcmp(name, to) != 0)
			continue;
		named++;
		if (age < 0 || now - rows[i].heartbeat < age)
			age = now - rows[i].heartbeat;
		if (now - rows[i].heartbeat >= 2 * c->renew_ms)
			continue;
		live++;
		if (rows[i].draining)
			continue;
		ready++;
		if (!lists_job(rows[i].jobs, job))
			continue;
		if (found++ == 0)
			snprintf(out, STORE_NAME_MAX + 1, "%s", rows[i].owner);
	}
	if (!named)
		fprintf(stderr, "leash handoff: --to %s: no such replica in the store (unknown, "
		        "stopped, or stopping: a stopping replica removes its presence row first)\n", to);
	else if (!live)
		fprintf(stderr, "leash handoff: --to %s: the replica is not live (its last heartbeat "
		        "was %.1fs ago)\n", to, age / 1000.0);
	else if (!ready)
		fprintf(stderr, "leash handoff: --to %s: the replica is draining (leash drain): it "
		        "takes no lease\n", to);
	else if (!found)
		fprintf(stderr, "leash handoff: --to %s: the replica does not define job %s\n", to,
		        job);
	else if (found > 1)
		fprintf(stderr, "leash handoff: --to %s: %zu live replicas have that name; name one "
		        "by its owner id (leash status --leases)\n", to, found);
	else
		rc = 0;
	store_free_replicas(rows, n);
	return rc;
}

/* What a control's command line says. */
struct ctl_args {
	const char *path, *job, *dur, *to;
	int no_wait, force;
};

/* Reads the options and JOB: 0, or EXIT_CONFIG with the usage printed. */
static int ctl_parse(int argc, char **argv, const char *cmd, int what, struct ctl_args *a)
{
	static const struct option longopts[] = {
		{ "for", required_argument, NULL, 'f' },
		{ "to", required_argument, NULL, 't' },
		{ "no-wait", no_argument, NULL, 'n' },
		{ "force", no_argument, NULL, 'F' },
		{ NULL, 0, NULL, 0 },
	};
	int opt;

	memset(a, 0, sizeof *a);
	while ((opt = getopt_long(argc, argv, "c:", longopts, NULL)) != -1) {
		if (opt == 'c') {
			a->path = optarg;
		} else if (opt == 'f' && what == STORE_CTL_PAUSE) {
			a->dur = optarg;
		} else if (opt == 't' && what == STORE_CTL_HANDOFF) {
			a->to = optarg;
		} else if (opt == 'n' && what != STORE_CTL_HANDOFF) {
			a->no_wait = 1;
		} else if (opt == 'F') {
			a->force = 1;
		} else {
			fputs(cmd_usage, stderr);
			return EXIT_CONFIG;
		}
	}
	if (optind < argc)
		a->job = argv[optind++];
	if (!a->job || optind < argc) {
		fprintf(stderr, "leash %s: %s\n%s", cmd, a->job ? "one JOB only" : "which JOB?",
		        cmd_usage);
		return EXIT_CONFIG;
	}
	return 0;
}

/* Whether a live replica (beat within two renew intervals) defines job, by
 * the job list of its presence row: 1, 0, or -1 with the reason printed. */
static int defined_live(struct store *s, const struct cfg *c, const char *cmd, const char *job)
{
	struct store_replica *rows = NULL;
	size_t n = 0;
	int64_t now;
	int found = 0;

	if (store_replicas(s, &rows, &n, &now) != STORE_OK) {
		fprintf(stderr, "leash %s: cannot read the replicas of the %s store: %s\n", cmd,
		        c->provider, s->err);
		return -1;
	}
	for (size_t i = 0; i < n && !found; i++)
		found = now - rows[i].heartbeat < 2 * c->renew_ms && lists_job(rows[i].jobs, job);
	store_free_replicas(rows, n);
	return found;
}

/* The job's lease row as store_list reads it now (*row zeroed and 0 when
 * there is none): 1, 0, or -1 with the reason in s->err. */
static int lease_now(struct store *s, const char *job, struct lease_row *row, int64_t *now)
{
	struct lease_row *rows = NULL;
	size_t n = 0;
	int found = 0;

	memset(row, 0, sizeof *row);
	if (store_list(s, &rows, &n, now) != STORE_OK)
		return -1;
	for (size_t i = 0; i < n && !found; i++)
		if ((found = strcmp(rows[i].name, job) == 0))
			*row = rows[i];
	free(rows);
	return found;
}

/* Waits until a holder took the control made at db time at: it holds the
 * lease unexpired and renewed it (a renew reads the controls) after the
 * control and after its acquire.  Up to the lease (the config's, or the
 * holder's own when longer).  0 with "OWNER took it at T (Ns)" in took,
 * EXIT_PROBLEMS with the reason printed. */
static int wait_taken(struct store *s, const struct cfg *c, const char *cmd, const char *job,
                      int64_t at, char *took, size_t len)
{
	int64_t bound = c->lease_ms, t0 = clock_mono_ms(), now;
	struct lease_row r;
	char when[40];

	for (;;) {
		if (lease_now(s, job, &r, &now) < 0) {
			fprintf(stderr, "leash %s: done, but cannot read the leases to see it taken: %s\n",
			        cmd, s->err);
			return EXIT_PROBLEMS;
		}
		if (r.owner[0] && r.expires_at > now && r.expires_at - r.renewed_at > bound)
			bound = r.expires_at - r.renewed_at;
		/* The same millisecond counts: a NOTIFY's renew often comes
		 * within one (PostgreSQL on loopback), and the next is a renew
		 * interval away. */
		if (r.owner[0] && r.expires_at > now && r.renewed_at >= at &&
		    r.renewed_at > r.acquired_at) {
			snprintf(took, len, "%s took it at %s (%.1fs)", r.owner,
			         clock_iso(when, sizeof when, r.renewed_at, 1), (r.renewed_at - at) / 1000.0);
			return 0;
		}
		if (clock_mono_ms() - t0 >= bound)
			break;
		usleep(100 * 1000);
	}
	fprintf(stderr, "leash %s: %s: no replica took it within %.1fs (the lease): it is kept in "
	        "the store and takes effect when a replica renews or takes the lease (leash status "
	        "shows who holds it)\n", cmd, job, bound / 1000.0);
	return EXIT_PROBLEMS;
}

/* Whether the control may go ahead: the job is known (a lease row, or a
 * file in jobs/) and a live replica defines it, or --force.  0, or the
 * exit code with the reason printed. */
static int ctl_allowed(struct store *s, const struct cfg *c, const char *cmd,
                       const struct ctl_args *a, int in_store)
{
	int live;

	if (a->force)
		return 0;
	if (!in_store && !cmd_local_job(c, a->job)) {
		fprintf(stderr, "leash %s: no job %s in the store or in %s/\n", cmd, a->job, c->jobs);
		return EXIT_PROBLEMS;
	}
	if ((live = defined_live(s, c, cmd, a->job)) < 0)
		return EXIT_PROBLEMS;
	if (live)
		return 0;
	fprintf(stderr, "leash %s: no live replica defines job %s (none lists it in its presence "
	        "row; leash status shows the replicas); --force writes the control all the same, "
	        "for a replica yet to start with it\n", cmd, a->job);
	return EXIT_CONFIG;
}

/* What the command says once the control is written (and, unless
 * --no-wait, taken: took). */
static void ctl_said(int what, const struct ctl_args *a, const struct lease_row *row, int held,
                     int64_t until, const char *target, const char *took)
{
	char at[32];

	if (what == STORE_CTL_PAUSE)
		printf("paused %s%s%s: %s\n", a->job, a->dur ? " until " : "",
		       a->dur ? clock_iso(at, sizeof at, until, 1) : "", took[0] ? took
		       : held ? "its holder skips its fires from its next renew" : "no replica holds it now");
	else if (what == STORE_CTL_RESUME && took[0])
		printf("resumed %s: %s\n", a->job, took);
	else if (what == STORE_CTL_RESUME)
		printf("resumed %s\n", a->job);
	else if (what == STORE_CTL_TRIGGER)
		printf("triggered %s: %s\n", a->job, took[0] ? took : "its holder runs it once at its "
		       "next renew");
	else if (a->to)
		printf("handoff of %s to %s asked: %s passes it on at its next safe point\n", a->job,
		       target, row->owner);
	else
		printf("handoff of %s asked: %s releases it at its next safe point\n", a->job,
		       row->owner);
}

/* --for D as ms (> 0): 0, or EXIT_CONFIG with the reason printed. */
static int ctl_duration(lua_State *L, const char *cmd, const char *dur, int64_t *ms)
{
	char err[STORE_ERR_MAX + 256];

	lua_pushstring(L, dur);
	if (lx_callmod(L, "leash.duration", "parse", 1, 2) != LUA_OK) {
		fprintf(stderr, "leash %s: %s\n", cmd, lx_report(L, err, sizeof err));
		return EXIT_PROBLEMS;
	}
	if (!lua_isinteger(L, -2) || lua_tointeger(L, -2) <= 0) {
		fprintf(stderr, "leash %s: --for: %s\n", cmd, lua_isstring(L, -1)
		        ? lua_tostring(L, -1) : "a pause must last more than 0s");
		return EXIT_CONFIG;
	}
	*ms = lua_tointeger(L, -2);
	lua_settop(L, 0);
	return 0;
}

/* Writes the control and its ledger row ("control", owner and actor
 * user@host, error the action); 0 or EXIT_PROBLEMS with the reason printed. */
static int ctl_write(struct store *s, const char *cmd, int what, const struct ctl_args *a,
                     const struct lease_row *row, int64_t until, const char *target,
                     int64_t *at_db)
{
	char text[160], at[32];
	int rc = store_control(s, a->job, what, until, a->to ? target : NULL, at_db);

	if (rc != STORE_OK) {
		fprintf(stderr, "leash %s: %s\n", cmd, rc == STORE_NO ? "the job's lease row is gone"
		        : s->err);
		return EXIT_PROBLEMS;
	}
	if (what == STORE_CTL_PAUSE && a->dur)
		snprintf(text, sizeof text, "pause for %s (until %s)", a->dur,
		         clock_iso(at, sizeof at, until, 1));
	else if (a->to)
		snprintf(text, sizeof text, "handoff --to %.140s", target);
	else
		snprintf(text, sizeof text, "%s", cmd);
	return cmd_record_control(s, cmd, a->job, *at_db, row->token, text) < 0 ? EXIT_PROBLEMS : 0;
}

/* One control on JOB: checked (ctl_allowed), written to its lease row and
 * the run ledger (ctl_write), then, unless --no-wait (and for a handoff),
 * waited for until its holder took it (wait_taken). */
static int control(int argc, char **argv, const char *cmd, int what)
{
	struct ctl_args a;
	char target[STORE_NAME_MAX + 1] = "", took[STORE_NAME_MAX + 96] = "";
	struct store *s = NULL;
	struct lease_row row;
	struct cfg c;
	lua_State *L;
	int64_t now = 0, at_db = 0, for_ms = 0, until = 0;
	int rc, held, in_store;

	if ((rc = ctl_parse(argc, argv, cmd, what, &a)) != 0)
		return rc;
	if (cmd_setup(a.path, &L, &c) < 0)
		return EXIT_CONFIG;
	if (a.dur && (rc = ctl_duration(L, cmd, a.dur, &for_ms)) != 0)
		goto done;
	if (!(s = cmd_control_store(cmd, &c, &rc)))
		goto done;
	rc = EXIT_PROBLEMS;
	if ((in_store = lease_now(s, a.job, &row, &now)) < 0) {
		fprintf(stderr, "leash %s: cannot read the leases of the %s store: %s\n", cmd,
		        c.provider, s->err);
		goto done;
	}
	if ((rc = ctl_allowed(s, &c, cmd, &a, in_store)) != 0)
		goto done;
	rc = EXIT_PROBLEMS;
	held = in_store && row.owner[0] && row.expires_at > now;
	if ((what == STORE_CTL_TRIGGER || what == STORE_CTL_HANDOFF) && !held) {
		fprintf(stderr, "leash %s: no replica holds %s now: nothing to %s\n", cmd, a.job, cmd);
		goto done;
	}
	if (a.to && (rc = resolve_to(s, &c, a.job, a.to, row.owner, target)) != 0) {
		rc = rc == 1 ? 0 : rc;
		goto done;
	}
	if (what == STORE_CTL_PAUSE)
		until = for_ms ? now + for_ms : STORE_PAUSED_FOREVER;
	if ((rc = ctl_write(s, cmd, what, &a, &row, until, target, &at_db)) != 0)
		goto done;
	if (!a.no_wait && what != STORE_CTL_HANDOFF &&
	    (rc = wait_taken(s, &c, cmd, a.job, at_db, took, sizeof took)) != 0)
		goto done;
	ctl_said(what, &a, &row, held, until, target, took);
	rc = 0;
done:
	return cmd_end(s, &c, L, rc);
}

int cmd_pause(int argc, char **argv)
{
	return control(argc, argv, "pause", STORE_CTL_PAUSE);
}

int cmd_resume(int argc, char **argv)
{
	return control(argc, argv, "resume", STORE_CTL_RESUME);
}

int cmd_trigger(int argc, char **argv)
{
	return control(argc, argv, "trigger", STORE_CTL_TRIGGER);
}

int cmd_handoff(int argc, char **argv)
{
	return control(argc, argv, "handoff", STORE_CTL_HANDOFF);
}
