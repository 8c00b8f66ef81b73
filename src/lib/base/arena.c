/*
 * arena.c — the per-batch arena: chunks allocated on demand, all but the
 * first freed on reset.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"

struct chunk {
	struct chunk *next;
	size_t size;
	size_t used;
	max_align_t data[]; /* aligned storage */
};

struct pgo_arena {
	struct chunk *head; /* newest first; the last one is kept on reset */
	size_t chunk;
};

static struct chunk *chunk_new(size_t size)
{
	struct chunk *c = malloc(sizeof(*c) + size);

	if (c) {
		c->next = NULL;
		c->size = size;
		c->used = 0;
	}
	return c;
}

pgo_arena_t *pgo_arena_new(size_t chunk)
{
	pgo_arena_t *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->chunk = chunk ? chunk : 8192;
	a->head = chunk_new(a->chunk);
	if (!a->head) {
		free(a);
		return NULL;
	}
	return a;
}

void *pgo_arena_alloc(pgo_arena_t *a, size_t n)
{
	const size_t align = sizeof(max_align_t);
	struct chunk *c = a->head;
	void *p;

	n = (n + align - 1) & ~(align - 1);
	if (c->size - c->used < n) {
		size_t size = n > a->chunk ? n : a->chunk;

		c = chunk_new(size);
		if (!c)
			return NULL;
		c->next = a->head;
		a->head = c;
	}
	p = (char *)c->data + c->used;
	c->used += n;
	return p;
}

char *pgo_arena_strdup(pgo_arena_t *a, const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = pgo_arena_alloc(a, n);

	if (p)
		memcpy(p, s, n);
	return p;
}

void pgo_arena_reset(pgo_arena_t *a)
{
	while (a->head->next) {
		struct chunk *c = a->head;

		a->head = c->next;
		free(c);
	}
	a->head->used = 0;
}

void pgo_arena_destroy(pgo_arena_t *a)
{
	if (!a)
		return;
	pgo_arena_reset(a);
	free(a->head);
	free(a);
}
