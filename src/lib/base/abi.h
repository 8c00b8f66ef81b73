/*
 * abi.h — the structs callers fill carry their size (abi.c): the checks
 * and copies that let a program built against an older pgoutbox.h run
 * with this library.
 */
#ifndef PGO_BASE_ABI_H
#define PGO_BASE_ABI_H

#include <stddef.h>

#include "pgoutbox.h"

typedef enum pgo_abi_struct {
	PGO_ABI_MSG = 0,
	PGO_ABI_JOB_OPTS = 1,
	PGO_ABI_CRON_SCHEDULE = 2,
	PGO_ABI_CONSUMER_OPTS = 3,
	PGO_ABI_WORKER_OPTS = 4,
	PGO_ABI_SCHEDULER_OPTS = 5
} pgo_abi_struct_t;

/* sizeof the struct in this build. */
size_t pgo_abi_size(pgo_abi_struct_t s);
/* PGO_OK when size is a size some release gave the struct; otherwise
 * PGO_ERR_INVALID with a message naming the struct and the fix. */
int pgo_abi_check(pgo_abi_struct_t s, size_t size, pgo_error_t *err);
/* Copies the caller's struct src (its size field checked) over dst, a
 * full struct already holding the defaults: the fields an older, smaller
 * struct lacks keep them.  dst's size field becomes this build's. */
int pgo_abi_copy(pgo_abi_struct_t s, void *dst, const void *src,
		 pgo_error_t *err);
/* What the *_opts_init() functions do: copies the first size bytes of a
 * full struct of defaults into dst and sets its size field, or, for a
 * size no release had, writes only the size field (when it fits) and
 * returns PGO_ERR_INVALID. */
int pgo_abi_init(pgo_abi_struct_t s, void *dst, size_t size,
		 const void *defaults);

#endif /* PGO_BASE_ABI_H */
