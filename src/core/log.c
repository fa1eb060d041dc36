/* log.c - records as `TIME LEVEL [job run N] message key=value` or JSON lines.
 * Whatever a message, key or value holds, a record is one line of valid
 * UTF-8 (esc.h): newlines and control characters are escaped, and each text
 * is cut past LOG_TEXT_MAX bytes, saying so. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/esc.h"
#include "core/log.h"

static const char *const level_names[] = { "debug", "info", "warn", "error" };

/* The process's logging, as log_setup and log_set_sink set it. */
static struct {
	int json;                       /* JSON lines, not text */
	enum log_level min;             /* records below it are dropped */
	log_sink_fn sink;               /* where a record goes instead of stderr */
	void *sink_arg;
} lg = { .min = LOG_INFO };

void log_set_sink(log_sink_fn fn, void *arg)
{
	lg.sink = fn;
	lg.sink_arg = arg;
}

void log_setup(int json, enum log_level min)
{
	lg.json = json;
	lg.min = min;
}

int log_level_parse(const char *s)
{
	for (int i = 0; i < 4; i++)
		if (strcmp(s, level_names[i]) == 0)
			return i;
	return -1;
}

/* A record's line, built whole and written with one write(2) so lines from
 * the parent never interleave: on the stack, on the heap when it grows past
 * that (each text in it is bounded, so the line is too). */
struct buf {
	char *b;
	size_t n, cap;
	char stack[8192];
};

static void put(void *arg, const char *s, size_t n)
{
	struct buf *b = arg;

	if (n > b->cap - 1 - b->n) {
		size_t cap = b->cap * 2 > b->n + n + 1 ? b->cap * 2 : b->n + n + 1;
		char *nb = b->b == b->stack ? malloc(cap) : realloc(b->b, cap);

		if (!nb) {      /* no room: the record is cut, still one line */
			n = b->cap - 1 - b->n;
		} else {
			if (b->b == b->stack)
				memcpy(nb, b->stack, b->n);
			b->b = nb;
			b->cap = cap;
		}
	}
	memcpy(b->b + b->n, s, n);
	b->n += n;
}

static void puts_(struct buf *b, const char *s)
{
	put(b, s, strlen(s));
}

static void putjson(struct buf *b, const char *s, size_t max)
{
	esc_json(put, b, s, strlen(s), max);
}

/* A text log value goes as it is when it is plain, else as a JSON string. */
static void puttext(struct buf *b, const char *s)
{
	size_t n = strlen(s);

	if (n <= LOG_TEXT_MAX && esc_plain(s, n))
		put(b, s, n);
	else
		esc_json(put, b, s, n, LOG_TEXT_MAX);
}

/* A JSON log field's key: one that would shadow the record's own (a job's
 * ctx.log field "level" or "msg") gets a "field." in front. */
static void putjsonkey(struct buf *b, const char *k)
{
	static const char *const own[][2] = {
		{ "ts", "field.ts" }, { "level", "field.level" }, { "job", "field.job" },
		{ "run", "field.run" }, { "msg", "field.msg" },
	};

	for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
		if (strcmp(k, own[i][0]) == 0)
			k = own[i][1];
	putjson(b, k, LOG_KEY_MAX);
}

void log_rec(enum log_level lv, const char *job, long run, const char *msg,
             const char *const *fields, size_t nfields)
{
	struct buf b;
	char ts[64], num[32];

	if (lv < lg.min)
		return;
	b.b = b.stack;
	b.n = 0;
	b.cap = sizeof b.stack;
	clock_iso(ts, sizeof ts, clock_wall_ms(), 1);
	if (lg.json) {
		puts_(&b, "{\"ts\":");
		putjson(&b, ts, LOG_TEXT_MAX);
		puts_(&b, ",\"level\":");
		putjson(&b, level_names[lv], LOG_TEXT_MAX);
		if (job) {
			puts_(&b, ",\"job\":");
			putjson(&b, job, LOG_TEXT_MAX);
		}
		if (run < 0)
			puts_(&b, run == LOG_HOOK_ON_FAILURE ? ",\"hook\":\"on_failure\""
			                                     : ",\"hook\":\"on_recover\"");
		else if (run) {
			snprintf(num, sizeof num, ",\"run\":%ld", run);
			puts_(&b, num);
		}
		puts_(&b, ",\"msg\":");
		putjson(&b, msg, LOG_TEXT_MAX);
		for (size_t i = 0; i < nfields; i++) {
			put(&b, ",", 1);
			putjsonkey(&b, fields[2 * i]);
			put(&b, ":", 1);
			putjson(&b, fields[2 * i + 1], LOG_TEXT_MAX);
		}
		put(&b, "}", 1);
	} else {
		puts_(&b, ts);
		snprintf(num, sizeof num, " %-5s ", level_names[lv]);
		puts_(&b, num);
		if (job) {
			puts_(&b, "[");
			esc_text(put, &b, job, strlen(job), LOG_TEXT_MAX, ESC_TEXT);
			if (run < 0) {
				puts_(&b, run == LOG_HOOK_ON_FAILURE ? " hook on_failure" : " hook on_recover");
			} else if (run) {
				snprintf(num, sizeof num, " run %ld", run);
				puts_(&b, num);
			}
			puts_(&b, "] ");
		}
		esc_text(put, &b, msg, strlen(msg), LOG_TEXT_MAX, ESC_LINE);
		for (size_t i = 0; i < nfields; i++) {
			put(&b, " ", 1);
			esc_text(put, &b, fields[2 * i], strlen(fields[2 * i]), LOG_KEY_MAX, ESC_KEY);
			put(&b, "=", 1);
			puttext(&b, fields[2 * i + 1]);
		}
	}
	if (lg.sink) {
		b.b[b.n] = '\0';
		lg.sink(lg.sink_arg, lv, b.b);
	} else {
		/* Keep room for the newline even when the record was cut. */
		b.b[b.n++] = '\n';
		if (write(STDERR_FILENO, b.b, b.n) < 0) {
			/* Nowhere left to report it. */
		}
	}
	if (b.b != b.stack)
		free(b.b);
}

void log_msg(enum log_level lv, const char *job, long run, const char *fmt, ...)
{
	char msg[LOG_TEXT_MAX];
	va_list ap;
	int n;

	if (lv < lg.min)
		return;
	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (n >= (int)sizeof msg) {     /* cut as log_rec cuts a text */
		size_t k = esc_cut(msg, sizeof msg - 1, sizeof msg - 64);

		snprintf(msg + k, sizeof msg - k, ESC_CUT_FMT, (size_t)n);
	}
	log_rec(lv, job, run, msg, NULL, 0);
}
