/* warm.c - the pages a run will touch, faulted in while it waits.
 *
 * The table is a shared mapping of the spawner's, so its children read and
 * write the one copy: a slot per job (found by the job's address, which is
 * the same in all of them), holding the ranges of pages the job's learning
 * run faulted in.  A learning run finds them in /proc/self/pagemap: at its
 * end, in a mapping it may write, the pages that are its own (written, so
 * copied or new); in one it may only read, the pages it has mapped at all
 * (the fork mapped none of those); less what it had mapped already at the
 * warm-up point (its own set-up's pages, which every run maps itself).  A slot's list is written under its seq
 * (odd while written); a reader that sees it change skips the warm-up. */
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/clock.h"
#include "launch/prefork/warm.h"

#define WARM_SLOTS 2048                 /* jobs with a list (a power of 2) */
#define WARM_PROBE 8                    /* slots a job may take */
#define WARM_RANGES 48                  /* ranges of pages in a list */
#define WARM_RELEARN 64                 /* a job's runs between learning runs */
#define WARM_GAP 4                      /* pages between hits a range bridges */
#define WARM_HAD 2048                   /* ranges a learning run notes it had */
#define WARM_AHEAD_NS 2000000           /* a run warms up this far ahead of its fire */
#define WARM_STOCK_AHEAD_NS 20000000    /* and learns only this far ahead */
#define WARM_MAP_MAX ((uint64_t)64 << 20) /* a mapping larger is not looked at */
#define PM_PRESENT ((uint64_t)1 << 63)  /* pagemap: the page is mapped */
#define PM_OWN ((uint64_t)1 << 56)      /* and mapped by this process only */

struct slot {
	const void *job;                /* NULL: free */
	uint32_t seq;                   /* odd while the list is written */
	uint32_t runs;                  /* the job's runs that looked here */
	uint32_t n;
	uint32_t pages[WARM_RANGES];    /* each range's length << 1 | written */
	uint64_t start[WARM_RANGES];
};

/* The shared table and the page size, from warm_init. */
static struct {
	struct slot *table;
	uint64_t page;
	struct learning *learning;      /* a learning run's, from warm_up */
} wm;

void warm_init(void)
{
	void *p;

	if (wm.table)
		return;
	wm.page = (uint64_t)sysconf(_SC_PAGESIZE);
	p = mmap(NULL, WARM_SLOTS * sizeof *wm.table, PROT_READ | PROT_WRITE,
	         MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p != MAP_FAILED)
		wm.table = p;
}

/* The job's slot, taken for it if it had none; NULL when the slots it may
 * take are all another's. */
static struct slot *slot_of(const void *job)
{
	uint64_t h = (uint64_t)(uintptr_t)job * 0x9e3779b97f4a7c15ULL;

	if (!wm.table || !job)
		return NULL;
	for (unsigned i = 0; i < WARM_PROBE; i++) {
		struct slot *s = &wm.table[((h >> 40) + i) & (WARM_SLOTS - 1)];
		const void *none = NULL;

		if (__atomic_load_n(&s->job, __ATOMIC_ACQUIRE) == job ||
		    __atomic_compare_exchange_n(&s->job, &none, job, 0, __ATOMIC_ACQ_REL,
		                                __ATOMIC_ACQUIRE) ||
		    none == job)
			return s;
	}
	return NULL;
}

/* A learning run's list, built up one hit (a page of its) at a time, and
 * what it reads to find them: in memory of its own, whose pages it leaves
 * out (as it does [vvar], [vdso] and [vsyscall]), and read without sscanf,
 * so that the runs after it do not fault in what only learning touched;
 * had: what it had mapped at the warm-up point, noted then. */
struct learning {
	char maps[1 << 16];
	uint64_t e[512];                /* pagemap entries */
	uint64_t had_start[WARM_HAD], had_end[WARM_HAD];
	uint32_t had_n, had_at;         /* had_at: the first not below the scan */
	int noting;                     /* 1: noting what it had, not hits */
	uint64_t start[WARM_RANGES], end[WARM_RANGES];
	int written[WARM_RANGES];
	uint32_t n;
	int open;                       /* the last range may still grow */
};


static void had(struct learning *l, uint64_t a)
{
	if (l->had_n && l->had_end[l->had_n - 1] == a)
		l->had_end[l->had_n - 1] = a + wm.page;
	else if (l->had_n < WARM_HAD) {
		l->had_start[l->had_n] = a;
		l->had_end[l->had_n++] = a + wm.page;
	}
}

static void hit(struct learning *l, uint64_t a, int written)
{
	uint32_t k = l->n - 1;

	if (a - (uint64_t)(uintptr_t)l < sizeof *l)
		return;                 /* the learning's own pages */
	if (l->noting) {
		had(l, a);
		return;
	}
	while (l->had_at < l->had_n && l->had_end[l->had_at] <= a)
		l->had_at++;
	if (l->had_at < l->had_n && l->had_start[l->had_at] <= a)
		return;                 /* mapped already when it warmed up */
	if (l->open && l->written[k] == written && a <= l->end[k] + WARM_GAP * wm.page) {
		l->end[k] = a + wm.page;
		return;
	}
	if (l->n == WARM_RANGES)
		return;
	l->start[l->n] = a;
	l->end[l->n] = a + wm.page;
	l->written[l->n++] = written;
	l->open = 1;
}

/* The hits of the mapping [a, b) into l. */
static void scan(struct learning *l, int pm, uint64_t a, uint64_t b, int writable)
{
	const size_t max = sizeof l->e / sizeof *l->e;

	l->open = 0;                    /* no range spans two mappings */
	while (a < b) {
		size_t want = (b - a) / wm.page < max ? (size_t)((b - a) / wm.page) : max, got;
		ssize_t r = pread(pm, l->e, want * sizeof *l->e, (off_t)(a / wm.page * sizeof *l->e));

		if (r <= 0)
			return;
		got = (size_t)r / sizeof *l->e;
		for (size_t i = 0; i < got; i++)
			if ((l->e[i] & PM_PRESENT) && (!writable || (l->e[i] & PM_OWN)))
				hit(l, a + i * wm.page, writable);
		a += got * wm.page;
	}
}

static uint64_t hex(const char **p)
{
	uint64_t v = 0;

	for (;; (*p)++) {
		char c = **p;

		if (c >= '0' && c <= '9')
			v = v << 4 | (uint64_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v << 4 | (uint64_t)(c - 'a' + 10);
		else
			return v;
	}
}

/* One line of /proc/self/maps ("start-end perms offset dev inode [path]"):
 * whether to look at its pages, with [*a, *b) and whether it is writable.
 * Private readable mappings, not the kernel's. */
static int wanted(const char *line, uint64_t *a, uint64_t *b, int *writable)
{
	const char *p = line, *name;

	*a = hex(&p);
	if (*p++ != '-')
		return 0;
	*b = hex(&p);
	if (*p++ != ' ' || strlen(p) < 4 || p[0] != 'r' || p[3] != 'p' || *b - *a > WARM_MAP_MAX)
		return 0;
	*writable = p[1] == 'w';
	/* the path begins after the fifth field's spaces */
	name = p;
	for (int field = 0; field < 4 && (name = strchr(name, ' ')); field++)
		while (*name == ' ')
			name++;
	return !name || name[0] != '[' || !strncmp(name, "[heap]", 6) || !strncmp(name, "[stack]", 7);
}

/* Every wanted mapping's pages into l (noting, or hits); -1 when /proc
 * cannot be read, or when it is not done by until (clock_mono_ms; 0: no
 * limit). */
static int scan_all(struct learning *l, int64_t until)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC), pm, w;
	size_t got = 0;
	uint64_t a, b;
	ssize_t r;

	if (fd < 0)
		return -1;
	while (got < sizeof l->maps - 1 && (r = read(fd, l->maps + got, sizeof l->maps - 1 - got)) > 0)
		got += (size_t)r;
	close(fd);
	l->maps[got] = 0;
	if ((pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	for (char *line = l->maps, *eol; (eol = strchr(line, '\n')); line = eol + 1) {
		*eol = 0;
		if (until && clock_mono_ms() > until) {
			close(pm);
			return -1;
		}
		if (wanted(line, &a, &b, &w))
			scan(l, pm, a, b, w);
	}
	close(pm);
	return 0;
}

/* A learning run, at its warm-up point: what it has mapped so far, noted
 * by until (clock_mono_ms).  0, or -1 (it learns another time). */
static int take_stock(int64_t until)
{
	struct learning *l = mmap(NULL, sizeof *l, PROT_READ | PROT_WRITE,
	                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (l == MAP_FAILED)
		return -1;
	l->noting = 1;
	if (scan_all(l, until) < 0) {
		munmap(l, sizeof *l);
		return -1;
	}
	l->noting = 0;
	wm.learning = l;
	return 0;
}

int warm_up(const void *job, int64_t ahead_ns)
{
	struct slot *s = slot_of(job);
	uint32_t pages[WARM_RANGES], seq, n, runs;
	uint64_t start[WARM_RANGES];

	if (!s || ahead_ns <= WARM_AHEAD_NS)
		return 0;
	runs = __atomic_fetch_add(&s->runs, 1, __ATOMIC_RELAXED);
	seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
	if (runs % WARM_RELEARN == 0 || seq == 0)
		return ahead_ns > WARM_STOCK_AHEAD_NS && take_stock(clock_mono_ms() + ahead_ns / 2000000) == 0;
	if (seq & 1)
		return 0;
	n = __atomic_load_n(&s->n, __ATOMIC_RELAXED);
	if (n > WARM_RANGES)
		return 0;
	memcpy(pages, s->pages, n * sizeof *pages);
	memcpy(start, s->start, n * sizeof *start);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (__atomic_load_n(&s->seq, __ATOMIC_RELAXED) != seq)
		return 0;
	/* A range no longer mapped (a stack that grew, a heap's end) fails
	 * alone. */
	for (uint32_t i = 0; i < n; i++)
		madvise((void *)(uintptr_t)start[i], (pages[i] >> 1) * wm.page,
		        pages[i] & 1 ? MADV_POPULATE_WRITE : MADV_POPULATE_READ);
	return 0;
}

void warm_learn(const void *job)
{
	struct slot *s = slot_of(job);
	struct learning *l = wm.learning;
	uint32_t seq;

	if (!s || !l)
		return;                 /* (warm_up noted what it had, or it does not learn) */
	l->n = 0;
	l->open = 0;
	l->had_at = 0;
	seq = __atomic_load_n(&s->seq, __ATOMIC_RELAXED);
	/* Unless another run of the job is writing it now. */
	if (scan_all(l, 0) == 0 && l->n && !(seq & 1) &&
	    __atomic_compare_exchange_n(&s->seq, &seq, seq + 1, 0, __ATOMIC_ACQUIRE,
	                                __ATOMIC_RELAXED)) {
		for (uint32_t i = 0; i < l->n; i++) {
			s->start[i] = l->start[i];
			s->pages[i] = (uint32_t)((l->end[i] - l->start[i]) / wm.page) << 1 |
			              (uint32_t)l->written[i];
		}
		__atomic_store_n(&s->n, l->n, __ATOMIC_RELAXED);
		__atomic_store_n(&s->seq, seq + 2, __ATOMIC_RELEASE);
	}
	munmap(l, sizeof *l);
	wm.learning = NULL;
}
