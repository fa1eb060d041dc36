/* view.c - the status and history views' inputs, gathered once for the
 * commands and the HTTP server. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bind/bind.h"
#include "core/clock.h"
#include "core/lx.h"
#include "web/view.h"

static void jobs_good(void *arg, struct job *j)
{
	struct view_jobs *d = arg;
	struct job **nj = realloc(d->jobs, (d->n + 1) * sizeof *nj);

	if (!nj) {
		job_free(d->L, j);
		return;
	}
	d->jobs = nj;
	d->jobs[d->n++] = j;
}

static void jobs_bad(void *arg, const char *file, const char *msg)
{
	struct view_jobs *d = arg;
	const char *base = strrchr(file, '/');
	size_t n;
	char **nb, *one;

	base = base ? base + 1 : file;
	n = strlen(base);
	if (n < 5 || strcmp(base + n - 4, ".lua") != 0)
		return;
	if (!(nb = realloc(d->bad, (d->nbad + 1) * sizeof *nb)))
		return;
	d->bad = nb;
	if (asprintf(&one, "%.*s\t%.*s", (int)(n - 4), base, (int)strcspn(msg, "\n"), msg) < 0)
		return;
	d->bad[d->nbad++] = one;
}

void view_jobs_load(struct view_jobs *d, lua_State *L, const char *dir, int64_t load_timeout_ms)
{
	d->L = L;
	d->jobs = NULL;
	d->n = 0;
	d->offset = d->limit = 0;
	d->bad = NULL;
	d->nbad = 0;
	job_load_dir(L, dir, load_timeout_ms, jobs_good, jobs_bad, d);
}

void view_jobs_free(struct view_jobs *d)
{
	for (size_t i = 0; i < d->n; i++)
		job_free(d->L, d->jobs[i]);
	free(d->jobs);
	d->jobs = NULL;
	d->n = 0;
	for (size_t i = 0; i < d->nbad; i++)
		free(d->bad[i]);
	free(d->bad);
	d->bad = NULL;
	d->nbad = 0;
}

static const struct store_job_runs *runs_of(const struct store_job_runs *jr, size_t n,
                                            const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(jr[i].job, name) == 0)
			return &jr[i];
	return NULL;
}

static const struct lease_row *lease_of(const struct lease_row *rows, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(rows[i].name, name) == 0)
			return &rows[i];
	return NULL;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Whether name is on the page: names[0..n) sorted, NULL for all. */
static int on_page(const char *const *names, size_t n, const char *name)
{
	return !names || bsearch(&name, names, n, sizeof *names, cmp_name) != NULL;
}

/* The page's names (sorted; borrowed from d, rows and jr), with the count
 * of all the jobs' names in *total: every name of the local jobs, the
 * leases and the ledger (but drains' "@REPLICA" rows), once.  *page is
 * NULL when d asks for no page; -1 out of memory. */
static int page_names(const struct view_jobs *d, const struct lease_row *rows, size_t n,
                      const struct store_job_runs *jr, size_t njr, const char ***page,
                      size_t *npage, size_t *total)
{
	const char **all = malloc((d->n + n + njr + 1) * sizeof *all);
	size_t k = 0, u = 0;

	*page = NULL;
	*npage = *total = 0;
	if (!all)
		return -1;
	for (size_t i = 0; i < d->n; i++)
		all[k++] = d->jobs[i]->name;
	for (size_t i = 0; i < n; i++)
		all[k++] = rows[i].name;
	for (size_t i = 0; i < njr; i++)
		if (jr[i].job[0] != '@')
			all[k++] = jr[i].job;
	qsort(all, k, sizeof *all, cmp_name);
	for (size_t i = 0; i < k; i++)
		if (u == 0 || strcmp(all[u - 1], all[i]) != 0)
			all[u++] = all[i];
	*total = u;
	if (!d->limit) {
		free(all);
		return 0;
	}
	if (d->offset >= u) {
		*npage = 0;
	} else {
		*npage = u - d->offset < d->limit ? u - d->offset : d->limit;
		memmove(all, all + d->offset, *npage * sizeof *all);
	}
	*page = all;
	return 0;
}

/* Pushes the local jobs for leash.jobs_view: name, schedule, kind,
 * singleton, lease_ms, next (the next fire after now) and due (the first
 * fire after the latest one a holder took care of, or after the lease was
 * taken when none was: what is overdue once its grace has passed). */
static void push_locals(lua_State *L, struct view_jobs *d, const struct cfg *c,
                        const struct lease_row *rows, size_t n,
                        const struct store_job_runs *jr, size_t njr, int64_t now,
                        const char *const *page, size_t npage)
{
	static const char *const kinds[] = { "every", "cron", "service" };
	lua_Integer at = 0;

	lua_createtable(L, page ? (int)npage : (int)d->n, 0);
	for (size_t i = 0; i < d->n; i++) {
		struct job *j = d->jobs[i];

		if (!on_page(page, npage, j->name))
			continue;
		const struct store_job_runs *r = runs_of(jr, njr, j->name);
		const struct lease_row *l = lease_of(rows, n, j->name);
		int64_t base = r && r->handled_at != STORE_NO_TIME ? r->handled_at
		               : l ? l->acquired_at : -1;

		if (!store_time_sane(base))     /* a corrupt row's: no due time */
			base = -1;

		lua_createtable(L, 0, 7);
		lua_pushstring(L, j->name);
		lua_setfield(L, -2, "name");
		lua_pushstring(L, j->describe ? j->describe : "");
		lua_setfield(L, -2, "schedule");
		lua_pushstring(L, kinds[j->kind]);
		lua_setfield(L, -2, "kind");
		lua_pushboolean(L, j->singleton);
		lua_setfield(L, -2, "singleton");
		lua_pushinteger(L, j->lease_ms ? j->lease_ms : c->lease_ms);
		lua_setfield(L, -2, "lease_ms");
		if (j->kind != JOB_SERVICE) {
			int64_t next = job_next_fire(L, j, now);
			int64_t due = base >= 0 ? job_next_fire(L, j, base) : -1;

			if (next >= 0) {
				lua_pushinteger(L, next);
				lua_setfield(L, -2, "next");
			}
			if (due >= 0) {
				lua_pushinteger(L, due);
				lua_setfield(L, -2, "due");
			}
		}
		lua_rawseti(L, -2, ++at);
	}
}

/* The local files that do not load, for leash.jobs_view: { {name=,
 * error=}, ... } (on the page, when there is one). */
static void push_bad(lua_State *L, const struct view_jobs *d, const char *const *page,
                     size_t npage)
{
	lua_Integer at = 0;

	lua_createtable(L, (int)d->nbad, 0);
	for (size_t i = 0; i < d->nbad; i++) {
		const char *tab = strchr(d->bad[i], '\t');
		char name[512];

		snprintf(name, sizeof name, "%.*s", (int)(tab - d->bad[i]), d->bad[i]);
		if (!on_page(page, npage, name))
			continue;
		lua_createtable(L, 0, 2);
		lua_pushstring(L, name);
		lua_setfield(L, -2, "name");
		lua_pushstring(L, tab + 1);
		lua_setfield(L, -2, "error");
		lua_rawseti(L, -2, ++at);
	}
}

int view_jobs_input(lua_State *L, const struct cfg *c, struct store *s, struct view_jobs *d,
                    char *err, size_t errlen)
{
	struct lease_row *rows = NULL;
	struct store_job_runs *jr = NULL;
	struct store_replica *reps = NULL;
	size_t n = 0, njr = 0, nreps = 0, npage = 0, total = 0, kept;
	const char **page = NULL;
	int64_t now = 0, rnow = 0, pnow = 0;
	int rc = -1;

	if (store_list(s, &rows, &n, &now) != STORE_OK) {
		snprintf(err, errlen, "cannot list the leases in the %s store: %s", c->provider, s->err);
		goto done;
	}
	if (store_last_runs(s, &jr, &njr, &rnow) != STORE_OK) {
		snprintf(err, errlen, "cannot read the run ledger of the %s store: %s", c->provider,
		         s->err);
		goto done;
	}
	/* A page: only its jobs' rows go to Lua, and only its local jobs'
	 * fires are computed. */
	if (page_names(d, rows, n, jr, njr, &page, &npage, &total) < 0) {
		snprintf(err, errlen, "out of memory");
		goto done;
	}
	if (page) {
		kept = 0;
		for (size_t i = 0; i < n; i++)
			if (on_page(page, npage, rows[i].name))
				rows[kept++] = rows[i];
		n = kept;
		kept = 0;
		for (size_t i = 0; i < njr; i++)
			if (on_page(page, npage, jr[i].job))
				jr[kept++] = jr[i];
		njr = kept;
	}
	lua_createtable(L, 0, 8);
	lua_createtable(L, 0, 3);
	lua_pushinteger(L, (lua_Integer)d->offset);
	lua_setfield(L, -2, "offset");
	lua_pushinteger(L, (lua_Integer)total);
	lua_setfield(L, -2, "total");
	lua_pushboolean(L, page != NULL);
	lua_setfield(L, -2, "paged");
	lua_setfield(L, -2, "page");
	lua_pushstring(L, c->provider);
	lua_setfield(L, -2, "provider");
	lua_pushinteger(L, now);
	lua_setfield(L, -2, "now");
	lua_pushinteger(L, c->lease_ms);
	lua_setfield(L, -2, "lease_ms");
	lx_push_rows(L, rows, n);
	lua_setfield(L, -2, "leases");
	lua_createtable(L, 0, (int)njr);
	for (size_t i = 0; i < njr; i++) {
		lx_push_job_runs(L, &jr[i]);
		lua_setfield(L, -2, jr[i].job);
	}
	lua_setfield(L, -2, "runs");
	/* The replicas' presence rows; a store without them shows none. */
	if (store_replicas(s, &reps, &nreps, &pnow) == STORE_OK && nreps) {
		lx_push_replicas(L, reps, nreps);
		lua_setfield(L, -2, "replicas");
	}
	push_locals(L, d, c, rows, n, jr, njr, now, page, npage);
	lua_setfield(L, -2, "locals");
	push_bad(L, d, page, npage);
	lua_setfield(L, -2, "local_broken");
	rc = 0;
done:
	free(page);
	free(rows);
	free(jr);
	store_free_replicas(reps, nreps);
	return rc;
}

int view_jobs(lua_State *L, const struct cfg *c, struct store *s, struct view_jobs *d,
              int view, long fail, char *err, size_t errlen)
{
	struct lease_row *rows = NULL;
	size_t n = 0;
	int64_t now = 0;
	int rc = -1;

	if (view == VIEW_LEASES || view == VIEW_LEASES_JSON) {      /* --leases --watch */
		if (store_list(s, &rows, &n, &now) != STORE_OK) {
			snprintf(err, errlen, "cannot list the leases in the %s store: %s", c->provider,
			         s->err);
			return -1;
		}
		if (view == VIEW_LEASES_JSON)
			lua_pushstring(L, c->provider);
		lx_push_rows(L, rows, n);
		lua_pushinteger(L, now);
		if (lx_callmod(L, "leash.status", view == VIEW_LEASES_JSON ? "json" : "table",
		               view == VIEW_LEASES_JSON ? 3 : 2, 1) != LUA_OK)
			lx_report(L, err, errlen);
		else
			rc = 0;
		free(rows);
		return rc;
	}
	if (view_jobs_input(L, c, s, d, err, errlen) < 0)
		return -1;
	lua_pushstring(L, view == VIEW_JSON ? "json" : view == VIEW_CHECK ? "check"
	               : view == VIEW_WIDE ? "wide" : "table");
	lua_pushinteger(L, fail);
	if (lx_callmod(L, "leash.jobs_view", "render", 3, 2) != LUA_OK) {
		lx_report(L, err, errlen);
		return -1;
	}
	rc = (int)lua_tointeger(L, -2);
	lua_remove(L, -2);
	return rc;
}

int view_history_args(lua_State *L, const char *job, const char *since, const char *limit,
                      int64_t *since_at, size_t *lim, char *err, size_t errlen)
{
	int top = lua_gettop(L), rc = -1;

	job ? (void)lua_pushstring(L, job) : lua_pushnil(L);
	since ? (void)lua_pushstring(L, since) : lua_pushnil(L);
	limit ? (void)lua_pushstring(L, limit) : lua_pushnil(L);
	lua_pushinteger(L, clock_wall_ms());
	if (lx_callmod(L, "leash.history", "args", 4, 2) != LUA_OK) {
		lx_report(L, err, errlen);
		goto done;
	}
	if (lua_isnil(L, -2)) {
		snprintf(err, errlen, "%s", lua_tostring(L, -1));
		rc = 1;
		goto done;
	}
	lua_getfield(L, -2, "limit");
	*lim = (size_t)lua_tointeger(L, -1);
	lua_getfield(L, -3, "since_at");
	*since_at = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : STORE_NO_TIME;
	rc = 0;
done:
	lua_settop(L, top);
	return rc;
}

int view_history(lua_State *L, const struct cfg *c, struct store *s, const char *job,
                 int64_t since_at, size_t lim, int view, char *err, size_t errlen)
{
	int json = view == VIEW_JSON;
	struct store_run_row *rows = NULL;
	size_t n = 0;
	int64_t now = 0;
	int rc = -1;

	if (store_read_runs(s, job, since_at, lim, &rows, &n, &now) != STORE_OK) {
		snprintf(err, errlen, "cannot read the run ledger of the %s store: %s", c->provider,
		         s->err);
		goto done;
	}
	if (json)
		lua_pushstring(L, c->provider);
	lua_createtable(L, (int)n, 0);
	for (size_t k = 0; k < n; k++) {
		struct store_job_runs one;

		/* A row goes to Lua as lx_push_job_runs pushes its last run. */
		memset(&one, 0, sizeof one);
		one.last = rows[k];
		lx_push_job_runs(L, &one);
		lua_getfield(L, -1, "last");
		lua_rawseti(L, -3, (lua_Integer)k + 1);
		lua_pop(L, 1);
	}
	lua_pushinteger(L, now);
	if (!json)
		lua_pushboolean(L, view == VIEW_WIDE);
	if (lx_callmod(L, "leash.history", json ? "json" : "table", 3, 1) != LUA_OK) {
		lx_report(L, err, errlen);
		goto done;
	}
	rc = 0;
done:
	free(rows);
	return rc;
}
