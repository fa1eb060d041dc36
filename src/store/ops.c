/* ops.c - the store operations written once, over a driver (driver.h).
 *
 * Each function here is an entry of every provider's ops table: it names
 * its statement, binds its parameters and decodes the rows; the dialects
 * differ only in their statement texts.  The wrappers in store.c have
 * checked the arguments already.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/driver.h"

const char *const store_stmt_what[ST_MAX] = {
#define X(id, what) [ST_##id] = what,
	STORE_STATEMENTS(X)
#undef X
};

int store_exec(struct store *s, int st, const struct store_param *p, int np, store_row_fn row,
               void *arg)
{
	return s->drv->exec(s, st, p, np, row, arg);
}

int64_t store_col_int(struct store *s, int c)
{
	return s->drv->col_int(s, c);
}

int64_t store_col_or(struct store *s, int c, int64_t null)
{
	return s->drv->is_null(s, c) ? null : s->drv->col_int(s, c);
}

void store_col_copy(struct store *s, int c, char *dst, size_t size)
{
	size_t n = 0;
	const char *t = s->drv->col_text(s, c, &n);

	if (!t)
		n = 0;
	if (n >= size)
		n = size - 1;
	if (n)
		memcpy(dst, t, n);
	dst[n] = '\0';
}

char *store_col_dup(struct store *s, int c, int *oom)
{
	size_t n = 0;
	const char *t = s->drv->col_text(s, c, &n);
	char *d;

	if (!t)
		return NULL;
	if (!(d = malloc(n + 1))) {
		*oom = 1;
		return NULL;
	}
	memcpy(d, t, n);
	d[n] = '\0';
	return d;
}

/* Room for element n of rows (cap of them so far): rows, moved when it
 * grew, or NULL when out of memory (rows is still the caller's). */
static void *grow(void *rows, size_t n, size_t *cap, size_t size)
{
	size_t c = *cap ? *cap * 2 : 16;
	void *p;

	if (n < *cap)
		return rows;
	if (!(p = realloc(rows, c * size)))
		return NULL;
	*cap = c;
	return p;
}

/* The names sorted, each with its index, for finding an answer row's
 * name without a comparison per name. */
struct name_index {
	const char *name;
	size_t i;
};

static int cmp_name(const void *a, const void *b)
{
	return strcmp(((const struct name_index *)a)->name, ((const struct name_index *)b)->name);
}

static struct name_index *index_names(struct store *s, const char *const *names, size_t n)
{
	struct name_index *x = malloc((n ? n : 1) * sizeof *x);

	if (!x) {
		store_fail(s, "%s: out of memory", s->ops->name);
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		x[i] = (struct name_index){ names[i], i };
	qsort(x, n, sizeof *x, cmp_name);
	return x;
}

/* The range [*lo, end) of x whose name is name (a name may be listed twice). */
static size_t name_range(const struct name_index *x, size_t n, const char *name, size_t *lo)
{
	size_t a = 0, b = n;

	while (a < b) {
		size_t m = a + (b - a) / 2;

		if (strcmp(x[m].name, name) < 0)
			a = m + 1;
		else
			b = m;
	}
	*lo = a;
	while (b < n && strcmp(x[b].name, name) == 0)
		b++;
	return b;
}

/* Rows read into a growing array of elements of size bytes: column 0 of
 * each row is the clock, and a row whose column 1 is NULL carries only
 * that; decode fills an element from the others (-1: out of memory).  On
 * an error the caller frees what rows holds. */
struct rows_answer {
	void *rows;
	size_t n, cap, size;
	int64_t now;
	int (*decode)(struct store *, void *elem);
};

static int rows_row(struct store *s, void *arg, int set)
{
	struct rows_answer *a = arg;
	char *r;

	(void)set;
	a->now = store_col_int(s, 0);
	if (s->drv->is_null(s, 1))
		return 0;
	if (!(r = grow(a->rows, a->n, &a->cap, a->size)))
		goto oom;
	a->rows = r;
	memset(r + a->n * a->size, 0, a->size);
	if (a->decode(s, r + a->n++ * a->size) == 0)
		return 0;
oom:
	store_fail(s, "%s: out of memory", s->ops->name);
	return -1;
}

/* ---- leases ---- */

struct lease_answer {
	int rows, got;
	struct lease_info *out;
};

/* The LEASE columns (driver.h) from column c on into out: got. */
static int lease_cols(struct store *s, int c, struct lease_info *out)
{
	store_col_copy(s, c + 1, out->owner, sizeof out->owner);
	out->token = store_col_int(s, c + 2);
	out->expires_at = store_col_int(s, c + 3);
	out->now = store_col_int(s, c + 4);
	out->last_fire = store_col_or(s, c + 5, STORE_NO_FIRE);
	return store_col_int(s, c) != 0;
}

/* A LEASE row. */
static int lease_row(struct store *s, void *arg, int set)
{
	struct lease_answer *a = arg;

	(void)set;
	a->rows++;
	a->got = lease_cols(s, 0, a->out);
	return 0;
}

/* A lease statement: one row, or none when none_is_no (a lost renew names
 * no holder, as on every provider: out stays zero). */
static int lease_call(struct store *s, int st, const char *name, const char *owner, int64_t ms,
                      int none_is_no, struct lease_info *out)
{
	struct store_param p[] = { SP_T(name), SP_T(owner), SP_I(ms) };
	struct lease_answer a = { 0, 0, out };

	memset(out, 0, sizeof *out);
	out->last_fire = STORE_NO_FIRE;
	if (store_exec(s, st, p, 3, lease_row, &a) != STORE_OK)
		return STORE_ERR;
	if (a.rows == 0 && none_is_no)
		return STORE_NO;
	if (a.rows != 1)
		return store_fail(s, "%s: %s: expected one row, got %d", s->ops->name,
		                  store_stmt_what[st], a.rows);
	return a.got ? STORE_OK : STORE_NO;
}

int store_op_try_acquire(struct store *s, const char *name, const char *owner, int64_t ms,
                         struct lease_info *out)
{
	return lease_call(s, ST_ACQUIRE, name, owner, ms, 0, out);
}

int store_op_renew(struct store *s, const char *name, const char *owner, int64_t ms,
                   struct lease_info *out)
{
	return lease_call(s, ST_RENEW, name, owner, ms, 1, out);
}

int store_op_release(struct store *s, const char *name, const char *owner)
{
	struct store_param p[] = { SP_T(name), SP_T(owner) };

	return store_exec(s, ST_RELEASE, p, 2, NULL, NULL);
}

struct acquire_answer {
	struct name_index *x;
	size_t n;
	struct lease_info *out;
	int *got;
};

/* An ACQUIRE_ALL row: (name, LEASE columns); a name listed twice gets the
 * answer at each place. */
static int acquired(struct store *s, void *arg, int set)
{
	struct acquire_answer *a = arg;
	char name[STORE_NAME_MAX + 1];
	size_t lo, end;

	(void)set;
	store_col_copy(s, 0, name, sizeof name);
	end = name_range(a->x, a->n, name, &lo);
	for (size_t k = lo; k < end; k++)
		a->got[a->x[k].i] = lease_cols(s, 1, &a->out[a->x[k].i]);
	return 0;
}

/* The names go as a table of (i, name); every name must be answered (its
 * now is set).  On an error none counts as taken. */
int store_op_acquire_all(struct store *s, const char *owner, const char *const *names, size_t n,
                         int64_t ms, struct lease_info *out, int *got)
{
	struct store_param *t = malloc((n ? n : 1) * 2 * sizeof *t);
	struct acquire_answer a = { index_names(s, names, n), n, out, got };
	int rc = STORE_ERR;

	memset(out, 0, n * sizeof *out);
	for (size_t i = 0; i < n; i++) {
		got[i] = 0;
		out[i].last_fire = STORE_NO_FIRE;
	}
	if (t && a.x) {
		struct store_param p[] = { SP_T(owner), SP_I(ms), SP_R(t, n, 2) };

		for (size_t i = 0; i < n; i++) {
			t[2 * i] = SP_I((int64_t)i + 1);
			t[2 * i + 1] = SP_T(names[i]);
		}
		rc = store_exec(s, ST_ACQUIRE_ALL, p, 3, acquired, &a);
	} else if (!t) {
		store_fail(s, "%s: out of memory", s->ops->name);
	}
	for (size_t i = 0; i < n && rc == STORE_OK; i++)
		if (out[i].now == 0)
			rc = store_fail(s, "%s: acquire_all: no answer for \"%s\"", s->ops->name,
			                names[i]);
	for (size_t i = 0; i < n && rc != STORE_OK; i++)
		got[i] = 0;
	free(t);
	free(a.x);
	return rc;
}

static int lease_row_decode(struct store *s, void *elem)
{
	struct lease_row *r = elem;

	store_col_copy(s, 1, r->name, sizeof r->name);
	store_col_copy(s, 2, r->owner, sizeof r->owner);
	r->token = store_col_int(s, 3);
	r->acquired_at = store_col_int(s, 4);
	r->renewed_at = store_col_int(s, 5);
	r->expires_at = store_col_int(s, 6);
	r->last_fire = store_col_or(s, 7, STORE_NO_FIRE);
	r->paused_until = store_col_or(s, 8, STORE_NO_TIME);
	return 0;
}

int store_op_list(struct store *s, struct lease_row **rows, size_t *n, int64_t *now)
{
	struct rows_answer a = { .size = sizeof **rows, .decode = lease_row_decode };

	if (store_exec(s, ST_LIST, NULL, 0, rows_row, &a) != STORE_OK) {
		free(a.rows);
		return STORE_ERR;
	}
	/* The controls' version is the store's, not a lease anyone holds. */
	for (size_t i = 0; i < a.n; i++) {
		struct lease_row *r = a.rows;
		if (strcmp(r[i].name, STORE_CONTROLS) == 0) {
			memmove(&r[i], &r[i + 1], (a.n - i - 1) * sizeof *r);
			a.n--;
			break;
		}
	}
	if (a.n == 0) {
		free(a.rows);
		a.rows = NULL;
	}
	*rows = a.rows;
	*n = a.n;
	*now = a.now;
	return STORE_OK;
}

/* ---- controls ---- */

/* A row back: (now). */
static int got_now(struct store *s, void *arg, int set)
{
	int64_t *v = arg;

	(void)set;
	v[0] = 1;
	v[1] = store_col_int(s, 0);
	return 0;
}

/* A CTL_VERSION row: (now, version or NULL). */
static int version_row(struct store *s, void *arg, int set)
{
	int64_t *v = arg;

	(void)set;
	v[0] = 1;
	v[1] = store_col_int(s, 0);
	v[2] = store_col_or(s, 1, 0);
	return 0;
}

int store_op_control(struct store *s, const char *name, int what, int64_t until, const char *to,
                     int64_t *now)
{
	struct store_param p[] = { SP_T(name), SP_I(what == STORE_CTL_PAUSE ? until : what),
	                           SP_T(to) };
	int64_t v[2] = { 0, 0 };

	if (store_exec(s, what == STORE_CTL_PAUSE ? ST_CTL_PAUSE : ST_CTL_SET, p,
	               what == STORE_CTL_PAUSE ? 2 : 3, got_now, v) != STORE_OK)
		return STORE_ERR;
	if (!v[0])
		return STORE_NO;
	*now = v[1];
	return STORE_OK;
}

int store_op_ctl_version(struct store *s, int64_t *version, int64_t *now)
{
	int64_t v[3] = { 0, 0, 0 };

	if (store_exec(s, ST_CTL_VERSION, NULL, 0, version_row, v) != STORE_OK)
		return STORE_ERR;
	if (!v[0])
		return store_fail(s, "ctl_version: the database answered no row");
	*now = v[1];
	*version = v[2];
	return STORE_OK;
}

/* A HANDOFF row: (to, now). */
static int handed(struct store *s, void *arg, int set)
{
	char *to = arg;

	(void)set;
	store_col_copy(s, 0, to + 1, STORE_NAME_MAX + 1);
	to[0] = 1;
	return 0;
}

int store_op_handoff(struct store *s, const char *name, const char *owner, int64_t ms,
                     int64_t live_ms, char *to)
{
	struct store_param p[] = { SP_T(name), SP_T(owner), SP_I(ms), SP_I(live_ms) };
	char got[STORE_NAME_MAX + 2] = "";

	if (store_exec(s, ST_HANDOFF, p, 4, handed, got) != STORE_OK)
		return STORE_ERR;
	memcpy(to, got + 1, STORE_NAME_MAX + 1);
	return got[0] ? STORE_OK : STORE_NO;
}

static int got_row(struct store *s, void *arg, int set)
{
	(void)s;
	(void)set;
	*(int *)arg = 1;
	return 0;
}

int store_op_health(struct store *s, const char *owner, const char *name, int64_t token,
                    int failing, int *changed)
{
	struct store_param p[] = { SP_T(name), SP_T(owner), SP_I(token), SP_I(failing) };

	return store_exec(s, ST_HEALTH, p, 4, got_row, changed);
}

/* ---- leash repair ---- */

static int repair_row(struct store *s, void *arg, int set)
{
	struct store_repair *r = arg;

	(void)set;
	r->now = store_col_int(s, 0);
	r->found = store_col_int(s, 1) != 0;
	r->token = store_col_int(s, 2);
	r->last_fire = store_col_or(s, 3, STORE_NO_FIRE);
	r->lease_bad = store_col_int(s, 4) != 0;
	r->new_token = store_col_int(s, 5);
	r->dropped = store_col_int(s, 6);
	return 0;
}

int store_op_repair(struct store *s, const char *name, struct store_repair *out)
{
	struct store_param p[] = { SP_T(name) };

	out->now = -1;
	if (store_exec(s, ST_REPAIR, p, 1, repair_row, out) != STORE_OK)
		return STORE_ERR;
	if (out->now < 0)
		return store_fail(s, "%s: repair: expected one row, got none", s->ops->name);
	return STORE_OK;
}

struct bad_answer {
	struct store_bad_run *rows;
	size_t n;
};

static int bad_row(struct store *s, void *arg, int set)
{
	struct bad_answer *a = arg;

	(void)set;
	if (a->n == STORE_BAD_RUNS_MAX)
		return 0;
	store_col_copy(s, 0, a->rows[a->n].job, sizeof a->rows[a->n].job);
	a->rows[a->n++].scheduled_at = store_col_int(s, 1);
	return 0;
}

int store_op_corrupt_runs(struct store *s, struct store_bad_run *rows, size_t *n)
{
	struct bad_answer a = { rows, 0 };
	int rc = store_exec(s, ST_CORRUPT_RUNS, NULL, 0, bad_row, &a);

	*n = a.n;
	return rc;
}

/* ---- presence ---- */

int store_op_leave(struct store *s, const char *owner)
{
	struct store_param p[] = { SP_T(owner) };

	return store_exec(s, ST_LEAVE, p, 1, NULL, NULL);
}

/* me's broken files text as the beat writes it: NULL for none. */
static const char *broken_text(const struct store_replica *me)
{
	return me->broken && *me->broken ? me->broken : NULL;
}

/* A PRESENCE row (driver.h). */
static int replica_decode(struct store *s, void *elem)
{
	struct store_replica *r = elem;
	int oom = 0;

	store_col_copy(s, 1, r->owner, sizeof r->owner);
	store_col_copy(s, 2, r->host, sizeof r->host);
	r->pid = store_col_int(s, 3);
	store_col_copy(s, 4, r->version, sizeof r->version);
	r->started_at = store_col_int(s, 5);
	r->heartbeat = store_col_int(s, 6);
	r->draining = store_col_int(s, 7) != 0;
	store_col_copy(s, 8, r->jobs_hash, sizeof r->jobs_hash);
	r->jobs = store_col_dup(s, 9, &oom);
	r->broken = store_col_dup(s, 10, &oom);
	if (r->broken && !*r->broken) {
		free(r->broken);
		r->broken = NULL;
	}
	return oom ? -1 : 0;
}

#define REPLICAS_ANSWER { .size = sizeof(struct store_replica), .decode = replica_decode }

static int replicas_done(int rc, struct rows_answer *a, struct store_replica **rows, size_t *n,
                         int64_t *now)
{
	if (rc != STORE_OK) {
		store_free_replicas(a->rows, a->n);
		return STORE_ERR;
	}
	*rows = a->rows;
	*n = a->n;
	*now = a->now;
	return STORE_OK;
}

int store_op_replicas(struct store *s, struct store_replica **rows, size_t *n, int64_t *now)
{
	struct rows_answer a = REPLICAS_ANSWER;

	return replicas_done(store_exec(s, ST_REPLICAS, NULL, 0, rows_row, &a), &a, rows, n, now);
}

int store_op_beat(struct store *s, const struct store_replica *me, int64_t prune_ms,
                  struct store_replica **rows, size_t *n, int64_t *now)
{
	struct store_param p[] = { SP_T(me->owner), SP_T(me->host), SP_I(me->pid),
	                           SP_T(me->version), SP_T(me->name), SP_T(me->jobs_hash),
	                           SP_T(me->jobs ? me->jobs : ""), SP_T(broken_text(me)),
	                           SP_I(prune_ms) };
	struct rows_answer a = REPLICAS_ANSWER;

	return replicas_done(store_exec(s, ST_BEAT, p, 9, rows_row, &a), &a, rows, n, now);
}

/* ---- renewing many leases ---- */

struct renew_answer {
	struct name_index *x;
	size_t n;
	int64_t *tokens;
	struct store_ctl *ctl;          /* renew_ctl, renew_beat: else NULL */
	int64_t *now;
	struct rows_answer pres;        /* renew_beat */
};

/* A renewed lease: its name in column c, token in c + 1 (renew_all, _ctl),
 * or as RENEW_BEAT's 'L' rows place them. */
static void renewed(struct store *s, struct renew_answer *a, int beat)
{
	char name[STORE_NAME_MAX + 1];
	size_t lo, end;

	store_col_copy(s, beat ? 1 : 0, name, sizeof name);
	end = name_range(a->x, a->n, name, &lo);
	for (size_t k = lo; k < end; k++) {
		size_t i = a->x[k].i;

		a->tokens[i] = store_col_int(s, beat ? 3 : 1);
		if (!a->ctl)
			continue;
		a->ctl[i].paused_until = store_col_or(s, beat ? 5 : 2, STORE_NO_TIME);
		a->ctl[i].trigger_at = store_col_or(s, beat ? 6 : 3, STORE_NO_TIME);
		a->ctl[i].handoff_at = store_col_or(s, beat ? 12 : 4, STORE_NO_TIME);
	}
	if (a->ctl && !beat)
		*a->now = store_col_int(s, 5);
}

static int renew_row(struct store *s, void *arg, int set)
{
	(void)set;
	renewed(s, arg, 0);
	return 0;
}

static int renew_beat_row(struct store *s, void *arg, int set)
{
	struct renew_answer *a = arg;
	size_t len = 0;
	const char *k = s->drv->col_text(s, 11, &len);

	if (k && len == 1 && *k == 'L') {
		renewed(s, a, 1);
		return 0;
	}
	return rows_row(s, &a->pres, set);
}

/* st with (owner, names, ms), its first np of them, in as many statements
 * as the driver's bound asks; each after the first counted in s->calls. */
static int by_chunks(struct store *s, int st, const char *owner, const char *const *names,
                     size_t n, int64_t ms, int np, store_row_fn row, void *arg)
{
	size_t chunk = s->drv->params_max ? s->drv->params_max - 2 : n;
	int rc = STORE_OK;

	for (size_t at = 0; at < n && rc == STORE_OK; at += chunk) {
		size_t k = n - at < chunk ? n - at : chunk;
		struct store_param p[] = { SP_T(owner), SP_A(names + at, k), SP_I(ms) };

		if (at > 0)
			s->calls++;
		rc = store_exec(s, st, p, np, row, arg);
	}
	return rc;
}

/* RENEW_ALL, RENEW_CTL or HELD (no ms) over the names. */
static int renew_names(struct store *s, int st, const char *owner, const char *const *names,
                       size_t n, int64_t ms, int64_t *tokens, struct store_ctl *ctl, int64_t *now)
{
	struct renew_answer a = { index_names(s, names, n), n, tokens, ctl, now, { 0 } };
	int rc;

	for (size_t i = 0; i < n; i++)
		tokens[i] = -1;
	if (!a.x)
		return STORE_ERR;
	rc = by_chunks(s, st, owner, names, n, ms, st == ST_HELD ? 2 : 3, renew_row, &a);
	free(a.x);
	return rc;
}

int store_op_renew_all(struct store *s, const char *owner, const char *const *names, size_t n,
                       int64_t ms, int64_t *tokens)
{
	return renew_names(s, ST_RENEW_ALL, owner, names, n, ms, tokens, NULL, NULL);
}

int store_op_held(struct store *s, const char *owner, const char *const *names, size_t n,
                  int64_t *tokens)
{
	return renew_names(s, ST_HELD, owner, names, n, 0, tokens, NULL, NULL);
}

int store_op_renew_ctl(struct store *s, const char *owner, const char *const *names, size_t n,
                       int64_t ms, int64_t *tokens, struct store_ctl *ctl, int64_t *now)
{
	return renew_names(s, ST_RENEW_CTL, owner, names, n, ms, tokens, ctl, now);
}

/* One statement; more names than one binds: renew_ctl, then the beat,
 * apart. */
int store_op_renew_beat(struct store *s, const char *owner, const char *const *names, size_t n,
                        int64_t ms, int64_t *tokens, struct store_ctl *ctl,
                        const struct store_replica *me, int64_t prune_ms,
                        struct store_replica **rows, size_t *nrows, int64_t *now)
{
	struct store_param p[] = { SP_T(owner), SP_T(me->host), SP_I(me->pid), SP_T(me->version),
	                           SP_T(me->name), SP_T(me->jobs_hash),
	                           SP_T(me->jobs ? me->jobs : ""), SP_T(broken_text(me)),
	                           SP_I(prune_ms), SP_A(names, n), SP_I(ms) };
	struct renew_answer a = { NULL, n, tokens, ctl, now, REPLICAS_ANSWER };
	int rc;

	if (s->drv->params_max && n + 10 > s->drv->params_max) {
		int64_t at = 0;

		if ((rc = store_op_renew_ctl(s, owner, names, n, ms, tokens, ctl, &at)) != STORE_OK)
			return rc;
		s->calls++;
		return store_op_beat(s, me, prune_ms, rows, nrows, now);
	}
	for (size_t i = 0; i < n; i++)
		tokens[i] = -1;
	if (!(a.x = index_names(s, names, n)))
		return STORE_ERR;
	rc = store_exec(s, ST_RENEW_BEAT, p, 11, renew_beat_row, &a);
	free(a.x);
	return replicas_done(rc, &a.pres, rows, nrows, now);
}

int store_op_release_all(struct store *s, const char *owner, const char *const *names,
                         size_t n)
{
	return by_chunks(s, ST_RELEASE_ALL, owner, names, n, 0, 2, NULL, NULL);
}

/* ---- drain ---- */

static int drain_row(struct store *s, void *arg, int set)
{
	int64_t *v = arg;

	(void)set;
	v[0] = store_col_int(s, 0);
	v[1] += store_col_int(s, 1);
	return 0;
}

/* One statement, one transaction: more owners than it binds are refused. */
int store_op_drain(struct store *s, const char *name, const char *const *owners, size_t n,
                   int on, int64_t *changed, int64_t *now)
{
	struct store_param p[] = { SP_A(owners, n), SP_T(name), SP_I(on) };
	int64_t v[2] = { 0, 0 };

	if (s->drv->params_max && n + 2 > s->drv->params_max)
		return store_fail(s, "%s: drain: at most %zu owners, got %zu", s->ops->name,
		                  s->drv->params_max - 2, n);
	if (store_exec(s, ST_DRAIN, p, 3, drain_row, v) != STORE_OK)
		return STORE_ERR;
	*now = v[0];
	*changed = v[1];
	return STORE_OK;
}

/* ---- reading the ledger ---- */

/* The RUN columns (driver.h) from column c on. */
static void run_cols(struct store *s, int c, struct store_run_row *r)
{
	store_col_copy(s, c, r->job, sizeof r->job);
	store_col_copy(s, c + 1, r->owner, sizeof r->owner);
	store_col_copy(s, c + 2, r->actor, sizeof r->actor);
	store_col_copy(s, c + 3, r->outcome, sizeof r->outcome);
	store_col_copy(s, c + 4, r->error, sizeof r->error);
	r->scheduled_at = store_col_int(s, c + 5);
	r->token = store_col_int(s, c + 6);
	r->claimed_at = store_col_or(s, c + 7, STORE_NO_TIME);
	r->started_at = store_col_or(s, c + 8, STORE_NO_TIME);
	r->ended_at = store_col_or(s, c + 9, STORE_NO_TIME);
	r->duration_ms = store_col_or(s, c + 10, STORE_NO_TIME);
	r->recorded_at = store_col_or(s, c + 11, STORE_NO_TIME);
	r->exit_code = (int)store_col_or(s, c + 12, STORE_NO_CODE);
	r->exit_signal = (int)store_col_or(s, c + 13, STORE_NO_CODE);
}

/* A READ row: (now, RUN columns, run_id, how). */
static int run_decode(struct store *s, void *elem)
{
	struct store_run_row *r = elem;

	run_cols(s, 1, r);
	r->run_id = store_col_or(s, 15, 0);
	store_col_copy(s, 16, r->how, sizeof r->how);
	return 0;
}

int store_op_read_runs(struct store *s, const char *job, int64_t since, size_t limit,
                       struct store_run_row **rows, size_t *n, int64_t *now)
{
	struct store_param p[] = { SP_T(job), SP_I(since == STORE_NO_TIME ? 0 : since),
	                           SP_I((int64_t)limit) };
	struct rows_answer a = { .size = sizeof **rows, .decode = run_decode };

	if (store_exec(s, job ? ST_READ_JOB : ST_READ_ALL, p, 3, rows_row, &a) != STORE_OK) {
		free(a.rows);
		return STORE_ERR;
	}
	*rows = a.rows;
	*n = a.n;
	*now = a.now;
	return STORE_OK;
}

/* The entry of job in rows sorted by job: the last one when it is that
 * job, else a new zeroed one at the end; NULL when out of memory. */
static struct store_job_runs *job_runs_at(struct store_job_runs **rows, size_t *n, size_t *cap,
                                          const char *job)
{
	struct store_job_runs *j;

	if (*n && strcmp((*rows)[*n - 1].job, job) == 0)
		return &(*rows)[*n - 1];
	if (!(j = grow(*rows, *n, cap, sizeof *j)))
		return NULL;
	*rows = j;
	j = &(*rows)[(*n)++];
	memset(j, 0, sizeof *j);
	snprintf(j->job, sizeof j->job, "%s", job);
	j->handled_at = STORE_NO_TIME;
	return j;
}

struct last_answer {
	struct store_job_runs *rows;
	size_t n, cap;
	int64_t now;
};

static int last_row(struct store *s, void *arg, int set)
{
	struct last_answer *a = arg;
	struct store_job_runs *j;
	char job[STORE_NAME_MAX + 1];
	int64_t cls = store_col_int(s, 15);

	(void)set;
	a->now = store_col_int(s, 0);
	if (s->drv->is_null(s, 1))
		return 0;
	store_col_copy(s, 1, job, sizeof job);
	if (!(j = job_runs_at(&a->rows, &a->n, &a->cap, job))) {
		store_fail(s, "%s: last_runs: out of memory", s->ops->name);
		return -1;
	}
	j->handled_at = store_col_or(s, 16, STORE_NO_TIME);
	j->fails = store_col_int(s, 17);
	if (!s->drv->is_null(s, 4) && cls >= 0 && cls <= 2)
		run_cols(s, 1, cls == 0 ? &j->last : cls == 1 ? &j->ok : &j->failed);
	return 0;
}

int store_op_last_runs(struct store *s, struct store_job_runs **rows, size_t *n, int64_t *now)
{
	struct last_answer a = { 0 };

	if (store_exec(s, ST_LAST_RUNS, NULL, 0, last_row, &a) != STORE_OK) {
		free(a.rows);
		return STORE_ERR;
	}
	*rows = a.rows;
	*n = a.n;
	*now = a.now;
	return STORE_OK;
}

/* ---- claims and the ledger's writes ---- */

/* The CLAIMS table (driver.h) of claims[0..n): 4 cells a claim. */
static struct store_param *claim_cells(struct store *s, const struct store_claim *c, size_t n)
{
	struct store_param *t = malloc((n ? n : 1) * 4 * sizeof *t);

	if (!t) {
		store_fail(s, "%s: out of memory", s->ops->name);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		t[4 * i] = SP_I((int64_t)i + 1);
		t[4 * i + 1] = SP_T(c[i].name);
		t[4 * i + 2] = SP_I(c[i].token);
		t[4 * i + 3] = SP_I(c[i].fire);
	}
	return t;
}

#define RUN_CELLS 13             /* a claim's row */
#define RECORD_CELLS 15          /* a recorded row: run_id and how after them */
static struct store_param or_null(int64_t v, int64_t null)
{
	return v == null ? SP_T(NULL) : SP_I(v);
}

/* The RUNS table (driver.h): each row led by its claim's number (claims
 * set: claimed_at is the database's now, so none is sent) or its job. */
static struct store_param *run_cells(struct store *s, const struct store_run *r, size_t n,
                                     int claims)
{
	size_t w = claims ? RUN_CELLS : RECORD_CELLS;
	struct store_param *t = malloc((n ? n : 1) * w * sizeof *t);

	if (!t) {
		store_fail(s, "%s: out of memory", s->ops->name);
		return NULL;
	}
	for (size_t k = 0; k < n; k++, r++) {
		struct store_param *c = t + k * w;

		c[0] = claims ? SP_I((int64_t)r->claim + 1) : SP_T(r->job);
		c[1] = SP_I(r->scheduled_at);
		c[2] = SP_T(r->owner);
		c[3] = SP_I(r->token);
		c[4] = or_null(claims ? STORE_NO_TIME : r->claimed_at, STORE_NO_TIME);  /* a claim's is now */
		c[5] = or_null(r->started_at, STORE_NO_TIME);
		c[6] = or_null(r->ended_at, STORE_NO_TIME);
		c[7] = SP_T(r->outcome);
		c[8] = or_null(r->exit_code, STORE_NO_CODE);
		c[9] = or_null(r->exit_signal, STORE_NO_CODE);
		c[10] = or_null(r->duration_ms, STORE_NO_TIME);
		c[11] = SP_T(r->error);
		c[12] = SP_T(r->actor);
		if (!claims) {
			c[13] = or_null(r->run_id, 0);
			c[14] = SP_T(r->how);
		}
	}
	return t;
}

struct claim_answer {
	int *ok;
	size_t n;
	int64_t now;
};

/* A (now, i) row: claim i (from 1) accepted; i NULL: the clock only. */
static int claim_row(struct store *s, void *arg, int set)
{
	struct claim_answer *a = arg;
	int64_t i = store_col_or(s, 1, 0);

	(void)set;
	if (!s->drv->is_null(s, 0))
		a->now = store_col_int(s, 0);
	if (i < 0 || (uint64_t)i > a->n) {
		store_fail(s, "%s: claim %lld in the answer is not one of the %zu", s->ops->name,
		           (long long)i, a->n);
		return -1;
	}
	if (i > 0)
		a->ok[i - 1] = 1;
	return 0;
}

/* CLAIM_ALL, UNCLAIM_ALL or CLAIM_RUNS (runs set).  On an error no claim
 * counts as accepted. */
static int claims_call(struct store *s, int st, const char *owner,
                       const struct store_claim *claims, size_t n, const struct store_run *runs,
                       size_t nruns, int *ok, int64_t *now)
{
	struct store_param *c = claim_cells(s, claims, n), *r = NULL;
	struct claim_answer a = { ok, n, 0 };
	int rc = STORE_ERR;

	if (c && (!runs || (r = run_cells(s, runs, nruns, 1)))) {
		struct store_param p[] = { SP_T(owner), SP_R(c, n, 4), SP_R(r, nruns, RUN_CELLS) };

		rc = store_exec(s, st, p, runs ? 3 : 2, claim_row, &a);
	}
	free(c);
	free(r);
	for (size_t i = 0; i < n && rc != STORE_OK; i++)
		ok[i] = 0;
	if (rc == STORE_OK && now)
		*now = a.now;
	return rc;
}

int store_op_claim_all(struct store *s, const char *owner, const struct store_claim *claims,
                       size_t n, int *ok, int64_t *now)
{
	return claims_call(s, ST_CLAIM_ALL, owner, claims, n, NULL, 0, ok, now);
}

int store_op_unclaim_all(struct store *s, const char *owner, const struct store_claim *claims,
                         size_t n, int *ok)
{
	return claims_call(s, ST_UNCLAIM_ALL, owner, claims, n, NULL, 0, ok, NULL);
}

int store_op_claim_runs(struct store *s, const char *owner, const struct store_claim *claims,
                        size_t n, const struct store_run *runs, size_t nruns, int *ok,
                        int64_t *now)
{
	/* A claim without rows still goes as a table of none. */
	static const struct store_run none;

	return claims_call(s, ST_CLAIM_RUNS, owner, claims, n, nruns ? runs : &none, nruns, ok,
	                   now);
}

int store_op_record_runs(struct store *s, const struct store_run *runs, size_t n)
{
	struct store_param *r = run_cells(s, runs, n, 0);
	int rc;

	if (!r)
		return STORE_ERR;
	{
		struct store_param p[] = { SP_R(r, n, RECORD_CELLS) };

		rc = store_exec(s, ST_RECORD_RUNS, p, 1, NULL, NULL);
	}
	free(r);
	return rc;
}

static int count_row(struct store *s, void *arg, int set)
{
	(void)set;
	*(int64_t *)arg = store_col_int(s, 0);
	return 0;
}

int store_op_prune_runs(struct store *s, int64_t keep_ms, int64_t keep_per_job, size_t max_rows,
                        int64_t *changed)
{
	struct store_param p[] = { SP_I(keep_ms), SP_I(keep_per_job), SP_I((int64_t)max_rows) };

	return store_exec(s, ST_PRUNE_RUNS, p, 3, count_row, changed);
}

/* The side table is made on first use: an UPDATE that fails makes it and
 * tries once more. */
int store_op_floor(struct store *s, int kind)
{
	struct store_param key[] = { SP_T("floor") };

	if (kind == STORE_FLOOR_SELECT)
		return store_exec(s, ST_FLOOR_SELECT, NULL, 0, NULL, NULL);
	if (store_exec(s, ST_FLOOR_UPDATE, key, 1, NULL, NULL) == STORE_OK)
		return STORE_OK;
	if (store_exec(s, ST_FLOOR_MAKE, NULL, 0, NULL, NULL) != STORE_OK)
		return STORE_ERR;
	return store_exec(s, ST_FLOOR_UPDATE, key, 1, NULL, NULL);
}
