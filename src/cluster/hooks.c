/* hooks.c - on_failure / on_recover (see hooks.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/hooks.h"
#include "plan/job.h"
#include "core/log.h"
#include "launch/runner.h"

/* 1 failing, 0 ok, -1 neither (the run says nothing of the job's health). */
static int health_of(const char *outcome)
{
	if (strcmp(outcome, "failed") == 0 || strcmp(outcome, "timeout") == 0)
		return 1;
	if (strcmp(outcome, "ok") == 0 || strcmp(outcome, "manual") == 0)
		return 0;
	return -1;
}

static void start(struct hooks *h, struct job *j, struct run_report *rep)
{
	struct run_info info = {
		.replica = h->replica, .token = rep->token, .grace_ms = h->grace_ms,
		.hook = rep, .timeout_ms = j->timeout_ms ? 0 : HOOKS_TIMEOUT_MS,
	};
	struct run *r = runner_start(h->L, j, &info);

	free(rep);
	if (!r)
		return;
	r->token = info.token;
	r->next = *h->runs;
	*h->runs = r;
	j->hook_run = r;
}

void hooks_run_ended(struct hooks *h, struct run *r, int stopping)
{
	struct job *j = r->job;
	struct run_report *rep;
	int code, sig, failing, changed;
	const char *outcome = runner_outcome(r, &code, &sig);
	unsigned want;

	failing = health_of(outcome);
	if (!j || !j->hooks || failing < 0 || stopping || j->health == failing)
		return;
	changed = h->record ? h->record(h->arg, j, failing) : HOOKS_LOCAL;
	if (changed == HOOKS_LOCAL)
		changed = j->health < 0 ? failing : 1;  /* unknown counts as ok */
	if (changed < 0)
		return;
	j->health = failing;
	want = failing ? JOB_ON_FAILURE : JOB_ON_RECOVER;
	if (!changed || !(j->hooks & want))
		return;
	if (!(rep = calloc(1, sizeof *rep))) {
		log_msg(LOG_ERROR, j->name, r->id, "out of memory: the %s hook does not run",
		        failing ? "on_failure" : "on_recover");
		return;
	}
	rep->hook = failing ? "on_failure" : "on_recover";
	rep->scheduled_ms = r->scheduled_ms;
	rep->token = r->token;
	rep->started_ms = r->started_wall;
	rep->ended_ms = runner_ended_wall(r);
	snprintf(rep->outcome, sizeof rep->outcome, "%s", outcome);
	rep->exit_code = code;
	rep->exit_signal = sig;
	snprintf(rep->error, sizeof rep->error, "%s", r->error ? r->error : r->stop_reason);
	log_msg(LOG_INFO, j->name, r->id, "%s: run %ld %s", failing ? "failing" : "recovered",
	        r->id, outcome);
	if (j->hook_run) {
		/* One hook at a time; the latest change waits for it. */
		if (j->hook_wait)
			log_msg(LOG_WARN, j->name, r->id, "the %s hook that waited is dropped: the "
			        "job changed again", j->hook_wait->hook);
		free(j->hook_wait);
		j->hook_wait = rep;
		return;
	}
	start(h, j, rep);
}

void hooks_hook_ended(struct hooks *h, struct run *r, int stopping)
{
	struct job *j = r->job;
	struct run_report *next;

	if (!j)
		return;
	j->hook_run = NULL;
	next = j->hook_wait;
	j->hook_wait = NULL;
	/* (A reload may have taken the hook out of the file.) */
	if (next && !stopping && !j->removed &&
	    (j->hooks & (strcmp(next->hook, "on_failure") == 0 ? JOB_ON_FAILURE : JOB_ON_RECOVER)))
		start(h, j, next);
	else
		free(next);
}
