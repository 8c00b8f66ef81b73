/*
 * settle.c — the settle rules: what happens to each event of a batch once
 * the sink gave its verdicts.  Pure: no connection, no clock, no log; the
 * cycle (cycle.c) turns the plan into SQL and log lines.
 *
 *  - a batch with any UNAVAILABLE verdict goes back untouched (no attempt
 *    spent: the downstream is down, not the events' fault);
 *  - OK: the row stays deleted;
 *  - no verdict counts as a retriable failure;
 *  - ordered and strict modes keep order: an event behind a failed one of
 *    its key (strict: behind any failed one) is held back without spending
 *    an attempt, whatever the sink said of it (one the sink took anyway
 *    is counted: its key's order may be broken downstream);
 *  - RETRY spends an attempt and backs off (pgo_backoff_ms, jitter from
 *    the caller); out of attempts it is dead-lettered, or, in the ordered
 *    modes with poison "halt", kept with no run time (its shard halts);
 *  - DEAD goes to dead letters at once.
 */
#include <string.h>

#include "relay/relay_int.h"
#include "base/backoff.h"
#include "conf/conf.h"
#include "pgoutbox/sink.h"

/* Did an earlier failure in this batch block event i?  *by: which. */
static bool held_back(const pgo_settle_rules_t *rules, const pgo_batch_t *b,
		      size_t i, const size_t *failed, size_t nfailed,
		      size_t *by)
{
	const char *key = b->events[i].key;

	if (rules->mode == PGO_MODE_STRICT && nfailed > 0) {
		*by = failed[0];
		return true;
	}
	if (rules->mode == PGO_MODE_STRICT || !key)
		return false;
	for (size_t k = 0; k < nfailed; k++)
		if (b->events[failed[k]].key &&
		    strcmp(b->events[failed[k]].key, key) == 0) {
			*by = failed[k];
			return true;
		}
	return false;
}

void pgo_settle_plan(const pgo_settle_rules_t *rules, pgo_batch_t *b,
		     settle_row_t *fix, size_t *failed,
		     double (*jitter)(void *ctx), void *ctx,
		     pgo_settle_plan_t *plan)
{
	bool ordered = rules->mode != PGO_MODE_CONCURRENT;
	size_t nfailed = 0, by = 0;

	memset(plan, 0, sizeof(*plan));
	plan->first_failed = b->n;
	for (size_t i = 0; i < b->n; i++)
		if (b->acks[i] == PGO_ACK_UNAVAILABLE) {
			plan->unavailable = true;
			plan->first_failed = i;
			return;
		}
	for (size_t i = 0; i < b->n; i++) {
		pgo_event_t *e = &b->events[i];
		settle_row_t *f = &fix[i];

		f->attempts = e->attempts;
		f->delay_ms = 0;
		if (b->acks[i] == PGO_ACK_NONE) {
			b->acks[i] = PGO_ACK_RETRY;
			b->errors[i] = "the sink gave no verdict";
		}
		if (ordered && b->acks[i] != PGO_ACK_DEAD &&
		    held_back(rules, b, i, failed, nfailed, &by)) {
			/* Keeps the key's order: it waits for the failed
			 * event before it, without spending an attempt,
			 * whether the sink took it or (as an ordered sink
			 * should) refused it because of that failure. */
			char msg[96];

			if (b->acks[i] == PGO_ACK_OK &&
			    plan->n_overtaken++ == 0) {
				plan->first_overtaken = i;
				plan->overtaken_behind = by;
			}
			snprintf(msg, sizeof(msg),
				 "held back behind event %lld",
				 (long long)b->events[by].id);
			pgo_batch_fail(b, i, PGO_ACK_RETRY, msg);
			plan->n_retry++;
			if (plan->first_failed == b->n)
				plan->first_failed = i;
			continue;
		}
		if (b->acks[i] == PGO_ACK_OK) {
			plan->n_ok++;
			continue;
		}
		if (plan->first_failed == b->n)
			plan->first_failed = i;
		f->attempts = e->attempts + 1;
		if (b->acks[i] == PGO_ACK_RETRY &&
		    f->attempts >= rules->max_attempts) {
			if (ordered && rules->poison == PGO_POISON_HALT) {
				f->delay_ms = -1;
				plan->n_halted++;
			} else {
				b->acks[i] = PGO_ACK_DEAD;
			}
		}
		if (b->acks[i] == PGO_ACK_DEAD) {
			plan->n_dead++;
			continue;
		}
		plan->n_retry++;
		if (f->delay_ms == 0)
			f->delay_ms =
				pgo_backoff_ms(f->attempts, rules->retry_base,
					       rules->retry_max, jitter(ctx));
		if (ordered)
			failed[nfailed++] = i;
	}
}
