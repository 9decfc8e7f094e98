/* SPDX-License-Identifier: GPL-2.0 */
/*
 * libsdp.conf: the rules that choose a transport for a program's TCP
 * sockets, in OFED libsdp's grammar (libsdp.conf(5)).  Parsing and
 * matching are pure functions on a struct, without I/O besides reading the
 * file, so that the unit tests exercise exactly what the preload runs.
 */
#ifndef SDP_CONF_H
#define SDP_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#ifdef __cplusplus
extern "C" {
#endif

/* C names, kernel style, also where C++ tests include them. */
/* NOLINTBEGIN(readability-identifier-naming) */

enum sdp_conf_use {
	SDP_USE_NONE = 0, /* no rule matched */
	SDP_USE_SDP,	  /* SDP only */
	SDP_USE_TCP,	  /* TCP only */
	SDP_USE_BOTH,	  /* SDP, else TCP; a listener takes both */
};

enum sdp_conf_role {
	SDP_ROLE_SERVER, /* "server" or "listen": bind() and listen() */
	SDP_ROLE_CLIENT, /* "client" or "connect": connect() */
};

enum sdp_conf_dest {
	SDP_LOG_STDERR,
	SDP_LOG_SYSLOG,
	SDP_LOG_FILE,
};

/* Log levels, as OFED libsdp's: 9 errors only ... 1 everything. */
enum {
	SDP_LOG_DEBUG = 1,
	SDP_LOG_CALLS = 2,
	SDP_LOG_NOMATCH = 3,
	SDP_LOG_MATCH = 4,
	SDP_LOG_SUMMARY = 7,
	SDP_LOG_WARN = 8,
	SDP_LOG_ERROR = 9,
};

#define SDP_CONF_MAX_RULES 256
#define SDP_CONF_PROGRAM_MAX 128
#define SDP_CONF_PATH_MAX 256
#define SDP_CONF_ERROR_MAX 256

struct sdp_conf_rule {
	enum sdp_conf_use use;
	enum sdp_conf_role role;
	char program[SDP_CONF_PROGRAM_MAX]; /* fnmatch(3) pattern */
	int family;			    /* AF_INET, AF_INET6, AF_UNSPEC: any */
	uint8_t addr[16];		    /* network byte order */
	int prefix;			    /* bits that must match */
	uint16_t port_lo, port_hi;	    /* inclusive, host order */
	int line;
};

struct sdp_conf {
	struct sdp_conf_rule rules[SDP_CONF_MAX_RULES];
	int nr_rules;
	enum sdp_conf_dest log_dest;
	char log_path[SDP_CONF_PATH_MAX];
	int log_level;
	/* First problem found: "LINE: what" (empty when none). */
	char error[SDP_CONF_ERROR_MAX];
};

/* The configuration with no file: errors to stderr, no rule. */
void sdp_conf_init(struct sdp_conf *conf);

/*
 * Parses the text of a whole file.  Returns 0, or -1 with conf->error set
 * ("line N: ...") and conf left with no rule: a file that does not parse is
 * not half applied.  The log settings of lines before the error are kept,
 * so that the error reaches the destination the file asked for.
 */
int sdp_conf_parse(struct sdp_conf *conf, const char *text);

/* Reads and parses PATH.  -1 with conf->error set if it cannot. */
int sdp_conf_load(struct sdp_conf *conf, const char *path);

/*
 * The first rule for ROLE that matches PROGRAM and ADDR (its address and
 * port; AF_INET or AF_INET6, v4-mapped IPv6 matches IPv4 rules), or
 * SDP_USE_NONE.  *line, if given, gets the rule's line.
 */
enum sdp_conf_use sdp_conf_match(const struct sdp_conf *conf, enum sdp_conf_role role,
				 const char *program, const struct sockaddr *addr, int *line);

/*
 * Whether any rule could select SDP (sdp or both) for PROGRAM: if none can,
 * its sockets stay plain TCP sockets from socket() on.
 */
bool sdp_conf_program_may_use_sdp(const struct sdp_conf *conf, const char *program);

const char *sdp_conf_use_name(enum sdp_conf_use use);

/* NOLINTEND(readability-identifier-naming) */

#ifdef __cplusplus
}
#endif

#endif /* SDP_CONF_H */
