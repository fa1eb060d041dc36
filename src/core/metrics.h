/* metrics.h - the counters, gauges and histograms /metrics shows.
 *
 * The parent's loop owns them: the scheduler, the election and the store
 * wrappers note what happened (metrics_note_*), and metrics_render writes
 * the lot in the Prometheus text format 0.0.4 for whoever serves /metrics.
 * Nothing here blocks, allocates on a fire's path or talks to the store.
 *
 * They live in one shared mapping of a memfd made when the program (or
 * leash.core) is loaded, so a process forked from the parent (a run's child)
 * renders the parent's live values, and so does the HTTP server, exec'd with
 * that descriptor (metrics_attach): a scrape costs the loop nothing.  Only the process
 * that made the mapping writes: in a forked child every note is a no-op (so
 * the scheduler must never be a forked copy of the process that loaded it:
 * leash run does not daemonize by forking).
 * A job's record is a fixed-size slot taken when the job is added and given
 * back when it is dropped; at most METRICS_JOBS_MAX are tracked at once
 * (the mapping is reserved for them, its pages are touched as slots are
 * used).  Histograms are fixed bucket arrays.
 */
#ifndef LEASH_METRICS_H
#define LEASH_METRICS_H

#include <stddef.h>
#include <stdint.h>

#define METRICS_JOBS_MAX 16384
#define METRICS_NAME_MAX 200         /* a job name's bytes: the store's STORE_NAME_MAX */

/* The store operations, one per wrapper of src/store/store.c (the op label). */
#define METRICS_OPS(X) \
	X(OPEN, "open") X(TRY_ACQUIRE, "try_acquire") X(RENEW, "renew") \
	X(RELEASE, "release") X(RENEW_ALL, "renew_all") X(ACQUIRE_ALL, "acquire_all") \
	X(RELEASE_ALL, "release_all") X(CLAIM_ALL, "claim_all") X(CLAIM_RUNS, "claim_runs") \
	X(RECORD_RUNS, "record_runs") X(READ_RUNS, "read_runs") X(LAST_RUNS, "last_runs") \
	X(RENEW_CTL, "renew_ctl") X(CONTROL, "control") X(PRUNE_RUNS, "prune_runs") \
	X(LIST, "list") X(FLOOR, "floor") X(BEAT, "beat") X(LEAVE, "leave") \
	X(REPLICAS, "replicas") X(UNCLAIM_ALL, "unclaim_all") X(HANDOFF, "handoff") X(HELD, "held") \
	X(CTL_VERSION, "ctl_version")

#define METRICS_OP_ENUM(id, label) METRICS_OP_##id,
enum metrics_op { METRICS_OPS(METRICS_OP_ENUM) METRICS_NOPS };
#undef METRICS_OP_ENUM

struct metrics_job;

/* A record for a job called name (cut to METRICS_NAME_MAX bytes), all zero;
 * NULL when METRICS_JOBS_MAX are tracked already or there is no mapping
 * (every note takes NULL and does nothing).  Its series show until
 * metrics_job_remove. */
struct metrics_job *metrics_job_add(const char *name);
void metrics_job_remove(struct metrics_job *);

/* A run ended: outcome as the ledger says it ("ok", "failed", "timeout",
 * "lost", "killed", "manual"), how long it ran, and the wall clock at its
 * end (the last success time, for ok and manual). */
void metrics_note_run(struct metrics_job *, const char *outcome, int64_t ran_ms,
                      int64_t wall_ms);

/* A run started at wall clock started_ms for the fire at scheduled_ms:
 * the lateness is observed for a periodic fire on time (not a service's
 * start, scheduled_ms 0, nor a catch-up or manual run, catchup != 0). */
void metrics_note_fire(struct metrics_job *, int64_t scheduled_ms, int catchup,
                       int64_t started_ms);

/* A fire that did not run: the ledger's outcome ("skipped-overlap",
 * "skipped-paused", "missed") becomes the reason label. */
void metrics_note_skip(struct metrics_job *, const char *outcome);

/* The job's lease was gained (1) or lost (0). */
void metrics_note_lease(struct metrics_job *, int gained);
/* Whether the job stands for election: only then has it lease series (a
 * job that runs unelected would look unheld everywhere). */
void metrics_job_elected(struct metrics_job *, int elected);

/* A run's process (or a failure hook's) was forked: by the spawner (1) or
 * by leash itself (0). */
void metrics_note_fork(int by_spawner);

/* The last load of jobs/ found n job files broken (a gauge). */
void metrics_note_broken(size_t n);

/* A renew statement succeeded this long before the nearest deadline of the
 * leases it renewed. */
void metrics_note_renew(int64_t margin_ms);

/* A store call: t0 from metrics_clock() just before it, rc its result (an
 * error when negative: STORE_ERR).  Returns rc, so a wrapper can return through it. */
int64_t metrics_clock(void);
int metrics_note_store(enum metrics_op, int64_t t0, int rc);

/* The exposition text, malloc'd and NUL-terminated (*len without the NUL),
 * or NULL when out of memory. */
char *metrics_render(size_t *len);

/* The mapping's descriptor (close-on-exec), for a process exec'd to read
 * it, or -1 when there is none. */
int metrics_fd(void);

/* In such a process: reads the metrics of the mapping on fd (read-only)
 * instead of its own; every note is then a no-op.  0, or -1 (its own stay). */
int metrics_attach(int fd);

#endif
