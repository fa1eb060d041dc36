/* sched.c - the job table: what runs when, on an injected clock. */
#include <assert.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/metrics.h"
#include "plan/sched.h"

void sched_init(struct sched *s, lua_State *L, const char *dir, const struct sched_env *env)
{
	memset(s, 0, sizeof *s);
	s->L = L;
	s->dir = dir;
	s->env = *env;
	s->prep_us = 1000;              /* a fork: 1 ms, until measured */
	s->prep_n = 1;
	s->accounts_left = SCHED_ACCOUNT_TURN_MAX;
	s->load_timeout_ms = JOB_LOAD_TIMEOUT_MS;
}

static int64_t wall(struct sched *s) { return s->env.now(s->env.arg, SCHED_WALL); }
static int64_t mono(struct sched *s) { return s->env.now(s->env.arg, SCHED_MONO); }

/* What the job table does to a run (sched_env.act). */
static int64_t act(const struct sched *s, enum sched_act what, struct run *r, struct job *j,
                   int64_t fire, const char *reason)
{
	return s->env.act(s->env.arg, what, r, j, fire, reason);
}

/* The election's word on j (0 without one). */
static int ask(struct sched *s, const struct job *j, enum sched_ask what)
{
	return s->env.ask ? s->env.ask(s->env.elect_arg, j, what) : 0;
}

static int takes_part(struct sched *s, const struct job *j)
{
	return ask(s, j, SCHED_TAKES_PART);
}

static int stale(struct sched *s, const struct job *j)
{
	return ask(s, j, SCHED_STALE);
}

static void enter(struct sched *s, struct job *j)
{
	if (s->env.stand && takes_part(s, j))
		s->env.stand(s->env.elect_arg, j, 1);
}

static void leave(struct sched *s, struct job *j)
{
	if (s->env.stand)
		s->env.stand(s->env.elect_arg, j, 0);
}

/* The fire j wants started (DUE), or has claimed ahead of its time
 * (CLAIMED); 0 when it has none such. */
static int64_t want_of(const struct job *j)
{
	return j->fire.state == FIRE_DUE ? j->fire.at : 0;
}

static int64_t claimed_of(const struct job *j)
{
	return j->fire.state == FIRE_CLAIMED ? j->fire.at : 0;
}

/* Every change of j's next fire (job.h's enum fire_state): to DUE at at
 * (catchup: a catch-up fire), to CLAIMED (the due one), to NONE.  Each
 * starts its claim's retries afresh; NONE leaves catchup as it was (the
 * callers clear it where a catch-up is over).  A change the picture in
 * job.h does not have is a bug: logged, and an assertion in a build with
 * them. */
static void fire_to(struct job *j, enum fire_state to, int64_t at, int catchup)
{
	static const char *const names[FIRE_STATES] = { "none", "due", "claimed" };
	static const unsigned legal[FIRE_STATES] = {
		[FIRE_NONE] = 1u << FIRE_NONE | 1u << FIRE_DUE,
		[FIRE_DUE] = 1u << FIRE_NONE | 1u << FIRE_DUE | 1u << FIRE_CLAIMED,
		[FIRE_CLAIMED] = 1u << FIRE_NONE,
	};

	if (!(legal[j->fire.state] & 1u << to)) {
		log_msg(LOG_ERROR, j->name, 0, "internal error: a fire went from %s to %s",
		        names[j->fire.state], names[to]);
		assert(!"an illegal fire_state transition");
	}
	if (to == FIRE_DUE) {
		j->fire.at = at;
		j->fire.catchup = catchup;
	} else if (to == FIRE_NONE) {
		j->fire.at = 0;
	}
	j->fire.state = to;
	j->fire.retry_at = 0;
}

struct job *sched_find(struct sched *s, const char *name)
{
	for (size_t i = 0; i < s->njobs; i++)
		if (strcmp(s->jobs[i]->name, name) == 0)
			return s->jobs[i];
	return NULL;
}

static void add_job(struct sched *s, struct job *j)
{
	if (s->njobs == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		struct job **nj = realloc(s->jobs, cap * sizeof *nj);
		if (!nj) {
			log_msg(LOG_ERROR, j->name, 0, "out of memory: job not added");
			job_free(s->L, j);
			return;
		}
		s->jobs = nj;
		s->cap = cap;
	}
	s->jobs[s->njobs++] = j;
	j->metrics = metrics_job_add(j->name);
}

/* A fire time for the log: with its milliseconds when a jitter gave it some. */
static char *fire_iso(char *out, size_t len, int64_t ms)
{
	return clock_iso(out, len, ms, ms % 1000 != 0);
}

/* Says what the job's file warns about (leash check shows the same lines). */
static void log_warnings(const struct job *j)
{
	const char *p = j->warnings;

	while (p && *p) {
		const char *nl = strchr(p, '\n');
		int n = nl ? (int)(nl - p) : (int)strlen(p);

		log_msg(LOG_WARN, j->name, 0, "%.*s", n, p);
		p = nl ? nl + 1 : p + n;
	}
}

static void schedule(struct sched *s, struct job *j)
{
	if (j->kind == JOB_SERVICE)
		j->restart_at = mono(s);
	else
		j->next_fire_ms = job_next_fire(s->L, j, wall(s));
}

static void drop_wanted(struct sched *, struct job *, const char *why, int held);
static void drop_prep(struct sched *, struct job *);
static int take_back(struct sched *, struct job *);
static int may_run(struct sched *, const struct job *);
static void account(struct sched *, struct job *, int64_t fire, int claimed, const char *outcome,
                    const char *why);

/* ---- loading ---- */

/* What one pass over jobs/ found. */
struct reload {
	struct sched *s;
	struct job **fresh;
	size_t nfresh, cap;
	char **broken;                  /* names whose file has problems */
	char **why;                     /* ... and the first line of the first */
	size_t nbroken;
};

static void on_good(void *arg, struct job *j)
{
	struct reload *r = arg;

	if (r->nfresh == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 16;
		struct job **nf = realloc(r->fresh, cap * sizeof *nf);
		if (!nf) {
			job_free(r->s->L, j);
			return;
		}
		r->fresh = nf;
		r->cap = cap;
	}
	r->fresh[r->nfresh++] = j;
}

static void on_bad(void *arg, const char *file, const char *msg)
{
	struct reload *r = arg;
	const char *base = strrchr(file, '/');
	size_t n;
	char **nb;

	log_msg(LOG_ERROR, NULL, 0, "%s", msg);
	base = base ? base + 1 : file;
	n = strlen(base);
	if (n < 5 || strcmp(base + n - 4, ".lua") != 0)
		return;
	nb = realloc(r->broken, (r->nbroken + 1) * sizeof *nb);
	if (!nb)
		return;
	r->broken = nb;
	nb = realloc(r->why, (r->nbroken + 1) * sizeof *nb);
	if (!nb)
		return;
	r->why = nb;
	r->why[r->nbroken] = strndup(msg, strcspn(msg, "\n"));
	r->broken[r->nbroken++] = strndup(base, n - 4);
}

/* At most max bytes of t, control characters as spaces, cut on a UTF-8
 * boundary, onto out at *at (room for it and more). */
static void broken_put(char *out, size_t *at, const char *t, size_t max)
{
	size_t n = strlen(t);

	if (n > max) {
		n = max;
		while (n > 0 && ((unsigned char)t[n] & 0xC0) == 0x80)
			n--;
	}
	for (size_t i = 0; i < n; i++)
		out[(*at)++] = (unsigned char)t[i] < 0x20 || t[i] == 0x7f ? ' ' : t[i];
}

/* The SINCE of name in the broken text old (sched.h), or -1. */
static int64_t broken_since(const char *old, const char *name)
{
	size_t n = strlen(name);

	for (const char *l = old; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : "")
		if (strncmp(l, name, n) == 0 && l[n] == '\t')
			return strtoll(l + n + 1, NULL, 10);
	return -1;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* s->broken made anew from a load's broken files (sched.h's text). */
static void broken_update(struct sched *s, struct reload *r)
{
	char **names = malloc((r->nbroken ? r->nbroken : 1) * sizeof *names);
	char *out = NULL, line[SCHED_BROKEN_NAME + SCHED_BROKEN_ERROR + 64];
	size_t at = 0, left = 0, k = 0, files = 0;

	if (!names || !(out = malloc(SCHED_BROKEN_MAX + 1)))
		goto done;
	for (size_t i = 0; i < r->nbroken; i++)
		if (r->broken[i] && r->why[i])
			names[k++] = r->broken[i];
	qsort(names, k, sizeof *names, cmp_str);
	for (size_t i = 0; i < k; i++) {
		const char *why = "";
		size_t n = 0;
		int64_t since = broken_since(s->broken, names[i]);
		const struct job *j = sched_find(s, names[i]);

		if (i > 0 && strcmp(names[i - 1], names[i]) == 0)
			continue;
		files++;
		for (size_t b = 0; b < r->nbroken; b++)
			if (r->broken[b] == names[i])
				why = r->why[b];
		broken_put(line, &n, names[i], SCHED_BROKEN_NAME);
		n += (size_t)snprintf(line + n, 48, "\t%lld\t%d\t",
		                      (long long)(since >= 0 ? since : wall(s)),
		                      j && !j->removed);
		broken_put(line, &n, why, SCHED_BROKEN_ERROR);
		line[n++] = '\n';
		if (at + n + 32 > SCHED_BROKEN_MAX) {
			left++;
			continue;
		}
		memcpy(out + at, line, n);
		at += n;
	}
	if (left)
		at += (size_t)snprintf(out + at, 32, "+\t0\t0\t%zu\n", left);
	out[at] = '\0';
	metrics_note_broken(files);
done:
	free(s->broken);
	s->broken = out && at ? out : NULL;
	if (out && !at)
		free(out);
	free(names);
}

static int is_broken(struct reload *r, const char *name)
{
	for (size_t i = 0; i < r->nbroken; i++)
		if (r->broken[i] && strcmp(r->broken[i], name) == 0)
			return 1;
	return 0;
}

/* A reload's fresh definition takes over what old had going: its times,
 * its run, its fires waiting (a fire waiting for the run only under the
 * same schedule), its hooks, its election and metrics. */
static void carry_over(struct sched *s, struct job *old, struct job *fresh, int changed)
{
	fresh->next_fire_ms = old->next_fire_ms;
	fresh->restart_at = old->restart_at;
	fresh->backoff_ms = old->backoff_ms;
	fresh->run = old->run;
	fresh->run_id = old->run_id;
	fresh->fire = old->fire;
	fresh->backlog_ms = old->backlog_ms;
	fresh->backlog_until = old->backlog_until;
	fresh->backlog_left = old->backlog_left;
	fresh->health = old->health;
	fresh->hook_run = old->hook_run;
	fresh->hook_wait = old->hook_wait;
	old->hook_wait = NULL;
	if (fresh->hook_run)
		act(s, SCHED_ADOPT, fresh->hook_run, fresh, 0, NULL);
	/* A fire waiting for the run keeps its place only under the same
	 * schedule (jitter and overlap are part of it, see describe). */
	if (!changed)
		fresh->pending_ms = old->pending_ms;
	else if (old->pending_ms) {
		char at[32];

		log_msg(LOG_INFO, fresh->name, 0, "dropped the fire at %s that waited for run %ld: "
		        "the schedule changed", fire_iso(at, sizeof at, old->pending_ms), old->run_id);
		if (may_run(s, fresh))
			account(s, fresh, old->pending_ms, 0, "missed", "the schedule changed");
	}
	if (fresh->run)
		act(s, SCHED_ADOPT, fresh->run, fresh, 0, NULL);
	fresh->elect = old->elect;
	fresh->follow_logged = old->follow_logged;
	fresh->metrics = old->metrics;
}

/* The election's user is the fresh definition; a standing that no longer
 * fits its settings leaves once the run is over (sched_run_ended), then
 * stands again with the new settings. */
static void restand(struct sched *s, struct job *fresh)
{
	if (s->env.stand)
		s->env.stand(s->env.elect_arg, fresh, 1); /* the election's user is the new one */
	if (stale(s, fresh)) {
		if (fresh->run && ask(s, fresh, SCHED_MAY_RUN))
			act(s, SCHED_STOP, fresh->run, NULL, 0, "the job's lease settings changed");
		if (!fresh->run)
			leave(s, fresh);
	}
}

/* What the reload says, and a changed schedule's consequences: the next
 * fire (or restart) under it, the old schedule's fires dropped. */
static void take_new_file(struct sched *s, struct job *old, struct job *fresh, int edited,
                          int changed)
{
	if (edited && !changed)
		log_msg(LOG_INFO, fresh->name, 0, "reloaded: %s (the next run uses the new file)",
		        fresh->describe);
	if (edited)
		log_warnings(fresh);
	if (changed) {
		log_msg(LOG_INFO, fresh->name, 0, "reloaded: %s", fresh->describe);
		if (fresh->kind != JOB_SERVICE)
			fresh->next_fire_ms = job_next_fire(s->L, fresh, wall(s));
		else if (old->kind != JOB_SERVICE)
			fresh->restart_at = mono(s);
		/* Fires of the old schedule: none is started under the new one. */
		drop_wanted(s, fresh, "the schedule changed", may_run(s, fresh));
	}
}

/* A process forked ahead runs the file as it was then: kept only when the
 * file is the same. */
static void keep_prep(struct sched *s, struct job *old, struct job *fresh, int edited)
{
	if (old->prep && !edited) {
		fresh->prep = old->prep;
		fresh->prep_ms = old->prep_ms;
		fresh->prep_ahead = old->prep_ahead;
		old->prep = NULL;
		old->prep_ahead = 0;
		act(s, SCHED_ADOPT, fresh->prep, fresh, 0, NULL);
	}
}

/* Takes in a fresh definition for a job that exists: the schedule state and
 * a run in progress stay, the definition is replaced. */
static void replace_job(struct sched *s, struct job *old, struct job *fresh)
{
	int changed = strcmp(old->describe, fresh->describe) != 0;
	int edited = strcmp(old->digest, fresh->digest) != 0;

	/* A start gone ahead is taken back when the fire may not start as it
	 * is (the process forked ahead with the old file goes, below; the old
	 * schedule's fires are dropped), unless the process went with it
	 * already: a run like any other, carried over. */
	if (edited || changed)
		take_back(s, old);
	carry_over(s, old, fresh, changed);
	if (fresh->elect)
		restand(s, fresh);
	take_new_file(s, old, fresh, edited, changed);
	keep_prep(s, old, fresh, edited);
	old->run = NULL;
	old->elect = NULL;
	drop_prep(s, old);
	job_free(s->L, old);
}

void sched_load(struct sched *s, int reload)
{
	struct job_check *c = job_check_start(s->L, s->dir, s->load_timeout_ms, -1, NULL);

	if (!c) {
		log_msg(LOG_ERROR, NULL, 0, "%s: out of memory", s->dir);
		return;
	}
	sched_load_checked(s, reload, c);
	job_check_free(c);
}

void sched_load_checked(struct sched *s, int reload, struct job_check *c)
{
	struct reload r = { .s = s };
	int seen = job_load_checked(s->L, c, on_good, on_bad, &r);

	if (seen == 0)
		log_msg(LOG_WARN, NULL, 0, "no job files in %s (add NAME.lua files, then send SIGHUP)",
		        s->dir);
	/* Jobs whose file is gone: stopped, then dropped.  A broken file keeps
	 * its last good definition. */
	for (size_t i = 0; i < s->njobs; i++) {
		struct job *j = s->jobs[i];
		int present = is_broken(&r, j->name);

		if (present && reload)
			log_msg(LOG_WARN, j->name, 0, "keeps its last good definition: %s has problems",
			        j->file);
		for (size_t k = 0; k < r.nfresh && !present; k++)
			present = strcmp(r.fresh[k]->name, j->name) == 0;
		if (!present && seen >= 0 && !j->removed) {
			j->removed = 1;
			j->pending_ms = 0;
			log_msg(LOG_INFO, j->name, 0, "removed: %s is gone", j->file);
			if (j->run)
				act(s, SCHED_STOP, j->run, NULL, 0, "job file removed");
		}
	}
	for (size_t k = 0; k < r.nfresh; k++) {
		struct job *old = sched_find(s, r.fresh[k]->name);

		if (old) {
			/* Also a job removed a moment ago whose run is still
			 * stopping: it comes back as the same job, so the new
			 * definition cannot start beside the old run. */
			if (old->removed)
				log_msg(LOG_INFO, old->name, 0, "back: %s", r.fresh[k]->file);
			old->removed = 0;
			for (size_t i = 0; i < s->njobs; i++)
				if (s->jobs[i] == old)
					s->jobs[i] = r.fresh[k];
			replace_job(s, old, r.fresh[k]);
		} else {
			add_job(s, r.fresh[k]);
			schedule(s, r.fresh[k]);
			enter(s, r.fresh[k]);
			log_msg(LOG_INFO, r.fresh[k]->name, 0, "%s: %s",
			        reload ? "added" : "loaded", r.fresh[k]->describe);
			log_warnings(r.fresh[k]);
		}
	}
	for (size_t i = 0; i < s->njobs; i++)
		if (!s->jobs[i]->removed && !s->jobs[i]->run && !s->jobs[i]->elect)
			enter(s, s->jobs[i]);
	broken_update(s, &r);
	for (size_t i = 0; i < r.nbroken; i++) {
		free(r.broken[i]);
		free(r.why[i]);
	}
	free(r.broken);
	free(r.why);
	free(r.fresh);
	/* Loading leaves sources and compiler garbage behind; the parent
	 * lives long, so give it back now rather than at the GC's leisure. */
	lua_gc(s->L, LUA_GCCOLLECT);
	malloc_trim(0);
}

/* ---- runs ---- */

/* Whether this replica may run the job now: the election gates the jobs
 * that take part in it. */
static int may_run(struct sched *s, const struct job *j)
{
	if (j->removed)
		return 0;
	if (!takes_part(s, j))
		return 1;
	return ask(s, j, SCHED_MAY_RUN);
}

static void start(struct sched *, struct job *, int64_t scheduled_ms, int catchup);

/* j's process forked ahead read the start that went ahead to it: the
 * claimed fire (prep_ms: see go_ahead) started; it is j's run. */
static void went_ahead(struct sched *s, struct job *j)
{
	j->prep_ahead = 0;
	start(s, j, j->prep_ms, 0);
	fire_to(j, FIRE_NONE, 0, 0);
}

/* j's claimed fire, if its process forked ahead has its start already:
 * the start taken back (0), or too late: the process read it at the fire's
 * time, so the fire started, and it is j's run now (1). */
static int take_back(struct sched *s, struct job *j)
{
	if (!j->prep || !j->prep_ahead)
		return 0;
	if (act(s, SCHED_TAKE_BACK, j->prep, NULL, 0, NULL) == 0) {
		j->prep_ahead = 0;
		return 0;
	}
	went_ahead(s, j);
	return 1;
}

/* The start of j's claimed fire, ahead of its time, to its process forked
 * ahead: it goes at that time by itself (a turn of this process that comes
 * late, behind other processes' runs on a busy machine, delays it no more). */
static void go_ahead(struct sched *s, struct job *j)
{
	if (j->prep && j->prep_ms == claimed_of(j) &&
	    act(s, SCHED_GO_AHEAD, j->prep, j, claimed_of(j), NULL) == 0)
		j->prep_ahead = 1;
}

/* j's process forked ahead goes: it will not start (unless it has
 * already: then it is j's run). */
static void drop_prep(struct sched *s, struct job *j)
{
	if (!j->prep || take_back(s, j))
		return;
	act(s, SCHED_DISCARD, j->prep, NULL, 0, NULL);
	j->prep = NULL;
}

/* Whether j's process forked ahead is still for a fire j is to start as a
 * regular one: the next, the one waiting for its claim, or the one claimed
 * ahead of its time. */
static int prep_fits(const struct job *j)
{
	return j->prep_ms == j->next_fire_ms || j->prep_ms == claimed_of(j) ||
	       (j->prep_ms == want_of(j) && !j->fire.catchup);
}

static void start(struct sched *s, struct job *j, int64_t scheduled_ms, int catchup)
{
	long id = 0;
	struct run *prep = NULL, *r;

	/* The process forked for this very fire, if any (a catch-up, manual
	 * or other fire leaves it to its own). */
	if (j->prep && j->prep_ms == scheduled_ms && !catchup) {
		prep = j->prep;
		j->prep = NULL;
		j->prep_ahead = 0;
	}
	r = s->env.start(s->env.arg, j, scheduled_ms, catchup, prep, &id);

	if (r) {
		metrics_note_fire(j->metrics, scheduled_ms, catchup, wall(s));
		j->run = r;
		j->run_id = id;
		j->run_catchup = catchup == 1;
	}
}

/* Tells the env (in singleton mode) of a fire j did not run. */
static void account(struct sched *s, struct job *j, int64_t fire, int claimed,
                    const char *outcome, const char *why)
{
	metrics_note_skip(j->metrics, outcome);
	if (s->env.account && s->env.claim && takes_part(s, j))
		s->env.account(s->env.elect_arg, j, fire, claimed, outcome, why);
}

int sched_idle(const struct job *j)
{
	return !j->pending_ms && !want_of(j) && !claimed_of(j) && !j->backlog_ms;
}

/* A fire came while run j->run still goes, or while the older fires of a
 * catch-up wait for their claim or their turn (they go first: the cursor
 * only moves on): the job's overlap policy. */
static void overlapped(struct sched *s, struct job *j, int64_t fire)
{
	char at[32], was[32], why[96], busy[64];

	fire_iso(at, sizeof at, fire);
	if (j->run)
		snprintf(busy, sizeof busy, "run %ld is still going", j->run_id);
	else
		snprintf(busy, sizeof busy, "the catch-up of older fires goes first");
	switch (j->overlap) {
	case JOB_SKIP:
		log_msg(LOG_WARN, j->name, 0, "skipped the fire at %s: %s", at, busy);
		if (j->run)
			snprintf(why, sizeof why, "run %ld was still going", j->run_id);
		else
			snprintf(why, sizeof why, "the catch-up of older fires went first");
		account(s, j, fire, 0, "skipped-overlap", why);
		break;
	case JOB_QUEUE:
		/* One waits at most: the first, which the later ones queue behind. */
		if (j->pending_ms) {
			log_msg(LOG_WARN, j->name, 0, "skipped the fire at %s: %s and the fire at %s "
			        "is queued", at, busy, fire_iso(was, sizeof was, j->pending_ms));
			snprintf(why, sizeof why, "%s, another fire queued", j->run ? "the run was still "
			         "going" : "a catch-up went first");
			account(s, j, fire, 0, "skipped-overlap", why);
			break;
		}
		j->pending_ms = fire;
		log_msg(LOG_INFO, j->name, 0, "queued the fire at %s: %s", at, busy);
		break;
	case JOB_REPLACE:
		if (!j->run) {
			/* Nothing to stop: the waiting fires give way at once. */
			snprintf(why, sizeof why, "replaced by the fire at %s", at);
			drop_wanted(s, j, why, 1);
			fire_to(j, FIRE_DUE, fire, 0);
			break;
		}
		/* The new run starts once the old one ended (sched_run_ended), so
		 * two never overlap; a later fire meanwhile takes the place. */
		if (j->pending_ms) {
			log_msg(LOG_WARN, j->name, 0, "skipped the fire at %s: the fire at %s replaces it "
			        "(run %ld is still stopping)", fire_iso(was, sizeof was, j->pending_ms), at,
			        j->run_id);
			snprintf(why, sizeof why, "replaced by the fire at %s", at);
			account(s, j, j->pending_ms, 0, "skipped-overlap", why);
			j->pending_ms = fire;
			break;
		}
		j->pending_ms = fire;
		snprintf(why, sizeof why, "replaced by the fire at %s", at);
		act(s, SCHED_STOP, j->run, NULL, 0, why);
		break;
	}
}

static int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/* Whether j's fires start only once claimed. */
static int claims(struct sched *s, const struct job *j)
{
	return s->env.claim && takes_part(s, j);
}

/* Forgets the fires j was going to start (why: "the job was removed", ...).
 * A claimed one is recorded missed; the unclaimed ones are accounted for
 * only when held (the lease stays here: the next claim moves the cursor
 * past them), else the next holder catches them up or accounts for them. */
static void drop_wanted(struct sched *s, struct job *j, const char *why, int held)
{
	char at[32], to[32];

	take_back(s, j);        /* (too late: the claimed fire runs) */
	if (j->pending_ms) {
		log_msg(LOG_INFO, j->name, 0, "queued fire at %s not started: %s",
		        fire_iso(at, sizeof at, j->pending_ms), why);
		if (held)
			account(s, j, j->pending_ms, 0, "missed", why);
	}
	if (want_of(j)) {
		log_msg(LOG_INFO, j->name, 0, "fire at %s not started: %s", fire_iso(at, sizeof at,
		        want_of(j)), why);
		if (held)
			account(s, j, want_of(j), 0, "missed", why);
	}
	if (claimed_of(j)) {
		log_msg(LOG_WARN, j->name, 0, "fire at %s missed: claimed, but not started: %s",
		        fire_iso(at, sizeof at, claimed_of(j)), why);
		account(s, j, claimed_of(j), 1, "missed", why);
	}
	if (j->backlog_ms) {
		log_msg(LOG_INFO, j->name, 0, "%d missed fire%s from %s to before %s not caught up: %s",
		        j->backlog_left, j->backlog_left == 1 ? "" : "s",
		        fire_iso(at, sizeof at, j->backlog_ms), fire_iso(to, sizeof to, j->backlog_until),
		        why);
		for (int64_t f = j->backlog_ms; held && f >= 0 && f < j->backlog_until;
		     f = job_next_fire(s->L, j, f))
			account(s, j, f, 0, "missed", why);
	}
	fire_to(j, FIRE_NONE, 0, 0);
	j->fire.catchup = 0;
	j->backlog_ms = j->pending_ms = 0;
	j->backlog_left = 0;
}

/* A catch-up goes on: older fires wait for their claim or their turn, or
 * one of them runs. */
static int catching_up(const struct job *j)
{
	return j->backlog_ms || j->fire.catchup || (j->run && j->run_catchup);
}

/* missed = "all", while a catch-up goes on: the fires from first to the
 * latest one up to now are missed fires too, so they queue behind the
 * catch-up's (in the backlog, each to run once) instead of meeting the
 * overlap policy. */
static void backlog_add(struct sched *s, struct job *j, int64_t first, int64_t now)
{
	int64_t last = first, from;

	for (int64_t f = job_next_fire(s->L, j, first); f >= 0 && f <= now;
	     f = job_next_fire(s->L, j, f))
		last = f;
	if (!j->backlog_ms) {
		j->backlog_ms = first;
		j->backlog_left = 1;
		from = first;
	} else {
		from = j->backlog_until - 1;
	}
	for (int64_t f = job_next_fire(s->L, j, from); f >= 0 && f <= last;
	     f = job_next_fire(s->L, j, f))
		j->backlog_left++;
	j->backlog_until = last + 1;
}

/* The next catch-up fire of a missed = "all" backlog becomes the wanted one. */
static void backlog_pop(struct sched *s, struct job *j)
{
	int64_t next;

	fire_to(j, FIRE_DUE, j->backlog_ms, 1);
	next = --j->backlog_left > 0 ? job_next_fire(s->L, j, j->backlog_ms) : -1;
	if (next < 0 || next >= j->backlog_until) {
		j->backlog_ms = 0;
		j->backlog_left = 0;
	} else {
		j->backlog_ms = next;
	}
}

/* The run ended: what starts next, if this replica may still run the job:
 * the fire that waited for it (queue, replace) or the next catch-up fire.
 * Catch-up fires are older, so they go first (the cursor only moves on),
 * except that a replacing fire drops them.  Returns whether one is wanted. */
static int next_wanted(struct sched *s, struct job *j, long ended_id)
{
	int64_t fire = j->pending_ms;
	char at[32];

	if (s->stopping || j->removed) {
		j->pending_ms = 0;
		drop_wanted(s, j, s->stopping ? "leash is stopping" : "the job was removed", 0);
		return 0;
	}
	if (!may_run(s, j)) {
		j->pending_ms = 0;
		if (fire)
			log_msg(LOG_INFO, j->name, 0, "dropped the fire at %s that waited for run %ld: "
			        "this replica no longer holds the lease", fire_iso(at, sizeof at, fire),
			        ended_id);
		drop_wanted(s, j, "this replica no longer holds the lease", 0);
		return 0;
	}
	if (want_of(j))
		return 1;
	if (fire && j->overlap == JOB_REPLACE && j->backlog_ms) {
		j->pending_ms = 0;      /* it replaces them: not dropped with them */
		drop_wanted(s, j, "a newer fire replaced the catch-up", 1);
		j->pending_ms = fire;
	}
	if (j->backlog_ms) {
		backlog_pop(s, j);
		log_msg(LOG_INFO, j->name, 0, "catching up the fire at %s", fire_iso(at, sizeof at,
		        want_of(j)));
		return 1;
	}
	if (!fire)
		return 0;
	j->pending_ms = 0;
	fire_iso(at, sizeof at, fire);
	if (j->overlap == JOB_QUEUE)
		log_msg(LOG_INFO, j->name, 0, "starting the queued fire at %s", at);
	else
		log_msg(LOG_INFO, j->name, 0, "starting the fire at %s: run %ld was replaced", at,
		        ended_id);
	fire_to(j, FIRE_DUE, fire, 0);
	return 1;
}

static int grow_batch(struct sched *s, size_t n)
{
	struct job **cj, **pj;
	int64_t *cf;
	int *cok;

	if (n <= s->ccap)
		return 0;
	if (!(cj = realloc(s->cj, n * sizeof *cj)))
		return -1;
	s->cj = cj;
	if (!(cf = realloc(s->cf, n * sizeof *cf)))
		return -1;
	s->cf = cf;
	if (!(cok = realloc(s->cok, n * sizeof *cok)))
		return -1;
	s->cok = cok;
	if (!(pj = realloc(s->pj, n * sizeof *pj)))
		return -1;
	s->pj = pj;
	s->ccap = n;
	return 0;
}

/* How early the claim of a fire that falls with n - 1 others goes out:
 * SCHED_CLAIM_AHEAD_MS, or twice what the slowest of the last claims took,
 * scaled to n fires (a thousand fires of one instant take their database
 * tens of ms, thirty a few), up to SCHED_CLAIM_AHEAD_MAX_MS.  The fire
 * still starts at its time. */
static int64_t claim_lead(const struct sched *s, size_t n)
{
	int64_t lead = SCHED_CLAIM_AHEAD_MS;

	for (size_t i = 0; i < sizeof s->claim_ms / sizeof *s->claim_ms; i++) {
		int64_t ms = s->claim_n[i] ? s->claim_ms[i] * (int64_t)n / (int64_t)s->claim_n[i] : 0;

		if (2 * ms > lead)
			lead = 2 * ms;
	}
	return lead < SCHED_CLAIM_AHEAD_MAX_MS ? lead : SCHED_CLAIM_AHEAD_MAX_MS;
}

/* A job's next fire is at t: the nearest such instant and how many fall
 * on it, tallied over a turn's walk (*at, *n): of the jobs that claim, for
 * the next turn's claim leads; of all, for this turn's forking ahead. */
static void tally_instant(int64_t t, int64_t *at, size_t *n)
{
	if (t < 0 || t > *at)
		return;
	if (t < *at) {
		*at = t;
		*n = 0;
	}
	(*n)++;
}

/* A claim of s->cj[0..n) sent at t0 and answered at now: logged when it
 * took SCHED_CLAIM_SLOW_MS or more and its answer came after the earliest
 * of its fires, which so starts late by the claim (or was late already). */
static void slow_claim(const struct sched *s, size_t n, int64_t t0, int64_t now)
{
	int64_t first = INT64_MAX;
	char at[32];

	for (size_t i = 0; i < n; i++)
		if (!s->cj[i]->fire.catchup)
			first = min64(first, want_of(s->cj[i]));
	if (now - t0 < SCHED_CLAIM_SLOW_MS || now <= first)
		return;
	log_msg(LOG_INFO, NULL, 0, "a claim of %zu fire%s took %lldms: the fire%s at %s start%s %lldms late",
	        n, n == 1 ? "" : "s", (long long)(now - t0), n == 1 ? "" : "s",
	        fire_iso(at, sizeof at, first), n == 1 ? "s" : "", (long long)(now - first));
}

/* Claims the wanted fires of s->cj[0..n) in one call and starts those the
 * store accepted (a fire claimed ahead of its time starts at it).  Returns
 * ms until a job of the batch wants a turn again, or INT64_MAX. */
static int64_t claim_batch(struct sched *s, size_t n)
{
	int64_t wake = INT64_MAX, now, t0;
	int rc;

	if (n == 0)
		return wake;
	t0 = wall(s);
	rc = s->env.claim(s->env.elect_arg, s->cj, s->cf, n, s->cok, 0);
	now = wall(s);
	s->claim_n[s->nclaims % (sizeof s->claim_ms / sizeof *s->claim_ms)] = n;
	s->claim_ms[s->nclaims++ % (sizeof s->claim_ms / sizeof *s->claim_ms)] = now - t0;
	slow_claim(s, n, t0, now);
	for (size_t i = 0; i < n; i++) {
		struct job *j = s->cj[i];
		char at[32], until[32];

		fire_iso(at, sizeof at, want_of(j));
		if (rc < 0) {
			if (!j->fire.retry_at)
				log_msg(LOG_WARN, j->name, 0, "fire at %s not started yet: its claim failed "
				        "(the store did not answer); trying again until %s", at,
				        fire_iso(until, sizeof until, want_of(j) + j->missed_within_ms));
			j->fire.retry_at = now + SCHED_CLAIM_RETRY_MS;
			wake = min64(wake, SCHED_CLAIM_RETRY_MS);
			continue;
		}
		if (!s->cok[i]) {
			log_msg(LOG_WARN, j->name, 0, "fire at %s not started: the claim was refused "
			        "(another replica holds the lease, or the fire ran already)", at);
		} else if (j->fire.at > now) {
			fire_to(j, FIRE_CLAIMED, 0, 0);
			go_ahead(s, j);
			wake = min64(wake, j->fire.at - now);
		} else {
			if (j->fire.catchup)
				log_msg(LOG_INFO, j->name, 0, "catch-up run of the fire at %s", at);
			start(s, j, j->fire.at, j->fire.catchup);
		}
		if (j->fire.state == FIRE_DUE)
			fire_to(j, FIRE_NONE, 0, 0);
		j->fire.catchup = 0;
		/* A refused catch-up fire: the next one of the backlog, if any,
		 * waits for the next turn. */
		if (!j->run && !claimed_of(j) && j->backlog_ms) {
			backlog_pop(s, j);
			wake = 0;
		} else if (!j->run && !claimed_of(j) && j->pending_ms) {
			wake = 0;       /* the queued fire, next turn (due_fire) */
		}
	}
	return wake;
}

/* Starts j's wanted fire: at once when the job claims nothing, else through
 * a claim of its own. */
static void start_wanted(struct sched *s, struct job *j)
{
	if (!claims(s, j)) {
		start(s, j, j->fire.at, j->fire.catchup);
		fire_to(j, FIRE_NONE, 0, 0);
		j->fire.catchup = 0;
		return;
	}
	if (grow_batch(s, 1) < 0) {
		log_msg(LOG_ERROR, j->name, 0, "out of memory: fire not claimed");
		return;
	}
	s->cj[0] = j;
	s->cf[0] = want_of(j);
	claim_batch(s, 1);
}

static void skip_paused(struct sched *s, struct job *j, int64_t fire)
{
	char at[32];

	log_msg(LOG_INFO, j->name, 0, "skipped the fire at %s: the job is paused",
	        fire_iso(at, sizeof at, fire));
	account(s, j, fire, 0, "skipped-paused", "the job is paused (leash pause)");
}

/* The loop came late (a stall, a long store call): of j's fires from fire
 * up to now the latest is the one to start, and the ones before it are
 * missed.  Returns that latest fire. */
static int64_t passed_over(struct sched *s, struct job *j, int64_t fire, int64_t now)
{
	int k = 0;

	for (int64_t f = job_next_fire(s->L, j, fire); f >= 0 && f <= now;
	     f = job_next_fire(s->L, j, f)) {
		char at[32];

		if (k++ < SCHED_ACCOUNT_MAX) {
			log_msg(LOG_WARN, j->name, 0, "fire at %s missed: leash came too late to start "
			        "it (a stall)", fire_iso(at, sizeof at, fire));
			account(s, j, fire, 0, "missed", "leash came too late to start it (a stall)");
		}
		fire = f;
	}
	return fire;
}

/* j's fire at next_fire_ms came (or is about to, within its claim's lead):
 * the next one is set, and this one is wanted (to claim and start), waits
 * behind a run or a catch-up, or is skipped (paused, or by the overlap
 * rule). */
static void fire_came(struct sched *s, struct job *j, int64_t now)
{
	int64_t fire = j->next_fire_ms;
	char at[32], was[32];
	int behind = claims(s, j) && j->missed == JOB_MISSED_ALL && catching_up(j);

	j->next_fire_ms = job_next_fire(s->L, j, fire > now ? fire : now);
	if (claims(s, j) && fire < now && !behind)
		fire = passed_over(s, j, fire, now);
	if (takes_part(s, j) && ask(s, j, SCHED_PAUSED) > 0) {
		skip_paused(s, j, fire);
	} else if (behind) {
		/* missed = "all": a fire during a catch-up waits behind it. */
		backlog_add(s, j, fire, now);
		log_msg(LOG_INFO, j->name, 0, "queued the fire at %s behind the catch-up (%d "
		        "fire%s to go)", fire_iso(at, sizeof at, fire), j->backlog_left,
		        j->backlog_left == 1 ? "" : "s");
	} else if (j->run && j->run_catchup && j->missed == JOB_MISSED_ONCE && claims(s, j)) {
		/* missed = "once": the present fire wins over the catch-up:
		 * it runs once the catch-up run ends, whatever the overlap. */
		if (j->pending_ms) {
			char why[64];

			snprintf(why, sizeof why, "the fire at %s took its place",
			         fire_iso(at, sizeof at, fire));
			account(s, j, j->pending_ms, 0, "missed", why);
		}
		j->pending_ms = fire;
		log_msg(LOG_INFO, j->name, 0, "queued the fire at %s behind the catch-up run %ld",
		        fire_iso(at, sizeof at, fire), j->run_id);
	} else if (j->run || claimed_of(j) || j->backlog_ms) {
		/* missed = "all": the older fires first.  ("once": the
		 * newest fire takes the waiting one's place, below.) */
		overlapped(s, j, fire);
	} else {
		if (want_of(j)) {
			char why[64];

			log_msg(LOG_WARN, j->name, 0, "fire at %s missed: the fire at %s takes its "
			        "place", fire_iso(was, sizeof was, want_of(j)),
			        fire_iso(at, sizeof at, fire));
			snprintf(why, sizeof why, "the fire at %s took its place", at);
			account(s, j, want_of(j), 0, "missed", why);
		}
		fire_to(j, FIRE_DUE, fire, 0);
	}
}

/* j's wanted fire (DUE; no run going, none claimed ahead): started
 * when it is not claimed, else into the claim batch (*n), missed once no
 * claim succeeded within missed_within, skipped while paused, or tried
 * again later.  Returns sleep_ms, or sooner. */
static int64_t claim_wanted(struct sched *s, struct job *j, int64_t now, int64_t sleep_ms,
                            size_t *n)
{
	char at[32];
	int paused;

	if (!claims(s, j)) {
		start_wanted(s, j);
	} else if (now - want_of(j) > j->missed_within_ms) {
		log_msg(LOG_WARN, j->name, 0, "fire at %s missed: no claim succeeded within "
		        "missed_within", fire_iso(at, sizeof at, want_of(j)));
		account(s, j, want_of(j), 0, "missed",
		        "no claim succeeded within missed_within (the store did not answer)");
		/* (Its catchup flag stays set, as it always did: catching_up
		 * reads it until the next fire is wanted.) */
		fire_to(j, FIRE_NONE, 0, 0);
		if (j->backlog_ms) {
			backlog_pop(s, j);
			sleep_ms = 0;
		} else if (j->pending_ms) {
			sleep_ms = 0;
		}
	} else if (now < j->fire.retry_at) {
		sleep_ms = min64(sleep_ms, j->fire.retry_at - now);
	} else if ((paused = ask(s, j, SCHED_PAUSED)) != 0) {
		if (paused < 0) {
			/* Just taken: the first renew reads the controls. */
			sleep_ms = min64(sleep_ms, SCHED_CTL_WAIT_MS);
		} else {
			skip_paused(s, j, j->fire.at);
			fire_to(j, FIRE_NONE, 0, 0);
			j->fire.catchup = 0;
			if (j->backlog_ms)
				backlog_pop(s, j);
			sleep_ms = 0;
		}
	} else {
		s->cj[*n] = j;
		s->cf[(*n)++] = want_of(j);
	}
	return sleep_ms;
}

/* A periodic job that may run: its fire if due (or about to be, when it is
 * claimed), and the fire it wants started, into the claim batch (*n). */
static int64_t due_fire(struct sched *s, struct job *j, int64_t now, size_t *n)
{
	int64_t sleep_ms = INT64_MAX, ahead = 0;

	if (claimed_of(j) && !j->run) {
		if (now < claimed_of(j))
			return claimed_of(j) - now;
		start(s, j, j->fire.at, 0);
		fire_to(j, FIRE_NONE, 0, 0);
	}
	/* Ahead only with nothing waiting: an older fire's claim goes first. */
	if (claims(s, j) && !j->run && !claimed_of(j) && !want_of(j) && !j->backlog_ms)
		ahead = claim_lead(s, j->next_fire_ms == s->next_instant ? s->next_instant_n : 1);
	if (j->next_fire_ms >= 0 && now >= j->next_fire_ms - ahead)
		fire_came(s, j, now);
	if (j->next_fire_ms >= 0)
		sleep_ms = j->next_fire_ms - ahead - now;
	/* A fire that queued behind a catch-up whose last fire is done. */
	if (j->pending_ms && !want_of(j) && !j->run && !claimed_of(j) && !j->backlog_ms) {
		fire_to(j, FIRE_DUE, j->pending_ms, 0);
		j->pending_ms = 0;
	}
	if (!want_of(j) || j->run || claimed_of(j))
		return sleep_ms;
	return claim_wanted(s, j, now, sleep_ms, n);
}

/* Whether j's next fire is one to fork the process of ahead: a regular fire
 * within SCHED_PREP_AHEAD_MS, with nothing else waiting or going (a run
 * whose body is over, its process only exiting, does not count: under a
 * burst's load that exit waits behind the runs starting), that the job is
 * not paused for. */
static int wants_prep(struct sched *s, const struct job *j, int64_t now)
{
	if (!s->env.prepare || j->prep || j->prep_ms == j->next_fire_ms ||
	    (j->run && !act(s, SCHED_BODY_OVER, j->run, NULL, 0, NULL)) ||
	    !sched_idle(j) || j->next_fire_ms < 0 || j->next_fire_ms - now > SCHED_PREP_AHEAD_MS)
		return 0;
	return !takes_part(s, j) || ask(s, j, SCHED_PAUSED) == 0;
}

/* How long before its fire the forking ahead of n processes starts: as late
 * as they can all be forked before the fire's claim may go out (twice the
 * forks' measured cost, and SCHED_PREP_MIN_MS more, before
 * SCHED_CLAIM_AHEAD_MAX_MS), so that it stays out of the way of the runs
 * started just before, which want both the CPU and the process's memory
 * (a fork write-protects it), and of the claim: forks on the database's
 * cores made its answer come after the fire (a whole second's starts late). */
static int64_t prep_lead(const struct sched *s, size_t n)
{
	int64_t us = s->prep_us / (s->prep_n ? s->prep_n : 1);
	int64_t there = act(s, SCHED_PREP_COST, NULL, NULL, 0, NULL);
	int64_t lead;

	if (there > us)
		us = there;
	lead = (int64_t)n * us * 2 / 1000 + SCHED_PREP_MIN_MS + SCHED_CLAIM_AHEAD_MAX_MS;

	return lead < SCHED_PREP_AHEAD_MS ? lead : SCHED_PREP_AHEAD_MS;
}

/* Forks the processes of s->pj[0..n)'s next fires ahead (those whose time
 * has come, see prep_lead), for at most SCHED_PREP_TURN_MS and never into
 * the time of a fire (sleep_ms away): the fires' own starts come first.
 * The nearest instant's lead counts all inst_n of its fires, not only
 * those free to fork now: a job whose last run is still ending joins the
 * forking later, and a lead measured without it comes too late for all.
 * Returns ms until it wants a turn. */
static int64_t prepare_ahead(struct sched *s, size_t n, int64_t sleep_ms, int64_t now,
                             int64_t inst, size_t inst_n)
{
	int64_t t0 = mono(s), wake = INT64_MAX;
	int64_t lead = prep_lead(s, n), inst_lead = prep_lead(s, inst_n > n ? inst_n : n);
	size_t made = 0;

	for (size_t i = 0; i < n; i++) {
		struct job *j = s->pj[i];
		int64_t spent = mono(s) - t0;
		int64_t ahead = j->next_fire_ms == inst ? inst_lead : lead;

		if (j->next_fire_ms - ahead > now) {
			wake = min64(wake, j->next_fire_ms - ahead - now);
			continue;
		}
		if (sleep_ms - spent <= SCHED_PREP_TURN_MS) {
			wake = INT64_MAX;       /* after the fire */
			break;
		}
		if (spent >= SCHED_PREP_TURN_MS) {
			wake = 0;               /* the rest in the next turn */
			break;
		}
		if (s->env.prepare(s->env.arg, j, j->next_fire_ms, &j->prep) == 0) {
			wake = SCHED_PREP_LATER_MS;     /* put off: whoever forks is busy */
			break;
		}
		j->prep_ms = j->next_fire_ms;   /* made, or failed: not tried again */
		made++;
	}
	if (made) {
		/* The cost per fork, over the last thousand or so. */
		s->prep_us += (mono(s) - t0) * 1000;
		s->prep_n += made;
		if (s->prep_n > 1000) {
			s->prep_us /= 2;
			s->prep_n /= 2;
		}
	}
	return wake;
}

int64_t sched_start_due(struct sched *s)
{
	int64_t now = wall(s), mnow = mono(s);
	int64_t sleep_ms = 60000;
	int64_t inst = INT64_MAX, pinst = INT64_MAX;     /* the claims', the forks' */
	size_t n = 0, np = 0, inst_n = 0, pinst_n = 0;

	s->accounts_left = SCHED_ACCOUNT_TURN_MAX;
	if (grow_batch(s, s->njobs) < 0) {
		log_msg(LOG_ERROR, NULL, 0, "out of memory: no fire starts this turn");
		return 1000;
	}
	for (size_t i = 0; i < s->njobs; i++) {
		struct job *j = s->jobs[i];
		int ok = !s->stopping && may_run(s, j);

		if (j->prep && (!ok || !prep_fits(j)))
			drop_prep(s, j);
		if (s->stopping)
			continue;
		if (!ok) {
			/* A follower's fire times pass too: what it catches up
			 * when it becomes the holder is sched_gained's choice. */
			if (want_of(j) || claimed_of(j) || j->backlog_ms || j->pending_ms)
				drop_wanted(s, j, j->removed ? "the job was removed"
				            : "this replica no longer holds the lease", 0);
			if (j->kind != JOB_SERVICE && j->next_fire_ms >= 0 && !j->removed) {
				if (now >= j->next_fire_ms)
					j->next_fire_ms = job_next_fire(s->L, j, now);
				if (j->next_fire_ms >= 0)
					sleep_ms = min64(sleep_ms, j->next_fire_ms - now);
			}
			continue;
		}
		if (j->kind == JOB_SERVICE) {
			if (!j->run && mnow >= j->restart_at)
				start(s, j, 0, 0);
			if (!j->run)
				sleep_ms = min64(sleep_ms, j->restart_at - mnow);
			continue;
		}
		sleep_ms = min64(sleep_ms, due_fire(s, j, now, &n));
		tally_instant(j->next_fire_ms, &pinst, &pinst_n);
		if (claims(s, j))
			tally_instant(j->next_fire_ms, &inst, &inst_n);
		if (wants_prep(s, j, now))
			s->pj[np++] = j;
	}
	s->next_instant = inst;
	s->next_instant_n = inst_n;
	if (!s->stopping)
		sleep_ms = min64(sleep_ms, claim_batch(s, n));
	if (np)
		sleep_ms = min64(sleep_ms, prepare_ahead(s, np, sleep_ms, now, pinst, pinst_n));
	return sleep_ms < 0 ? 0 : sleep_ms;
}

void sched_run_ended(struct sched *s, struct job *j, int failed, int64_t ran_ms)
{
	j->run = NULL;
	if (stale(s, j)) {
		leave(s, j);
		enter(s, j);
	}
	if (j->kind == JOB_SERVICE && !s->stopping && failed == JOB_RUN_STOPPED) {
		/* Stopped on purpose (a hand-off): no failure and no backoff; it
		 * comes back at once if the hand-off is called off. */
		j->restart_at = mono(s);
	} else if (j->kind == JOB_SERVICE && !s->stopping) {
		if (ran_ms >= SCHED_BACKOFF_MAX)
			j->backoff_ms = 0;
		j->backoff_ms = j->backoff_ms ? j->backoff_ms * 2 : SCHED_BACKOFF_MIN;
		if (j->backoff_ms > SCHED_BACKOFF_MAX)
			j->backoff_ms = SCHED_BACKOFF_MAX;
		j->restart_at = mono(s) + j->backoff_ms;
		log_msg(LOG_INFO, j->name, 0, "service %s; restarting in %.1fs",
		        failed ? "failed" : "returned", j->backoff_ms / 1000.0);
	} else if (j->kind != JOB_SERVICE && next_wanted(s, j, j->run_id)) {
		start_wanted(s, j);
	}
	if (j->manual_wait && !j->run && !claimed_of(j)) {
		j->manual_wait = 0;
		if (!s->stopping && may_run(s, j)) {
			log_msg(LOG_INFO, j->name, 0, "triggered run starts (it waited for run %ld)",
			        j->run_id);
			start(s, j, wall(s), SCHED_MANUAL);
		}
	}
}

int sched_trigger(struct sched *s, struct job *j)
{
	if (j->kind == JOB_SERVICE || j->removed || s->stopping || !may_run(s, j)) {
		log_msg(LOG_WARN, j->name, 0, "trigger dropped: %s", j->kind == JOB_SERVICE
		        ? "a service runs already" : "this replica cannot run the job now");
		return 0;
	}
	if (!j->run && !claimed_of(j)) {
		log_msg(LOG_INFO, j->name, 0, "triggered: one run now (leash trigger)");
		start(s, j, wall(s), SCHED_MANUAL);
		return 1;
	}
	/* A fire claimed and not yet begun (claims go out ahead of it): no
	 * run goes, so the overlap rule has nothing to skip or replace; the
	 * trigger runs once that fire's run has ended. */
	if (!j->run) {
		log_msg(LOG_INFO, j->name, 0, "trigger queued: it runs after the fire about to start");
		j->manual_wait = 1;
		return 1;
	}
	switch (j->overlap) {
	case JOB_SKIP:
		log_msg(LOG_WARN, j->name, 0, "trigger skipped: run %ld is still going", j->run_id);
		return 0;
	case JOB_QUEUE:
		log_msg(LOG_INFO, j->name, 0, "trigger queued: run %ld is still going", j->run_id);
		break;
	case JOB_REPLACE:
		log_msg(LOG_INFO, j->name, 0, "trigger replaces run %ld", j->run_id);
		if (j->run)
			act(s, SCHED_STOP, j->run, NULL, 0, "replaced by a triggered run");
		break;
	}
	j->manual_wait = 1;
	return 1;
}

static const char *const missed_words[] = { "once", "skip", "all" };

/* Logs count missed fires from first to last (a range, or one), and
 * accounts for them one by one (at most *budget more of them). */
static void log_missed(struct sched *s, struct job *j, int count, int64_t first, int64_t last,
                       const char *why, int *budget)
{
	char a[32], b[32], note[64] = "";
	int n = 0;

	if (count <= 0)
		return;
	for (int64_t f = first; f >= 0 && f <= last && *budget > 0; f = job_next_fire(s->L, j, f)) {
		account(s, j, f, 0, "missed", why);
		--*budget;
		n++;
	}
	if (n < count)
		snprintf(note, sizeof note, " (the ledger records the first %d of them)", n);
	if (count == 1)
		log_msg(LOG_WARN, j->name, 0, "fire at %s missed: %s%s", fire_iso(a, sizeof a, first),
		        why, note);
	else
		log_msg(LOG_WARN, j->name, 0, "%d fires from %s to %s missed: %s%s", count,
		        fire_iso(a, sizeof a, first), fire_iso(b, sizeof b, last), why, note);
}

/* The catch-up of a periodic job that just took its lease with cursor
 * last_fire: the fires after it and before the first fire the regular path
 * starts (next_fire_ms, when it is due already), up to now included (a
 * follower at a fire's millisecond moved next_fire_ms past it).  Every fire not
 * run is accounted for, up to SCHED_ACCOUNT_MAX of them, from at most
 * SCHED_ACCOUNT_SPAN back (the cursor may be years old). */
static void catch_up(struct sched *s, struct job *j, int64_t last_fire, const char *cause,
                     int *budget)
{
	int64_t now = wall(s), oldest = now - j->missed_within_ms;
	int64_t until = j->next_fire_ms >= 0 && j->next_fire_ms <= now ? j->next_fire_ms : now + 1;
	int64_t f, first = -1, last = -1, run_from;
	int count = 0, run, k;
	char why[96], lost[512];

	drop_wanted(s, j, "the lease was taken again", 0);
	if (!cause)
		cause = "no replica held the lease";
	snprintf(lost, sizeof lost, "%s (older than missed_within)", cause);
	if (last_fire < 0) {
		/* A new job: nothing to catch up.  But its first fire may yet
		 * fall in a hand-over gap, so its cursor starts here: the fires
		 * from now on are the cluster's to run or account for. */
		j->seed_ms = until - 1;
		return;
	}
	f = job_next_fire(s->L, j, last_fire);
	if (f >= 0 && f < oldest && f < until) {
		int64_t stop = oldest < until ? oldest : until, from = f;
		char a[32], b[32];

		if (f < stop - SCHED_ACCOUNT_SPAN)
			f = job_next_fire(s->L, j, stop - SCHED_ACCOUNT_SPAN - 1);
		for (; f >= 0 && f < stop && *budget > 0; f = job_next_fire(s->L, j, f), (*budget)--)
			account(s, j, f, 0, "missed", lost);
		/* Not counted: the cursor may be years old. */
		log_msg(LOG_WARN, j->name, 0, "fires from %s to before %s missed: older than "
		        "missed_within%s", fire_iso(a, sizeof a, from), fire_iso(b, sizeof b, stop),
		        f >= 0 && f < stop ? " (the ledger records the first of them only)"
		        : from < stop - SCHED_ACCOUNT_SPAN ? " (the ledger records the last day only)"
		        : "");
		f = job_next_fire(s->L, j, oldest - 1);
	}
	for (; f >= 0 && f < until; f = job_next_fire(s->L, j, f)) {
		if (first < 0)
			first = f;
		last = f;
		count++;
	}
	if (count == 0)
		return;
	snprintf(why, sizeof why, "missed = \"%s\"", missed_words[j->missed]);
	run = j->missed == JOB_MISSED_SKIP ? 0 : j->missed == JOB_MISSED_ONCE ? 1
	    : count < j->missed_max ? count : j->missed_max;
	if (run == 0) {
		snprintf(lost, sizeof lost, "%s (missed = \"skip\" runs none)", cause);
		log_missed(s, j, count, first, last, lost, budget);
		return;
	}
	/* The run newest ones, oldest first. */
	run_from = first;
	for (k = 0; k < count - run; k++)
		run_from = job_next_fire(s->L, j, run_from);
	if (count > run) {
		int64_t before = first;

		for (k = 0; k < count - run - 1; k++)
			before = job_next_fire(s->L, j, before);
		snprintf(lost, sizeof lost, "%s (%s)", cause, j->missed == JOB_MISSED_ONCE
		         ? "missed = \"once\" runs the latest" : "more than missed_max");
		log_missed(s, j, count - run, first, before, lost, budget);
	}
	log_msg(LOG_INFO, j->name, 0, "catching up %d missed fire%s (%s)", run, run == 1 ? "" : "s",
	        why);
	fire_to(j, FIRE_DUE, run_from, 1);
	if (run > 1) {
		j->backlog_ms = job_next_fire(s->L, j, run_from);
		j->backlog_left = run - 1;
		j->backlog_until = until;
	}
}

void sched_gained(struct sched *s, struct job *j, int64_t last_fire, const char *cause)
{
	j->health = -1;         /* the store's, from the next run's end on */
	if (j->kind == JOB_SERVICE) {
		j->restart_at = mono(s);
		j->backoff_ms = 0;
		return;
	}
	{
		/* The job's share of the fires accounted one by one, out of what
		 * is left of them in this turn (a thousand jobs taken at once
		 * after an outage would make the turn last seconds). */
		int share = SCHED_ACCOUNT_MAX < s->accounts_left ? SCHED_ACCOUNT_MAX : s->accounts_left;
		int budget = share;

		catch_up(s, j, last_fire, cause, &budget);
		s->accounts_left -= share - budget;
	}
}

/* The stop came between the claims of fires, which go out ahead of them,
 * and their starts: the fires go back to the store, so that whoever holds
 * the jobs next runs them (a rolling restart loses none).  One call. */
static void give_back(struct sched *s)
{
	size_t n = 0;
	int rc;

	if (!s->env.claim || grow_batch(s, s->njobs) < 0)
		return;
	for (size_t i = 0; i < s->njobs; i++) {
		struct job *j = s->jobs[i];

		take_back(s, j);        /* (too late: it runs) */
		if (claimed_of(j) && !j->run && claims(s, j)) {
			s->cj[n] = j;
			s->cf[n++] = claimed_of(j);
		}
	}
	if (n == 0)
		return;
	rc = s->env.claim(s->env.elect_arg, s->cj, s->cf, n, s->cok, 1);
	for (size_t k = 0; rc == 0 && k < n; k++) {
		struct job *j = s->cj[k];
		char at[32];

		if (!s->cok[k])
			continue;
		log_msg(LOG_INFO, j->name, 0, "fire at %s given back: leash is stopping and did "
		        "not start it (whoever holds the job next runs it)", fire_iso(at, sizeof at, claimed_of(j)));
		fire_to(j, FIRE_NONE, 0, 0);
	}
}

void sched_stopped(struct sched *s)
{
	give_back(s);
	for (size_t i = 0; i < s->njobs; i++) {
		struct job *j = s->jobs[i];

		j->pending_ms = 0;
		if (want_of(j) || claimed_of(j) || j->backlog_ms)
			drop_wanted(s, j, "leash is stopping", 0);
	}
}

void sched_prep_started(struct sched *s, struct job *j, struct run *r)
{
	if (j->prep == r && j->prep_ahead)
		went_ahead(s, j);
}

void sched_prep_ended(struct sched *s, struct job *j, struct run *r)
{
	(void)s;
	if (j->prep == r) {
		j->prep = NULL;
		j->prep_ahead = 0;
	}
}

void sched_drop_removed(struct sched *s)
{
	size_t w = 0;

	for (size_t i = 0; i < s->njobs; i++) {
		struct job *j = s->jobs[i];

		if (j->removed)
			take_back(s, j);        /* (too late: it runs first) */
		if (j->removed && !j->run && !j->hook_run) {
			drop_prep(s, j);
			leave(s, j);
			metrics_job_remove(j->metrics);
			job_free(s->L, j);
		} else {
			s->jobs[w++] = j;
		}
	}
	s->njobs = w;
}

void sched_free(struct sched *s)
{
	for (size_t i = 0; i < s->njobs; i++) {
		s->jobs[i]->prep_ahead = 0;     /* the end: whatever goes, goes */
		drop_prep(s, s->jobs[i]);
		leave(s, s->jobs[i]);
		metrics_job_remove(s->jobs[i]->metrics);
		job_free(s->L, s->jobs[i]);
	}
	free(s->jobs);
	s->jobs = NULL;
	s->njobs = s->cap = 0;
	free(s->broken);
	s->broken = NULL;
	free(s->cj);
	free(s->cf);
	free(s->cok);
	free(s->pj);
	s->cj = NULL;
	s->cf = NULL;
	s->cok = NULL;
	s->pj = NULL;
	s->ccap = 0;
}
