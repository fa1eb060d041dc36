/* store.c - the provider registry and the argument-checking wrappers. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/esc.h"
#include "core/metrics.h"
#include "store/driver.h"

/* Every provider call goes through here: a fault injected for it (below)
 * answers instead of the provider, and it is timed and counted for
 * /metrics.  call_t0 is set before the call is evaluated (the comma is a
 * sequence point); calls never nest. */
static int64_t call_t0;
_Static_assert(METRICS_NAME_MAX == STORE_NAME_MAX, "metrics keeps whole job names");

static int fault_due(struct store *s, const char *op);
#define FAULTY(op, call) (fault_due(s, op) ? STORE_ERR : (call))
#define TIMED(op, call) (call_t0 = metrics_clock(), \
	metrics_note_store(METRICS_OP_##op, call_t0, FAULTY(#op, call)))

/* ---- faults, for the specs ----
 * As SQLite's faultsim: the n-th call (from 1) of an operation fails before
 * it reaches the provider, with an ordinary STORE_ERR whose reason names the
 * fault, so that a spec can fail each operation of a run in turn and check
 * the scheduler's promises.  The plan is store_fault_plan's, or else the
 * environment's LEASH_STORE_FAULT, read at the first call. */
#define FAULTS_MAX 16
static struct {
	int read;                       /* the environment was looked at */
	int n;
	char bad[STORE_ERR_MAX];        /* a plan that could not be read: every call fails */
	struct {
		char op[32];
		long nth, seen;
		int kind;
	} f[FAULTS_MAX];
} faults;

static const char *const fault_kinds[] = { "timeout", "gone", "refused" };
static const enum store_err_kind fault_err[] = { STORE_E_TIMEOUT, STORE_E_GONE,
                                                 STORE_E_REFUSED };
static const char *const fault_texts[] = {
	"no answer within the timeout", "connection lost", "refused by the server"
};

int store_fault_plan(const char *plan, char *err, size_t errlen)
{
	const char *p = plan ? plan : "";

	faults.read = 1;
	faults.n = 0;
	faults.bad[0] = '\0';
	while (*p) {
		char op[32], kind[16];
		long nth;
		int used = 0, k;

		if (faults.n == FAULTS_MAX ||
		    sscanf(p, "%31[a-z_]:%ld:%15[a-z]%n", op, &nth, kind, &used) != 3 || nth < 1 ||
		    (p[used] && p[used] != ',')) {
			snprintf(err, errlen, "store fault plan \"%s\": want op:n:kind[,...] (n >= 1, at"
			         " most %d)", plan, FAULTS_MAX);
			faults.n = 0;
			return -1;
		}
		for (k = 0; k < 3 && strcmp(kind, fault_kinds[k]) != 0; k++)
			;
		if (k == 3) {
			snprintf(err, errlen, "store fault plan \"%s\": kind \"%s\" is not timeout, gone"
			         " or refused", plan, kind);
			faults.n = 0;
			return -1;
		}
		snprintf(faults.f[faults.n].op, sizeof faults.f[faults.n].op, "%s", op);
		faults.f[faults.n].nth = nth;
		faults.f[faults.n].seen = 0;
		faults.f[faults.n++].kind = k;
		p += used + (p[used] == ',');
	}
	return 0;
}

/* 1 when this call of op is to fail (s->err says so). */
static int fault_due(struct store *s, const char *op)
{
	if (!faults.read && store_fault_plan(getenv("LEASH_STORE_FAULT"), faults.bad,
	                                     sizeof faults.bad) < 0)
		faults.read = 1;
	if (faults.bad[0]) {
		store_fail(s, "LEASH_STORE_FAULT: %s", faults.bad);
		return 1;
	}
	for (int i = 0; i < faults.n; i++)
		if (strcasecmp(faults.f[i].op, op) == 0 && ++faults.f[i].seen == faults.f[i].nth) {
			store_fail_kind(s, fault_err[faults.f[i].kind], "%s: %s: %s (injected fault)",
			                s->ops->name, faults.f[i].op, fault_texts[faults.f[i].kind]);
			return 1;
		}
	return 0;
}

extern const struct store_provider store_sqlite, store_postgres, store_mssql;

#define REGISTRY_MAX 16
/* The providers leash knows: any given to store_register, then the
 * built-in ones, added at the first look-up. */
static struct {
	const struct store_provider *p[REGISTRY_MAX];
	int n;
	int builtins_added;
} reg;

int store_register(const struct store_provider *p)
{
	if (reg.n == REGISTRY_MAX)
		return -1;
	reg.p[reg.n++] = p;
	return 0;
}

static void add_builtins(void)
{
	if (!reg.builtins_added) {
		reg.builtins_added = 1;
		/* After any earlier registration, so a consumer's own wins. */
		store_register(&store_sqlite);
		store_register(&store_postgres);
		store_register(&store_mssql);
	}
}

const struct store_provider *store_find(const char *name)
{
	add_builtins();
	for (int i = 0; i < reg.n; i++)
		if (strcmp(reg.p[i]->name, name) == 0)
			return reg.p[i];
	return NULL;
}

void store_unload(void)
{
	for (int i = 0; i < reg.n; i++)
		if (reg.p[i]->unload)
			reg.p[i]->unload();
}

/* POSIX's dlsym() answers functions as data pointers of the same size. */
_Static_assert(sizeof(void *) == sizeof(void (*)(void)), "function pointers fit dlsym's");

int store_lib_load(struct store_lib *l, char *err, size_t errlen)
{
	char name[64];
	void *h, *f;
	size_t k = 0;

	if (l->handle)
		return 0;
	if (!(h = dlopen(l->file, RTLD_NOW | RTLD_LOCAL))) {
		snprintf(err, errlen, "%s: cannot load %s: %s; install %s", l->who, l->file, dlerror(),
		         l->package);
		return -1;
	}
	for (const char *p = l->names; *p; p += strlen(name) + 1, k++) {
		snprintf(name, sizeof name, "%.*s", (int)strcspn(p, " "), p);
		if (!(f = dlsym(h, name))) {
			snprintf(err, errlen, "%s: %s has no %s(); install %s", l->who, l->file, name,
			         l->package);
			memset(l->fns, 0, l->size);
			dlclose(h);
			return -1;
		}
		memcpy((char *)l->fns + k * sizeof f, &f, sizeof f);
	}
	l->handle = h;
	return 0;
}

void store_lib_unload(struct store_lib *l)
{
	if (!l->handle)
		return;
	memset(l->fns, 0, l->size);
	dlclose(l->handle);
	l->handle = NULL;
}

const struct store_provider *store_provider_at(int i)
{
	add_builtins();
	for (int j = 0; j < reg.n; j++)
		if (store_find(reg.p[j]->name) == reg.p[j] && i-- == 0)
			return reg.p[j];
	return NULL;
}

struct store *store_open(const char *name, const struct store_opts *o, char *err,
                         size_t errlen)
{
	const struct store_provider *p = store_find(name);
	struct store *st;
	int64_t t0;

	if (!p) {
		snprintf(err, errlen, "unknown store provider \"%s\" (use sqlite, postgres or mssql)",
		         name);
		return NULL;
	}
	if (o->table && !store_valid_table(o->table)) {
		snprintf(err, errlen,
		         "table \"%s\" is not a valid identifier ([A-Za-z_][A-Za-z0-9_]*, at most %d bytes)",
		         o->table, STORE_IDENT_MAX);
		return NULL;
	}
	t0 = metrics_clock();
	st = p->open(o, err, errlen);
	metrics_note_store(METRICS_OP_OPEN, t0, st ? STORE_OK : STORE_ERR);
	return st;
}

char *store_no_table(char *err, size_t errlen, const char *provider, const char *where,
                     const char *missing)
{
	snprintf(err, errlen, "no lease table yet: has `leash run` started? (%s %s has no table "
	         "%s; only leash run makes the tables)", provider, where, missing);
	return err;
}

int store_valid_table(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > STORE_IDENT_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		int alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
		if (!alpha && !(i > 0 && c >= '0' && c <= '9'))
			return 0;
	}
	return 1;
}

int store_fail(struct store *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->err, sizeof s->err, fmt, ap);
	va_end(ap);
	return STORE_ERR;
}

int store_fail_kind(struct store *s, enum store_err_kind kind, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->err, sizeof s->err, fmt, ap);
	va_end(ap);
	s->kind = kind;
	return STORE_ERR;
}

const char *store_kind_name(enum store_err_kind kind)
{
	static const char *const names[] = { "other", "timeout", "gone", "refused", "duplicate" };

	return (unsigned)kind < sizeof names / sizeof names[0] ? names[kind] : "other";
}

/* The error of a call the provider has no entry for. */
static int lacks(struct store *s, const char *op, const char *what)
{
	return store_fail(s, "the %s provider has no %s: %s", s->ops->name, op, what);
}

static int check_str(struct store *s, const char *what, const char *v)
{
	size_t n;

	if (!v)
		return store_fail(s, "%s is missing", what);
	n = strlen(v);
	if (n == 0 || n > STORE_NAME_MAX)
		return store_fail(s, "%s must be 1-%d bytes, got %zu", what, STORE_NAME_MAX, n);
	return STORE_OK;
}

static int check_ms(struct store *s, int64_t ms)
{
	if (ms <= 0 || ms > STORE_DURATION_MAX)
		return store_fail(s, "duration must be > 0 and at most 24h, got %lld ms",
		                  (long long)ms);
	return STORE_OK;
}

static int check_names(struct store *s, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (check_str(s, "lease name", names[i]) != STORE_OK)
			return STORE_ERR;
	return STORE_OK;
}

static void begin(struct store *s)
{
	s->err[0] = '\0';
	s->kind = STORE_E_OTHER;
}

/* What every call on a batch of one owner's leases checks. */
static int check_batch(struct store *s, const char *owner, const char *const *names, size_t n,
                       int64_t ms)
{
	if (check_str(s, "owner", owner) < 0 || check_ms(s, ms) < 0 || check_names(s, names, n) < 0)
		return -1;
	return 0;
}

int store_try_acquire(struct store *s, const char *name, const char *owner,
                      int64_t ms, struct lease_info *out)
{
	begin(s);
	if (check_str(s, "lease name", name) < 0 || check_str(s, "owner", owner) < 0 ||
	    check_ms(s, ms) < 0)
		return STORE_ERR;
	s->calls++;
	return TIMED(TRY_ACQUIRE, s->ops->try_acquire(s, name, owner, ms, out));
}

int store_renew(struct store *s, const char *name, const char *owner, int64_t ms,
                struct lease_info *out)
{
	begin(s);
	if (check_str(s, "lease name", name) < 0 || check_str(s, "owner", owner) < 0 ||
	    check_ms(s, ms) < 0)
		return STORE_ERR;
	s->calls++;
	return TIMED(RENEW, s->ops->renew(s, name, owner, ms, out));
}

int store_release(struct store *s, const char *name, const char *owner)
{
	begin(s);
	if (check_str(s, "lease name", name) < 0 || check_str(s, "owner", owner) < 0)
		return STORE_ERR;
	s->calls++;
	return TIMED(RELEASE, s->ops->release(s, name, owner));
}

int store_renew_all(struct store *s, const char *owner, const char *const *names,
                    size_t n, int64_t ms, int64_t *tokens)
{
	begin(s);
	if (check_batch(s, owner, names, n, ms) < 0)
		return STORE_ERR;
	if (n == 0)
		return STORE_OK;
	s->calls++;
	return TIMED(RENEW_ALL, s->ops->renew_all(s, owner, names, n, ms, tokens));
}

int store_acquire_all(struct store *s, const char *owner, const char *const *names,
                      size_t n, int64_t ms, struct lease_info *out, int *got)
{
	begin(s);
	if (check_batch(s, owner, names, n, ms) < 0)
		return STORE_ERR;
	if (n == 0)
		return STORE_OK;
	if (s->ops->acquire_all) {
		s->calls++;
		return TIMED(ACQUIRE_ALL, s->ops->acquire_all(s, owner, names, n, ms, out, got));
	}
	for (size_t i = 0; i < n; i++) {
		int rc;

		s->calls++;
		rc = TIMED(TRY_ACQUIRE, s->ops->try_acquire(s, names[i], owner, ms, &out[i]));
		if (rc == STORE_ERR)
			return STORE_ERR;
		got[i] = rc == STORE_OK;
	}
	return STORE_OK;
}

int store_release_all(struct store *s, const char *owner, const char *const *names,
                      size_t n)
{
	begin(s);
	if (check_str(s, "owner", owner) < 0 || check_names(s, names, n) < 0)
		return STORE_ERR;
	if (n == 0)
		return STORE_OK;
	if (s->ops->release_all) {
		s->calls++;
		return TIMED(RELEASE_ALL, s->ops->release_all(s, owner, names, n));
	}
	for (size_t i = 0; i < n; i++) {
		s->calls++;
		if (TIMED(RELEASE, s->ops->release(s, names[i], owner)) == STORE_ERR)
			return STORE_ERR;
	}
	return STORE_OK;
}

static int cmp_claim_name(const void *a, const void *b)
{
	return strcmp((*(const struct store_claim *const *)a)->name,
	              (*(const struct store_claim *const *)b)->name);
}

/* Every claim well formed, and no name twice (one row cannot take two
 * fires in one statement: which one wins would be the provider's choice). */
static int check_claims(struct store *s, const struct store_claim *c, size_t n)
{
	const struct store_claim **sorted;
	int rc = STORE_OK;

	for (size_t i = 0; i < n; i++) {
		if (check_str(s, "lease name", c[i].name) != STORE_OK)
			return STORE_ERR;
		if (c[i].token <= 0)
			return store_fail(s, "claim of \"%s\": token must be > 0, got %lld", c[i].name,
			                  (long long)c[i].token);
		if (!store_time_sane(c[i].fire))
			return store_fail(s, "claim of \"%s\": fire must be 0 to %lld ms, got %lld",
			                  c[i].name, (long long)STORE_TIME_MAX, (long long)c[i].fire);
	}
	if (n < 2)
		return STORE_OK;
	if (!(sorted = malloc(n * sizeof *sorted)))
		return store_fail(s, "claim_all: out of memory");
	for (size_t i = 0; i < n; i++)
		sorted[i] = &c[i];
	qsort(sorted, n, sizeof *sorted, cmp_claim_name);
	for (size_t i = 1; i < n; i++)
		if (strcmp(sorted[i - 1]->name, sorted[i]->name) == 0) {
			rc = store_fail(s, "claim of \"%s\": the name is listed twice",
			                sorted[i]->name);
			break;
		}
	free(sorted);
	return rc;
}

int store_claim_all(struct store *s, const char *owner, const struct store_claim *claims,
                    size_t n, int *ok, int64_t *now)
{
	begin(s);
	*now = 0;
	for (size_t i = 0; i < n; i++)
		ok[i] = 0;
	if (check_str(s, "owner", owner) < 0 || check_claims(s, claims, n) < 0)
		return STORE_ERR;
	if (!s->ops->claim_all)
		return lacks(s, "claim_all", "claiming fires is not supported");
	if (n == 0)
		return STORE_OK;
	s->calls++;
	return TIMED(CLAIM_ALL, s->ops->claim_all(s, owner, claims, n, ok, now));
}

int store_unclaim_all(struct store *s, const char *owner, const struct store_claim *claims,
                      size_t n, int *ok)
{
	begin(s);
	for (size_t i = 0; i < n; i++)
		ok[i] = 0;
	if (check_str(s, "owner", owner) < 0 || check_claims(s, claims, n) < 0)
		return STORE_ERR;
	if (!s->ops->unclaim_all)
		return lacks(s, "unclaim_all", "giving fires back is not supported");
	if (n == 0)
		return STORE_OK;
	s->calls++;
	return TIMED(UNCLAIM_ALL, s->ops->unclaim_all(s, owner, claims, n, ok));
}

/* ---- the run ledger ---- */

static const char *const outcomes[] = { STORE_OUTCOMES };

static int one_of(const char *s, const char *const *list, size_t n)
{
	for (size_t i = 0; s && i < n; i++)
		if (strcmp(s, list[i]) == 0)
			return 1;
	return 0;
}

int store_valid_outcome(const char *s)
{
	return one_of(s, outcomes, sizeof outcomes / sizeof outcomes[0]);
}

static const char *const hows[] = { STORE_HOWS };

/* 1 when s is one of STORE_HOWS. */
static int how_ok(const char *s)
{
	return one_of(s, hows, sizeof hows / sizeof hows[0]);
}

/* Copies at most STORE_RUN_ERROR_MAX bytes of src into dst (which has room
 * for that and the NUL), whole characters only, each byte that starts no
 * well-formed character becoming '?'. */
static void clean_error(char *dst, const char *src)
{
	const unsigned char *p = (const unsigned char *)src;
	size_t len = 0;

	while (*p) {
		size_t n = esc_char_len((const char *)p, 4);    /* NUL-ended: stops there */

		if (n == 0) {
			if (len + 1 > STORE_RUN_ERROR_MAX)
				break;
			dst[len++] = '?';
			p++;
			continue;
		}
		if (len + n > STORE_RUN_ERROR_MAX)
			break;
		memcpy(dst + len, p, n);
		len += n;
		p += n;
	}
	dst[len] = '\0';
}

/* A NULL-able time (STORE_NO_TIME or >= 0). */
static int check_time(struct store *s, const char *job, const char *what, int64_t v)
{
	if ((v < 0 && v != STORE_NO_TIME) || v > STORE_TIME_MAX)
		return store_fail(s, "run of \"%s\": %s must be 0 to %lld ms or unknown, got %lld", job,
		                  what, (long long)STORE_TIME_MAX, (long long)v);
	return STORE_OK;
}

static int check_run(struct store *s, const struct store_run *r)
{
	if (check_str(s, "run job", r->job) != STORE_OK ||
	    check_str(s, "run owner", r->owner) != STORE_OK)
		return STORE_ERR;
	if (!store_valid_outcome(r->outcome))
		return store_fail(s, "run of \"%s\": outcome \"%s\" is not one of running, ok, failed, "
		                  "timeout, lost, killed, skipped-overlap, skipped-paused, missed, manual, "
		                  "control, handed-off, stopped",
		                  r->job, r->outcome ? r->outcome : "(missing)");
	if (!store_time_sane(r->scheduled_at))
		return store_fail(s, "run of \"%s\": scheduled_at must be 0 to %lld ms, got %lld",
		                  r->job, (long long)STORE_TIME_MAX, (long long)r->scheduled_at);
	if (r->token < 0 || r->token >= STORE_TOKEN_LIMIT)
		return store_fail(s, "run of \"%s\": token must be 0 to 2^62 - 1, got %lld", r->job,
		                  (long long)r->token);
	if (check_time(s, r->job, "claimed_at", r->claimed_at) != STORE_OK ||
	    check_time(s, r->job, "started_at", r->started_at) != STORE_OK ||
	    check_time(s, r->job, "ended_at", r->ended_at) != STORE_OK ||
	    check_time(s, r->job, "duration_ms", r->duration_ms) != STORE_OK)
		return STORE_ERR;
	if (r->exit_code < STORE_NO_CODE || r->exit_signal < STORE_NO_CODE)
		return store_fail(s, "run of \"%s\": exit_code and exit_signal must be >= 0 or unknown",
		                  r->job);
	if (r->actor && check_str(s, "run actor", r->actor) != STORE_OK)
		return STORE_ERR;
	if (r->run_id < 0 || r->run_id > STORE_TIME_MAX)
		return store_fail(s, "run of \"%s\": run_id must be 0 to %lld, got %lld", r->job,
		                  (long long)STORE_TIME_MAX, (long long)r->run_id);
	if (r->how && !how_ok(r->how))
		return store_fail(s, "run of \"%s\": how \"%s\" is not one of catch-up, manual", r->job,
		                  r->how);
	return STORE_OK;
}

static int cmp_run_key(const void *a, const void *b)
{
	const struct store_run *x = *(const struct store_run *const *)a;
	const struct store_run *y = *(const struct store_run *const *)b;
	int c = strcmp(x->job, y->job);

	if (c == 0)
		c = x->scheduled_at < y->scheduled_at ? -1 : x->scheduled_at > y->scheduled_at;
	if (c == 0)
		c = strcmp(x->owner, y->owner);
	return c;
}

/* Checks every row and makes the per-call copy the provider gets: the same
 * rows with their error text cut and cleaned (the caller's strings are never
 * written).  A key listed twice is refused: one statement cannot write a row
 * twice on every provider, and which write wins would be its choice.
 * Returns the copy (free() it; its texts live in the same block) or NULL
 * with s->err set.  claims/n: claim_runs' claims, else NULL. */
static struct store_run *copy_runs(struct store *s, const struct store_run *runs, size_t nruns,
                                   const struct store_claim *claims, size_t n)
{
	struct store_run *copy;
	const struct store_run **sorted;
	size_t nerr = 0;
	char *text;

	for (size_t k = 0; k < nruns; k++) {
		if (claims && runs[k].claim >= n) {
			store_fail(s, "run %zu: its claim index %zu is not below the %zu claims", k,
			           runs[k].claim, n);
			return NULL;
		}
		if (check_run(s, &runs[k]) != STORE_OK)
			return NULL;
		if (claims && strcmp(runs[k].job, claims[runs[k].claim].name) != 0) {
			store_fail(s, "run of \"%s\": its claim %zu is of \"%s\"", runs[k].job,
			           runs[k].claim, claims[runs[k].claim].name);
			return NULL;
		}
		nerr += runs[k].error != NULL;
	}
	if (!(sorted = malloc((nruns ? nruns : 1) * sizeof *sorted))) {
		store_fail(s, "runs: out of memory");
		return NULL;
	}
	for (size_t k = 0; k < nruns; k++)
		sorted[k] = &runs[k];
	qsort(sorted, nruns, sizeof *sorted, cmp_run_key);
	for (size_t k = 1; k < nruns; k++)
		if (cmp_run_key(&sorted[k - 1], &sorted[k]) == 0) {
			store_fail(s, "run of \"%s\" at %lld by \"%s\" is listed twice", sorted[k]->job,
			           (long long)sorted[k]->scheduled_at, sorted[k]->owner);
			free(sorted);
			return NULL;
		}
	free(sorted);
	copy = malloc((nruns ? nruns : 1) * sizeof *copy + nerr * (STORE_RUN_ERROR_MAX + 1));
	if (!copy) {
		store_fail(s, "runs: out of memory");
		return NULL;
	}
	text = (char *)(copy + (nruns ? nruns : 1));
	for (size_t k = 0; k < nruns; k++) {
		copy[k] = runs[k];
		if (runs[k].error) {
			clean_error(text, runs[k].error);
			copy[k].error = text;
			text += STORE_RUN_ERROR_MAX + 1;
		}
	}
	return copy;
}

int store_claim_runs(struct store *s, const char *owner, const struct store_claim *claims,
                     size_t n, const struct store_run *runs, size_t nruns, int *ok,
                     int64_t *now)
{
	struct store_run *copy;
	int rc = STORE_OK;

	begin(s);
	*now = 0;
	for (size_t i = 0; i < n; i++)
		ok[i] = 0;
	if (check_str(s, "owner", owner) < 0 || check_claims(s, claims, n) < 0)
		return STORE_ERR;
	if (!s->ops->claim_runs)
		return lacks(s, "claim_runs", "the run ledger is not supported");
	if (!(copy = copy_runs(s, runs, nruns, claims, n)))
		return STORE_ERR;
	if (n > 0) {
		s->calls++;
		rc = TIMED(CLAIM_RUNS, s->ops->claim_runs(s, owner, claims, n, copy, nruns, ok, now));
	}
	free(copy);
	return rc;
}

int store_record_runs(struct store *s, const struct store_run *runs, size_t n)
{
	struct store_run *copy;
	int rc = STORE_OK;

	begin(s);
	if (!s->ops->record_runs)
		return lacks(s, "record_runs", "the run ledger is not supported");
	if (!(copy = copy_runs(s, runs, n, NULL, 0)))
		return STORE_ERR;
	if (n > 0) {
		s->calls++;
		rc = TIMED(RECORD_RUNS, s->ops->record_runs(s, copy, n));
	}
	free(copy);
	return rc;
}

int store_read_runs(struct store *s, const char *job, int64_t since, size_t limit,
                    struct store_run_row **rows, size_t *n, int64_t *now)
{
	begin(s);
	*rows = NULL;
	*n = 0;
	*now = 0;
	if (job && check_str(s, "job", job) < 0)
		return STORE_ERR;
	if (since < 0 && since != STORE_NO_TIME)
		return store_fail(s, "since must be >= 0 ms or unknown, got %lld", (long long)since);
	if (limit < 1 || limit > STORE_RUNS_MAX)
		return store_fail(s, "limit must be 1-%d rows, got %zu", STORE_RUNS_MAX, limit);
	if (!s->ops->read_runs)
		return lacks(s, "read_runs", "the run ledger is not supported");
	s->calls++;
	return TIMED(READ_RUNS, s->ops->read_runs(s, job, since, limit, rows, n, now));
}

int store_last_runs(struct store *s, struct store_job_runs **rows, size_t *n, int64_t *now)
{
	begin(s);
	*rows = NULL;
	*n = 0;
	*now = 0;
	if (!s->ops->last_runs)
		return lacks(s, "last_runs", "the run ledger is not supported");
	s->calls++;
	return TIMED(LAST_RUNS, s->ops->last_runs(s, rows, n, now));
}

int store_renew_ctl(struct store *s, const char *owner, const char *const *names, size_t n,
                    int64_t ms, int64_t *tokens, struct store_ctl *ctl, int64_t *now)
{
	*now = 0;
	for (size_t i = 0; i < n; i++)
		ctl[i] = (struct store_ctl){ STORE_NO_TIME, STORE_NO_TIME, STORE_NO_TIME };
	if (!s->ops->renew_ctl)
		return store_renew_all(s, owner, names, n, ms, tokens);
	begin(s);
	if (check_batch(s, owner, names, n, ms) < 0)
		return STORE_ERR;
	if (n == 0)
		return STORE_OK;
	s->calls++;
	return TIMED(RENEW_CTL, s->ops->renew_ctl(s, owner, names, n, ms, tokens, ctl, now));
}

static int check_beat(struct store *s, const struct store_replica *me, int64_t prune_ms);

int store_renew_beat(struct store *s, const char *owner, const char *const *names, size_t n,
                     int64_t ms, int64_t *tokens, struct store_ctl *ctl,
                     const struct store_replica *me, int64_t prune_ms,
                     struct store_replica **rows, size_t *nrows, int64_t *now)
{
	int64_t at = 0;
	int rc;

	*rows = NULL;
	*nrows = 0;
	*now = 0;
	if (!s->ops->renew_beat || n == 0) {
		if ((rc = store_renew_ctl(s, owner, names, n, ms, tokens, ctl, &at)) != STORE_OK)
			return rc;
		return store_beat(s, me, prune_ms, rows, nrows, now);
	}
	for (size_t i = 0; i < n; i++)
		ctl[i] = (struct store_ctl){ STORE_NO_TIME, STORE_NO_TIME, STORE_NO_TIME };
	begin(s);
	if (check_batch(s, owner, names, n, ms) < 0 || check_beat(s, me, prune_ms) < 0)
		return STORE_ERR;
	if (strcmp(me->owner, owner) != 0)
		return store_fail(s, "renew_beat: the presence row is %s's, the leases %s's", me->owner,
		                  owner);
	s->calls++;
	rc = FAULTY("renew_beat",
	            s->ops->renew_beat(s, owner, names, n, ms, tokens, ctl, me, prune_ms, rows, nrows,
	                               now));
	if (rc != STORE_OK) {
		store_free_replicas(*rows, *nrows);
		*rows = NULL;
		*nrows = 0;
	}
	return rc;
}

int store_control(struct store *s, const char *name, int what, int64_t until, const char *to,
                  int64_t *now)
{
	begin(s);
	*now = 0;
	if (check_str(s, "lease name", name) < 0 || (to && check_str(s, "handoff target", to) < 0))
		return STORE_ERR;
	if (strcmp(name, STORE_CONTROLS) == 0)
		return store_fail(s, "control: \"%s\" is the store's own row, not a job", name);
	if (to && what != STORE_CTL_HANDOFF)
		return store_fail(s, "control: only a handoff names a target");
	if (what < STORE_CTL_PAUSE || what > STORE_CTL_HANDOFF)
		return store_fail(s, "control: unknown control %d", what);
	if (what == STORE_CTL_PAUSE && until <= 0)
		return store_fail(s, "control: a pause must end after 0 ms, got %lld", (long long)until);
	if (!s->ops->control)
		return lacks(s, "control", "leash pause, trigger and handoff are not supported");
	s->calls++;
	return TIMED(CONTROL, s->ops->control(s, name, what, until, to, now));
}

int store_ctl_version(struct store *s, int64_t *version, int64_t *now)
{
	begin(s);
	*version = *now = 0;
	if (!s->ops->ctl_version)
		return lacks(s, "ctl_version", "not supported");
	s->calls++;
	return TIMED(CTL_VERSION, s->ops->ctl_version(s, version, now));
}

int store_held(struct store *s, const char *owner, const char *const *names, size_t n,
               int64_t ms, int64_t *tokens)
{
	if (!s->ops->held)
		return store_renew_all(s, owner, names, n, ms, tokens);
	begin(s);
	if (check_str(s, "owner", owner) < 0 || check_ms(s, ms) < 0 || check_names(s, names, n) < 0)
		return STORE_ERR;
	s->calls++;
	return TIMED(HELD, s->ops->held(s, owner, names, n, tokens));
}

int store_handoff(struct store *s, const char *name, const char *owner, int64_t ms,
                  int64_t live_ms, char *to)
{
	begin(s);
	to[0] = '\0';
	if (check_str(s, "lease name", name) < 0 || check_str(s, "owner", owner) < 0 ||
	    check_ms(s, ms) < 0 || check_ms(s, live_ms) < 0)
		return STORE_ERR;
	s->calls++;
	if (!s->ops->handoff)
		return TIMED(RELEASE, s->ops->release(s, name, owner));
	return TIMED(HANDOFF, s->ops->handoff(s, name, owner, ms, live_ms, to));
}

int store_repair(struct store *s, const char *name, struct store_repair *out)
{
	begin(s);
	memset(out, 0, sizeof *out);
	out->last_fire = STORE_NO_FIRE;
	if (check_str(s, "lease name", name) < 0)
		return STORE_ERR;
	if (!s->ops->repair)
		return lacks(s, "repair", "leash repair is not supported");
	s->calls++;
	return FAULTY("repair", s->ops->repair(s, name, out));
}

int store_corrupt_runs(struct store *s, struct store_bad_run *rows, size_t *n)
{
	begin(s);
	*n = 0;
	if (!s->ops->corrupt_runs)
		return STORE_OK;
	s->calls++;
	return FAULTY("corrupt_runs", s->ops->corrupt_runs(s, rows, n));
}

const char *store_lease_corrupt(int64_t token, int64_t last_fire, int64_t *value)
{
	if (token < 0 || token >= STORE_TOKEN_LIMIT) {
		*value = token;
		return "token";
	}
	if (last_fire < STORE_NO_FIRE || last_fire > STORE_TIME_MAX) {
		*value = last_fire;
		return "last_fire";
	}
	return NULL;
}

int store_time_sane(int64_t t)
{
	return t >= 0 && t <= STORE_TIME_MAX;
}

const char *store_run_corrupt(const struct store_run_row *r, int64_t *value)
{
	static const char *const names[] = { "claimed_at", "started_at", "ended_at",
	                                     "recorded_at" };
	const int64_t t[] = { r->claimed_at, r->started_at, r->ended_at, r->recorded_at };

	*value = r->scheduled_at;
	if (!store_time_sane(r->scheduled_at))
		return "scheduled_at";
	*value = r->token;
	if (r->token < 0 || r->token >= STORE_TOKEN_LIMIT)
		return "token";
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		*value = t[i];
		if (t[i] != STORE_NO_TIME && !store_time_sane(t[i]))
			return names[i];
	}
	return NULL;
}

const char *store_runs_corrupt_text(const struct store_job_runs *j, char *buf, size_t len)
{
	const struct store_run_row *rows[] = { &j->last, &j->ok, &j->failed };
	const char *col = NULL;
	int64_t v = 0;

	for (size_t i = 0; i < sizeof rows / sizeof rows[0] && !col; i++)
		if (rows[i]->job[0])
			col = store_run_corrupt(rows[i], &v);
	if (!col && j->handled_at != STORE_NO_TIME && !store_time_sane(j->handled_at)) {
		col = "scheduled_at";
		v = j->handled_at;
	}
	if (!col)
		return NULL;
	snprintf(buf, len, "ledger %s = %lld", col, (long long)v);
	return buf;
}

int store_health(struct store *s, const char *owner, const char *name, int64_t token,
                 int failing, int *changed)
{
	begin(s);
	*changed = 0;
	if (check_str(s, "owner", owner) < 0 || check_str(s, "lease name", name) < 0)
		return STORE_ERR;
	if (token <= 0)
		return store_fail(s, "health: token must be > 0, got %lld", (long long)token);
	if (failing != 0 && failing != 1)
		return store_fail(s, "health: failing must be 0 or 1, got %d", failing);
	if (!s->ops->health)
		return lacks(s, "health", "failure hooks are not supported");
	s->calls++;
	return FAULTY("health", s->ops->health(s, owner, name, token, failing, changed));
}

int store_drain(struct store *s, const char *name, const char *const *owners, size_t n, int on,
                int64_t *changed, int64_t *now)
{
	begin(s);
	*changed = 0;
	*now = 0;
	if (name && check_str(s, "replica name", name) < 0)
		return STORE_ERR;
	for (size_t i = 0; i < n; i++)
		if (check_str(s, "owner", owners[i]) < 0)
			return STORE_ERR;
	if (on != 0 && on != 1)
		return store_fail(s, "drain: on must be 0 or 1, got %d", on);
	if (!s->ops->drain)
		return lacks(s, "drain", "leash drain and undrain are not supported");
	s->calls++;
	return FAULTY("drain", s->ops->drain(s, name, owners, n, on, changed, now));
}

int store_prune_runs(struct store *s, int64_t keep_ms, int64_t keep_per_job, size_t max_rows,
                     int64_t *changed)
{
	begin(s);
	*changed = 0;
	if (keep_ms <= 0)
		return store_fail(s, "keep must be > 0 ms, got %lld", (long long)keep_ms);
	if (keep_per_job < 1)
		return store_fail(s, "keep_per_job must be >= 1, got %lld", (long long)keep_per_job);
	if (max_rows < 1 || max_rows > STORE_RUNS_MAX)
		return store_fail(s, "max_rows must be 1-%d, got %zu", STORE_RUNS_MAX, max_rows);
	if (!s->ops->prune_runs)
		return lacks(s, "prune_runs", "the run ledger is not supported");
	s->calls++;
	return TIMED(PRUNE_RUNS, s->ops->prune_runs(s, keep_ms, keep_per_job, max_rows, changed));
}

int store_list(struct store *s, struct lease_row **rows, size_t *n, int64_t *now)
{
	begin(s);
	*rows = NULL;
	*n = 0;
	s->calls++;
	return TIMED(LIST, s->ops->list(s, rows, n, now));
}

int store_event_fd(struct store *s)
{
	return s->ops->event_fd ? s->ops->event_fd(s) : -1;
}

int store_drain_events(struct store *s, void (*fn)(void *, const char *), void *arg)
{
	/* Not a statement: the last statement's error stays for whoever
	 * reads it (reading events once made an outage look like recovery). */
	return s->ops->drain_events ? s->ops->drain_events(s, fn, arg) : 0;
}

void store_set_timeout(struct store *s, int ms)
{
	if (s->ops->set_timeout)
		s->ops->set_timeout(s, ms);
}

int store_floor(struct store *s, int kind)
{
	begin(s);
	if (kind != STORE_FLOOR_SELECT && kind != STORE_FLOOR_UPDATE)
		return store_fail(s, "floor kind %d is not STORE_FLOOR_SELECT or STORE_FLOOR_UPDATE",
		                  kind);
	if (!s->ops->floor)
		return store_fail(s, "the %s provider has no floor op", s->ops->name);
	s->calls++;
	return TIMED(FLOOR, s->ops->floor(s, kind));
}

void store_close(struct store *s)
{
	if (s)
		s->ops->close(s);
}

/* ---- presence ---- */

/* A beat's arguments, as store_beat documents them. */
static int check_beat(struct store *s, const struct store_replica *me, int64_t prune_ms)
{
	if (!me)
		return store_fail(s, "beat: no replica given");
	if (check_str(s, "owner", me->owner) < 0 || check_str(s, "host", me->host) < 0 ||
	    check_ms(s, prune_ms) < 0)
		return STORE_ERR;
	if (strlen(me->version) > STORE_VERSION_MAX || strlen(me->jobs_hash) > STORE_HASH_MAX)
		return store_fail(s, "beat: version or jobs_hash too long");
	if (me->name[0] && check_str(s, "replica name", me->name) < 0)
		return STORE_ERR;
	if (me->broken && strlen(me->broken) > STORE_BROKEN_MAX)
		return store_fail(s, "beat: broken files text of %zu bytes (at most %d)",
		                  strlen(me->broken), STORE_BROKEN_MAX);
	return STORE_OK;
}

int store_beat(struct store *s, const struct store_replica *me, int64_t prune_ms,
               struct store_replica **rows, size_t *n, int64_t *now)
{
	begin(s);
	*rows = NULL;
	*n = 0;
	if (check_beat(s, me, prune_ms) < 0)
		return STORE_ERR;
	if (!s->ops->beat)
		return lacks(s, "beat", "presence is not supported");
	s->calls++;
	return TIMED(BEAT, s->ops->beat(s, me, prune_ms, rows, n, now));
}

int store_leave(struct store *s, const char *owner)
{
	begin(s);
	if (check_str(s, "owner", owner) < 0)
		return STORE_ERR;
	if (!s->ops->leave)
		return lacks(s, "leave", "presence is not supported");
	s->calls++;
	return TIMED(LEAVE, s->ops->leave(s, owner));
}

int store_replicas(struct store *s, struct store_replica **rows, size_t *n, int64_t *now)
{
	begin(s);
	*rows = NULL;
	*n = 0;
	if (!s->ops->replicas)
		return lacks(s, "replicas", "presence is not supported");
	s->calls++;
	return TIMED(REPLICAS, s->ops->replicas(s, rows, n, now));
}

void store_free_replicas(struct store_replica *rows, size_t n)
{
	for (size_t i = 0; i < n && rows; i++) {
		free(rows[i].jobs);
		free(rows[i].broken);
	}
	free(rows);
}
