/* ledger.h - what this replica writes to the run ledger (<table>_runs), and
 * when: off the paths that start fires and renew leases.
 *
 * Two queues:
 *   accounts  fires of a held job that were not run (missed, skipped): each
 *             rides on the job's next claim (store_claim_runs), so the row is
 *             written iff the fire cursor moves past it, by the one holder
 *             that moves it.  A refused claim drops them (the holder that
 *             moved the cursor accounts for those fires); an erred one keeps
 *             them.  A job left idle with accounts claims them on its own.
 *   records   rows written with store_record_runs: a claimed run's end, a
 *             service's or an unelected run's start and end (one row
 *             while both wait).  Batched; a write that fails is tried
 *             again, and rows are dropped (and the count logged) only past
 *             LEDGER_QUEUE_MAX, or a batch the store refused ten times.
 * Times go to the store on the database's clock: the local wall clock plus
 * the offset the last claim measured.
 */
#ifndef LEASH_LEDGER_H
#define LEASH_LEDGER_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

#define LEDGER_QUEUE_MAX 10000          /* rows of each queue held at most */
#define LEDGER_BATCH 500                /* rows one record_runs writes at most */
#define LEDGER_FLUSH_EVERY_MS 1000      /* records are written this often at most,
                                         * unless a batch is full */
#define LEDGER_PRUNE_EVERY_MS 60000     /* upkeep of the ledger, per replica */
#define LEDGER_PRUNE_ROWS 1000          /* rows one upkeep step touches at most */
#define LEDGER_ACCOUNT_MAX 1000         /* missed fires a catch-up records one by one */

struct ledger_row {
	char job[STORE_NAME_MAX + 1];
	char outcome[STORE_OUTCOME_MAX + 1];
	char *error;                    /* malloc'd, or NULL */
	int64_t scheduled_at, token, started_at, ended_at, duration_ms;
	int exit_code, exit_signal;
	int64_t run_id;                 /* the log's `[job run N]`, or 0 when none */
	const char *how;                /* NULL or one of STORE_HOWS (a constant) */
	int riding;                     /* an account sent with the claim in flight */
};

struct ledger {
	const char *owner;
	struct ledger_row *acct, *rec;
	size_t nacct, nrec, acap, rcap;
	int64_t offset;                 /* db clock - local wall clock (ms) */
	int64_t retry_at;               /* boottime: records wait after a failure */
	int64_t flush_at;               /* boottime: records wait for company until then */
	int64_t prune_at;               /* boottime: next upkeep */
	int64_t keep_ms, keep_per_job;
	int failures;                   /* failed writes of the batch in front */
	uint64_t dropped;               /* rows lost since the last log line */
	int64_t drop_logged;            /* boottime */
	/* The corrupt rows (store.h's bounds) the last upkeep found, each a
	 * hash of job and scheduled_at: a row is logged when an upkeep finds
	 * it and the one before did not. */
	uint64_t bad[STORE_BAD_RUNS_MAX];
	size_t nbad;
};

void ledger_init(struct ledger *, const char *owner, int64_t keep_ms, int64_t keep_per_job);
void ledger_free(struct ledger *);

/* The database's clock minus ours, from a store answer's now (ms). */
void ledger_clock(struct ledger *, int64_t db_now, int64_t wall_now);

/* A fire of a held job that was not run: outcome "missed" or "skipped-...",
 * why goes in the error column. */
void ledger_account(struct ledger *, const char *job, int64_t fire, const char *outcome,
                    const char *why);
/* The job's lease moved (or came back): its accounts are the holder's who
 * moved the cursor past them, not ours. */
void ledger_forget(struct ledger *, const char *job);
/* Whether job has accounts waiting; the latest one's fire in *fire. */
int ledger_has_accounts(const struct ledger *, const char *job, int64_t *fire);

/* A row to write with record_runs (times on the local wall clock, or
 * STORE_NO_TIME; the ledger converts them). */
void ledger_record(struct ledger *, const struct ledger_row *);

/* The rows that ride on claims[0..n): a "running" row for each of the first
 * nrun (fires about to start; the others only carry accounts) and the
 * accounts of each claim's job with a fire up to the claim's.  *runs is malloc'd
 * (free() it); the accounts sent are marked riding until ledger_claimed.
 * Returns the row count, or -1 when out of memory. */
long ledger_claim_rows(struct ledger *, const struct store_claim *claims, size_t n,
                       size_t nrun, struct store_run **runs);
/* The claim answered (rc): the riding accounts are gone (written, or left
 * to the holder that was), or back in the queue after an error. */
void ledger_claimed(struct ledger *, int rc);

/* When the records want writing (boottime), or INT64_MAX when none wait. */
int64_t ledger_due(const struct ledger *);

/* Writes queued records in one record_runs when they are due (the store is
 * open, no failure is being waited out, and a batch is full or the last
 * write was LEDGER_FLUSH_EVERY_MS ago).  Returns STORE_OK when nothing
 * was due or all went, STORE_ERR with the reason in s->err. */
int ledger_flush(struct ledger *, struct store *, int64_t now_boot);
/* The periodic upkeep when due: prune_runs, then corrupt_runs, each newly
 * found corrupt row logged once; STORE_OK or STORE_ERR. */
int ledger_prune(struct ledger *, struct store *, int64_t now_boot);

#endif
