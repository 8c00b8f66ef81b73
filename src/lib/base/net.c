/*
 * net.c — loopback names and addresses (base/net.h).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "base/net.h"

bool pgo_host_is_loopback(const char *host)
{
	const char *end;
	size_t n;

	if (!host)
		return false;
	if (host[0] == '[') { /* an IPv6 literal: only [::1] */
		end = strchr(host, ']');
		if (!end)
			return false;
		n = (size_t)(end - host) + 1;
		if (n != 5 || strncmp(host, "[::1]", 5) != 0)
			return false;
	} else {
		n = strcspn(host, ":");
		if (!(n == 9 && strncasecmp(host, "localhost", 9) == 0)) {
			/* a dotted quad of 127.0.0.0/8 */
			struct in_addr a;
			char ip[16];

			if (n >= sizeof(ip))
				return false;
			memcpy(ip, host, n);
			ip[n] = '\0';
			if (inet_pton(AF_INET, ip, &a) != 1 ||
			    (ntohl(a.s_addr) >> 24) != 127)
				return false;
		}
	}
	/* Then nothing, or ":PORT". */
	end = host + n;
	if (!*end)
		return true;
	if (*end != ':' || !end[1])
		return false;
	return strspn(end + 1, "0123456789") == strlen(end + 1);
}

bool pgo_addr_is_loopback(const struct sockaddr *sa)
{
	if (!sa)
		return false;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a =
			&((const struct sockaddr_in6 *)sa)->sin6_addr;

		return IN6_IS_ADDR_LOOPBACK(a) ||
		       (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return false;
}
