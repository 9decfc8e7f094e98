// SPDX-License-Identifier: GPL-2.0
/*
 * libsdp.conf parser and matcher (sdp_conf.h, libsdp.conf(5)).
 *
 *   use {sdp|tcp|both} {server|listen|client|connect} PROGRAM ADDRESS
 *   log [destination stderr|syslog|file PATH] [min-level N]
 *
 * ADDRESS is "*", "*:PORTS", A.B.C.D[/PREFIX][:PORTS],
 * [IPV6][/PREFIX][:PORTS], or a bare IPV6[/PREFIX] (any port); PORTS is
 * "*", N or N-M.  '#' starts a comment.
 */
#define _GNU_SOURCE
#include "sdp_conf.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define SDP_CONF_FILE_MAX (1 << 20)
#define SDP_CONF_TOKENS 8

void sdp_conf_init(struct sdp_conf *conf)
{
	memset(conf, 0, sizeof(*conf));
	conf->log_dest = SDP_LOG_STDERR;
	conf->log_level = SDP_LOG_ERROR;
}

static int conf_fail(struct sdp_conf *conf, int line, const char *fmt, ...)
{
	va_list ap;
	int n;

	n = snprintf(conf->error, sizeof(conf->error), "line %d: ", line);
	if (n < 0 || (size_t)n >= sizeof(conf->error))
		return -1;
	va_start(ap, fmt);
	vsnprintf(conf->error + n, sizeof(conf->error) - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

/* A decimal number in [lo, hi], the whole string. */
static bool parse_uint(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	if (!isdigit((unsigned char)*s))
		return false;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

static bool parse_ports(const char *s, uint16_t *lo, uint16_t *hi)
{
	char buf[32];
	char *dash;
	long a, b;

	if (!strcmp(s, "*")) {
		*lo = 0;
		*hi = 65535;
		return true;
	}
	if (strlen(s) >= sizeof(buf))
		return false;
	strcpy(buf, s);
	dash = strchr(buf, '-');
	if (dash)
		*dash++ = '\0';
	if (!parse_uint(buf, 0, 65535, &a))
		return false;
	b = a;
	if (dash && !strcmp(dash, "*"))
		b = 65535;
	else if (dash && !parse_uint(dash, 0, 65535, &b))
		return false;
	if (b < a)
		return false;
	*lo = (uint16_t)a;
	*hi = (uint16_t)b;
	return true;
}

/* ADDR[/PREFIX] into the rule; "*" is any address of any family. */
static bool parse_addr(const char *s, bool v6, struct sdp_conf_rule *rule)
{
	char buf[INET6_ADDRSTRLEN + 8];
	char *slash;
	long prefix;
	int max;

	if (!strcmp(s, "*")) {
		rule->family = AF_UNSPEC;
		rule->prefix = 0;
		return true;
	}
	if (strlen(s) >= sizeof(buf))
		return false;
	strcpy(buf, s);
	slash = strchr(buf, '/');
	if (slash)
		*slash++ = '\0';
	rule->family = v6 ? AF_INET6 : AF_INET;
	if (inet_pton(rule->family, buf, rule->addr) != 1)
		return false;
	max = v6 ? 128 : 32;
	prefix = max;
	if (slash && !parse_uint(slash, 0, max, &prefix))
		return false;
	rule->prefix = (int)prefix;
	return true;
}

static bool parse_addr_spec(const char *spec, struct sdp_conf_rule *rule)
{
	char buf[INET6_ADDRSTRLEN + 32];
	const char *ports = "*";
	char *close, *colon;

	if (strlen(spec) >= sizeof(buf))
		return false;
	strcpy(buf, spec);
	if (buf[0] == '[') {
		/* [IPV6][/PREFIX][:PORTS] */
		close = strchr(buf, ']');
		if (!close)
			return false;
		*close = '\0';
		colon = close + 1;
		if (*colon == '/') {
			char *p = strchr(colon, ':');
			char addr[INET6_ADDRSTRLEN + 8];

			if (p)
				*p = '\0';
			if (snprintf(addr, sizeof(addr), "%s%s", buf + 1, colon) >= (int)sizeof(addr))
				return false;
			if (!parse_addr(addr, true, rule))
				return false;
			return p ? parse_ports(p + 1, &rule->port_lo, &rule->port_hi) :
				   parse_ports("*", &rule->port_lo, &rule->port_hi);
		}
		if (*colon && *colon != ':')
			return false;
		if (*colon == ':')
			ports = colon + 1;
		return parse_addr(buf + 1, true, rule) &&
		       parse_ports(ports, &rule->port_lo, &rule->port_hi);
	}
	colon = strchr(buf, ':');
	if (colon && strchr(colon + 1, ':'))
		/* A bare IPv6 address: no port (brackets give one). */
		return parse_addr(buf, true, rule) && parse_ports("*", &rule->port_lo, &rule->port_hi);
	if (colon) {
		*colon = '\0';
		ports = colon + 1;
	}
	return parse_addr(buf, false, rule) && parse_ports(ports, &rule->port_lo, &rule->port_hi);
}

static int parse_use(struct sdp_conf *conf, int line, char **tok, int n)
{
	struct sdp_conf_rule rule;

	memset(&rule, 0, sizeof(rule));
	rule.line = line;
	if (n < 2)
		return conf_fail(conf, line, "'use' needs sdp, tcp or both");
	if (!strcasecmp(tok[1], "sdp"))
		rule.use = SDP_USE_SDP;
	else if (!strcasecmp(tok[1], "tcp"))
		rule.use = SDP_USE_TCP;
	else if (!strcasecmp(tok[1], "both"))
		rule.use = SDP_USE_BOTH;
	else
		return conf_fail(conf, line, "'use' needs sdp, tcp or both, not '%s'", tok[1]);
	if (n < 3)
		return conf_fail(conf, line, "missing role (server, listen, client or connect)");
	if (!strcasecmp(tok[2], "server") || !strcasecmp(tok[2], "listen"))
		rule.role = SDP_ROLE_SERVER;
	else if (!strcasecmp(tok[2], "client") || !strcasecmp(tok[2], "connect"))
		rule.role = SDP_ROLE_CLIENT;
	else
		return conf_fail(conf, line,
				 "role must be server, listen, client or connect, not '%s'", tok[2]);
	if (n < 4)
		return conf_fail(conf, line, "missing program name (or *)");
	if (strlen(tok[3]) >= sizeof(rule.program))
		return conf_fail(conf, line, "program name longer than %zu bytes",
				 sizeof(rule.program) - 1);
	strcpy(rule.program, tok[3]);
	if (n < 5)
		return conf_fail(conf, line, "missing address (ADDRESS[/PREFIX][:PORTS] or *:*)");
	if (!parse_addr_spec(tok[4], &rule))
		return conf_fail(conf, line, "bad address or ports '%s'", tok[4]);
	if (n > 5)
		return conf_fail(conf, line, "unexpected '%s' after the address", tok[5]);
	if (conf->nr_rules >= SDP_CONF_MAX_RULES)
		return conf_fail(conf, line, "more than %d rules", SDP_CONF_MAX_RULES);
	conf->rules[conf->nr_rules++] = rule;
	return 0;
}

static int parse_log(struct sdp_conf *conf, int line, char **tok, int n)
{
	long level;
	int i = 1;

	if (n < 2)
		return conf_fail(conf, line, "'log' needs destination or min-level");
	while (i < n) {
		if (!strcasecmp(tok[i], "destination")) {
			if (i + 1 >= n)
				return conf_fail(conf, line, "destination needs stderr, syslog or file PATH");
			if (!strcasecmp(tok[i + 1], "stderr")) {
				conf->log_dest = SDP_LOG_STDERR;
				i += 2;
			} else if (!strcasecmp(tok[i + 1], "syslog")) {
				conf->log_dest = SDP_LOG_SYSLOG;
				i += 2;
			} else if (!strcasecmp(tok[i + 1], "file")) {
				if (i + 2 >= n)
					return conf_fail(conf, line, "destination file needs a path");
				if (strlen(tok[i + 2]) >= sizeof(conf->log_path))
					return conf_fail(conf, line, "log file path too long");
				conf->log_dest = SDP_LOG_FILE;
				strcpy(conf->log_path, tok[i + 2]);
				i += 3;
			} else {
				return conf_fail(conf, line,
						 "destination needs stderr, syslog or file PATH, not '%s'",
						 tok[i + 1]);
			}
		} else if (!strcasecmp(tok[i], "min-level")) {
			if (i + 1 >= n || !parse_uint(tok[i + 1], 1, 9, &level))
				return conf_fail(conf, line, "min-level needs a level from 1 to 9");
			conf->log_level = (int)level;
			i += 2;
		} else {
			return conf_fail(conf, line, "'log' takes destination or min-level, not '%s'",
					 tok[i]);
		}
	}
	return 0;
}

static int parse_line(struct sdp_conf *conf, int line, char *text)
{
	char *tok[SDP_CONF_TOKENS];
	char *hash, *save = NULL, *t;
	int n = 0;

	hash = strchr(text, '#');
	if (hash)
		*hash = '\0';
	for (t = strtok_r(text, " \t\r\v\f", &save); t; t = strtok_r(NULL, " \t\r\v\f", &save)) {
		if (n == SDP_CONF_TOKENS)
			return conf_fail(conf, line, "too many words");
		tok[n++] = t;
	}
	if (!n)
		return 0;
	if (!strcasecmp(tok[0], "use"))
		return parse_use(conf, line, tok, n);
	if (!strcasecmp(tok[0], "log"))
		return parse_log(conf, line, tok, n);
	return conf_fail(conf, line, "unknown keyword '%s' (use or log)", tok[0]);
}

int sdp_conf_parse(struct sdp_conf *conf, const char *text)
{
	const char *p = text;
	char buf[1024];
	int line = 0;

	conf->error[0] = '\0';
	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);

		line++;
		if (memchr(p, '\0', len)) {
			conf->nr_rules = 0;
			return conf_fail(conf, line, "NUL byte");
		}
		if (len >= sizeof(buf)) {
			conf->nr_rules = 0;
			return conf_fail(conf, line, "longer than %zu bytes", sizeof(buf) - 1);
		}
		memcpy(buf, p, len);
		buf[len] = '\0';
		if (parse_line(conf, line, buf)) {
			conf->nr_rules = 0;
			return -1;
		}
		p += len + (nl ? 1 : 0);
	}
	return 0;
}

int sdp_conf_load(struct sdp_conf *conf, const char *path)
{
	struct stat st;
	ssize_t got;
	size_t off = 0;
	char *text;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(conf->error, sizeof(conf->error), "cannot open %s: %s", path,
			 strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > SDP_CONF_FILE_MAX) {
		snprintf(conf->error, sizeof(conf->error), "%s: not a regular file of at most %d bytes",
			 path, SDP_CONF_FILE_MAX);
		close(fd);
		return -1;
	}
	text = malloc((size_t)st.st_size + 1);
	if (!text) {
		snprintf(conf->error, sizeof(conf->error), "%s: out of memory", path);
		close(fd);
		return -1;
	}
	while (off < (size_t)st.st_size) {
		got = read(fd, text + off, (size_t)st.st_size - off);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		off += (size_t)got;
	}
	close(fd);
	text[off] = '\0';
	if (memchr(text, '\0', off)) {
		free(text);
		snprintf(conf->error, sizeof(conf->error), "%s: a NUL byte: not a text file", path);
		return -1;
	}
	rc = sdp_conf_parse(conf, text);
	free(text);
	if (rc) {
		char msg[SDP_CONF_ERROR_MAX];

		snprintf(msg, sizeof(msg), "%s: %s", path, conf->error);
		memcpy(conf->error, msg, sizeof(msg));
	}
	return rc;
}

static bool prefix_matches(const uint8_t *a, const uint8_t *b, int bits)
{
	int bytes = bits / 8, rest = bits % 8;

	if (memcmp(a, b, (size_t)bytes))
		return false;
	if (!rest)
		return true;
	return ((a[bytes] ^ b[bytes]) & (uint8_t)(0xff << (8 - rest))) == 0;
}

static bool rule_matches_addr(const struct sdp_conf_rule *rule, const struct sockaddr *addr)
{
	static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	const uint8_t *ip;
	uint16_t port;
	int family;

	if (addr->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)addr;

		family = AF_INET;
		ip = (const uint8_t *)&in->sin_addr;
		port = ntohs(in->sin_port);
	} else if (addr->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)addr;

		family = AF_INET6;
		ip = in6->sin6_addr.s6_addr;
		port = ntohs(in6->sin6_port);
		if (rule->family == AF_INET && !memcmp(ip, v4mapped, sizeof(v4mapped))) {
			family = AF_INET;
			ip += sizeof(v4mapped);
		}
	} else {
		return false;
	}
	if (port < rule->port_lo || port > rule->port_hi)
		return false;
	if (rule->family == AF_UNSPEC)
		return true;
	return rule->family == family && prefix_matches(rule->addr, ip, rule->prefix);
}

enum sdp_conf_use sdp_conf_match(const struct sdp_conf *conf, enum sdp_conf_role role,
				 const char *program, const struct sockaddr *addr, int *line)
{
	int i;

	for (i = 0; i < conf->nr_rules; i++) {
		const struct sdp_conf_rule *rule = &conf->rules[i];

		if (rule->role != role || fnmatch(rule->program, program, 0) ||
		    !rule_matches_addr(rule, addr))
			continue;
		if (line)
			*line = rule->line;
		return rule->use;
	}
	return SDP_USE_NONE;
}

bool sdp_conf_program_may_use_sdp(const struct sdp_conf *conf, const char *program)
{
	int i;

	for (i = 0; i < conf->nr_rules; i++) {
		const struct sdp_conf_rule *rule = &conf->rules[i];

		if (rule->use != SDP_USE_TCP && !fnmatch(rule->program, program, 0))
			return true;
	}
	return false;
}

const char *sdp_conf_use_name(enum sdp_conf_use use)
{
	switch (use) {
	case SDP_USE_SDP:
		return "sdp";
	case SDP_USE_TCP:
		return "tcp";
	case SDP_USE_BOTH:
		return "both";
	default:
		return "none";
	}
}
