/*
 * redis-latency-producer.c — the producer of bench/redis-latency.sh.
 *
 *   redis-latency-producer CONNINFO TOPIC RUN COUNT RATE OUT [CONNS]
 *
 * Sends COUNT events, one per transaction (BEGIN; SELECT pgoutbox.send(
 * TOPIC, key, 'latency.probe', {"run": RUN, "seq": n}); COMMIT), open loop
 * at RATE events/s: event n is due at start + n / RATE, whatever happened
 * to the ones before.  CONNS connections (default 4, one thread each;
 * thread j sends the events n with n % CONNS == j) keep the schedule when
 * one commit (an fsync) takes longer than the interval.
 *
 * Writes one line per event to OUT: "seq event_id due_us commit_us", both
 * times CLOCK_REALTIME in microseconds since the epoch; commit_us is taken
 * right after COMMIT returned.  The consumers stamp their arrivals with the
 * same clock (PostgreSQL's clock_timestamp(), Node's performance.timeOrigin
 * + performance.now()), so arrival - commit is the latency.  Prints a
 * summary line to stderr (sent, seconds, worst lateness against the
 * schedule).  Exit 0 when every event committed, 1 otherwise.
 */
#include <libpq-fe.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct rec {
	long long id;
	int64_t due_us, commit_us;
	int ok;
};

static const char *conninfo, *topic, *run;
static long count;
static double rate;
static int nconns;
static struct timespec start;
static struct rec *recs;

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int exec_ok(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	int ok = PQresultStatus(r) == PGRES_COMMAND_OK;

	if (!ok)
		fprintf(stderr, "producer: %s: %s", sql, PQerrorMessage(c));
	PQclear(r);
	return ok;
}

static void *sender(void *arg)
{
	int j = (int)(intptr_t)arg;
	PGconn *c = PQconnectdb(conninfo);

	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, "producer: connect: %s", PQerrorMessage(c));
		PQfinish(c);
		return NULL;
	}
	for (long n = j; n < count; n += nconns) {
		/* Absolute due time on CLOCK_REALTIME (the clock we report). */
		double off = (double)n / rate;
		struct timespec due = start;
		char key[32], payload[160];
		const char *params[4];
		PGresult *r;

		due.tv_sec += (time_t)off;
		due.tv_nsec += (long)((off - (double)(time_t)off) * 1e9);
		if (due.tv_nsec >= 1000000000L) {
			due.tv_sec++;
			due.tv_nsec -= 1000000000L;
		}
		while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &due,
				       NULL) != 0)
			;
		recs[n].due_us =
			(int64_t)due.tv_sec * 1000000 + due.tv_nsec / 1000;
		snprintf(key, sizeof(key), "k%ld", n % 16);
		snprintf(payload, sizeof(payload),
			 "{\"run\": \"%s\", \"seq\": %ld}", run, n);
		params[0] = topic;
		params[1] = key;
		params[2] = "latency.probe";
		params[3] = payload;
		if (!exec_ok(c, "BEGIN"))
			continue;
		r = PQexecParams(c,
				 "SELECT pgoutbox.send($1, $2, $3, $4::jsonb)",
				 4, NULL, params, NULL, NULL, 0);
		if (PQresultStatus(r) != PGRES_TUPLES_OK) {
			fprintf(stderr, "producer: send: %s",
				PQerrorMessage(c));
			PQclear(r);
			exec_ok(c, "ROLLBACK");
			continue;
		}
		recs[n].id = atoll(PQgetvalue(r, 0, 0));
		PQclear(r);
		if (!exec_ok(c, "COMMIT"))
			continue;
		recs[n].commit_us = now_us();
		recs[n].ok = 1;
	}
	PQfinish(c);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[64];
	int64_t worst = 0, t0;
	long sent = 0;
	FILE *out;

	if (argc < 7 || argc > 8) {
		fprintf(stderr, "usage: redis-latency-producer CONNINFO TOPIC "
				"RUN COUNT RATE OUT [CONNS]\n");
		return 2;
	}
	conninfo = argv[1];
	topic = argv[2];
	run = argv[3];
	count = atol(argv[4]);
	rate = atof(argv[5]);
	nconns = argc == 8 ? atoi(argv[7]) : 4;
	if (count <= 0 || rate <= 0 || nconns < 1 || nconns > 64) {
		fprintf(stderr, "redis-latency-producer: COUNT and RATE > 0, "
				"CONNS in 1..64\n");
		return 2;
	}
	recs = calloc((size_t)count, sizeof(*recs));
	if (!recs)
		return 1;
	/* Start 100 ms from now, so that every thread is connected by then. */
	clock_gettime(CLOCK_REALTIME, &start);
	start.tv_nsec += 100000000L;
	if (start.tv_nsec >= 1000000000L) {
		start.tv_sec++;
		start.tv_nsec -= 1000000000L;
	}
	t0 = now_us();
	for (int j = 0; j < nconns; j++)
		pthread_create(&th[j], NULL, sender, (void *)(intptr_t)j);
	for (int j = 0; j < nconns; j++)
		pthread_join(th[j], NULL);
	out = fopen(argv[6], "w");
	if (!out) {
		perror(argv[6]);
		return 1;
	}
	for (long n = 0; n < count; n++) {
		if (!recs[n].ok)
			continue;
		sent++;
		if (recs[n].commit_us - recs[n].due_us > worst)
			worst = recs[n].commit_us - recs[n].due_us;
		fprintf(out, "%ld %lld %lld %lld\n", n, recs[n].id,
			(long long)recs[n].due_us,
			(long long)recs[n].commit_us);
	}
	fclose(out);
	fprintf(stderr,
		"producer: %ld/%ld committed in %.2f s at %.0f/s on %d "
		"connections; "
		"worst commit %.1f ms after its due time\n",
		sent, count, (double)(now_us() - t0) / 1e6, rate, nconns,
		(double)worst / 1000.0);
	free(recs);
	return sent == count ? 0 : 1;
}
