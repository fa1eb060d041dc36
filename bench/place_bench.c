/* bench/place_bench.c - placement (src/cluster/place.c) from made-up replicas and
 * job names alone: the shares, the jobs a leave or a join moves, and what a
 * map costs, for the slack and walk orders one could choose.  It includes
 * place.c itself, with the slack a variable and the walk's order set here,
 * so what it measures is the code leash runs.
 *
 *   place_bench [SETS]     (default 100 name sets a size)
 *
 * Names: "any" are random names of leash's alphabet, 1 to 40 bytes;
 * "plain" are job-0001, job-0002, ...  A leave is each replica's in turn
 * (the map without it, which is also runner_up's map); a join is one
 * replica more than n; both count jobs whose replica changed, as a multiple
 * of the ideal (k/n for a leave, k/(n+1) for a join).  A heavy set has
 * every 20th job at weight 5; "flat hash" walks it by the hash alone, not
 * heavier first. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* The slack: a fixed percentage, or (bench_fixed < 0) place.c's own rule. */
static long bench_fixed = -1;
static long place_slack_pct(long n);
static long bench_slack(long n)
{
	return bench_fixed >= 0 ? bench_fixed : place_slack_pct(n);
}
#define PLACE_SLACK_PCT(n) bench_slack(n)
#include "../src/cluster/place.c"

enum order { ORDER_HASH, ORDER_NAME, ORDER_PREFERENCE, ORDER_FLAT };
static const char *const order_names[] = { "hash", "name", "preference", "flat hash" };

static uint64_t rng;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* k distinct job names into out (malloc'd strings). */
static void make_names(char **out, size_t k, int plain, unsigned seed)
{
	static const char alpha[] = "abcdefghijklmnopqrstuvwxyz0123456789._-";

	rng = 0x9e3779b97f4a7c15ULL ^ ((uint64_t)seed * 0x100000001b3ULL);
	for (size_t j = 0; j < k; j++) {
		char buf[48];
		size_t len;

		if (plain) {
			snprintf(buf, sizeof buf, "job-%04zu", j + 1);
		} else {
			len = 1 + next_rand() % 40;
			for (size_t c = 0; c < len; c++)
				buf[c] = alpha[next_rand() % (c ? 39 : 36)];
			buf[len] = '\0';
			/* a repeat gets a suffix: distinct names */
			for (size_t i = 0; i < j; i++)
				if (strcmp(out[i], buf) == 0) {
					snprintf(buf + len, sizeof buf - len, "~%zu", j);
					break;
				}
		}
		out[j] = strdup(buf);
	}
}

static const struct place_job *sorted_jobs;
static int cmp_name_order(const void *a, const void *b)
{
	const struct place_job *x = &sorted_jobs[*(const size_t *)a], *y = &sorted_jobs[*(const size_t *)b];

	if (x->weight != y->weight)
		return x->weight > y->weight ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* The hash order without heavier first. */
static int cmp_flat_order(const void *a, const void *b)
{
	const struct place_job *x = &sorted_jobs[*(const size_t *)a], *y = &sorted_jobs[*(const size_t *)b];
	uint64_t hx = hash_mix(hash_fnv(HASH_FNV_OFFSET, x->name));
	uint64_t hy = hash_mix(hash_fnv(HASH_FNV_OFFSET, y->name));

	return hx != hy ? (hx < hy ? -1 : 1) : strcmp(x->name, y->name);
}

static uint64_t *top_score;
static int cmp_pref_order(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	if (sorted_jobs[x].weight != sorted_jobs[y].weight)
		return sorted_jobs[x].weight > sorted_jobs[y].weight ? -1 : 1;
	return top_score[x] != top_score[y] ? (top_score[x] > top_score[y] ? -1 : 1) : 0;
}

/* The walk's order, when it is not place.c's own. */
static void reorder(struct place *pl, enum order o)
{
	if (o == ORDER_HASH)
		return;
	sorted_jobs = pl->jobs;
	if (o == ORDER_PREFERENCE) {
		top_score = calloc(pl->njobs, sizeof *top_score);
		for (size_t j = 0; j < pl->njobs; j++)
			for (size_t i = 0; i < pl->n; i++)
				if (pl->score[j * pl->n + i] > top_score[j])
					top_score[j] = pl->score[j * pl->n + i];
	}
	qsort(pl->order, pl->njobs, sizeof *pl->order, o == ORDER_NAME ? cmp_name_order
	      : o == ORDER_FLAT ? cmp_flat_order : cmp_pref_order);
	free(top_score);
	top_score = NULL;
}

/* n replicas r1..rn (n + 1 with extra), every one defining every job. */
static struct place *make(char **names, const int *weights, size_t k, size_t n, enum order o)
{
	static char rname[64][16], rowner[64][24];
	struct place_job *jobs = malloc(k * sizeof *jobs);
	struct place_rep reps[64];
	struct place *pl;

	for (size_t j = 0; j < k; j++)
		jobs[j] = (struct place_job){ names[j], weights ? weights[j] : 1 };
	qsort(jobs, k, sizeof *jobs, cmp_job);
	for (size_t i = 0; i < n; i++) {
		snprintf(rname[i], sizeof rname[i], "r%zu", i + 1);
		snprintf(rowner[i], sizeof rowner[i], "r%zu:%zu:00", i + 1, i + 100);
		reps[i] = (struct place_rep){ rname[i], rowner[i], jobs, k, 1, 1 };
	}
	pl = place_make(reps, n);
	free(jobs);
	reorder(pl, o);
	return pl;
}

/* Replica name (r1, r2, ...) index of job j in map m. */
static int at(struct place *pl, size_t j, int without)
{
	int settled;

	return place_at(pl, (int)j, without, &settled);
}

struct figures {
	double share, leave_worst, leave_sum, join_worst, join_sum;
	long leaves, joins, leave_over, join_over;
};

static void measure(size_t n, size_t k, int plain, int heavy, enum order o, int sets,
                    struct figures *f)
{
	char **names = malloc(k * sizeof *names);
	int *w = malloc(k * sizeof *w);

	memset(f, 0, sizeof *f);
	for (int s = 1; s <= sets; s++) {
		struct place *a, *b;
		long total = 0, *load = calloc(n + 1, sizeof *load);

		make_names(names, k, plain, (unsigned)s);
		for (size_t j = 0; j < k; j++) {
			w[j] = heavy && j % 20 == 0 ? 5 : 1;
			total += w[j];
		}
		a = make(names, heavy ? w : NULL, k, n, o);
		b = make(names, heavy ? w : NULL, k, n + 1, o);
		for (size_t j = 0; j < k; j++)
			load[at(a, j, -1)] += a->jobs[j].weight;
		for (size_t i = 0; i < n; i++) {
			double d = fabs((double)load[i] - (double)total / n) / ((double)total / n);
			if (d > f->share)
				f->share = d;
		}
		for (size_t x = 0; x < n; x++) {
			long moved = 0;
			double r;

			for (size_t j = 0; j < k; j++)
				moved += at(a, j, -1) != at(a, j, (int)x);
			r = moved / ((double)k / n);
			f->leave_sum += r;
			f->leaves++;
			f->leave_over += r > 1.5;
			if (r > f->leave_worst)
				f->leave_worst = r;
		}
		{
			long moved = 0;
			double r;

			for (size_t j = 0; j < k; j++)
				moved += at(a, j, -1) != at(b, j, -1);
			r = moved / ((double)k / (n + 1));
			f->join_sum += r;
			f->joins++;
			f->join_over += r > 1.5;
			if (r > f->join_worst)
				f->join_worst = r;
		}
		place_free(a);
		place_free(b);
		free(load);
		for (size_t j = 0; j < k; j++)
			free(names[j]);
	}
	free(names);
	free(w);
}

/* CPU seconds: what a map costs the replica, whatever else the machine runs. */
static double secs(void)
{
	struct timespec t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* What a map costs for n x k, in CPU time: place_make (union, scores,
 * order), the first walk, and one walk without a replica (runner_up's). */
static void cost(size_t n, size_t k)
{
	char **names = malloc(k * sizeof *names);
	double t0, make_s = 0, walk_s = 0, without_s = 0;
	int rounds = 50;

	make_names(names, k, 0, 1);
	for (int r = 0; r < rounds; r++) {
		struct place *pl;

		t0 = secs();
		pl = make(names, NULL, k, n, ORDER_HASH);
		make_s += secs() - t0;
		t0 = secs();
		at(pl, 0, -1);
		walk_s += secs() - t0;
		t0 = secs();
		at(pl, 0, 0);
		without_s += secs() - t0;
		place_free(pl);
	}
	printf("map cost (CPU) %2zu x %5zu: make %.3f ms, first walk %.3f ms, a walk without one %.3f ms;"
	       " all %zu runner-up maps %.2f ms\n", n, k, make_s * 1e3 / rounds, walk_s * 1e3 / rounds,
	       without_s * 1e3 / rounds, n, (make_s + walk_s + n * without_s) * 1e3 / rounds);
	for (size_t j = 0; j < k; j++)
		free(names[j]);
	free(names);
}

/* A row of figures; slack -1 is place.c's rule, NO_BOUND pure rendezvous. */
#define NO_BOUND 100000
static void row(size_t n, size_t k, int plain, int heavy, enum order o, long slack, int sets)
{
	struct figures f;
	char label[24];

	bench_fixed = slack;
	if (slack == NO_BOUND)
		snprintf(label, sizeof label, "none");
	else if (slack < 0)
		snprintf(label, sizeof label, "leash");
	else
		snprintf(label, sizeof label, "%ld%%", slack);
	measure(n, k, plain, heavy, o, sets, &f);
	printf("%2zu x %5zu %-5s %-6s %-10s %6s | %5.1f%% | %5.2f %5.2f %4ld | %5.2f %5.2f %4ld\n",
	       n, k, plain ? "plain" : "any", heavy ? "1/20x5" : "all 1", order_names[o], label,
	       100 * f.share, f.leave_worst, f.leave_sum / f.leaves, f.leave_over, f.join_worst,
	       f.join_sum / f.joins, f.join_over);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	int sets = argc > 1 ? atoi(argv[1]) : 100;
	static const size_t sizes[][2] = { { 3, 30 }, { 10, 1000 }, { 3, 1000 }, { 5, 100 },
	                                   { 6, 60 }, { 20, 1000 } };
	static const long slacks[] = { NO_BOUND, 0, 5, 8, 10, -1 };

	printf("placement from the map alone (bench/place_bench.c), %d name sets a row (half for"
	       " 10 x 1000 and up)\n", sets);
	printf("slack: none = pure rendezvous, N%% = a fixed slack, leash = place.c's (n - 2%%, at"
	       " most 8%%)\n");
	printf("share: the largest distance from the mean; leave: each replica's, moved / (k/n);"
	       " join: one more, moved / (k/(n+1))\n");
	printf("%-10s %-5s %-6s %-10s %6s | %6s | %-22s | %-22s\n", "n x k", "names", "weight",
	       "order", "slack", "share", "leave: worst mean >1.5", "join n+1: worst mean >1.5");
	for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
		size_t n = sizes[s][0], k = sizes[s][1];
		int rs = k >= 1000 && n >= 10 ? sets / 2 : sets;

		for (size_t l = 0; l < sizeof slacks / sizeof slacks[0]; l++)
			row(n, k, 0, 0, ORDER_HASH, slacks[l], rs);
		row(n, k, 0, 0, ORDER_NAME, -1, rs);
		row(n, k, 0, 0, ORDER_PREFERENCE, -1, rs);
		row(n, k, 1, 0, ORDER_HASH, -1, rs);
		row(n, k, 0, 1, ORDER_HASH, -1, rs);
		row(n, k, 0, 1, ORDER_NAME, -1, rs);
		row(n, k, 0, 1, ORDER_FLAT, -1, rs);
	}
	cost(3, 30);
	cost(10, 1000);
	cost(20, 5000);
	return 0;
}
