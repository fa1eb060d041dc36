/* log.h - the scheduler's log: one line per record on stderr, text or JSON. */
#ifndef LEASH_LOG_H
#define LEASH_LOG_H

#include <stddef.h>

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

/* A record's message and each field's value are cut past LOG_TEXT_MAX
 * bytes, a field's key past LOG_KEY_MAX (on a character boundary, the cut
 * said at the end). */
#define LOG_TEXT_MAX 4096
#define LOG_KEY_MAX 128

/* Sets the format ("text" or "json") and the lowest level written. */
void log_setup(int json, enum log_level min);

/* Sends every record (one line, no newline) to fn instead of stderr; NULL
 * restores stderr.  For the specs that drive the core in-process. */
typedef void (*log_sink_fn)(void *arg, enum log_level, const char *line);
void log_set_sink(log_sink_fn fn, void *arg);

/* Parses "debug", "info", "warn" or "error"; -1 when it is none of them. */
int log_level_parse(const char *s);

/* A hook's records: not a run, so no run number ("[job hook on_failure]",
 * JSON "hook":"on_failure"). */
#define LOG_HOOK_ON_FAILURE (-1L)
#define LOG_HOOK_ON_RECOVER (-2L)

/* Writes one record.  job may be NULL (the scheduler itself); run is 0 when
 * the record belongs to no run, a LOG_HOOK_* for a hook's.  fields holds nfields key/value pairs.  Any
 * bytes may come in: the line written is valid UTF-8 with its control
 * characters escaped (as JSON escapes in the JSON format, as \xNN in the
 * text format's message and keys, a text value quoted as a JSON string when
 * it is not plain). */
void log_rec(enum log_level, const char *job, long run, const char *msg,
             const char *const *fields, size_t nfields);

/* printf-style record with no fields. */
void log_msg(enum log_level, const char *job, long run, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif
