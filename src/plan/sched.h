/* sched.h - the job table: loading and reloading jobs/, fire times, starting
 * runs, services' backoff, dropping removed jobs.
 *
 * It owns no clock, no process and no election: the environment it is given
 * reads the clocks, starts and stops runs, and (in singleton mode) says
 * whether a job may run and takes it in and out of the election.  `leash
 * run` wires it to the runner and the singleton glue; the specs drive it
 * through leash.core.sched with a fake clock and fake runs, in milliseconds.
 */
#ifndef LEASH_SCHED_H
#define LEASH_SCHED_H

#include <stddef.h>
#include <stdint.h>
#include <lua.h>

#include "plan/job.h"

#define SCHED_BACKOFF_MIN 1000          /* ms: a service's first restart delay */
#define SCHED_BACKOFF_MAX 60000         /* and the longest; a run this long resets it */
#define SCHED_CLAIM_AHEAD_MS 10         /* a fire's claim goes out this early, or */
#define SCHED_CLAIM_AHEAD_MAX_MS 100    /* twice the slowest recent claim, up to this */
#define SCHED_CLAIM_RETRY_MS 1000       /* an erred claim is tried again after this */
#define SCHED_CLAIM_SLOW_MS 20          /* a claim this slow that made fires late is logged */
#define SCHED_CTL_WAIT_MS 50            /* a look again while a new lease's controls are unread */
#define SCHED_PREP_AHEAD_MS 1000        /* a fire's process is forked at most this early */
#define SCHED_PREP_MIN_MS 50            /* and at least this before its claim may go out */
#define SCHED_PREP_TURN_MS 5            /* forking ahead takes at most this much of a turn */
#define SCHED_PREP_LATER_MS 1           /* a put-off fork is tried again after */
#define SCHED_ACCOUNT_MAX 1000          /* missed fires one catch-up accounts one by one */
#define SCHED_ACCOUNT_TURN_MAX 10000    /* and all the catch-ups between two turns */
#define SCHED_ACCOUNT_SPAN (24LL * 3600 * 1000) /* and how far back it looks at most */

/* The clocks the job table reads (sched_env.now). */
enum sched_clock {
	SCHED_WALL,                     /* fire times */
	SCHED_MONO,                     /* services' restarts */
};

/* What the job table does to a run or a process forked ahead
 * (sched_env.act), each with the arguments it uses:
 * - STOP (run, reason): asks a run to stop (it ends later, through
 *   sched_run_ended).  The reason may live on the caller's stack: keep a
 *   copy.
 * - ADOPT (run, job): a reload replaced the definition of a job whose run
 *   goes on: the run now belongs to the fresh struct job (the old one is
 *   freed).
 * - DISCARD (run): a process forked ahead that will not start goes,
 *   quietly.
 * - GO_AHEAD (run, job, fire): the start of a claimed fire's process
 *   forked ahead, given it ahead of the fire's time: it goes at that time
 *   by itself, whatever this process is doing then; start still follows at
 *   the time.  0, or -1 when it cannot be (start gives it then).
 * - TAKE_BACK (run): such a start taken back (0), or -1 when too late: the
 *   process has gone, and the fire started (the job table makes it the run
 *   with start).
 * - BODY_OVER (run): 1 when the run's body is over, its process only
 *   exiting (then the next fire's process may be forked ahead; the fire
 *   itself still waits for the run to end); 0 when not.
 * - PREP_COST: what forking one ahead costs where it is done (µs; 0:
 *   unknown, then prepare's own time counts). */
enum sched_act {
	SCHED_STOP, SCHED_ADOPT, SCHED_DISCARD, SCHED_GO_AHEAD, SCHED_TAKE_BACK,
	SCHED_BODY_OVER, SCHED_PREP_COST,
};

/* What the job table asks the election of an elected job (sched_env.ask):
 * TAKES_PART the job is elected; MAY_RUN it holds its lease now; STALE its
 * standing no longer fits its settings; PAUSED (leash pause) 1 its fires are
 * accounted "skipped-paused" instead of run, -1 not known yet (just taken:
 * nothing is claimed until it is), 0 not. */
enum sched_ask { SCHED_TAKES_PART, SCHED_MAY_RUN, SCHED_STALE, SCHED_PAUSED };

/* The job table's environment: eight callbacks, the first four about
 * runs (given arg), the last four about the election (given elect_arg). */
struct sched_env {
	void *arg;
	int64_t (*now)(void *arg, enum sched_clock);
	/* Starts a run of the job (scheduled_ms 0 for a service; catchup: a
	 * missed fire run late): the run's handle and id, or NULL when it could
	 * not start (the env logs why).  prep: the process prepare made for
	 * this fire, to start instead of a new one (NULL: none). */
	struct run *(*start)(void *arg, struct job *, int64_t scheduled_ms, int catchup,
	                     struct run *prep, long *id);
	/* Forks, ahead of time, the process of the job's fire at fire (a
	 * periodic fire, not a catch-up): it waits, doing nothing, until start
	 * is given it.  *out set: 1; 0 when not now (whoever forks is busy: asked
	 * again SCHED_PREP_LATER_MS later); -1 when it failed
	 * (the fire's process is forked at the fire).  NULL: runs are forked
	 * when they start, and act is never asked to DISCARD, GO_AHEAD,
	 * TAKE_BACK, BODY_OVER or PREP_COST. */
	int (*prepare)(void *arg, struct job *, int64_t fire, struct run **out);
	/* enum sched_act: one of the things done to a run (run or job may be
	 * NULL where the act takes none; fire is 0 but for GO_AHEAD, reason
	 * NULL but for STOP). */
	int64_t (*act)(void *arg, enum sched_act, struct run *, struct job *, int64_t fire,
	               const char *reason);
	/* The election, in singleton mode; all NULL without it. */
	void *elect_arg;
	int (*ask)(void *arg, const struct job *, enum sched_ask);
	/* The job stands for election (in 1), or leaves it: released,
	 * forgotten (in 0). */
	void (*stand)(void *arg, struct job *, int in);
	/* Claims fires[i] of the elected jobs[i] (distinct jobs, each holding
	 * its lease), all in one store call: ok[i] is 1 when the fire may
	 * start, 0 when the store refused it (another replica holds the lease,
	 * or the fire ran already).  With back, at the stop: the fires claimed
	 * ahead of their time that did not start are given back instead, so
	 * that the next holder runs them (ok[i] 1 given back, 0 refused: the
	 * lease moved on; refused, they are accounted missed).  0, or -1 when
	 * the store did not answer (ok unset; the env logs why).  NULL: fires
	 * start unclaimed. */
	int (*claim)(void *arg, struct job *const *jobs, const int64_t *fires, size_t n, int *ok,
	             int back);
	/* A fire of a job that claims, while it holds its lease, did not run:
	 * outcome "missed", "skipped-overlap" or "skipped-paused", why says
	 * why.  claimed: the fire was claimed (and so recorded) already.  Set
	 * with claim. */
	void (*account)(void *arg, struct job *, int64_t fire, int claimed, const char *outcome,
	                const char *why);
};

/* env.start's catchup for a manual run (leash trigger). */
#define SCHED_MANUAL 2

struct sched {
	lua_State *L;
	const char *dir;
	struct sched_env env;
	struct job **jobs;
	size_t njobs, cap;
	int stopping;                   /* no new runs */
	/* sched_start_due's batch of claims, room for njobs. */
	struct job **cj;
	int64_t *cf;
	int *cok;
	struct job **pj;                /* the jobs whose fire's process to prepare */
	size_t ccap;
	int64_t prep_us, prep_n;        /* what forking ahead took, for how many */
	int64_t claim_ms[32];           /* how long the last claims took (wall clock) */
	size_t claim_n[32];             /* and how many fires each claimed */
	unsigned nclaims;
	/* The nearest fire instant of the jobs that may claim, and how many
	 * fire then (claim_lead's measure), as the last turn left them. */
	int64_t next_instant;
	size_t next_instant_n;
	int accounts_left;              /* of SCHED_ACCOUNT_TURN_MAX, since the last turn */
	int64_t load_timeout_ms;        /* a job file's ([leash] load_timeout) */
	char *broken;                   /* the job files the last load found broken,
	                                 * as sched_broken says; NULL for none */
};

/* The job files that failed to load, as a replica publishes them with its
 * presence: a line per file, sorted by name, "NAME\tSINCE\tKEPT\tERROR":
 * NAME the file's name without ".lua", SINCE the wall ms (the injected
 * clock) of the first load that found it broken since it last loaded
 * well, KEPT 1 while the job runs its last good definition (0: the file
 * never loaded, or its job is gone), ERROR the first line of the first
 * problem.  Control characters (tabs, newlines) are spaces, NAME is cut at
 * SCHED_BROKEN_NAME and ERROR at SCHED_BROKEN_ERROR bytes (on a UTF-8
 * boundary), and the text at SCHED_BROKEN_MAX bytes: the files left out
 * are counted by a last line "+\t0\t0\tN". */
#define SCHED_BROKEN_MAX 8192
#define SCHED_BROKEN_NAME 200
#define SCHED_BROKEN_ERROR 300
static inline const char *sched_broken(const struct sched *s) { return s->broken; }

void sched_init(struct sched *, lua_State *L, const char *jobs_dir, const struct sched_env *);

/* Reads jobs/ (first load, or a reload on SIGHUP): new files start, changed
 * ones take effect (a run going finishes under its old definition), removed
 * ones have their run stopped and are dropped once it ended; a file that
 * became broken keeps its last good definition.  Problems are logged. */
void sched_load(struct sched *, int reload);
/* The same with a check of jobs/ (job_check_start) that ended: the loop
 * goes on while it goes, then takes its files in. */
struct job_check;
void sched_load_checked(struct sched *, int reload, struct job_check *);

/* Starts the runs that are due, lets past fire times go by (a follower's
 * too: what a new holder catches up is sched_gained's decision).  With a
 * claim hook, an elected job's fire starts only once claimed: the fires due
 * now (or within the claim's lead, see claim_lead in sched.c) of all jobs go
 * in one claim call.  A
 * refused fire does not start (logged); one whose claim erred is tried
 * again every SCHED_CLAIM_RETRY_MS until it is missed_within old, then it
 * is missed (logged), as is a waiting fire a newer one supersedes.  A fire while the
 * job's run still goes follows its overlap: skip (logged), queue (one fire
 * waits for the run's end) or replace (the run is asked to stop and the fire
 * waits for its end).  Returns ms until it wants to be called again (>= 0). */
int64_t sched_start_due(struct sched *);

/* A run of j ended (failed: 1 not a clean exit, 0 a clean one, SCHED_STOPPED
 * leash stopped it on purpose; ran_ms: how long).  Restarts a service after
 * its backoff (at once after JOB_RUN_STOPPED, once it may run here again), puts a job whose election no longer fits back
 * into it, and starts (through a claim of its own, when the job claims) the
 * next catch-up fire or the fire that waited for the run (queue, replace),
 * unless the job was removed, leash is stopping or the lease is not held. */
void sched_run_ended(struct sched *, struct job *, int failed, int64_t ran_ms);

/* The job now holds its lease: a service starts at once.  A periodic job
 * catches up the fires after its cursor last_fire (< 0: none, a new job:
 * nothing) and before now, per its missed policy: "once" the latest, "all"
 * the latest missed_max oldest first (one at a time, through the overlap
 * rule), "skip" none; never one older than missed_within.  Each fire not
 * run is logged and accounted as missed, saying why in words: cause, what
 * kept the fires after the cursor from running (as "the holder r1:42:ab
 * stopped renewing at 2026-12-01T03:00:04Z"); NULL when unknown. */
void sched_gained(struct sched *, struct job *, int64_t last_fire, const char *cause);

/* At shutdown, once the runs have ended: the fires that were to start are
 * dropped (a claimed one is accounted missed: its row says so). */
void sched_stopped(struct sched *);

/* A prepared process of j whose start went ahead ended, and it had read
 * the start (take_back said so): the fire started; it becomes j's run (whose
 * end the caller reports next, as any run's). */
void sched_prep_started(struct sched *, struct job *, struct run *);

/* A prepared process of j died before its fire (the fire's process is then
 * forked when it starts). */
void sched_prep_ended(struct sched *, struct job *, struct run *);

/* Drops removed jobs whose run has ended. */
void sched_drop_removed(struct sched *);

/* leash trigger: one run of periodic job j now, on this replica, through
 * its overlap rule (skip: dropped while a run goes; queue and replace: it
 * starts once that run ended, replace stopping it first), never through a
 * claim or the catch-up (the cursor does not move).  Started with
 * scheduled_ms = now and catchup SCHED_MANUAL.  Returns 1 when it started
 * or waits, 0 when it was dropped (logged). */
int sched_trigger(struct sched *, struct job *);

struct job *sched_find(struct sched *, const char *name);

/* Whether j has no fire waiting, claimed or wanted (a run may go): a claim
 * made for it now cannot pass over a fire it is still to start. */
int sched_idle(const struct job *);

/* Every job leaves the election (singleton mode), then all are freed. */
void sched_free(struct sched *);

#endif
