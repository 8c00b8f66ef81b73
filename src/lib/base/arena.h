/*
 * arena.h — per-batch memory (pg_cron's per-iteration context): a cycle
 * allocates from the arena without freeing, and the arena is reset after
 * each claim/publish/ack cycle.
 */
#ifndef PGO_BASE_ARENA_H
#define PGO_BASE_ARENA_H

#include <stddef.h>

typedef struct pgo_arena pgo_arena_t;
/* An arena growing by chunks of chunk bytes (0: 8192); NULL on OOM. */
pgo_arena_t *pgo_arena_new(size_t chunk);
/* n bytes aligned for any type, valid until the next reset; NULL on OOM. */
void *pgo_arena_alloc(pgo_arena_t *a, size_t n);
char *pgo_arena_strdup(pgo_arena_t *a, const char *s);
/* Frees everything allocated but the first chunk. */
void pgo_arena_reset(pgo_arena_t *a);
/* NULL is a no-op. */
void pgo_arena_destroy(pgo_arena_t *a);

#endif /* PGO_BASE_ARENA_H */
