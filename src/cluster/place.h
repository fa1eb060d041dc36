/* place.h - placement: which replica each job goes to, by rendezvous
 * hashing with bounded loads.
 *
 * The inputs are the replicas (name, owner id, whether settled or only
 * live) and the jobs each defines, with their weights; the output is one
 * replica a job, the same on every replica that has the same inputs.  The
 * jobs are walked in a fixed order (heavier first, then by a hash of the
 * name), each to its highest-scoring candidate (place_score of job and
 * replica name, ties by the smaller owner id) that still has room: the
 * mean weight per replica rounded up plus a slack (none for 2 replicas, up
 * to 8% of the mean from 10 on), and no more than leaves every other
 * replica its floor (the mean rounded down less the slack) from the jobs
 * still to walk.  A job that fits nowhere goes to its least-loaded
 * candidate (the higher score on a tie).  bench/spread_results.txt has the
 * figures behind the order and the slack.
 *
 * A job's candidates are the settled replicas that define it, else (none
 * settled does) the live ones that define it: the two kinds share no
 * replica, and each has its own mean.  No I/O, no clock, no global state.
 */
#ifndef LEASH_PLACE_H
#define LEASH_PLACE_H

#include <stddef.h>
#include <stdint.h>

/* A job's weight: 1 unless its file says weight = N, 1 <= N <= this. */
#define PLACE_WEIGHT_MAX 1000

/* The rendezvous score of replica name for job: a 64-bit mix of both, the
 * same on every replica and every platform. */
uint64_t place_score(const char *job, const char *name);

struct place_job {
	const char *name;
	int weight;                     /* 1 .. PLACE_WEIGHT_MAX */
};

struct place_rep {
	const char *name, *owner;
	const struct place_job *jobs;   /* sorted by name */
	size_t njobs;
	int live;                       /* live and not draining: may take jobs */
	int settled;                    /* live, not draining, up for settle */
};

struct place;

/* The placement of the union of the reps' jobs (a job two replicas give
 * different weights counts the larger), copied: reps may go once it
 * returns.  NULL out of memory. */
struct place *place_make(const struct place_rep *reps, size_t n);

/* The jobs placed, sorted by name (their indices), into *jobs; how many. */
size_t place_jobs(const struct place *, const struct place_job **jobs);

/* The job's index in the placement, or -1 when no live replica defines it. */
int place_find(const struct place *, const char *job);

/* The replica (index into the reps given to place_make) job index j goes
 * to, or -1 when it has no candidate; *settled says whether it came from
 * the settled replicas.  With without >= 0: where it goes in the
 * placement computed without that replica (made on the first call for
 * it, then kept).  -1 also out of memory. */
int place_at(struct place *, int j, int without, int *settled);

void place_free(struct place *);

#endif
