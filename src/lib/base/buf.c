/*
 * buf.c — a growable text buffer with the two escapers the wire formats
 * need (JSON strings, PostgreSQL array elements).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"

void pgo_buf_init(pgo_buf_t *b)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->oom = false;
}

void pgo_buf_free(pgo_buf_t *b)
{
	free(b->data);
	pgo_buf_init(b);
}

void pgo_buf_reset(pgo_buf_t *b)
{
	b->len = 0;
	b->oom = false;
	if (b->data)
		b->data[0] = '\0';
}

bool pgo_buf_reserve(pgo_buf_t *b, size_t extra)
{
	size_t need = b->len + extra + 1;
	size_t cap;
	char *p;

	if (b->oom)
		return false;
	if (need <= b->cap)
		return true;
	cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap *= 2;
	p = realloc(b->data, cap);
	if (!p) {
		b->oom = true;
		return false;
	}
	b->data = p;
	b->cap = cap;
	return true;
}

void pgo_buf_append(pgo_buf_t *b, const char *s, size_t n)
{
	if (!pgo_buf_reserve(b, n))
		return;
	memcpy(b->data + b->len, s, n);
	b->len += n;
	b->data[b->len] = '\0';
}

void pgo_buf_puts(pgo_buf_t *b, const char *s)
{
	pgo_buf_append(b, s, strlen(s));
}

void pgo_buf_printf(pgo_buf_t *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !pgo_buf_reserve(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void pgo_buf_json_str(pgo_buf_t *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;

	/* Worst case: every byte becomes \u00XX. */
	if (!pgo_buf_reserve(b, strlen(s) * 6 + 2))
		return;
	b->data[b->len++] = '"';
	for (; *p; p++) {
		unsigned char c = *p;
		char *o = b->data + b->len;

		if (c >= 0x20 && c != '"' && c != '\\') {
			*o = (char)c;
			b->len++;
			continue;
		}
		o[0] = '\\';
		switch (c) {
		case '"':
			o[1] = '"';
			b->len += 2;
			break;
		case '\\':
			o[1] = '\\';
			b->len += 2;
			break;
		case '\n':
			o[1] = 'n';
			b->len += 2;
			break;
		case '\r':
			o[1] = 'r';
			b->len += 2;
			break;
		case '\t':
			o[1] = 't';
			b->len += 2;
			break;
		default:
			o[1] = 'u';
			o[2] = '0';
			o[3] = '0';
			o[4] = hex[c >> 4];
			o[5] = hex[c & 15];
			b->len += 6;
		}
	}
	b->data[b->len++] = '"';
	b->data[b->len] = '\0';
}

void pgo_buf_array_elem(pgo_buf_t *b, const char *s)
{
	if (!s) {
		pgo_buf_append(b, "NULL", 4);
		return;
	}
	if (!pgo_buf_reserve(b, strlen(s) * 2 + 2))
		return;
	b->data[b->len++] = '"';
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			b->data[b->len++] = '\\';
		b->data[b->len++] = *s;
	}
	b->data[b->len++] = '"';
	b->data[b->len] = '\0';
}
