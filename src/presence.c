/* presence.c - rendezvous hashing over the live replicas, and the hand-off
 * decision. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "presence.h"

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL

static uint64_t fnv(uint64_t h, const char *s)
{
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= FNV_PRIME;
	}
	return h;
}

/* murmur3's finaliser: FNV alone leaves the high bits of similar names
 * alike, and rendezvous hashing compares whole values. */
static uint64_t mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

uint64_t presence_score(const char *job, const char *name)
{
	uint64_t h = fnv(FNV_OFFSET, job);

	h ^= 0xff;                      /* a separator no name contains */
	h *= FNV_PRIME;
	return mix(fnv(h, name));
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

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void presence_free(struct presence *p)
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

/* Splits r->row.jobs in place into a sorted array of its lines. */
static int split_jobs(struct presence_rep *r)
{
	size_t cap = 1;
	char *s = r->row.jobs;

	for (char *c = s; *c; c++)
		cap += *c == '\n';
	if (!(r->jobs = malloc(cap * sizeof *r->jobs)))
		return -1;
	r->njobs = 0;
	for (char *line = s; *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		if (*line)
			r->jobs[r->njobs++] = line;
		if (!nl)
			break;
		line = nl + 1;
	}
	qsort(r->jobs, r->njobs, sizeof *r->jobs, cmp_str);
	return 0;
}

int presence_set(struct presence *p, struct store_replica *rows, size_t n, int64_t now,
                 const char *my_owner, int64_t live_ms, int64_t settle_ms)
{
	struct presence_rep *reps = calloc(n ? n : 1, sizeof *reps);

	presence_free(p);
	if (!reps) {
		store_free_replicas(rows, n);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		struct presence_rep *r = &reps[i];

		r->row = rows[i];
		presence_name_of(r->row.owner, r->name, sizeof r->name);
		r->live = now - r->row.heartbeat < live_ms;
		r->settled = r->live && !r->row.draining && now - r->row.started_at >= settle_ms;
		if (r->row.jobs && split_jobs(r) < 0) {
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
	return 0;
}

int presence_defines(const struct presence *p, size_t i, const char *job)
{
	const struct presence_rep *r = &p->reps[i];

	if (!r->row.jobs)
		return 1;
	return bsearch(&job, r->jobs, r->njobs, sizeof *r->jobs, cmp_str) != NULL;
}

static int prefer_skip(const struct presence *p, const char *job, int skip, int *settled);

int presence_prefer(const struct presence *p, const char *job, int *settled)
{
	return prefer_skip(p, job, -1, settled);
}

int presence_runner_up(const struct presence *p, const char *job, int first)
{
	int settled;

	return first < 0 ? -1 : prefer_skip(p, job, first, &settled);
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
};

static int cmp_named(const void *a, const void *b)
{
	return strcmp(((const struct named *)a)->name, ((const struct named *)b)->name);
}

int presence_jobs(const char *const *names, const char *const *digests, size_t n,
                  char hash[STORE_HASH_MAX + 1], char **text)
{
	struct named *v = malloc((n ? n : 1) * sizeof *v);
	size_t len = 1, at = 0;
	uint64_t h = FNV_OFFSET;
	char *t;

	if (!v)
		return -1;
	for (size_t i = 0; i < n; i++) {
		v[i] = (struct named){ names[i], digests && digests[i] ? digests[i] : "" };
		len += strlen(names[i]) + 1;
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
		t[at++] = '\n';
		h = fnv(h, v[i].name);
		h = (h ^ 0xff) * FNV_PRIME;
		h = fnv(h, v[i].digest);
		h = (h ^ 0xfe) * FNV_PRIME;
	}
	t[at] = '\0';
	snprintf(hash, STORE_HASH_MAX + 1, "%016llx", (unsigned long long)mix(h));
	*text = t;
	free(v);
	return 0;
}
