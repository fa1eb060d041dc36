/* presence.c - presence rows, the map made from them (place.h), and the
 * hand-off decision. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "cluster/presence.h"

uint64_t presence_score(const char *job, const char *name)
{
	return place_score(job, name);
}

void presence_name_of(const char *owner, char *out, size_t len)
{
	const char *last = strrchr(owner, ':'), *cut = NULL;
	size_t n;

	if (last) {
		for (const char *p = last - 1; p >= owner; p--)
			if (*p == ':') {
				cut = p;
				break;
			}
	}
	n = cut ? (size_t)(cut - owner) : strlen(owner);
	if (n >= len)
		n = len - 1;
	memcpy(out, owner, n);
	out[n] = '\0';
}

int presence_pick(const char *job, const struct presence_cand *c, size_t n)
{
	int best = -1;
	uint64_t top = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t s = presence_score(job, c[i].name);
		if (best < 0 || s > top || (s == top && strcmp(c[i].owner, c[best].owner) < 0)) {
			best = (int)i;
			top = s;
		}
	}
	return best;
}

static int cmp_job(const void *a, const void *b)
{
	return strcmp(((const struct place_job *)a)->name, ((const struct place_job *)b)->name);
}

/* The rows go; the map and its key stay for the next presence_set. */
static void drop_rows(struct presence *p)
{
	for (size_t i = 0; i < p->n; i++) {
		free(p->reps[i].row.jobs);
		free(p->reps[i].jobs);
	}
	free(p->reps);
	p->reps = NULL;
	p->n = 0;
	p->me = -1;
}

void presence_free(struct presence *p)
{
	drop_rows(p);
	place_free(p->place);
	p->place = NULL;
	free(p->key);
	p->key = NULL;
	p->keylen = 0;
}

/* A line's weight: the number after the name, 1 for none or anything but
 * a whole number from 1 to PLACE_WEIGHT_MAX (a row of another version is
 * read, never refused). */
static int line_weight(const char *w)
{
	long v = 0;

	if (!*w)
		return 1;
	for (; *w >= '0' && *w <= '9' && v <= PLACE_WEIGHT_MAX; w++)
		v = v * 10 + (*w - '0');
	return *w || v < 1 || v > PLACE_WEIGHT_MAX ? 1 : (int)v;
}

/* Splits a jobs text in place into its jobs, sorted by name (*out
 * malloc'd). */
static int split_jobs(char *s, struct place_job **out, size_t *n)
{
	size_t cap = 1;
	struct place_job *v;

	for (char *c = s; *c; c++)
		cap += *c == '\n';
	if (!(v = malloc(cap * sizeof *v)))
		return -1;
	*n = 0;
	for (char *line = s; *line;) {
		char *nl = strchr(line, '\n'), *sp;

		if (nl)
			*nl = '\0';
		if ((sp = strchr(line, ' ')))
			*sp = '\0';
		if (*line)
			v[(*n)++] = (struct place_job){ line, sp ? line_weight(sp + 1) : 1 };
		if (!nl)
			break;
		line = nl + 1;
	}
	qsort(v, *n, sizeof *v, cmp_job);
	*out = v;
	return 0;
}

/* The map's inputs, in a string: each row's owner, whether live (and not
 * draining) and settled, and a live row's jobs text ("\1" for NULL), then
 * my jobs text.  The same string, the same map. */
static char *place_key(const struct presence *p, const char *my_jobs, size_t *len)
{
	size_t need = 2 + (my_jobs ? strlen(my_jobs) : 0), at = 0;
	char *k;

	for (size_t i = 0; i < p->n; i++) {
		const struct presence_rep *r = &p->reps[i];

		need += strlen(r->row.owner) + 4;
		for (size_t t = 0; r->row.jobs && t < r->njobs; t++)
			need += strlen(r->jobs[t].name) + 1 + sizeof r->jobs[t].weight;
	}
	if (!(k = malloc(need)))
		return NULL;
	for (size_t i = 0; i < p->n; i++) {
		const struct presence_rep *r = &p->reps[i];
		int live = r->live && !r->row.draining;
		size_t o = strlen(r->row.owner) + 1;

		memcpy(k + at, r->row.owner, o);
		at += o;
		k[at++] = (char)('0' + live + 2 * r->settled);
		if (live && r->row.jobs) {
			/* Its jobs as read: each name, then its weight's bytes. */
			for (size_t t = 0; t < r->njobs; t++) {
				size_t l = strlen(r->jobs[t].name);
				memcpy(k + at, r->jobs[t].name, l);
				at += l;
				k[at++] = ' ';
				memcpy(k + at, &r->jobs[t].weight, sizeof r->jobs[t].weight);
				at += sizeof r->jobs[t].weight;
			}
		} else if (live) {
			k[at++] = '\1';
		}
		k[at++] = '\0';
	}
	if (my_jobs) {
		size_t l = strlen(my_jobs);
		memcpy(k + at, my_jobs, l);
		at += l;
	} else {
		k[at++] = '\1';
	}
	*len = at;
	return k;
}

uint64_t presence_inputs(const struct presence *p)
{
	uint64_t h = HASH_FNV_OFFSET;

	if (!p->key)
		return 0;
	for (size_t i = 0; i < p->keylen; i++)
		h = hash_sep(h, (unsigned char)p->key[i]);
	return hash_mix(h);
}

/* Makes the map again when its inputs changed since the last one. */
static int place_again(struct presence *p, const char *my_jobs)
{
	struct place_rep *reps = NULL;
	struct place_job *mine = NULL;
	char *text = NULL, *key;
	size_t len = 0, nmine = 0;
	int rc = -1;

	p->remade = 0;
	if (!(key = place_key(p, my_jobs, &len)))
		return -1;
	if (p->place && len == p->keylen && memcmp(key, p->key, len) == 0) {
		free(key);
		return 0;
	}
	place_free(p->place);
	p->place = NULL;
	free(p->key);
	p->key = key;
	p->keylen = len;
	if (my_jobs && (!(text = strdup(my_jobs)) || split_jobs(text, &mine, &nmine) < 0))
		goto done;
	/* A row that says "the same as mine" when mine is not known: no map,
	 * every job by pure rendezvous. */
	for (size_t i = 0; i < p->n && !my_jobs; i++)
		if (!p->reps[i].row.jobs && p->reps[i].live) {
			rc = 0;
			goto done;
		}
	if (!(reps = calloc(p->n ? p->n : 1, sizeof *reps)))
		goto done;
	for (size_t i = 0; i < p->n; i++) {
		const struct presence_rep *r = &p->reps[i];

		reps[i] = (struct place_rep){ r->name, r->row.owner, r->row.jobs ? r->jobs : mine,
		                              r->row.jobs ? r->njobs : nmine,
		                              r->live && !r->row.draining, r->settled };
	}
	if ((p->place = place_make(reps, p->n)))
		rc = 0;
	p->remade = 1;
done:
	if (rc < 0) {
		free(p->key);           /* made again next time */
		p->key = NULL;
		p->keylen = 0;
	}
	free(reps);
	free(mine);
	free(text);
	return rc;
}

int presence_set(struct presence *p, struct store_replica *rows, size_t n, int64_t now,
                 const char *my_owner, const char *my_jobs, int64_t live_ms, int64_t settle_ms)
{
	struct presence_rep *reps = calloc(n ? n : 1, sizeof *reps);

	drop_rows(p);
	if (!reps) {
		store_free_replicas(rows, n);
		presence_free(p);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		struct presence_rep *r = &reps[i];

		r->row = rows[i];
		presence_name_of(r->row.owner, r->name, sizeof r->name);
		r->live = now - r->row.heartbeat < live_ms;
		r->settled = r->live && !r->row.draining && now - r->row.started_at >= settle_ms;
		if (r->row.jobs && split_jobs(r->row.jobs, &r->jobs, &r->njobs) < 0) {
			for (size_t k = i + 1; k < n; k++)
				free(rows[k].jobs);
			free(rows);
			p->reps = reps;
			p->n = i + 1;
			presence_free(p);
			return -1;
		}
		if (my_owner && strcmp(r->row.owner, my_owner) == 0)
			p->me = (int)i;
	}
	free(rows);                     /* the jobs texts now belong to reps */
	p->reps = reps;
	p->n = n;
	p->now = now;
	if (place_again(p, my_jobs) < 0) {
		presence_free(p);
		return -1;
	}
	return 0;
}

int presence_defines(const struct presence *p, size_t i, const char *job)
{
	const struct presence_rep *r = &p->reps[i];
	struct place_job key = { job, 1 };

	if (!r->row.jobs)
		return 1;
	return bsearch(&key, r->jobs, r->njobs, sizeof *r->jobs, cmp_job) != NULL;
}

static int prefer_skip(const struct presence *p, const char *job, int skip, int *settled);

/* The map's answer; pure rendezvous for a job it does not know. */
static int placed(const struct presence *p, const char *job, int without, int *settled)
{
	int j = p->place ? place_find(p->place, job) : -1;

	if (j < 0)
		return prefer_skip(p, job, without, settled);
	return place_at(p->place, j, without, settled);
}

int presence_prefer(const struct presence *p, const char *job, int *settled)
{
	return placed(p, job, -1, settled);
}

int presence_runner_up(const struct presence *p, const char *job, int first)
{
	int settled;

	return first < 0 ? -1 : placed(p, job, first, &settled);
}

static int prefer_skip(const struct presence *p, const char *job, int skip, int *settled)
{
	struct presence_cand stack[16], *c = p->n <= 16 ? stack : malloc(p->n * sizeof *c);
	int idx[16], *ix = p->n <= 16 ? idx : malloc(p->n * sizeof *ix);
	int best = -1;

	*settled = 0;
	if (!c || !ix)
		goto done;
	for (int pass = 1; pass >= 0 && best < 0; pass--) {
		size_t k = 0;
		for (size_t i = 0; i < p->n; i++) {
			const struct presence_rep *r = &p->reps[i];
			if ((int)i != skip && (pass ? r->settled : r->live && !r->row.draining) &&
			    presence_defines(p, i, job)) {
				c[k] = (struct presence_cand){ r->name, r->row.owner };
				ix[k++] = (int)i;
			}
		}
		int w = presence_pick(job, c, k);
		if (w >= 0) {
			best = ix[w];
			*settled = pass;
		}
	}
done:
	if (c != stack)
		free(c);
	if (ix != idx)
		free(ix);
	return best;
}

int presence_safe_point(int service, int busy, int64_t now, int64_t next_fire,
                        int64_t after_next, int64_t handover_ms)
{
	if (service)
		return busy ? PRESENCE_STOP : PRESENCE_RELEASE;
	if (busy)
		return PRESENCE_WAIT;
	if (next_fire < 0 || next_fire - now > handover_ms)
		return PRESENCE_RELEASE;
	/* A fire is due within the handover: wait for it, unless the job
	 * fires so often that there is never a quiet handover time. */
	if (after_next >= 0 && after_next - next_fire <= handover_ms)
		return PRESENCE_RELEASE;
	return PRESENCE_WAIT;
}

struct named {
	const char *name, *digest;
	int weight;
};

static int cmp_named(const void *a, const void *b)
{
	return strcmp(((const struct named *)a)->name, ((const struct named *)b)->name);
}

int presence_jobs(const char *const *names, const char *const *digests, const int *weights,
                  size_t n, char hash[STORE_HASH_MAX + 1], char **text)
{
	struct named *v = malloc((n ? n : 1) * sizeof *v);
	size_t len = 1, at = 0;
	uint64_t h = HASH_FNV_OFFSET;
	char *t;

	if (!v)
		return -1;
	for (size_t i = 0; i < n; i++) {
		v[i] = (struct named){ names[i], digests && digests[i] ? digests[i] : "",
		                       weights ? weights[i] : 1 };
		len += strlen(names[i]) + 1 + (v[i].weight != 1 ? 12 : 0);
	}
	qsort(v, n, sizeof *v, cmp_named);
	if (!(t = malloc(len))) {
		free(v);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		size_t k = strlen(v[i].name);
		memcpy(t + at, v[i].name, k);
		at += k;
		if (v[i].weight != 1)
			at += (size_t)snprintf(t + at, len - at, " %d", v[i].weight);
		t[at++] = '\n';
		h = hash_sep(hash_fnv(h, v[i].name), 0xff);
		h = hash_sep(hash_fnv(h, v[i].digest), 0xfe);
	}
	t[at] = '\0';
	snprintf(hash, STORE_HASH_MAX + 1, "%016llx", (unsigned long long)hash_mix(h));
	*text = t;
	free(v);
	return 0;
}
