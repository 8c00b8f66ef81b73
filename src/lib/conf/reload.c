/*
 * conf/reload.c — SIGHUP: every source read again into a fresh
 * configuration, checked as a whole as the next start would check it;
 * then each key that changed is taken when a running relay may take it
 * (reloadable) and logged, masked, either way.
 */
#include <stdio.h>
#include <string.h>

#include "conf/conf_int.h"
#include "base/buf.h"
#include "base/log.h"
#include "conf/conf.h"
#include "pgoutbox.h"

static void swap_ptr(char **a, char **b)
{
	char *t = *a;

	*a = *b;
	*b = t;
}

/* Exchanges pgo_conf_keys[i]'s value, text and origin between two
 * configurations; nothing is allocated, so a reload cannot fail half-way. */
static void swap_key(pgo_conf_t *x, pgo_conf_t *y, size_t i)
{
	union {
		char *s;
		int64_t ms;
		int n;
		bool b;
	} tmp;
	pgo_conf_origin_t o = x->state[i].origin;
	int64_t num = x->state[i].num;

	if (pgo_conf_keys[i]->in_values) {
		void *fx = field_of(&x->vals, pgo_conf_keys[i]);
		void *fy = field_of(&y->vals, pgo_conf_keys[i]);
		size_t n = field_size(pgo_conf_keys[i]);

		memcpy(&tmp, fx, n);
		memcpy(fx, fy, n);
		memcpy(fy, &tmp, n);
	}
	x->state[i].num = y->state[i].num;
	y->state[i].num = num;
	swap_ptr(&x->state[i].text, &y->state[i].text);
	swap_ptr(&x->state[i].where, &y->state[i].where);
	x->state[i].origin = y->state[i].origin;
	y->state[i].origin = o;
}

/* Reads every source again into fresh, as conf was built. */
static int reread(const pgo_conf_t *conf, pgo_conf_t *fresh, char *const *envp)
{
	int rc;

	if (conf->path && (rc = pgo_conf_load_file(fresh, conf->path)))
		return rc;
	if ((rc = pgo_conf_load_env(fresh, envp)))
		return rc;
	for (size_t i = 0; i < conf->nsettings; i++) {
		const struct setting *s = &conf->settings[i];

		rc = pgo_conf_set_key(fresh, s->key, s->value, s->origin,
				      s->where);
		if (rc)
			return rc;
	}
	/* Checked as a whole, as the next start would check it.  Each rule
	 * ties keys that are all reloadable or all not, so what is applied
	 * below stays valid too. */
	return pgo_conf_validate(fresh);
}

/* Takes pgo_conf_keys[i] from fresh when it differs and may change; returns 1
 * when it did. */
static int take_key(pgo_conf_t *conf, pgo_conf_t *fresh, size_t i)
{
	const pgo_conf_key_t *k = pgo_conf_keys[i];
	struct key_state *old = &conf->state[i], *new = &fresh->state[i];
	pgo_buf_t b1, b2;
	char from[600];

	if (strcmp(old->text, new->text) == 0) {
		/* Same value, perhaps from another line: keep show exact. */
		swap_ptr(&old->where, &new->where);
		old->origin = new->origin;
		return 0;
	}
	pgo_buf_init(&b1);
	pgo_buf_init(&b2);
	pgo_conf_describe_origin(new, from, sizeof(from));
	if (k->reloadable) {
		pgo_log(PGO_LOG_INFO, "config", "%s changed from %s to %s (%s)",
			k->key, pgo_conf_display(k, old->text, &b1),
			pgo_conf_display(k, new->text, &b2), from);
		swap_key(conf, fresh, i);
	} else {
		pgo_log(PGO_LOG_WARN, "config",
			"%s changed to %s (%s) but needs a restart; "
			"keeping %s",
			k->key, pgo_conf_display(k, new->text, &b2), from,
			pgo_conf_display(k, old->text, &b1));
	}
	pgo_buf_free(&b1);
	pgo_buf_free(&b2);
	return k->reloadable;
}

int pgo_conf_reload(pgo_conf_t *conf, char *const *envp, int *changed)
{
	pgo_conf_t *fresh;
	int rc, n = 0;

	if (changed)
		*changed = 0;
	fresh = pgo_conf_new();
	if (!fresh)
		return pgo_conf_nomem(conf);
	rc = reread(conf, fresh, envp);
	if (rc != PGO_OK) {
		memcpy(conf->errmsg, fresh->errmsg, sizeof(conf->errmsg));
		pgo_conf_destroy(fresh);
		return rc;
	}
	/* A fleet's [database NAME] sections (the fleet adds and removes
	 * their relays, fleet.c). */
	if (pgo_conf_databases_take(conf, fresh) != PGO_OK) {
		pgo_conf_destroy(fresh);
		return PGO_ERR_NOMEM;
	}
	for (size_t i = 0; i < pgo_conf_nkeys; i++)
		n += take_key(conf, fresh, i);
	pgo_conf_destroy(fresh);
	if (changed)
		*changed = n;
	return PGO_OK;
}
