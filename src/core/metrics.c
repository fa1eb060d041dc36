/* metrics.c - the Prometheus exposition of what the loop noted.
 *
 * One writer (the process that loaded us), any number of readers in forked
 * children: counters are single 64-bit words stored with relaxed atomics, and
 * a slot's seq is odd while the slot changes hands (a job added or removed),
 * so a reader copies a slot and keeps the copy only if seq stayed even and
 * the same (a seqlock).  A histogram's count is the sum of its buckets, so
 * the +Inf bucket and _count always agree in one render.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "core/metrics.h"


#define BUCKETS_MAX 15

/* A job's name up to 43 bytes is in its slot, a longer one beside it. */
#define METRICS_NAME_INLINE 44

/* A histogram is HIST_WORDS(n) words: its n buckets (per bucket, not
 * cumulative), then +Inf, then the sum in microseconds.  Each is sized to
 * its bounds: a job's two are in every job's slot. */
#define HIST_WORDS(n) ((n) + 2)

/* A histogram's upper bounds as the le label prints them (seconds). */
struct bounds {
	const char *const *le;
	int n;
	int64_t us[BUCKETS_MAX];                /* the same, in microseconds */
};

#define NELEMS(a) (sizeof (a) / sizeof (a)[0])
static const char *const late_le[] = { "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1",
	"0.25", "0.5", "1", "2.5", "5", "10" };
static const char *const dur_le[] = { "0.01", "0.1", "0.5", "1", "5", "10", "30", "60", "300",
	"900", "3600", "14400" };
static const char *const store_le[] = { "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025",
	"0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10" };
static const char *const margin_le[] = { "0.1", "0.25", "0.5", "1", "2", "3", "5", "10", "15", "20",
	"30", "60", "120" };
#define LATE_N NELEMS(late_le)
#define DUR_N NELEMS(dur_le)
#define STORE_N NELEMS(store_le)
#define MARGIN_N NELEMS(margin_le)
_Static_assert(STORE_N <= BUCKETS_MAX && LATE_N <= BUCKETS_MAX && DUR_N <= BUCKETS_MAX &&
               MARGIN_N <= BUCKETS_MAX, "BUCKETS_MAX");

static struct bounds late_b = { late_le, LATE_N, { 0 } };
static struct bounds dur_b = { dur_le, DUR_N, { 0 } };
static struct bounds store_b = { store_le, STORE_N, { 0 } };
static struct bounds margin_b = { margin_le, MARGIN_N, { 0 } };

/* The ledger's outcomes of a run that ran, and of a fire that did not. */
static const char *const outcomes[] = { "ok", "failed", "timeout", "lost", "killed", "manual",
                                        "handed-off", "stopped" };
#define NOUTCOMES (sizeof outcomes / sizeof outcomes[0])
static const char *const skip_outcomes[] = { "skipped-overlap", "skipped-paused", "missed" };
static const char *const reasons[] = { "overlap", "paused", "missed" };
#define NREASONS (sizeof reasons / sizeof reasons[0])

#define OP_LABEL(id, label) label,
static const char *const op_labels[] = { METRICS_OPS(OP_LABEL) };
#undef OP_LABEL

struct metrics_job {
	uint32_t seq;                   /* odd while the slot changes hands */
	int32_t next_free;              /* the free list (writer only); -1 ends it */
	int32_t live;
	int32_t elected;                /* it has lease series */
	int32_t long_name;              /* the name is in long_names[slot], not here */
	char name[METRICS_NAME_INLINE];
	uint64_t runs[NOUTCOMES];
	uint64_t skips[NREASONS];
	uint64_t held, gained, lost;    /* the lease (0/1), handovers */
	int64_t last_ok_ms;             /* wall clock; 0: no success yet */
	uint64_t dur[HIST_WORDS(DUR_N)], late[HIST_WORDS(LATE_N)];
};

struct arena {
	pid_t owner;
	int64_t start_ms;               /* wall clock at load: the process's start */
	int32_t free_head;              /* writer only */
	int32_t hi;                     /* slots [0, hi) were ever used */
	uint64_t refused;               /* jobs not tracked: every slot was taken */
	uint64_t forks[2];              /* runs' processes forked by leash, by the spawner */
	uint64_t broken;                /* job files the last load of jobs/ found broken */
	uint64_t store[METRICS_NOPS][HIST_WORDS(STORE_N)];
	uint64_t store_err[METRICS_NOPS];
	uint64_t margin[HIST_WORDS(MARGIN_N)];
	struct metrics_job jobs[METRICS_JOBS_MAX];
	/* A name too long for its slot: a page here is taken only by the
	 * slots that have one, so most jobs' slots stay small. */
	char long_names[METRICS_JOBS_MAX][METRICS_NAME_MAX + 1];
};

/* This process's view of the arena. */
static struct {
	struct arena *a;                /* the mapping; NULL before metrics_init */
	int fd;                         /* the memfd behind it */
	int writer;                     /* 0 in a forked child: it only reads */
} mx = { .fd = -1 };

static void forked(void)
{
	mx.writer = 0;
}

static void init_bounds(struct bounds *b)
{
	for (int i = 0; i < b->n; i++)
		b->us[i] = (int64_t)(strtod(b->le[i], NULL) * 1e6 + 0.5);
}

/* At load, before main (or when leash.core is opened): the mapping must
 * exist before the parent forks its first reader. */
__attribute__((constructor)) static void metrics_init(void)
{
	struct timespec ts;
	int fd = memfd_create("leash-metrics", MFD_CLOEXEC);
	void *p = MAP_FAILED;

	/* A memfd, so that an exec'd reader can map it too; its pages are
	 * taken as they are touched, as an anonymous mapping's. */
	if (fd >= 0 && ftruncate(fd, (off_t)sizeof *mx.a) == 0)
		p = mmap(NULL, sizeof *mx.a, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
	if (p == MAP_FAILED && fd >= 0) {
		close(fd);
		fd = -1;
	}
	if (p == MAP_FAILED)
		p = mmap(NULL, sizeof *mx.a, PROT_READ | PROT_WRITE,
		         MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	mx.fd = fd;

	init_bounds(&late_b);
	init_bounds(&dur_b);
	init_bounds(&store_b);
	init_bounds(&margin_b);
	if (p == MAP_FAILED)
		return;                 /* no metrics; every note does nothing */
	mx.a = p;
	clock_gettime(CLOCK_REALTIME, &ts);
	mx.a->owner = getpid();
	mx.a->start_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	mx.a->free_head = -1;
	mx.writer = 1;
	pthread_atfork(NULL, NULL, forked);
}

int metrics_fd(void)
{
	return mx.fd;
}

int metrics_attach(int fd)
{
	void *p = mmap(NULL, sizeof *mx.a, PROT_READ, MAP_SHARED | MAP_NORESERVE, fd, 0);

	if (p == MAP_FAILED)
		return -1;
	if (mx.a)
		munmap(mx.a, sizeof *mx.a);
	if (mx.fd >= 0)
		close(mx.fd);
	mx.a = p;
	mx.fd = -1;
	mx.writer = 0;
	return 0;
}

/* ---- writing ---- */

static void add(uint64_t *p, uint64_t v)
{
	__atomic_store_n(p, *p + v, __ATOMIC_RELAXED);
}

static uint64_t ld(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static void observe(uint64_t *h, const struct bounds *b, int64_t us)
{
	int i = 0;

	if (us < 0)
		us = 0;
	while (i < b->n && us > b->us[i])
		i++;
	add(&h[i], 1);
	add(&h[b->n + 1], (uint64_t)us);
}

static int index_of(const char *const *list, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(list[i], s) == 0)
			return (int)i;
	return -1;
}

struct metrics_job *metrics_job_add(const char *name)
{
	struct metrics_job *j;
	size_t len;
	int32_t i;

	if (!mx.a || !mx.writer)
		return NULL;
	if (mx.a->free_head >= 0) {
		i = mx.a->free_head;
		mx.a->free_head = mx.a->jobs[i].next_free;
	} else if (mx.a->hi < METRICS_JOBS_MAX) {
		i = mx.a->hi;
	} else {
		add(&mx.a->refused, 1);
		return NULL;
	}
	j = &mx.a->jobs[i];
	__atomic_store_n(&j->seq, j->seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memset((char *)j + sizeof j->seq, 0, sizeof *j - sizeof j->seq);
	if ((len = strlen(name)) < sizeof j->name) {
		memcpy(j->name, name, len + 1);
	} else {
		snprintf(mx.a->long_names[i], sizeof mx.a->long_names[i], "%s", name);
		j->long_name = 1;
	}
	j->live = 1;
	__atomic_store_n(&j->seq, j->seq + 1, __ATOMIC_RELEASE);
	if (i == mx.a->hi)
		__atomic_store_n(&mx.a->hi, i + 1, __ATOMIC_RELEASE);
	return j;
}

void metrics_job_remove(struct metrics_job *j)
{
	if (!j || !mx.writer)
		return;
	__atomic_store_n(&j->seq, j->seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	j->live = 0;
	__atomic_store_n(&j->seq, j->seq + 1, __ATOMIC_RELEASE);
	j->next_free = mx.a->free_head;
	mx.a->free_head = (int32_t)(j - mx.a->jobs);
}

void metrics_note_run(struct metrics_job *j, const char *outcome, int64_t ran_ms,
                      int64_t wall_ms)
{
	int k;

	if (!j || !mx.writer || (k = index_of(outcomes, NOUTCOMES, outcome)) < 0)
		return;
	add(&j->runs[k], 1);
	observe(j->dur, &dur_b, ran_ms * 1000);
	if (strcmp(outcome, "ok") == 0 || strcmp(outcome, "manual") == 0)
		__atomic_store_n(&j->last_ok_ms, wall_ms, __ATOMIC_RELAXED);
}

void metrics_note_fire(struct metrics_job *j, int64_t scheduled_ms, int catchup,
                       int64_t started_ms)
{
	if (!j || !mx.writer || scheduled_ms <= 0 || catchup)
		return;
	observe(j->late, &late_b, (started_ms - scheduled_ms) * 1000);
}

void metrics_note_skip(struct metrics_job *j, const char *outcome)
{
	int k;

	if (j && mx.writer && (k = index_of(skip_outcomes, NREASONS, outcome)) >= 0)
		add(&j->skips[k], 1);
}

void metrics_note_lease(struct metrics_job *j, int gained)
{
	if (!j || !mx.writer)
		return;
	add(gained ? &j->gained : &j->lost, 1);
	__atomic_store_n(&j->held, gained ? 1 : 0, __ATOMIC_RELAXED);
}

void metrics_job_elected(struct metrics_job *j, int elected)
{
	if (j && mx.writer)
		__atomic_store_n(&j->elected, elected ? 1 : 0, __ATOMIC_RELAXED);
}

void metrics_note_fork(int by_spawner)
{
	if (mx.a && mx.writer)
		add(&mx.a->forks[by_spawner ? 1 : 0], 1);
}

void metrics_note_broken(size_t n)
{
	if (mx.a && mx.writer)
		__atomic_store_n(&mx.a->broken, (uint64_t)n, __ATOMIC_RELAXED);
}

void metrics_note_renew(int64_t margin_ms)
{
	if (mx.a && mx.writer)
		observe(mx.a->margin, &margin_b, margin_ms * 1000);
}

int64_t metrics_clock(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int metrics_note_store(enum metrics_op op, int64_t t0, int rc)
{
	if (mx.a && mx.writer && op < METRICS_NOPS) {
		observe(mx.a->store[op], &store_b, (metrics_clock() - t0) / 1000);
		if (rc < 0)
			add(&mx.a->store_err[op], 1);
	}
	return rc;
}

/* ---- rendering ---- */

struct buf {
	char *p;
	size_t n, cap;
	int oom;
};

static int room(struct buf *b, size_t more)
{
	char *p;
	size_t cap;

	if (b->oom)
		return -1;
	if (b->n + more < b->cap)
		return 0;
	for (cap = b->cap ? b->cap : 4096; cap <= b->n + more; cap *= 2)
		;
	if (!(p = realloc(b->p, cap))) {
		b->oom = 1;
		return -1;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

__attribute__((format(printf, 2, 3)))
static void putf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (room(b, 256) < 0)
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= b->cap - b->n) {
		if (room(b, (size_t)n + 1) < 0)
			return;
		va_start(ap, fmt);
		vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
		va_end(ap);
	}
	b->n += (size_t)n;
}

static void family(struct buf *b, const char *name, const char *type, const char *help)
{
	putf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value as the text format wants it: \, " and newline escaped. */
static void escape(char *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"' || *s == '\n') {
			*out++ = '\\';
			*out++ = *s == '\n' ? 'n' : *s;
		} else {
			*out++ = *s;
		}
	}
	*out = '\0';
}

static void put_secs(struct buf *b, uint64_t us)
{
	putf(b, "%llu.%06llu", (unsigned long long)(us / 1000000), (unsigned long long)(us % 1000000));
}

static void put_mem(struct buf *b, const char *s, size_t n)
{
	if (room(b, n) == 0) {
		memcpy(b->p + b->n, s, n);
		b->n += n;
	}
}

static void put_str(struct buf *b, const char *s)
{
	put_mem(b, s, strlen(s));
}

static void put_u64(struct buf *b, uint64_t v)
{
	char d[20];
	int i = sizeof d;

	do
		d[--i] = (char)('0' + v % 10);
	while ((v /= 10) && i > 0);
	put_mem(b, d + i, sizeof d - (size_t)i);
}

/* name_bucket, _sum and _count of h; labels is `job="x"` or "" (none).
 * Without printf: the buckets are most of a render's lines. */
static void put_hist(struct buf *b, const char *name, const char *labels, const uint64_t *h,
                     const struct bounds *bd)
{
	const char *close = *labels ? "}" : "";
	uint64_t cum = 0;

	for (int i = 0; i <= bd->n; i++) {
		cum += ld(&h[i]);
		put_str(b, name);
		put_str(b, "_bucket{");
		put_str(b, labels);
		put_str(b, *labels ? ",le=\"" : "le=\"");
		put_str(b, i < bd->n ? bd->le[i] : "+Inf");
		put_str(b, "\"} ");
		put_u64(b, cum);
		put_mem(b, "\n", 1);
	}
	putf(b, "%s_sum%s%s%s ", name, *labels ? "{" : "", labels, close);
	put_secs(b, ld(&h[bd->n + 1]));
	putf(b, "\n%s_count%s%s%s %llu\n", name, *labels ? "{" : "", labels, close,
	     (unsigned long long)cum);
}

/* A job as one render sees it: a consistent copy and its job label. */
struct snap {
	struct metrics_job j;
	char label[sizeof "job=\"\"" + 2 * METRICS_NAME_MAX];
};

/* Copies slot i and its name into out and name: 0 if the slot changed
 * hands meanwhile (or is changing). */
static int copy_slot(int32_t i, struct metrics_job *out, char name[METRICS_NAME_MAX + 1])
{
	const struct metrics_job *j = &mx.a->jobs[i];
	uint32_t s1 = __atomic_load_n(&j->seq, __ATOMIC_ACQUIRE);

	if (s1 & 1)
		return 0;
	memcpy(out, j, sizeof *j);
	if (out->long_name)
		memcpy(name, mx.a->long_names[i], METRICS_NAME_MAX + 1);
	else
		memcpy(name, out->name, sizeof out->name);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (__atomic_load_n(&j->seq, __ATOMIC_RELAXED) != s1)
		return 0;
	name[out->long_name ? METRICS_NAME_MAX : sizeof out->name - 1] = '\0';
	return 1;
}

/* Copies the live slots; a slot that changes hands meanwhile is tried
 * again a few times, then left out of this render. */
static size_t snapshot(struct snap *out, int32_t hi)
{
	size_t n = 0;
	char name[METRICS_NAME_MAX + 1], esc[2 * METRICS_NAME_MAX + 1];

	for (int32_t i = 0; i < hi; i++) {
		int tries = 0;

		while (tries < 4 && !copy_slot(i, &out[n].j, name))
			tries++;
		if (tries < 4 && out[n].j.live) {
			escape(esc, name);
			snprintf(out[n].label, sizeof out[n].label, "job=\"%s\"", esc);
			n++;
		}
	}
	return n;
}

/* The resident set of the process that notes (the parent, also when a
 * forked server renders), in bytes, or -1. */
static long long rss_bytes(void)
{
	char path[64];
	long long pages = -1, rss = -1;
	long page = sysconf(_SC_PAGESIZE);
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/statm", mx.a ? (int)mx.a->owner : (int)getpid());
	if (!(f = fopen(path, "r")))
		return -1;
	if (fscanf(f, "%lld %lld", &pages, &rss) != 2)
		rss = -1;
	fclose(f);
	return rss < 0 || page <= 0 ? -1 : rss * page;
}

static void render_process(struct buf *b)
{
	long long rss = rss_bytes();

	family(b, "leash_build_info", "gauge", "The leash version serving these metrics.");
	putf(b, "leash_build_info{version=\"%s\"} 1\n", LEASH_VERSION);
	if (rss >= 0) {
		family(b, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
		putf(b, "process_resident_memory_bytes %lld\n", rss);
	}
	if (mx.a) {
		family(b, "process_start_time_seconds", "gauge",
		       "Start time of the process since unix epoch in seconds.");
		putf(b, "process_start_time_seconds %lld.%03lld\n", (long long)(mx.a->start_ms / 1000),
		     (long long)(mx.a->start_ms % 1000));
	}
}

/* A family of one value a job (the uint64_t at off in its record), for the
 * jobs that stand for election. */
static void per_elected(struct buf *b, const struct snap *s, size_t n, const char *name,
                        const char *type, const char *help, size_t off)
{
	family(b, name, type, help);
	for (size_t i = 0; i < n; i++) {
		uint64_t v;

		if (!s[i].j.elected)
			continue;
		memcpy(&v, (const char *)&s[i].j + off, sizeof v);
		putf(b, "%s{%s} %llu\n", name, s[i].label, (unsigned long long)v);
	}
}

static void render_jobs(struct buf *b, const struct snap *s, size_t n)
{
	family(b, "leash_runs_total", "counter", "Runs that ended, by job and outcome.");
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < NOUTCOMES; k++)
			putf(b, "leash_runs_total{%s,outcome=\"%s\"} %llu\n", s[i].label, outcomes[k],
			     (unsigned long long)s[i].j.runs[k]);
	family(b, "leash_run_duration_seconds", "histogram", "How long runs ran, by job.");
	for (size_t i = 0; i < n; i++)
		put_hist(b, "leash_run_duration_seconds", s[i].label, s[i].j.dur, &dur_b);
	family(b, "leash_fire_lateness_seconds", "histogram",
	       "A fire's start minus its scheduled time, by job (ms resolution).");
	for (size_t i = 0; i < n; i++)
		put_hist(b, "leash_fire_lateness_seconds", s[i].label, s[i].j.late, &late_b);
	family(b, "leash_fires_skipped_total", "counter",
	       "Fires that did not run, by job and reason.");
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < NREASONS; k++)
			putf(b, "leash_fires_skipped_total{%s,reason=\"%s\"} %llu\n", s[i].label,
			     reasons[k], (unsigned long long)s[i].j.skips[k]);
	per_elected(b, s, n, "leash_lease_held", "gauge",
	            "Whether this replica holds the job's lease (0/1).", offsetof(struct metrics_job, held));
	per_elected(b, s, n, "leash_lease_gained_total", "counter",
	            "Times this replica took the job's lease.", offsetof(struct metrics_job, gained));
	per_elected(b, s, n, "leash_lease_lost_total", "counter",
	            "Times this replica lost or gave up the job's lease.",
	            offsetof(struct metrics_job, lost));
	family(b, "leash_last_success_timestamp_seconds", "gauge",
	       "When the job's last successful run ended (unix seconds).");
	for (size_t i = 0; i < n; i++)
		if (s[i].j.last_ok_ms)
			putf(b, "leash_last_success_timestamp_seconds{%s} %lld.%03lld\n", s[i].label,
			     (long long)(s[i].j.last_ok_ms / 1000), (long long)(s[i].j.last_ok_ms % 1000));
}

static uint64_t hist_count(const uint64_t *h, const struct bounds *bd)
{
	uint64_t c = 0;

	for (int i = 0; i <= bd->n; i++)
		c += ld(&h[i]);
	return c;
}

static void render_store(struct buf *b)
{
	char label[64];

	family(b, "leash_store_call_duration_seconds", "histogram",
	       "Store calls' latency, by operation (the ones called so far).");
	for (int op = 0; op < METRICS_NOPS; op++)
		if (hist_count(mx.a->store[op], &store_b)) {
			snprintf(label, sizeof label, "op=\"%s\"", op_labels[op]);
			put_hist(b, "leash_store_call_duration_seconds", label, mx.a->store[op], &store_b);
		}
	family(b, "leash_store_errors_total", "counter", "Store calls that failed, by operation.");
	for (int op = 0; op < METRICS_NOPS; op++)
		if (hist_count(mx.a->store[op], &store_b))
			putf(b, "leash_store_errors_total{op=\"%s\"} %llu\n", op_labels[op],
			     (unsigned long long)ld(&mx.a->store_err[op]));
	family(b, "leash_lease_renew_margin_seconds", "histogram",
	       "Time left before the nearest lease deadline when a renew statement succeeded.");
	put_hist(b, "leash_lease_renew_margin_seconds", "", mx.a->margin, &margin_b);
	family(b, "leash_metrics_jobs_refused_total", "counter",
	       "Jobs added while every slot was taken: they have no series.");
	putf(b, "leash_metrics_jobs_refused_total %llu\n", (unsigned long long)ld(&mx.a->refused));
	family(b, "leash_run_forks_total", "counter",
	       "Processes of runs and failure hooks forked, by whom: the spawner, or leash itself "
	       "(when it had no spawner to ask).");
	putf(b, "leash_run_forks_total{by=\"leash\"} %llu\n", (unsigned long long)ld(&mx.a->forks[0]));
	putf(b, "leash_run_forks_total{by=\"spawner\"} %llu\n", (unsigned long long)ld(&mx.a->forks[1]));
	family(b, "leash_job_files_broken", "gauge",
	       "Job files of this replica's jobs/ that its last load found broken (leash status "
	       "lists them, from every replica).");
	putf(b, "leash_job_files_broken %llu\n", (unsigned long long)ld(&mx.a->broken));
}

char *metrics_render(size_t *len)
{
	struct buf b = { 0 };
	struct snap *s = NULL;
	size_t n = 0;

	if (mx.a) {
		int32_t hi = __atomic_load_n(&mx.a->hi, __ATOMIC_ACQUIRE);

		if (hi > 0 && !(s = malloc((size_t)hi * sizeof *s)))
			return NULL;
		n = s ? snapshot(s, hi) : 0;
	}
	/* About 3 KB a job: one growth at most. */
	room(&b, 8192 + n * 3072);
	render_process(&b);
	if (mx.a) {
		render_jobs(&b, s, n);
		render_store(&b);
	}
	free(s);
	if (room(&b, 1) < 0) {
		free(b.p);
		return NULL;
	}
	b.p[b.n] = '\0';
	*len = b.n;
	return b.p;
}
