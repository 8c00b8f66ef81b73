/*
 * abi.c — what a program built against one pgoutbox.h needs to know about
 * the library it runs with: its version (pgo_version(), compiled from the
 * generated pgoutbox/version.h, so it is the library's, not the caller's).
 */
#include "pgo_int.h"

int pgo_version(void)
{
	return PGO_VERSION_NUM;
}

const char *pgo_version_str(void)
{
	return PGO_VERSION;
}
