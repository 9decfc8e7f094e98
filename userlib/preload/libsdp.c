// SPDX-License-Identifier: GPL-2.0
/*
 * libsdp.so: LD_PRELOAD this library and the TCP sockets a program makes
 * become SDP sockets, chosen by the rules of libsdp.conf(5).
 *
 * It stays thin on purpose (Documentation/preload.md): socket() asks the
 * kernel for an IPPROTO_SDP socket instead of a TCP one, and bind(),
 * connect() and listen() set the socket's SDP_TRANSPORT_POLICY from the rule
 * that matches the address before the kernel sees the call; a SO_ZEROCOPY
 * that a kernel before 6.12 refuses on an SDP socket is retried as
 * SDP_ZEROCOPY.  The descriptor
 * is the kernel's socket, with no shadow descriptor or table here, so poll,
 * epoll, fork, exec, dup, SCM_RIGHTS and io_uring I/O work as on TCP, and
 * the fallback to TCP happens in the kernel on the same socket.
 */
#define _GNU_SOURCE
#include "sdp_conf.h"
#include "uapi/sdp.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <syslog.h>
#include <unistd.h>

#define SDP_DEFAULT_CONF "/etc/libsdp.conf"

typedef int (*socket_fn)(int, int, int);
typedef int (*addr_fn)(int, const struct sockaddr *, socklen_t);
typedef int (*listen_fn)(int, int);
typedef int (*setsockopt_fn)(int, int, int, const void *, socklen_t);

static struct {
	bool ready;
	/* Every TCP socket over SDP with the kernel's default policy. */
	bool simple;
	/* The rules (or the default ones); read once, at load. */
	struct sdp_conf conf;
	int log_fd;
	socket_fn real_socket;
	addr_fn real_bind;
	addr_fn real_connect;
	listen_fn real_listen;
	setsockopt_fn real_setsockopt;
} lib = { .log_fd = -1 };

static void say(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say(int level, const char *fmt, ...)
{
	char msg[512];
	int saved = errno, n;
	va_list ap;

	if (level < lib.conf.log_level)
		return;
	n = snprintf(msg, sizeof(msg), "libsdp[%d] %s: ", getpid(), program_invocation_short_name);
	if (n < 0 || (size_t)n >= sizeof(msg))
		goto out;
	va_start(ap, fmt);
	vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
	va_end(ap);
	if (lib.conf.log_dest == SDP_LOG_SYSLOG) {
		syslog(level >= SDP_LOG_ERROR ? LOG_ERR :
		       level >= SDP_LOG_WARN  ? LOG_WARNING :
						LOG_DEBUG,
		       "%s", msg + n);
	} else {
		int fd = lib.log_fd >= 0 ? lib.log_fd : STDERR_FILENO;
		size_t len = strlen(msg);

		if (len < sizeof(msg) - 1)
			msg[len++] = '\n';
		if (write(fd, msg, len) < 0)
			(void)0; /* nowhere left to say it */
	}
out:
	errno = saved;
}

static void resolve(void)
{
	lib.real_socket = (socket_fn)dlsym(RTLD_NEXT, "socket");
	lib.real_bind = (addr_fn)dlsym(RTLD_NEXT, "bind");
	lib.real_connect = (addr_fn)dlsym(RTLD_NEXT, "connect");
	lib.real_listen = (listen_fn)dlsym(RTLD_NEXT, "listen");
	lib.real_setsockopt = (setsockopt_fn)dlsym(RTLD_NEXT, "setsockopt");
}

/* What applies with no usable file: SDP with fallback for every socket. */
static void default_rules(struct sdp_conf *conf)
{
	sdp_conf_parse(conf, "use both server * *:*\nuse both client * *:*\n");
}

static bool env_set(const char *name)
{
	const char *v = getenv(name);

	return v && *v && strcmp(v, "0");
}

static void init(void)
{
	const char *path = getenv("LIBSDP_CONFIG_FILE");
	const char *level = getenv("LIBSDP_LOG_LEVEL");
	bool explicit_path = path && *path;
	bool missing;
	int rc;

	if (lib.ready)
		return;
	resolve();
	sdp_conf_init(&lib.conf);
	lib.simple = env_set("SIMPLE_LIBSDP") || env_set("ALWAYS_USE_SDP");
	if (!explicit_path)
		path = SDP_DEFAULT_CONF;
	/* No /etc/libsdp.conf is not an error; a file asked for is. */
	missing = !explicit_path && access(path, F_OK) && errno == ENOENT;
	rc = lib.simple || missing ? 0 : sdp_conf_load(&lib.conf, path);
	if (lib.conf.log_dest == SDP_LOG_FILE) {
		lib.log_fd = open(lib.conf.log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (lib.log_fd < 0)
			lib.conf.log_dest = SDP_LOG_STDERR;
	} else if (lib.conf.log_dest == SDP_LOG_SYSLOG) {
		openlog("libsdp", LOG_PID, LOG_USER);
	}
	if (level && *level) {
		int l = atoi(level);

		if (l >= SDP_LOG_DEBUG && l <= SDP_LOG_ERROR)
			lib.conf.log_level = l;
	}
	lib.ready = true;
	if (lib.simple) {
		say(SDP_LOG_SUMMARY, "every TCP socket over SDP (%s)",
		    env_set("SIMPLE_LIBSDP") ? "SIMPLE_LIBSDP" : "ALWAYS_USE_SDP");
		return;
	}
	if (rc) {
		/* Said once, at load; the documented default applies. */
		say(SDP_LOG_ERROR, "%s; using the default rules (both, for every socket)",
		    lib.conf.error);
		default_rules(&lib.conf);
	} else if (missing) {
		say(SDP_LOG_DEBUG, "no %s: the default rules (both, for every socket)", path);
		default_rules(&lib.conf);
	} else {
		say(SDP_LOG_DEBUG, "%d rules from %s", lib.conf.nr_rules, path);
	}
}

__attribute__((constructor)) static void libsdp_load(void)
{
	init();
}

static int sysfs_int(const char *path, int fallback)
{
	char buf[32];
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fallback;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return fallback;
	buf[n] = '\0';
	return atoi(buf);
}

/*
 * The SDP socket in place of socket(domain, type, TCP): IPPROTO_SDP, which
 * keeps the family (and autoloads sdp.ko), else the SDP family.  -1 if
 * neither exists, with errno of the first attempt.
 */
static int sdp_socket(int domain, int type)
{
	int ipproto = sysfs_int(SDP_IPPROTO_SYSFS_PATH, IPPROTO_SDP);
	int fd = -1, err = EPROTONOSUPPORT;

	if (ipproto > 0) {
		fd = lib.real_socket(domain, type, ipproto);
		if (fd >= 0)
			return fd;
		err = errno;
	}
	fd = lib.real_socket(sysfs_int(SDP_FAMILY_SYSFS_PATH, AF_INET_SDP), type, 0);
	if (fd >= 0)
		return fd;
	errno = err;
	return -1;
}

int socket(int domain, int type, int protocol)
{
	static bool warned;
	int fd;

	init();
	if ((domain != AF_INET && domain != AF_INET6) || (type & 0xf) != SOCK_STREAM ||
	    (protocol != 0 && protocol != IPPROTO_TCP) ||
	    !(lib.simple || sdp_conf_program_may_use_sdp(&lib.conf, program_invocation_short_name)))
		return lib.real_socket(domain, type, protocol);
	fd = sdp_socket(domain, type);
	if (fd >= 0) {
		say(SDP_LOG_CALLS, "socket(%s) = %d: SDP", domain == AF_INET ? "AF_INET" : "AF_INET6",
		    fd);
		return fd;
	}
	if (!warned) {
		warned = true;
		say(SDP_LOG_ERROR, "no SDP socket (%s): is sdp.ko loadable? TCP sockets instead",
		    strerror(errno));
	}
	return lib.real_socket(domain, type, protocol);
}

static bool is_sdp_socket(int fd)
{
	int proto = -1, domain = -1;
	socklen_t len = sizeof(proto);

	if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len))
		return false;
	len = sizeof(domain);
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len))
		return false;
	if (domain == AF_INET || domain == AF_INET6)
		return proto == sysfs_int(SDP_IPPROTO_SYSFS_PATH, IPPROTO_SDP);
	return domain == sysfs_int(SDP_FAMILY_SYSFS_PATH, AF_INET_SDP);
}

static const char *addr_text(const struct sockaddr *sa, char *buf, size_t size)
{
	char ip[INET6_ADDRSTRLEN] = "?";

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
		snprintf(buf, size, "%s:%u", ip, ntohs(in->sin_port));
	} else {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
		snprintf(buf, size, "[%s]:%u", ip, ntohs(in6->sin6_port));
	}
	return buf;
}

/*
 * The rule for FD at ADDR decides its policy: sdp SDP only, both SDP else
 * TCP, tcp (or no rule) TCP only.  SIMPLE_LIBSDP leaves the kernel's
 * default (net.sdp.fallback).  A socket that has chosen already (EISCONN)
 * keeps its choice.
 */
static void apply_rule(int fd, enum sdp_conf_role role, const struct sockaddr *addr,
		       socklen_t len, const char *call)
{
	enum sdp_conf_use use;
	char text[INET6_ADDRSTRLEN + 16];
	int policy, line = 0;

	if (!addr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) ||
	    len < (addr->sa_family == AF_INET ? sizeof(struct sockaddr_in) :
						sizeof(struct sockaddr_in6)) ||
	    lib.simple || !is_sdp_socket(fd))
		return;
	use = sdp_conf_match(&lib.conf, role, program_invocation_short_name, addr, &line);
	policy = use == SDP_USE_SDP  ? SDP_POLICY_SDP :
		 use == SDP_USE_BOTH ? SDP_POLICY_FALLBACK :
				       SDP_POLICY_TCP;
	if (use == SDP_USE_NONE)
		say(SDP_LOG_NOMATCH, "%s(%d, %s): no rule: tcp", call, fd,
		    addr_text(addr, text, sizeof(text)));
	else
		say(call[0] == 'b' ? SDP_LOG_MATCH : SDP_LOG_SUMMARY, "%s(%d, %s): %s (line %d)", call,
		    fd, addr_text(addr, text, sizeof(text)), sdp_conf_use_name(use), line);
	if (lib.real_setsockopt(fd, SOL_SDP, SDP_TRANSPORT_POLICY, &policy, sizeof(policy)) &&
	    errno != EISCONN)
		say(SDP_LOG_WARN, "%s(%d): SDP_TRANSPORT_POLICY: %s", call, fd, strerror(errno));
}

int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	init();
	apply_rule(fd, SDP_ROLE_SERVER, addr, len, "bind");
	return lib.real_bind(fd, addr, len);
}

int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	init();
	apply_rule(fd, SDP_ROLE_CLIENT, addr, len, "connect");
	return lib.real_connect(fd, addr, len);
}

int listen(int fd, int backlog)
{
	struct sockaddr_storage local;
	socklen_t len = sizeof(local);

	init();
	if (!getsockname(fd, (struct sockaddr *)&local, &len))
		apply_rule(fd, SDP_ROLE_SERVER, (struct sockaddr *)&local, len, "listen");
	return lib.real_listen(fd, backlog);
}

/*
 * SO_ZEROCOPY: kernels before 6.12 refuse it (EOPNOTSUPP) for every
 * protocol but TCP and UDP before SDP sees the call; SDP takes the same
 * option as SOL_SDP/SDP_ZEROCOPY.  Only a refused call on an SDP socket is
 * retried, so TCP sockets and newer kernels see one real call.
 */
int setsockopt(int fd, int level, int optname, const void *optval, socklen_t optlen)
{
	int saved, ret;

	init();
	ret = lib.real_setsockopt(fd, level, optname, optval, optlen);
	if (ret == 0 || level != SOL_SOCKET || optname != SO_ZEROCOPY || errno != EOPNOTSUPP)
		return ret;
	saved = errno;
	if (!is_sdp_socket(fd)) {
		errno = saved;
		return ret;
	}
	ret = lib.real_setsockopt(fd, SOL_SDP, SDP_ZEROCOPY, optval, optlen);
	say(SDP_LOG_CALLS, "setsockopt(%d, SO_ZEROCOPY): as SDP_ZEROCOPY: %s", fd,
	    ret ? strerror(errno) : "ok");
	return ret;
}
