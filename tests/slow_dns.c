/*
 * slow_dns.c — an LD_PRELOAD shim for tests: getaddrinfo() of a name
 * ending in ".test" sleeps SLOW_DNS_MS (default 3000) ms, as a name
 * server that answers slowly, then answers for 127.0.0.1.  Other names
 * go to the real getaddrinfo().  Built by the tests that use it
 * (t_fleet_slow_dns, t_fleet_wal_dns): cc -shared -fPIC -o slow_dns.so
 * slow_dns.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int (*gai_fn)(const char *, const char *, const struct addrinfo *,
		      struct addrinfo **);

int getaddrinfo(const char *node, const char *service,
		const struct addrinfo *hints, struct addrinfo **res)
{
	gai_fn real = (gai_fn)dlsym(RTLD_NEXT, "getaddrinfo");
	size_t n = node ? strlen(node) : 0;

	if (n > 5 && strcmp(node + n - 5, ".test") == 0) {
		const char *ms = getenv("SLOW_DNS_MS");
		long wait = ms ? atol(ms) : 3000;
		struct timespec ts = {wait / 1000, (wait % 1000) * 1000000};

		nanosleep(&ts, NULL);
		node = "127.0.0.1";
	}
	return real(node, service, hints, res);
}
