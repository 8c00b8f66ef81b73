/*
 * registry.c — metric families and their series, written out in the
 * Prometheus text exposition format (version 0.0.4).
 *
 * A family is a name, a help line and a type; a series is one set of
 * label values with its value (and, for a histogram, its buckets, sum and
 * count).  Runners keep pointers to the series they update on their hot
 * paths, so an update is one addition; looking a series up by its labels
 * is for gauges set from a query, a few times a minute.  No I/O here.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/metrics.h"
#include "base/buf.h"

const double pgo_metrics_seconds_buckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025,
					      0.05,  0.1,    0.25,  0.5,  1,
					      2.5,   5,	     10,    30,	  60};
const int pgo_metrics_seconds_nbuckets =
	(int)(sizeof(pgo_metrics_seconds_buckets) /
	      sizeof(pgo_metrics_seconds_buckets[0]));

struct pgo_series {
	struct pgo_series *next;
	const struct pgo_metric *family; /* its bounds, for observe() */
	char *labels;			 /* `k="v",...`; "" for none */
	double value;	   /* counter, gauge; histogram: the sum */
	uint64_t count;	   /* histogram: observations */
	uint64_t *buckets; /* histogram: per bound, not cumulative */
};

struct pgo_metric {
	struct pgo_metric *next;
	pgo_metric_type_t type;
	const char *name, *help; /* borrowed: string literals */
	const double *bounds;	 /* histogram bucket bounds, borrowed */
	int nbounds;
	pgo_series_t *series; /* in the order made */
};

struct pgo_metrics {
	pgo_metric_t *first, *last;
};

pgo_metrics_t *pgo_metrics_new(void)
{
	return calloc(1, sizeof(pgo_metrics_t));
}

static void series_free(pgo_series_t *s)
{
	while (s) {
		pgo_series_t *next = s->next;

		free(s->labels);
		free(s->buckets);
		free(s);
		s = next;
	}
}

void pgo_metrics_destroy(pgo_metrics_t *m)
{
	if (!m)
		return;
	for (pgo_metric_t *f = m->first, *next; f; f = next) {
		next = f->next;
		series_free(f->series);
		free(f);
	}
	free(m);
}

pgo_metric_t *pgo_metrics_family(pgo_metrics_t *m, pgo_metric_type_t type,
				 const char *name, const char *help,
				 const double *bounds, int nbounds)
{
	pgo_metric_t *f;

	if (!m)
		return NULL;
	/* A fleet's relays share one registry: the family is made once,
	 * each relay's series are labelled with its database. */
	for (f = m->first; f; f = f->next)
		if (strcmp(f->name, name) == 0)
			return f->type == type ? f : NULL;
	if (!(f = calloc(1, sizeof(*f))))
		return NULL;
	f->type = type;
	f->name = name;
	f->help = help;
	if (type == PGO_METRIC_HISTOGRAM) {
		f->bounds = bounds;
		f->nbounds = nbounds;
	}
	if (m->last)
		m->last->next = f;
	else
		m->first = f;
	m->last = f;
	return f;
}

pgo_series_t *pgo_metric_series(pgo_metric_t *f, const char *labels)
{
	pgo_series_t *s, **tail;

	if (!f)
		return NULL;
	if (!labels)
		labels = "";
	for (tail = &f->series; (s = *tail); tail = &s->next)
		if (strcmp(s->labels, labels) == 0)
			return s;
	if (!(s = calloc(1, sizeof(*s))) || !(s->labels = strdup(labels)) ||
	    (f->nbounds &&
	     !(s->buckets = calloc((size_t)f->nbounds, sizeof(uint64_t))))) {
		if (s)
			free(s->labels);
		free(s);
		return NULL;
	}
	s->family = f;
	*tail = s;
	return s;
}

void pgo_metric_clear(pgo_metric_t *f)
{
	if (!f)
		return;
	series_free(f->series);
	f->series = NULL;
}

void pgo_metric_clear_prefix(pgo_metric_t *f, const char *prefix)
{
	size_t n = prefix ? strlen(prefix) : 0;

	if (!f)
		return;
	for (pgo_series_t **p = &f->series; *p;) {
		pgo_series_t *s = *p;

		if (strncmp(s->labels, prefix ? prefix : "", n) != 0) {
			p = &s->next;
			continue;
		}
		*p = s->next;
		s->next = NULL;
		series_free(s);
	}
}

void pgo_metrics_clear_prefix(pgo_metrics_t *m, const char *prefix)
{
	for (pgo_metric_t *f = m ? m->first : NULL; f; f = f->next)
		pgo_metric_clear_prefix(f, prefix);
}

void pgo_series_add(pgo_series_t *s, double v)
{
	if (s)
		s->value += v;
}

void pgo_series_set(pgo_series_t *s, double v)
{
	if (s)
		s->value = v;
}

double pgo_series_value(const pgo_series_t *s)
{
	return s ? s->value : 0;
}

void pgo_series_observe(pgo_series_t *s, double v)
{
	const pgo_metric_t *f;
	int lo = 0, hi;

	if (!s || !s->buckets)
		return;
	f = s->family;
	/* The first bound >= v (le is "less than or equal"). */
	hi = f->nbounds;
	while (lo < hi) {
		int mid = (lo + hi) / 2;

		if (f->bounds[mid] >= v)
			hi = mid;
		else
			lo = mid + 1;
	}
	if (lo < f->nbounds)
		s->buckets[lo]++;
	s->count++;
	s->value += v;
}

char *pgo_metrics_labels(char *buf, size_t size, ...)
{
	size_t n = 0;
	const char *k;
	va_list ap;

	if (!size)
		return buf;
	buf[0] = '\0';
	va_start(ap, size);
	while ((k = va_arg(ap, const char *))) {
		const char *v = va_arg(ap, const char *);
		int w = snprintf(buf + n, size - n, "%s%s=\"", n ? "," : "", k);

		if (w < 0 || (size_t)w >= size - n)
			break;
		n += (size_t)w;
		for (; v && *v && n + 3 < size; v++) {
			char c = *v;

			if (c == '\\' || c == '"' || c == '\n') {
				buf[n++] = '\\';
				c = c == '\n' ? 'n' : c;
			}
			buf[n++] = c;
		}
		if (n + 2 > size)
			break;
		buf[n++] = '"';
		buf[n] = '\0';
	}
	va_end(ap);
	buf[n < size ? n : size - 1] = '\0';
	return buf;
}

/* A sample value: whole numbers without a fraction, NaN and infinities
 * as the format spells them. */
static void put_value(pgo_buf_t *out, double v)
{
	if (isnan(v))
		pgo_buf_puts(out, "NaN");
	else if (isinf(v))
		pgo_buf_puts(out, v > 0 ? "+Inf" : "-Inf");
	else if (v == (double)(int64_t)v && fabs(v) < 9e15)
		pgo_buf_printf(out, "%lld", (long long)v);
	else
		pgo_buf_printf(out, "%.17g", v);
}

/* name{labels[,extra]} value */
static void put_sample(pgo_buf_t *out, const char *name, const char *suffix,
		       const char *labels, const char *extra, double v)
{
	bool any = labels[0] || (extra && extra[0]);

	pgo_buf_puts(out, name);
	pgo_buf_puts(out, suffix);
	if (any) {
		pgo_buf_puts(out, "{");
		pgo_buf_puts(out, labels);
		if (extra && extra[0]) {
			if (labels[0])
				pgo_buf_puts(out, ",");
			pgo_buf_puts(out, extra);
		}
		pgo_buf_puts(out, "}");
	}
	pgo_buf_puts(out, " ");
	put_value(out, v);
	pgo_buf_puts(out, "\n");
}

/* The help text escaped: backslash and newline. */
static void put_help(pgo_buf_t *out, const char *help)
{
	for (; *help; help++) {
		if (*help == '\\')
			pgo_buf_puts(out, "\\\\");
		else if (*help == '\n')
			pgo_buf_puts(out, "\\n");
		else
			pgo_buf_append(out, help, 1);
	}
}

static const char *const type_names[] = {"counter", "gauge", "histogram"};

void pgo_metrics_format(const pgo_metrics_t *m, pgo_buf_t *out)
{
	for (const pgo_metric_t *f = m ? m->first : NULL; f; f = f->next) {
		pgo_buf_printf(out, "# HELP %s ", f->name);
		put_help(out, f->help);
		pgo_buf_printf(out, "\n# TYPE %s %s\n", f->name,
			       type_names[f->type]);
		for (const pgo_series_t *s = f->series; s; s = s->next) {
			uint64_t cum = 0;
			char le[40];

			if (f->type != PGO_METRIC_HISTOGRAM) {
				put_sample(out, f->name, "", s->labels, NULL,
					   s->value);
				continue;
			}
			for (int i = 0; i < f->nbounds; i++) {
				cum += s->buckets[i];
				snprintf(le, sizeof(le), "le=\"%g\"",
					 f->bounds[i]);
				put_sample(out, f->name, "_bucket", s->labels,
					   le, (double)cum);
			}
			put_sample(out, f->name, "_bucket", s->labels,
				   "le=\"+Inf\"", (double)s->count);
			put_sample(out, f->name, "_sum", s->labels, NULL,
				   s->value);
			put_sample(out, f->name, "_count", s->labels, NULL,
				   (double)s->count);
		}
	}
}
