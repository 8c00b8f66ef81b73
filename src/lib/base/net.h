/*
 * base/net.h — loopback names and addresses, for the HTTP servers of a
 * process (the metrics endpoint, the console) that listen on a loopback
 * address and answer only to a loopback Host: a web page whose name was
 * made to resolve to 127.0.0.1 (DNS rebinding) sends its own name as the
 * Host, and is refused.
 */
#ifndef PGO_BASE_NET_H
#define PGO_BASE_NET_H

#include <stdbool.h>

struct sockaddr;

/* What such a server answers a request of another Host (403). */
#define PGO_HOST_REFUSED                                                       \
	"this server listens on a loopback address and answers only to "       \
	"localhost, 127.0.0.1 or [::1] as its Host, not to another name "      \
	"(DNS rebinding)"

/* Whether a Host header names this machine's loopback: "localhost",
 * an address of 127.0.0.0/8 or "[::1]", each with or without ":PORT".
 * False for NULL and for anything else ("evil.example:9187",
 * "127.0.0.1.evil.example"). */
bool pgo_host_is_loopback(const char *host);

/* Whether sa is a loopback address: 127.0.0.0/8, ::1, or 127.0.0.0/8
 * mapped into IPv6.  False for NULL and other families. */
bool pgo_addr_is_loopback(const struct sockaddr *sa);

#endif /* PGO_BASE_NET_H */
