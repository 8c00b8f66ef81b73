/*
 * backoff.c — the retry backoff: exponential, capped, with equal jitter.
 */
#include <stdint.h>

#include "base/backoff.h"

int64_t pgo_backoff_ms(int attempt, int64_t base, int64_t max, double rnd)
{
	int64_t d = base;

	if (attempt < 1)
		attempt = 1;
	for (int i = 1; i < attempt && d < max; i++)
		d *= 2;
	if (d > max)
		d = max;
	if (d <= 0)
		return 0;
	return d / 2 + (int64_t)((double)(d - d / 2) * rnd);
}
