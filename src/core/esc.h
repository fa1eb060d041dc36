/* esc.h - text made well-formed for where it is printed: a JSON string, the
 * text log, a terminal.
 *
 * Names, rows, errors and job output may hold any bytes.  Whatever comes
 * in, what these write is valid UTF-8 holding no control character: a byte
 * that does not start a valid UTF-8 character (or a character cut short)
 * becomes U+FFFD, and control characters are escaped.  Every JSON string
 * leash prints (the JSON log, --json, the HTTP API) is written by esc_json, every
 * store or job text shown on a terminal or in the text log by esc_text.
 */
#ifndef LEASH_ESC_H
#define LEASH_ESC_H

#include <stddef.h>

/* Where the escaped text goes: n bytes at s. */
typedef void (*esc_put_fn)(void *arg, const char *s, size_t n);

/* The text a cut string ends with: "... [cut: N bytes in all]". */
#define ESC_CUT_FMT "... [cut: %zu bytes in all]"

/* The length of the valid UTF-8 character at s (1 to 4, at most n bytes),
 * or 0 when s does not start one (a stray or overlong byte, a surrogate,
 * past U+10FFFF, or cut short by n). */
size_t esc_char_len(const char *s, size_t n);

/* The longest prefix of s (n bytes) of at most max bytes that ends on a
 * character boundary: a UTF-8 character is never split. */
size_t esc_cut(const char *s, size_t n, size_t max);

/* n, or less when s ends in the first bytes of a UTF-8 character that more
 * bytes could complete: where to cut a stream that goes on. */
size_t esc_whole(const char *s, size_t n);

/* s (n bytes) as a JSON string, with its quotes: " and \ escaped, control
 * characters as \n, \t, \r, \b, \f or \u00XX (C1 ones and DEL too), invalid
 * bytes as U+FFFD.  When n > max, only its first max bytes (cut on a
 * character boundary) and ESC_CUT_FMT, inside the quotes. */
void esc_json(esc_put_fn put, void *arg, const char *s, size_t n, size_t max);

/* Which characters esc_text escapes besides control characters and \. */
enum esc_text_kind {
	ESC_TEXT,       /* text from a store or a job, a cell: \ as \\ too */
	ESC_LINE,       /* a message: \ as it is (only controls are escaped) */
	ESC_KEY,        /* a log field's key: \, space, " and = as \\ or \xNN too */
};

/* s (n bytes) for a terminal or a text log line, on one line: C0 controls
 * and DEL as \xNN, C1 controls as \u00XX, invalid bytes as U+FFFD, and by
 * kind; cut past max as esc_json is. */
void esc_text(esc_put_fn put, void *arg, const char *s, size_t n, size_t max,
              enum esc_text_kind kind);

/* Whether s (n bytes) can be written into a text log line as it is, as a
 * field's value: not empty, valid UTF-8, and no control character, space,
 * quote, = or \. */
int esc_plain(const char *s, size_t n);

#endif
