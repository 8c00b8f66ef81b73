/*
 * fuzz.h — what the libFuzzer harnesses of tests/fuzz share: the input cut
 * into NUL-terminated fields, and a check that aborts (a crash libFuzzer
 * reports, with the input saved) when an oracle is violated.
 *
 * Each harness is one LLVMFuzzerTestOneInput() over one parser of
 * pgoutbox; tests/fuzz/README.md says which and how to run them.
 */
#ifndef PGO_FUZZ_H
#define PGO_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_FIELDS_MAX 16

/* The input cut at each byte sep into at most max fields (the last one
 * takes the rest), each a NUL-terminated copy; fields not in the input
 * are "".  Free with fuzz_fields_free(). */
typedef struct fuzz_fields {
	char *f[FUZZ_FIELDS_MAX];
	size_t len[FUZZ_FIELDS_MAX];
	int n; /* fields present in the input */
} fuzz_fields_t;

static inline void fuzz_fields(fuzz_fields_t *ff, const uint8_t *data,
			       size_t size, char sep, int max)
{
	size_t start = 0;
	int k = 0;

	memset(ff, 0, sizeof(*ff));
	if (max > FUZZ_FIELDS_MAX)
		max = FUZZ_FIELDS_MAX;
	for (size_t i = 0; i <= size && k < max; i++) {
		if (i < size && (data[i] != (uint8_t)sep || k == max - 1))
			continue;
		ff->len[k] = i - start;
		ff->f[k] = malloc(ff->len[k] + 1);
		if (!ff->f[k])
			abort();
		memcpy(ff->f[k], data + start, ff->len[k]);
		ff->f[k][ff->len[k]] = '\0';
		k++;
		start = i + 1;
	}
	ff->n = k;
	for (; k < max; k++) {
		ff->f[k] = calloc(1, 1);
		if (!ff->f[k])
			abort();
	}
}

static inline void fuzz_fields_free(fuzz_fields_t *ff)
{
	for (int k = 0; k < FUZZ_FIELDS_MAX; k++)
		free(ff->f[k]);
}

/* An oracle failed: say which and crash, so that libFuzzer keeps the
 * input. */
#define FUZZ_CHECK(cond, ...)                                                  \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "fuzz check failed: %s: ", #cond);     \
			fprintf(stderr, __VA_ARGS__);                          \
			fputc('\n', stderr);                                   \
			abort();                                               \
		}                                                              \
	} while (0)

#endif /* PGO_FUZZ_H */
