/* esc.c - text made well-formed: one UTF-8 reader and one escaping loop
 * for the JSON strings and the text lines leash prints. */
#include <stdio.h>
#include <string.h>

#include "core/esc.h"

size_t esc_char_len(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	unsigned char lo = 0x80, hi = 0xbf;
	size_t len;

	if (!n)
		return 0;
	if (p[0] < 0x80)
		return 1;
	if (p[0] < 0xc2)                /* a continuation byte, or overlong */
		return 0;
	if (p[0] < 0xe0) {
		len = 2;
	} else if (p[0] < 0xf0) {
		len = 3;
		if (p[0] == 0xe0)
			lo = 0xa0;      /* overlong */
		else if (p[0] == 0xed)
			hi = 0x9f;      /* surrogates */
	} else if (p[0] < 0xf5) {
		len = 4;
		if (p[0] == 0xf0)
			lo = 0x90;      /* overlong */
		else if (p[0] == 0xf4)
			hi = 0x8f;      /* past U+10FFFF */
	} else {
		return 0;
	}
	if (n < len || p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return len;
}

size_t esc_cut(const char *s, size_t n, size_t max)
{
	size_t j = max;

	if (n <= max)
		return n;
	/* Back to the first byte of the character that straddles max, if
	 * one does. */
	while (j > 0 && max - j < 3 && ((unsigned char)s[j] & 0xc0) == 0x80)
		j--;
	if (j < max && esc_char_len(s + j, n - j) > max - j)
		return j;
	return max;
}

size_t esc_whole(const char *s, size_t n)
{
	for (size_t i = 1; i <= 3 && i <= n; i++) {
		unsigned char b = (unsigned char)s[n - i];

		if ((b & 0xc0) == 0x80)
			continue;
		if (b >= 0xc0 && (size_t)(b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : 2) > i)
			return n - i;
		break;
	}
	return n;
}

enum mode { JSON, TEXT, LINE, KEY };

/* The escape of the character at s (len bytes, 0: not a valid one) in
 * mode m, written into out; NULL when it goes as it is. */
static const char *escape_of(const unsigned char *s, size_t len, enum mode m, char out[8])
{
	unsigned c = s[0];

	if (len == 0)
		return "\xef\xbf\xbd";  /* U+FFFD */
	if (len == 2 && c == 0xc2 && s[1] < 0xa0) {     /* C1: U+0080 to U+009F */
		snprintf(out, 8, "\\u%04x", s[1]);
		return out;
	}
	if (len > 1)
		return NULL;
	if (c == '\\')
		return m == LINE ? NULL : "\\\\";
	if (m == JSON) {
		static const char *const named[32] = {
			['\b'] = "\\b", ['\f'] = "\\f", ['\n'] = "\\n", ['\r'] = "\\r", ['\t'] = "\\t",
		};
		if (c == '"')
			return "\\\"";
		if (c < 0x20 && named[c])
			return named[c];
		if (c < 0x20 || c == 0x7f) {
			snprintf(out, 8, "\\u%04x", c);
			return out;
		}
		return NULL;
	}
	if (c < 0x20 || c == 0x7f || (m == KEY && (c == ' ' || c == '"' || c == '='))) {
		snprintf(out, 8, "\\x%02x", c);
		return out;
	}
	return NULL;
}

/* s cut to max bytes and escaped by mode m; the cut said at its end. */
static void escape(esc_put_fn put, void *arg, const char *s, size_t n, size_t max, enum mode m)
{
	size_t end = esc_cut(s, n, max), plain = 0, i = 0;

	while (i < end) {
		size_t len = esc_char_len(s + i, end - i);
		char buf[8];
		const char *e = escape_of((const unsigned char *)s + i, len, m, buf);

		if (!e) {
			i += len;
			continue;
		}
		if (i > plain)
			put(arg, s + plain, i - plain);
		put(arg, e, strlen(e));
		i += len ? len : 1;
		plain = i;
	}
	if (end > plain)
		put(arg, s + plain, end - plain);
	if (end < n) {
		char cut[64];
		int k = snprintf(cut, sizeof cut, ESC_CUT_FMT, n);

		put(arg, cut, (size_t)k);
	}
}

void esc_json(esc_put_fn put, void *arg, const char *s, size_t n, size_t max)
{
	put(arg, "\"", 1);
	escape(put, arg, s, n, max, JSON);
	put(arg, "\"", 1);
}

void esc_text(esc_put_fn put, void *arg, const char *s, size_t n, size_t max,
              enum esc_text_kind kind)
{
	escape(put, arg, s, n, max, kind == ESC_KEY ? KEY : kind == ESC_LINE ? LINE : TEXT);
}

int esc_plain(const char *s, size_t n)
{
	size_t i = 0;

	if (!n)
		return 0;
	while (i < n) {
		size_t len = esc_char_len(s + i, n - i);
		char buf[8];

		if (!len || escape_of((const unsigned char *)s + i, len, KEY, buf))
			return 0;
		i += len;
	}
	return 1;
}
