/* runs.c - the runs of `leash run`: what the job table asks of them (its
 * sched_env: start one, fork one ahead, give it its start ahead or take it
 * back, stop it, discard it; and, in singleton mode, the election's calls,
 * the singleton glue's), their deadlines, and
 * their ends, reported to the job table, the election and the hooks.  The
 * loop (src/loop.c) reaps their exits and turns the wheel; a run's life as
 * a process is src/launch/'s. */
#include <malloc.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/clock.h"
#include "core/log.h"
#include "cluster/hooks.h"
#include "cluster/singleton.h"
#include "launch/launch.h"
#include "launch/runner.h"
#include "plan/sched.h"
#include "loop.h"
#include "runs.h"

static int64_t now(void *arg, enum sched_clock which)
{
	(void)arg;
	return which == SCHED_WALL ? clock_wall_ms() : clock_mono_ms();
}

static void add_run(struct loop *lp, struct run *r)
{
	r->next = lp->runs;
	lp->runs = r;
}

/* What a run of j's fire at scheduled_ms (0: a service) goes with: the
 * replica, the grace, and in singleton mode today's token and fence. */
static struct run_info fire_info(struct loop *lp, const struct job *j, int64_t scheduled_ms)
{
	struct run_info info = {
		.replica = lp->owner, .scheduled_ms = scheduled_ms, .grace_ms = lp->cfg->grace_ms,
	};

	if (lp->cfg->singleton)
		singleton_run_info(&lp->sg, j, &info);
	return info;
}

static struct run *start_run(void *arg, struct job *j, int64_t scheduled_ms, int catchup,
                             struct run *prep, long *id)
{
	struct loop *lp = arg;
	struct run_info info = fire_info(lp, j, scheduled_ms);
	struct run *r = NULL;

	info.catchup = catchup == 1;
	info.manual = catchup == SCHED_MANUAL;
	if (prep && runner_go(prep, &info) == 0)
		r = prep;
	else if (prep)
		runner_discard(prep);   /* its child died: a fresh one */
	if (!r && (r = lp->launch->start(lp->L, j, &info, scheduled_ms && !catchup)))
		add_run(lp, r);
	if (!r)
		return NULL;
	r->scheduled_ms = scheduled_ms;
	r->token = info.token;
	r->manual = info.manual;
	r->catchup = info.catchup;
	r->started_wall = clock_wall_ms();
	if (lp->cfg->singleton)
		singleton_run_started(&lp->sg, r);
	*id = r->id;
	return r;
}

/* A fire's process forked ahead (sched.h's prepare): the token and the fence
 * deadline are today's; runner_go sends the ones of the start. */
static int prepare_run(void *arg, struct job *j, int64_t fire, struct run **out)
{
	struct loop *lp = arg;
	struct run_info info = fire_info(lp, j, fire);
	struct run *r;
	int later;

	if (!(r = lp->launch->prepare(lp->L, j, &info, &later)))
		return later ? 0 : -1;
	add_run(lp, r);
	*out = r;
	return 1;
}

/* What the job table does to a run (sched.h's enum sched_act). */
static int64_t act_on_run(void *arg, enum sched_act what, struct run *r, struct job *j,
                          int64_t fire, const char *reason)
{
	struct loop *lp = arg;
	const struct launch_ops *ops = lp->launch;
	struct run_info info;

	switch (what) {
	case SCHED_STOP:
		runner_stop(r, RUN_STOP_STOPPED, reason);
		return 0;
	case SCHED_ADOPT:
		r->job = j;
		return 0;
	case SCHED_DISCARD:
		runner_discard(r);
		return 0;
	case SCHED_GO_AHEAD:
		if (!ops->go_ahead)
			return -1;
		info = fire_info(lp, j, fire);
		return ops->go_ahead(r, &info);
	case SCHED_TAKE_BACK:
		return ops->take_back ? ops->take_back(r) : 0;
	case SCHED_BODY_OVER:
		return r->ended_ms != 0;
	case SCHED_PREP_COST:
		return ops->prep_cost_us ? ops->prep_cost_us() : 0;
	}
	return -1;
}

/* The election's word on a job (sched.h's enum sched_ask). */
static int elect_ask(void *sg, const struct job *j, enum sched_ask what)
{
	switch (what) {
	case SCHED_TAKES_PART: return singleton_takes_part(sg, j);
	case SCHED_MAY_RUN: return singleton_may_run(sg, j);
	case SCHED_STALE: return singleton_stale(sg, j);
	case SCHED_PAUSED: return singleton_paused(sg, j);
	}
	return 0;
}

static void elect_stand(void *sg, struct job *j, int in)
{
	if (in)
		singleton_enter(sg, j);
	else
		singleton_leave(sg, j);
}

static int elect_claim(void *sg, struct job *const *jobs, const int64_t *fires, size_t n,
                       int *ok, int back)
{
	return back ? singleton_unclaim(sg, jobs, fires, n, ok)
	            : singleton_claim(sg, jobs, fires, n, ok);
}

/* Runs whose child exited and whose pipes are drained: logged, handed back
 * to the job table, freed. */
static void finish_done_runs(struct loop *lp)
{
	struct run **p = &lp->runs;

	while (*p) {
		struct run *r = *p;
		int failed;

		if (!runner_done(r)) {
			p = &r->next;
			continue;
		}
		*p = r->next;
		/* Its start went ahead and it read it: the fire ran, now (or
		 * before the turn that was to start it came). */
		if (r->state == RUN_AHEAD && r->job && lp->launch->take_back(r) < 0)
			sched_prep_started(&lp->sched, r->job, r);
		if (runner_prepared(r)) {       /* never started: nothing to tell but its death */
			if (r->job && r->state == RUN_LOST) {
				sched_prep_ended(&lp->sched, r->job, r);
			} else if (r->job) {
				log_msg(LOG_WARN, r->job->name, 0, "the process forked ahead of a fire "
				        "died before it (pid %d, status %d); the fire forks another",
				        (int)r->pid, r->status);
				sched_prep_ended(&lp->sched, r->job, r);
			}
			runner_free(r);
			continue;
		}
		runner_report(r, &failed);
		lp->ended++;
		if (r->hook) {
			hooks_hook_ended(&lp->hooks, r, lp->stopping);
			runner_free(r);
			continue;
		}
		if (lp->cfg->singleton)
			singleton_run_ended(&lp->sg, r);
		if (r->job) {
			hooks_run_ended(&lp->hooks, r, lp->stopping);
			sched_run_ended(&lp->sched, r->job, failed, runner_ran_ms(r));
		}
		runner_free(r);
	}
}

/* Once a burst of runs is over (LOOP_TRIM_RUNS ended, none going), the
 * heap's free pages go back to the system: the burst's records and buffers
 * leave holes below what was allocated after them, which free() alone
 * cannot return (0.7 MB after 1,000 runs). */
#define LOOP_TRIM_RUNS 256

static void trim_after_burst(struct loop *lp)
{
	if (lp->ended < LOOP_TRIM_RUNS || runner_going())
		return;
	lp->ended = 0;
	malloc_trim(0);
}

/* Timeouts and kills that are due; returns ms until the next one. */
int64_t runs_tick(struct loop *lp, int64_t sleep_ms)
{
	int64_t now = clock_mono_ms();

	for (struct run *r = lp->runs; r; r = r->next) {
		int64_t t = runner_tick(r, now);
		if (t != INT64_MAX && t - now < sleep_ms)
			sleep_ms = t - now;
	}
	return sleep_ms < 0 ? 0 : sleep_ms;
}

void runs_finish(struct loop *lp)
{
	finish_done_runs(lp);
	trim_after_burst(lp);
}

void runs_env(struct loop *lp, struct sched_env *env)
{
	lp->launch = launch_pick(lp->cfg->prefork);
	*env = (struct sched_env){
		.arg = lp, .now = now, .start = start_run, .act = act_on_run,
	};
	if (lp->launch->prepare)        /* [leash] prefork = false: each run forks at its start */
		env->prepare = prepare_run;
	if (!lp->cfg->singleton)
		return;
	env->elect_arg = &lp->sg;
	env->ask = elect_ask;
	env->stand = elect_stand;
	env->claim = elect_claim;
	env->account = singleton_account;
}
