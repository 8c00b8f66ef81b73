/*
 * base/backoff.h — the delay before a retry, one rule for every module
 * (a work queue's failed job, the relay's failed event, reconnects).
 */
#ifndef PGO_BASE_BACKOFF_H
#define PGO_BASE_BACKOFF_H

#include <stdint.h>

/* Backoff before attempt `attempt` (1 = first retry): base * 2^(attempt-1)
 * capped at max, then "equal jitter": half fixed, half random.  rnd is a
 * uniform value in [0,1). */
int64_t pgo_backoff_ms(int attempt, int64_t base, int64_t max, double rnd);

#endif /* PGO_BASE_BACKOFF_H */
