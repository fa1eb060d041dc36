/* ledger.c - the run ledger's two queues and their writes (see ledger.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/hash.h"
#include "cluster/ledger.h"
#include "core/log.h"

#define LEDGER_RETRY_MS 1000            /* records wait this long after a failure */
#define LEDGER_DROP_LOG_MS 60000        /* "rows dropped" is logged this often at most */
#define LEDGER_FAILURES_MAX 10         /* writes of one batch before it is dropped */
#define ERROR_COPY_MAX (STORE_RUN_ERROR_MAX + 4)        /* the wrapper cuts the rest */

void ledger_init(struct ledger *l, const char *owner, int64_t keep_ms, int64_t keep_per_job)
{
	memset(l, 0, sizeof *l);
	l->owner = owner;
	l->keep_ms = keep_ms;
	l->keep_per_job = keep_per_job;
	/* Not all at once when a cluster starts together. */
	l->prune_at = clock_boot_ms() + 5000 + (int64_t)(clock_wall_ms() % 10000);
}

static void clear_rows(struct ledger_row *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(r[i].error);
}

void ledger_free(struct ledger *l)
{
	clear_rows(l->acct, l->nacct);
	clear_rows(l->rec, l->nrec);
	free(l->acct);
	free(l->rec);
	l->acct = l->rec = NULL;
	l->nacct = l->nrec = l->acap = l->rcap = 0;
}

void ledger_clock(struct ledger *l, int64_t db_now, int64_t wall_now)
{
	if (db_now > 0)
		l->offset = db_now - wall_now;
}

static char *copy_error(const char *s)
{
	size_t n;
	char *c;

	if (!s || !*s)
		return NULL;
	n = strnlen(s, ERROR_COPY_MAX);
	if ((c = malloc(n + 1))) {
		memcpy(c, s, n);
		c[n] = '\0';
	}
	return c;
}

/* Room for one more row at the end of a queue, dropping the oldest past
 * LEDGER_QUEUE_MAX: a tenth of them at once, so that a flood of rows (a
 * catch-up of a thousand jobs) costs one move of the queue per thousand, not
 * one per row.  NULL when out of memory (the row is dropped). */
static struct ledger_row *push(struct ledger *l, struct ledger_row **q, size_t *n, size_t *cap)
{
	if (*n >= LEDGER_QUEUE_MAX) {
		size_t d = LEDGER_QUEUE_MAX / 10;

		clear_rows(*q, d);
		memmove(*q, *q + d, (*n - d) * sizeof **q);
		*n -= d;
		l->dropped += d;
	}
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 16;
		struct ledger_row *g = realloc(*q, c * sizeof *g);

		if (!g) {
			l->dropped++;
			return NULL;
		}
		*q = g;
		*cap = c;
	}
	memset(&(*q)[*n], 0, sizeof **q);
	return &(*q)[(*n)++];
}

/* An emptied queue gives its room back: a burst's thousand rows would
 * otherwise keep 300 KB (and the heap's top above them) for good. */
static void shrink(struct ledger_row **q, size_t n, size_t *cap)
{
	if (n == 0 && *cap > 64) {
		free(*q);
		*q = NULL;
		*cap = 0;
	}
}

static void set_str(char *dst, size_t len, const char *s)
{
	size_t n = strnlen(s, len - 1);

	memcpy(dst, s, n);
	dst[n] = '\0';
}

void ledger_account(struct ledger *l, const char *job, int64_t fire, const char *outcome,
                    const char *why)
{
	struct ledger_row *r = push(l, &l->acct, &l->nacct, &l->acap);

	if (!r)
		return;
	set_str(r->job, sizeof r->job, job);
	set_str(r->outcome, sizeof r->outcome, outcome);
	r->error = copy_error(why);
	r->scheduled_at = fire;
	r->started_at = r->ended_at = r->duration_ms = STORE_NO_TIME;
	r->exit_code = r->exit_signal = STORE_NO_CODE;
}

void ledger_forget(struct ledger *l, const char *job)
{
	size_t w = 0;

	for (size_t i = 0; i < l->nacct; i++) {
		if (!l->acct[i].riding && strcmp(l->acct[i].job, job) == 0) {
			free(l->acct[i].error);
			continue;
		}
		l->acct[w++] = l->acct[i];
	}
	l->nacct = w;
}

int ledger_has_accounts(const struct ledger *l, const char *job, int64_t *fire)
{
	int found = 0;

	for (size_t i = 0; i < l->nacct; i++)
		if (!l->acct[i].riding && strcmp(l->acct[i].job, job) == 0) {
			if (!found || l->acct[i].scheduled_at > *fire)
				*fire = l->acct[i].scheduled_at;
			found = 1;
		}
	return found;
}

/* A later write of a queued row: what it knows replaces what the row had. */
static void merge(struct ledger_row *r, const struct ledger_row *row)
{
	snprintf(r->outcome, sizeof r->outcome, "%s", row->outcome);
	r->token = row->token;
#define TAKE(f, none) if (row->f != (none)) r->f = row->f
	TAKE(started_at, STORE_NO_TIME);
	TAKE(ended_at, STORE_NO_TIME);
	TAKE(duration_ms, STORE_NO_TIME);
	TAKE(exit_code, STORE_NO_CODE);
	TAKE(exit_signal, STORE_NO_CODE);
	TAKE(run_id, 0);
	TAKE(how, NULL);
#undef TAKE
	if (row->error && *row->error) {
		free(r->error);
		r->error = copy_error(row->error);
	}
}

void ledger_record(struct ledger *l, const struct ledger_row *row)
{
	struct ledger_row *r;

	/* A run's start and end in one batch are one row (a batch may not
	 * name a row twice). */
	for (size_t i = l->nrec; i-- > 0;)
		if (l->rec[i].scheduled_at == row->scheduled_at && strcmp(l->rec[i].job, row->job) == 0) {
			merge(&l->rec[i], row);
			return;
		}
	if (!(r = push(l, &l->rec, &l->nrec, &l->rcap)))
		return;
	*r = *row;
	r->riding = 0;
	r->error = copy_error(row->error);
}

static int64_t db_time(const struct ledger *l, int64_t t)
{
	return t == STORE_NO_TIME ? t : t + l->offset;
}

static struct store_run as_run(const struct ledger *l, const struct ledger_row *r)
{
	return (struct store_run){
		.job = r->job, .scheduled_at = r->scheduled_at, .owner = l->owner,
		.token = r->token, .claimed_at = STORE_NO_TIME,
		.started_at = db_time(l, r->started_at), .ended_at = db_time(l, r->ended_at),
		.outcome = r->outcome, .exit_code = r->exit_code, .exit_signal = r->exit_signal,
		.duration_ms = r->duration_ms, .error = r->error, .run_id = r->run_id, .how = r->how,
	};
}

long ledger_claim_rows(struct ledger *l, const struct store_claim *claims, size_t n,
                       size_t nrun, struct store_run **runs)
{
	size_t k = 0, cap = nrun + l->nacct;
	struct store_run *out = malloc((cap ? cap : 1) * sizeof *out);

	*runs = out;
	if (!out)
		return -1;
	for (size_t i = 0; i < nrun; i++)
		out[k++] = (struct store_run){
			.job = claims[i].name, .scheduled_at = claims[i].fire, .owner = l->owner,
			.token = claims[i].token, .claimed_at = STORE_NO_TIME,
			.started_at = STORE_NO_TIME, .ended_at = STORE_NO_TIME, .outcome = "running",
			.exit_code = STORE_NO_CODE, .exit_signal = STORE_NO_CODE,
			.duration_ms = STORE_NO_TIME, .claim = i,
		};
	for (size_t a = 0; a < l->nacct; a++) {
		struct ledger_row *r = &l->acct[a];

		if (r->riding)
			continue;
		for (size_t i = 0; i < n; i++)
			if (r->scheduled_at <= claims[i].fire && strcmp(r->job, claims[i].name) == 0) {
				r->riding = 1;
				r->token = claims[i].token;
				out[k] = as_run(l, r);
				out[k++].claim = i;
				break;
			}
	}
	return (long)k;
}

void ledger_claimed(struct ledger *l, int rc)
{
	size_t w = 0;

	for (size_t i = 0; i < l->nacct; i++) {
		struct ledger_row *r = &l->acct[i];

		if (r->riding && rc != STORE_ERR) {
			free(r->error);
			continue;
		}
		r->riding = 0;
		l->acct[w++] = *r;
	}
	l->nacct = w;
	shrink(&l->acct, l->nacct, &l->acap);
}

static void log_drops(struct ledger *l, int64_t now)
{
	if (!l->dropped || now - l->drop_logged < LEDGER_DROP_LOG_MS)
		return;
	log_msg(LOG_ERROR, NULL, 0, "run ledger: %llu row%s dropped: the store did not take them "
	        "(more than %d waited)", (unsigned long long)l->dropped, l->dropped == 1 ? "" : "s",
	        LEDGER_QUEUE_MAX);
	l->dropped = 0;
	l->drop_logged = now;
}

int64_t ledger_due(const struct ledger *l)
{
	if (!l->nrec)
		return INT64_MAX;
	if (l->nrec >= LEDGER_BATCH)
		return l->retry_at;
	return l->flush_at > l->retry_at ? l->flush_at : l->retry_at;
}

int ledger_flush(struct ledger *l, struct store *s, int64_t now)
{
	struct store_run runs[LEDGER_BATCH];
	size_t n = l->nrec < LEDGER_BATCH ? l->nrec : LEDGER_BATCH;

	log_drops(l, now);
	if (!s || n == 0 || now < ledger_due(l))
		return STORE_OK;
	l->flush_at = now + LEDGER_FLUSH_EVERY_MS;
	for (size_t i = 0; i < n; i++)
		runs[i] = as_run(l, &l->rec[i]);
	if (store_record_runs(s, runs, n) != STORE_OK) {
		l->retry_at = now + LEDGER_RETRY_MS;
		/* The store answers the election (else this is not tried) but
		 * keeps refusing this batch: it would block every row after it. */
		if (++l->failures < LEDGER_FAILURES_MAX)
			return STORE_ERR;
		log_msg(LOG_ERROR, NULL, 0, "run ledger: %zu row%s dropped after %d failed writes: %s", n,
		        n == 1 ? "" : "s", l->failures, s->err);
	}
	l->failures = 0;
	clear_rows(l->rec, n);
	memmove(l->rec, l->rec + n, (l->nrec - n) * sizeof *l->rec);
	l->nrec -= n;
	shrink(&l->rec, l->nrec, &l->rcap);
	return STORE_OK;
}

/* Logs the corrupt rows the last upkeep did not find. */
static int report_bad(struct ledger *l, struct store *s)
{
	struct store_bad_run rows[STORE_BAD_RUNS_MAX];
	uint64_t seen[STORE_BAD_RUNS_MAX];
	size_t n = 0;

	if (store_corrupt_runs(s, rows, &n) != STORE_OK)
		return STORE_ERR;
	for (size_t i = 0; i < n; i++) {
		char at[24];
		int known = 0;

		snprintf(at, sizeof at, "%lld", (long long)rows[i].scheduled_at);
		seen[i] = hash_fnv(hash_sep(hash_fnv(HASH_FNV_OFFSET, rows[i].job), 0), at);
		for (size_t k = 0; k < l->nbad; k++)
			known |= l->bad[k] == seen[i];
		if (!known)
			log_msg(LOG_ERROR, rows[i].job, 0, "corrupt ledger row: scheduled_at = %s is out "
			        "of bounds; `leash repair %s` drops it", at, rows[i].job);
	}
	memcpy(l->bad, seen, n * sizeof *seen);
	l->nbad = n;
	return STORE_OK;
}

int ledger_prune(struct ledger *l, struct store *s, int64_t now)
{
	int64_t changed = 0;

	if (!s || now < l->prune_at)
		return STORE_OK;
	l->prune_at = now + LEDGER_PRUNE_EVERY_MS;
	if (store_prune_runs(s, l->keep_ms, l->keep_per_job, LEDGER_PRUNE_ROWS, &changed) != STORE_OK)
		return STORE_ERR;
	/* More to do: the next batch soon, a short statement at a time. */
	if (changed >= LEDGER_PRUNE_ROWS)
		l->prune_at = now + LEDGER_RETRY_MS;
	if (changed)
		log_msg(LOG_DEBUG, NULL, 0, "run ledger: %lld rows pruned or marked lost",
		        (long long)changed);
	return report_bad(l, s);
}
