/* log.c - records as `TIME LEVEL [job run N] message key=value` or JSON lines. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"

static int as_json;
static enum log_level min_level = LOG_INFO;
static const char *const level_names[] = { "debug", "info", "warn", "error" };
static log_sink_fn sink;
static void *sink_arg;

void log_set_sink(log_sink_fn fn, void *arg)
{
	sink = fn;
	sink_arg = arg;
}

void log_setup(int json, enum log_level min)
{
	as_json = json;
	min_level = min;
}

int log_level_parse(const char *s)
{
	for (int i = 0; i < 4; i++)
		if (strcmp(s, level_names[i]) == 0)
			return i;
	return -1;
}

/* A growing line buffer: records are written with one write(2) so lines
 * from the parent never interleave. */
struct buf {
	char b[8192];
	size_t n;
};

static void put(struct buf *b, const char *s, size_t n)
{
	if (n > sizeof b->b - 1 - b->n)
		n = sizeof b->b - 1 - b->n;
	memcpy(b->b + b->n, s, n);
	b->n += n;
}

static void puts_(struct buf *b, const char *s)
{
	put(b, s, strlen(s));
}

static void putjson(struct buf *b, const char *s)
{
	put(b, "\"", 1);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		char esc[8];

		if (*p == '"' || *p == '\\') {
			esc[0] = '\\';
			esc[1] = *p;
			put(b, esc, 2);
		} else if (*p == '\n') {
			put(b, "\\n", 2);
		} else if (*p == '\t') {
			put(b, "\\t", 2);
		} else if (*p < 0x20 || *p == 0x7f) {
			snprintf(esc, sizeof esc, "\\u%04x", *p);
			put(b, esc, 6);
		} else {
			put(b, (const char *)p, 1);
		}
	}
	put(b, "\"", 1);
}

/* Text values are quoted when they hold spaces, quotes or control bytes. */
static void puttext(struct buf *b, const char *s)
{
	if (*s && !strpbrk(s, " \t\n\"=\\"))
		puts_(b, s);
	else
		putjson(b, s);
}

void log_rec(enum log_level lv, const char *job, long run, const char *msg,
             const char *const *fields, size_t nfields)
{
	struct buf b;
	char ts[64], num[32];

	if (lv < min_level)
		return;
	b.n = 0;
	clock_iso(ts, sizeof ts, clock_wall_ms(), 1);
	if (as_json) {
		puts_(&b, "{\"ts\":");
		putjson(&b, ts);
		puts_(&b, ",\"level\":");
		putjson(&b, level_names[lv]);
		if (job) {
			puts_(&b, ",\"job\":");
			putjson(&b, job);
		}
		if (run) {
			snprintf(num, sizeof num, ",\"run\":%ld", run);
			puts_(&b, num);
		}
		puts_(&b, ",\"msg\":");
		putjson(&b, msg);
		for (size_t i = 0; i < nfields; i++) {
			put(&b, ",", 1);
			putjson(&b, fields[2 * i]);
			put(&b, ":", 1);
			putjson(&b, fields[2 * i + 1]);
		}
		put(&b, "}", 1);
	} else {
		puts_(&b, ts);
		snprintf(num, sizeof num, " %-5s ", level_names[lv]);
		puts_(&b, num);
		if (job) {
			puts_(&b, "[");
			puts_(&b, job);
			if (run) {
				snprintf(num, sizeof num, " run %ld", run);
				puts_(&b, num);
			}
			puts_(&b, "] ");
		}
		puts_(&b, msg);
		for (size_t i = 0; i < nfields; i++) {
			put(&b, " ", 1);
			puts_(&b, fields[2 * i]);
			put(&b, "=", 1);
			puttext(&b, fields[2 * i + 1]);
		}
	}
	if (sink) {
		b.b[b.n] = '\0';
		sink(sink_arg, lv, b.b);
		return;
	}
	/* Keep room for the newline even when the record was cut. */
	b.b[b.n++] = '\n';
	if (write(STDERR_FILENO, b.b, b.n) < 0) {
		/* Nowhere left to report it. */
	}
}

void log_msg(enum log_level lv, const char *job, long run, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;

	if (lv < min_level)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	log_rec(lv, job, run, msg, NULL, 0);
}
