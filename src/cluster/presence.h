/* presence.h - who is live, and which replica each job prefers.
 *
 * Every replica writes a presence row (store_beat) once per renew interval
 * and reads the others' in the same call.  From those rows, judged on the
 * database's clock, this file decides which replica a job prefers: its
 * place in the map that place.h computes from the live, non-draining
 * replicas and the jobs (and weights) each defines, by rendezvous hashing
 * of (job name, replica name) with bounded loads.  Every replica computes
 * the same map from the same rows; one that restarts under the same name
 * gets the same jobs back, and one that joins or leaves moves about 1/n of
 * them.  The map is made again only when its inputs change (who is live,
 * settled or draining, and the jobs texts), not on every beat.  No I/O and
 * no clock of its own: the specs drive it through leash.core with made-up
 * rows.
 *
 * A row's jobs text is a job a line, sorted by name: "name" for weight 1,
 * "name weight" otherwise, so a row of a version without weights reads as
 * weight 1 a job, and a garbled weight too.
 */
#ifndef LEASH_PRESENCE_H
#define LEASH_PRESENCE_H

#include <stddef.h>
#include <stdint.h>

#include "cluster/place.h"
#include "store/store.h"

/* The rendezvous score of replica name for job (place_score). */
uint64_t presence_score(const char *job, const char *name);

/* The replica name in an owner id "<name>:<pid>:<hex>" (the whole id when
 * it has no such tail), into out. */
void presence_name_of(const char *owner, char *out, size_t len);

/* Of n candidates, the one job prefers by pure rendezvous hashing (no
 * bound): the highest score of its name, the smaller owner on a tie.  -1
 * when n is 0.  For a job the map does not know yet (a reload's new job
 * before the next beat). */
struct presence_cand {
	const char *name, *owner;
};
int presence_pick(const char *job, const struct presence_cand *c, size_t n);

struct presence_rep {
	struct store_replica row;       /* row.jobs: NULL = the same jobs as mine */
	char name[STORE_NAME_MAX + 1];  /* from the owner id */
	struct place_job *jobs;         /* row.jobs split and sorted by name, when read */
	size_t njobs;
	int live;                       /* heartbeat younger than live_ms */
	int settled;                    /* live, not draining, up for settle_ms */
};

struct presence {
	struct presence_rep *reps;
	size_t n;
	int64_t now;                    /* the database's clock the rows were read at */
	int me;                         /* my row's index, or -1 */
	/* The map, kept across beats while its inputs stay the same. */
	struct place *place;
	char *key;                      /* its inputs, as presence_set saw them */
	size_t keylen;
	int remade;                     /* the last presence_set made it again */
};

/* Replaces p's rows with rows (taking them over, freed here) read at db
 * time now: a row is live while now - heartbeat < live_ms, settled when
 * also not draining and now - started_at >= settle_ms (a joining replica
 * is preferred only once settled, so one that keeps restarting does not
 * make the others churn).  my_jobs is my jobs text, which a row's NULL
 * jobs stands for (NULL: none known; then every job is placed by pure
 * rendezvous).  The map is made again when the inputs differ from the
 * last call's.  0, or -1 out of memory (p is then empty). */
int presence_set(struct presence *, struct store_replica *rows, size_t n, int64_t now,
                 const char *my_owner, const char *my_jobs, int64_t live_ms, int64_t settle_ms);

/* The map's inputs (who is live, settled or draining, and the jobs each
 * defines) as one number, 0 before any: it changes when the membership
 * does, and heartbeats never change it. */
uint64_t presence_inputs(const struct presence *);

/* 1 when replica i defines job (its jobs are mine, or list it). */
int presence_defines(const struct presence *, size_t i, const char *job);

/* The replica a job I define prefers: its place in the map, among the
 * settled replicas that define it, else (none is settled) among the live,
 * non-draining ones.  Its index, or -1 when there is none (no rows yet:
 * first come, as without spread); *settled tells which of the two sets it
 * came from. */
int presence_prefer(const struct presence *, const char *job, int *settled);

/* The replica job goes to in the map made without replica first (its
 * preferred one): the next in line when that one dies.  -1 when none. */
int presence_runner_up(const struct presence *, const char *job, int first);

void presence_free(struct presence *);

/* A holder that is not preferred: may it hand the lease off now?
 * PRESENCE_WAIT not yet, PRESENCE_RELEASE release now, PRESENCE_STOP stop
 * the run first (a service: handed off at once, restarted on the
 * preferred replica).  busy: a run goes or a claimed fire waits to start;
 * next_fire and after_next: the job's next two fire times (wall ms, any
 * clock the caller keeps), handover_ms the time the store needs to pass a
 * released lease on (milliseconds with NOTIFY, a retry elsewhere).  A
 * periodic job is released when idle and no fire is due within the
 * handover time, or, when it fires more often than that, as soon as it is
 * idle (right after a run ended): the fire in the gap is the next holder's
 * to catch up. */
enum { PRESENCE_WAIT = 0, PRESENCE_RELEASE = 1, PRESENCE_STOP = 2 };
int presence_safe_point(int service, int busy, int64_t now, int64_t next_fire,
                        int64_t after_next, int64_t handover_ms);

/* The definitions hash of n jobs (names[i] with digests[i], any order),
 * 16 hex digits, and their jobs text (malloc'd, "" for none): the names
 * sorted, one a line, each followed by " weight" when weights[i] is not 1
 * (weights NULL: all 1).  The digest covers the weight (it is in the
 * file), so the hash leaves it out and stays what it was before weights.
 * 0, or -1 out of memory. */
int presence_jobs(const char *const *names, const char *const *digests, const int *weights,
                  size_t n, char hash[STORE_HASH_MAX + 1], char **text);

#endif
