/*
 * buf.h — a growable text buffer, and the two escapers the wire formats
 * need: JSON string literals (the one JSON escaper) and PostgreSQL array
 * elements.  A failed grow sets oom and makes every later append a no-op,
 * so a caller checks once, at the end.
 */
#ifndef PGO_BASE_BUF_H
#define PGO_BASE_BUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct pgo_buf {
	char *data; /* NUL-terminated while len < cap */
	size_t len;
	size_t cap;
	bool oom; /* a failed grow: contents are incomplete */
} pgo_buf_t;

void pgo_buf_init(pgo_buf_t *b);
void pgo_buf_free(pgo_buf_t *b);
void pgo_buf_reset(pgo_buf_t *b);
bool pgo_buf_reserve(pgo_buf_t *b, size_t extra);
void pgo_buf_append(pgo_buf_t *b, const char *s, size_t n);
void pgo_buf_puts(pgo_buf_t *b, const char *s);
void pgo_buf_printf(pgo_buf_t *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Appends s as a JSON string literal (with quotes). */
void pgo_buf_json_str(pgo_buf_t *b, const char *s);
/* Appends s as an element of a PostgreSQL array literal ("..." or NULL). */
void pgo_buf_array_elem(pgo_buf_t *b, const char *s);

#endif /* PGO_BASE_BUF_H */
