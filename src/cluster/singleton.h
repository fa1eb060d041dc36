/* singleton.h - singleton mode's glue between the job table and the
 * election: opening and retrying the store, the elector's callbacks, pushing
 * running children's fence deadlines, and the one owner of "the store is
 * down" / "the store is back" (and of what the log says about it).
 *
 * Never used, and the store never opened, with singleton mode off. */
#ifndef LEASH_SINGLETON_H
#define LEASH_SINGLETON_H

#include <stdint.h>

#include "core/cfg.h"
#include "cluster/elect.h"
#include "cluster/spread.h"
#include "plan/job.h"
#include "cluster/ledger.h"
#include "store/store.h"

struct sched;
struct run;

/* How often an outage that goes on is logged again. */
#define SINGLETON_OUTAGE_LOG_MS 60000
/* No store call this close to a fire (or a restart). */
#define SINGLETON_FIRE_GUARD_MS 30
/* A store without release events (SQLite, SQL Server): a replica holding
 * leases reads the controls' version this often (elector.ctl_poll_ms), so
 * a control takes effect within about this, not a renew interval. */
#define SINGLETON_CTL_POLL_MS 1000
/* Accounts the store did not take are tried again after this. */
#define SINGLETON_LEDGER_RETRY_MS 1000
/* Health changes (failure hooks) recorded per loop turn at most: a burst of
 * jobs failing at once costs the loop a bounded number of round trips; the
 * others are recorded at their next run's end. */
#define SINGLETON_HEALTH_PER_TURN 16

struct singleton {
	const struct cfg *cfg;
	struct sched *sched;
	struct elector el;
	struct ledger ledger;
	struct store_opts opts;
	int64_t open_retry_at;          /* boottime: next attempt to open the store */
	int64_t deferred_since;         /* boottime: store calls held back for a fire */
	int64_t accounts_at;            /* boottime: the next claim of accounts alone */
	/* The store's health: the only place that decides it is down or back. */
	int down;
	int64_t down_since, down_logged;        /* boottime */
	int64_t answered_at;            /* boottime: the last step it answered, or -1 */
	int64_t outage_end;             /* boottime: when it last answered again after
	                                 * being down, or 0 */
	int step_failed;                /* an error was reported during this step */
	int release_failed;             /* at shutdown: stop trying to release */
	int health_left;                /* store_health calls left this turn */
	struct spread spread;           /* presence and the preferred holders */
};

/* Sets up the elector for owner.  Returns 0, or -1 with the reason in err
 * (a store option the environment does not provide). */
int singleton_init(struct singleton *, const struct cfg *, struct sched *, const char *owner,
                   char *err, size_t errlen);

/* The job table's election hooks (struct sched_env). */
int singleton_takes_part(void *sg, const struct job *);
int singleton_may_run(void *sg, const struct job *);
void singleton_enter(void *sg, struct job *);
void singleton_leave(void *sg, struct job *);
int singleton_stale(void *sg, const struct job *);
/* Whether the job is paused, as the last renew read its lease row. */
int singleton_paused(void *sg, const struct job *);
/* Claims the fires in one store_claim_runs with each job's token, writing
 * their ledger rows (and the accounts that ride on them) in the same round
 * trip; -1 (and the store is down) when it did not answer. */
int singleton_claim(void *sg, struct job *const *jobs, const int64_t *fires, size_t n, int *ok);
/* Gives claimed fires back (struct sched_env's unclaim): one
 * store_unclaim_all with each job's token; -1 when it did not answer. */
int singleton_unclaim(void *sg, struct job *const *jobs, const int64_t *fires, size_t n,
                      int *ok);
/* A fire the job table did not run (struct sched_env's account). */
void singleton_account(void *sg, struct job *, int64_t fire, int claimed, const char *outcome,
                       const char *why);

/* The ledger's side of a run: started (a service's or an unelected job's
 * run gets its row now; a claimed fire has one since its claim) and ended
 * (its outcome, written in the next batch). */
void singleton_run_started(struct singleton *, struct run *);
void singleton_run_ended(struct singleton *, struct run *);

/* hooks' record: the job's health through the store when the job takes
 * part in the election and this replica holds it (1 changed, 0 not, -1 the
 * store did not answer), else decided here as hooks does alone. */
int singleton_health(void *arg, struct job *, int failing);

/* Opens the store when needed and lets the elector do what is due, unless
 * a fire is due_in ms away (then only deadlines are checked).  Returns ms
 * until it wants to be called again, or INT64_MAX. */
int64_t singleton_turn(struct singleton *, int64_t due_in);

/* A run's token and fence deadline, when the job is elected. */
struct run_info;
void singleton_run_info(struct singleton *, const struct job *, struct run_info *);

/* Moves a running child's self-fencing deadline after a good renew. */
void singleton_push_fence(struct singleton *, struct run *);

/* The descriptor release events arrive on (PostgreSQL NOTIFY), or -1; and
 * what to do when it is readable, or before the loop sleeps (a store call
 * may have read events off the socket, which then is not readable): the
 * count of events taken (0 on none or an error). */
int singleton_event_fd(struct singleton *);
int singleton_events(struct singleton *);

/* At shutdown, once the bodies have stopped and before the leases go:
 * writes what the ledger still holds (the runs' ends, the accounts), each
 * kind in one try; what the store does not take is logged as lost. */
void singleton_flush(struct singleton *);

/* At shutdown, once the bodies have stopped: releases every held lease in
 * one batch (store_release_all), logs one line, and leaves every job a
 * follower, so that sched_free's leave only forgets them.  A release that
 * fails is not retried (release_failed). */
void singleton_release_all(struct singleton *);

/* At shutdown, after sched_free: logs the statement count, closes the
 * store. */
void singleton_free(struct singleton *, int64_t ran_ms);

#endif
