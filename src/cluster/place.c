/* place.c - rendezvous hashing with bounded loads (place.h).
 *
 * place_make does the work that does not depend on which replica is left
 * out (the union of the jobs, who defines what, every score, the order of
 * the walk); each map is then one walk, O(jobs x replicas) comparisons and
 * no hashing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "cluster/place.h"

/* The slack of a kind of n replicas, in percent of its mean weight per
 * replica (rounded down): a replica takes up to the mean rounded up plus
 * it, and keeps room for the others down to the mean rounded down less
 * it.  The jobs a leave or a join moves beyond the replica's own share are
 * the overflow cascading down the walk, the longer the more replicas there
 * are: slack shortens it from about 10 replicas on, but in a small cluster
 * it only makes the shares uneven (and a job of slack in a 2-replica map
 * can even add a move).  So none for 2 replicas, n - 2 % for n, 8% from 10
 * on (within the 10% the shares may differ from the mean).
 * bench/place_bench.c varies it; bench/spread_results.txt has the figures. */
static long place_slack_pct(long n)
{
	return n <= 2 ? 0 : n - 2 > 8 ? 8 : n - 2;
}

#ifndef PLACE_SLACK_PCT                 /* (bench/place_bench.c varies it) */
#define PLACE_SLACK_PCT(n) place_slack_pct(n)
#endif

/* A map's entry: the replica's index times 2, plus 1 when it came from the
 * settled replicas; PLACE_NONE when the job has no candidate. */
#define PLACE_NONE (-1)

struct place {
	size_t n, njobs;
	char *blob;                     /* the jobs' names, then the owners */
	struct place_job *jobs;         /* sorted by name */
	const char **owner;             /* n, in blob: ties */
	unsigned char *live, *settled;  /* n */
	unsigned char *def;             /* njobs x n: replica i defines job j */
	uint64_t *score;                /* njobs x n: its score, where it does */
	size_t *order;                  /* the walk */
	int **map;                      /* n + 1: [0] with every replica, [1 + i]
	                                 * without replica i; NULL until made */
};

uint64_t place_score(const char *job, const char *name)
{
	return hash_mix(hash_fnv(hash_sep(hash_fnv(HASH_FNV_OFFSET, job), 0xff), name));
}

static int cmp_job(const void *a, const void *b)
{
	return strcmp(((const struct place_job *)a)->name, ((const struct place_job *)b)->name);
}

/* The order of the walk: heavier first, so that the light jobs fill the
 * gaps the heavy ones leave; then by a hash of the name, which no replica
 * and no naming scheme correlates with the scores; then by name. */
struct walk_key {
	int weight;
	uint64_t h;
	const char *name;
	size_t j;
};

static int cmp_walk(const void *a, const void *b)
{
	const struct walk_key *x = a, *y = b;

	if (x->weight != y->weight)
		return x->weight > y->weight ? -1 : 1;
	if (x->h != y->h)
		return x->h < y->h ? -1 : 1;
	return strcmp(x->name, y->name);
}

void place_free(struct place *pl)
{
	if (!pl)
		return;
	if (pl->map)
		for (size_t i = 0; i <= pl->n; i++)
			free(pl->map[i]);
	free(pl->map);
	free(pl->blob);
	free(pl->jobs);
	free(pl->owner);
	free(pl->live);
	free(pl->settled);
	free(pl->def);
	free(pl->score);
	free(pl->order);
	free(pl);
}

/* Whether rep i's jobs count in the union: it is live, and no live rep
 * before it has the same list (the replicas whose jobs are mine share one). */
static int adds_list(const struct place_rep *reps, size_t i)
{
	if (!reps[i].live)
		return 0;
	for (size_t s = 0; s < i; s++)
		if (reps[s].live && reps[s].jobs == reps[i].jobs)
			return 0;
	return 1;
}

/* The union of the live reps' jobs into pl->jobs (names in pl->blob, the
 * owners after them). */
static int gather(struct place *pl, const struct place_rep *reps, size_t n)
{
	struct place_job *all;
	size_t total = 0, k = 0, bytes = 0, at = 0;

	for (size_t i = 0; i < n; i++) {
		bytes += strlen(reps[i].owner) + 1;
		if (adds_list(reps, i))
			total += reps[i].njobs;
	}
	if (!(all = malloc((total ? total : 1) * sizeof *all)))
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (!adds_list(reps, i))
			continue;
		for (size_t t = 0; t < reps[i].njobs; t++)
			all[k++] = reps[i].jobs[t];
	}
	qsort(all, k, sizeof *all, cmp_job);
	pl->njobs = 0;
	for (size_t t = 0; t < k; t++) {
		struct place_job *last = pl->njobs ? &all[pl->njobs - 1] : NULL;

		if (last && strcmp(last->name, all[t].name) == 0) {
			if (all[t].weight > last->weight)
				last->weight = all[t].weight;
			continue;
		}
		all[pl->njobs++] = all[t];
		bytes += strlen(all[t].name) + 1;
	}
	if (!(pl->blob = malloc(bytes ? bytes : 1))) {
		free(all);
		return -1;
	}
	for (size_t j = 0; j < pl->njobs; j++) {
		size_t len = strlen(all[j].name) + 1;

		memcpy(pl->blob + at, all[j].name, len);
		all[j].name = pl->blob + at;
		at += len;
	}
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(reps[i].owner) + 1;

		memcpy(pl->blob + at, reps[i].owner, len);
		pl->owner[i] = pl->blob + at;
		at += len;
	}
	pl->jobs = all;
	return 0;
}

/* Who defines what, and the scores: each live rep's sorted list walked
 * along the sorted union. */
static void defs(struct place *pl, const struct place_rep *reps)
{
	size_t n = pl->n;

	for (size_t i = 0; i < n; i++) {
		size_t j = 0;

		if (!reps[i].live)
			continue;
		for (size_t t = 0; t < reps[i].njobs; t++) {
			int c = 1;

			while (j < pl->njobs && (c = strcmp(pl->jobs[j].name, reps[i].jobs[t].name)) < 0)
				j++;
			if (j == pl->njobs)
				break;
			if (c == 0)
				pl->def[j * n + i] = 1;
		}
	}
	for (size_t j = 0; j < pl->njobs; j++) {
		uint64_t h = hash_sep(hash_fnv(HASH_FNV_OFFSET, pl->jobs[j].name), 0xff);

		for (size_t i = 0; i < n; i++)
			if (pl->def[j * n + i])
				pl->score[j * n + i] = hash_mix(hash_fnv(h, reps[i].name));
	}
}

static int sort_walk(struct place *pl)
{
	struct walk_key *k = malloc((pl->njobs ? pl->njobs : 1) * sizeof *k);

	if (!k)
		return -1;
	for (size_t j = 0; j < pl->njobs; j++)
		k[j] = (struct walk_key){ pl->jobs[j].weight,
		                          hash_mix(hash_fnv(HASH_FNV_OFFSET, pl->jobs[j].name)),
		                          pl->jobs[j].name, j };
	qsort(k, pl->njobs, sizeof *k, cmp_walk);
	for (size_t j = 0; j < pl->njobs; j++)
		pl->order[j] = k[j].j;
	free(k);
	return 0;
}

struct place *place_make(const struct place_rep *reps, size_t n)
{
	struct place *pl = calloc(1, sizeof *pl);
	size_t cells;

	if (!pl)
		return NULL;
	pl->n = n;
	if (!(pl->owner = calloc(n ? n : 1, sizeof *pl->owner)) ||
	    !(pl->live = calloc(n ? n : 1, 1)) || !(pl->settled = calloc(n ? n : 1, 1)) ||
	    !(pl->map = calloc(n + 1, sizeof *pl->map)) || gather(pl, reps, n) < 0)
		goto fail;
	for (size_t i = 0; i < n; i++) {
		pl->live[i] = !!reps[i].live;
		pl->settled[i] = reps[i].live && reps[i].settled;
	}
	cells = pl->njobs * n;
	if (!(pl->def = calloc(cells ? cells : 1, 1)) ||
	    !(pl->score = calloc(cells ? cells : 1, sizeof *pl->score)) ||
	    !(pl->order = malloc((pl->njobs ? pl->njobs : 1) * sizeof *pl->order)))
		goto fail;
	defs(pl, reps);
	if (sort_walk(pl) < 0)
		goto fail;
	return pl;
fail:
	place_free(pl);
	return NULL;
}

size_t place_jobs(const struct place *pl, const struct place_job **jobs)
{
	*jobs = pl->jobs;
	return pl->njobs;
}

int place_find(const struct place *pl, const char *job)
{
	struct place_job key = { job, 1 }, *hit;

	hit = bsearch(&key, pl->jobs, pl->njobs, sizeof key, cmp_job);
	return hit ? (int)(hit - pl->jobs) : -1;
}

/* Whether replica i may take job j, of kind c, in the map without x. */
static int cand(const struct place *pl, size_t j, size_t i, int x, int c)
{
	return (int)i != x && pl->def[j * pl->n + i] && (c ? pl->settled[i] : pl->live[i]);
}

/* Job j's kind of candidates without x: 1 settled ones, 0 live ones only,
 * -1 none. */
static int kind(const struct place *pl, size_t j, int x)
{
	int c = -1;

	for (size_t i = 0; i < pl->n; i++)
		if ((int)i != x && pl->def[j * pl->n + i] && pl->live[i]) {
			if (pl->settled[i])
				return 1;
			c = 0;
		}
	return c;
}

/* i before best by score, then by the smaller owner. */
static int higher(const struct place *pl, size_t j, size_t i, int best)
{
	uint64_t a, b;

	if (best < 0)
		return 1;
	a = pl->score[j * pl->n + i];
	b = pl->score[j * pl->n + (size_t)best];
	return a != b ? a > b : strcmp(pl->owner[i], pl->owner[best]) < 0;
}

/* How much of a replica's floor (least) a job of weight w placed there
 * fills. */
static long fills(long least, long load, long w)
{
	long gap = least - load;

	return gap <= 0 ? 0 : gap < w ? gap : w;
}

/* One map: the walk, without replica x (-1: with every replica). */
static int walk(const struct place *pl, int x, int *map)
{
	size_t n = pl->n;
	long *load = calloc(n ? 3 * n : 1, sizeof *load), *most, *least;
	long sum[2] = { 0, 0 }, reps[2] = { 0, 0 }, room[2] = { 0, 0 }, low[2] = { 0, 0 };
	long need[2] = { 0, 0 }, left[2] = { 0, 0 };

	if (!load)
		return -1;
	most = load + n;                /* the weight it defines: its load at most */
	least = most + n;               /* its floor */
	/* Each kind's mean, from its jobs' weights and its replicas. */
	for (size_t j = 0; j < pl->njobs; j++) {
		int c = kind(pl, j, x);

		map[j] = c;             /* for now: the kind, or PLACE_NONE */
		if (c < 0)
			continue;
		sum[c] += pl->jobs[j].weight;
		for (size_t i = 0; i < n; i++)
			if (cand(pl, j, i, x, c))
				most[i] += pl->jobs[j].weight;
	}
	for (size_t i = 0; i < n; i++)
		reps[pl->settled[i]] += most[i] > 0;
	for (int c = 0; c < 2; c++) {
		long slack;

		if (!reps[c])
			continue;
		slack = sum[c] * PLACE_SLACK_PCT(reps[c]) / (100 * reps[c]);
		room[c] = (sum[c] + reps[c] - 1) / reps[c] + slack;
		low[c] = sum[c] / reps[c] - slack;
		left[c] = sum[c];
	}
	/* A replica's floor: no more than it could ever get. */
	for (size_t i = 0; i < n; i++) {
		int c = pl->settled[i];

		least[i] = most[i] < low[c] ? most[i] : low[c];
		need[c] += least[i] > 0 ? least[i] : 0;
	}
	for (size_t k = 0; k < pl->njobs; k++) {
		size_t j = pl->order[k];
		int c = map[j], best = -1;
		long w = pl->jobs[j].weight;

		if (c < 0)
			continue;
		/* The highest score with room that leaves the floors reachable. */
		for (size_t i = 0; i < n; i++)
			if (cand(pl, j, i, x, c) && load[i] + w <= room[c] &&
			    need[c] - fills(least[i], load[i], w) <= left[c] - w && higher(pl, j, i, best))
				best = (int)i;
		/* Fits nowhere: the least loaded. */
		if (best < 0)
			for (size_t i = 0; i < n; i++)
				if (cand(pl, j, i, x, c) &&
				    (best < 0 || load[i] < load[best] ||
				     (load[i] == load[best] && higher(pl, j, i, best))))
					best = (int)i;
		need[c] -= fills(least[best], load[best], w);
		left[c] -= w;
		load[best] += w;
		map[j] = best * 2 + c;
	}
	free(load);
	return 0;
}

int place_at(struct place *pl, int j, int without, int *settled)
{
	int m = without >= 0 && (size_t)without < pl->n ? without + 1 : 0, at;

	*settled = 0;
	if (j < 0 || (size_t)j >= pl->njobs)
		return -1;
	if (!pl->map[m]) {
		if (!(pl->map[m] = malloc((pl->njobs ? pl->njobs : 1) * sizeof **pl->map)))
			return -1;
		if (walk(pl, m - 1, pl->map[m]) < 0) {
			free(pl->map[m]);
			pl->map[m] = NULL;
			return -1;
		}
	}
	at = pl->map[m][j];
	if (at == PLACE_NONE)
		return -1;
	*settled = at & 1;
	return at >> 1;
}
