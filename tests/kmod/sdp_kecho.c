// SPDX-License-Identifier: GPL-2.0
/*
 * sdp_kecho: an in-kernel consumer of AF_INET_SDP, for the VM tests.
 *
 * Everything goes through the kernel socket API that kernel users of a
 * stream protocol use (sock_create_kern, kernel_bind/listen/accept/connect,
 * kernel_sendmsg/kernel_recvmsg on kvecs, sock_sendmsg/sock_recvmsg on
 * ITER_BVEC iterators, kernel_sock_shutdown, sock_release), with memory of
 * every kind a kernel user may hand over: kmalloc, vmalloc (kvecs into it and
 * bvecs over vmalloc_to_page()), single pages and high-order compound pages
 * (multi-page bvec segments), at unaligned offsets.
 *
 * Echo server (parameter server=1, the default): listens on addr:port when
 * the module loads (insmod fails if it cannot) and echoes every byte of each
 * accepted connection from a thread of its own, rotating how it receives and
 * sends (see kecho_server_modes).  Counters in
 * /sys/module/sdp_kecho/parameters/server_stats.
 *
 * Client self-test: writing "A.B.C.D:PORT" to
 * /sys/module/sdp_kecho/parameters/client starts it in the background; it
 * connects to an echo server there, sends messages of 1 B to 4 MiB (rounds
 * times the size table, rotating through the send methods, poisoning each
 * buffer as soon as the send returns), receives the echo on a second thread
 * (rotating through the receive methods, MSG_WAITALL or not), verifies every
 * byte, half-closes and expects a clean EOF.  The outcome is in
 * /sys/module/sdp_kecho/parameters/result as key=value lines; "state" is
 * idle, running, passed or failed.
 *
 * rmmod shuts every socket down, stops the threads and releases the sockets.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bvec.h>
#include <linux/inet.h>
#include <linux/in.h>
#include <linux/jiffies.h>
#include <linux/kthread.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/net.h>
#include <linux/sched/task.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/socket.h>
#include <linux/spinlock.h>
#include <linux/uio.h>
#include <linux/vmalloc.h>
#include <net/net_namespace.h>
#include <net/sock.h>

#include "uapi/sdp.h"

/* ---- parameters ---------------------------------------------------------- */

static int kecho_family = AF_INET_SDP;
module_param_named(family, kecho_family, int, 0444);
MODULE_PARM_DESC(family, "socket family of sdp.ko (default 27, AF_INET_SDP)");

static char *kecho_addr = "10.77.0.1";
module_param_named(addr, kecho_addr, charp, 0444);
MODULE_PARM_DESC(addr, "IPv4 address the echo server listens on");

static ushort kecho_port = 7300;
module_param_named(port, kecho_port, ushort, 0444);
MODULE_PARM_DESC(port, "port the echo server listens on");

static bool kecho_server_on = true;
module_param_named(server, kecho_server_on, bool, 0444);
MODULE_PARM_DESC(server, "run the echo server (default 1)");

static int kecho_rounds = 2;
module_param_named(rounds, kecho_rounds, int, 0644);
MODULE_PARM_DESC(rounds, "client self-test: passes over the message size table");

static int kecho_timeout_s = 30;
module_param_named(timeout, kecho_timeout_s, int, 0644);
MODULE_PARM_DESC(timeout, "client self-test: send/receive timeout in seconds");

/* ---- buffers ------------------------------------------------------------- */

enum kecho_mem {
	KMEM_KMALLOC,	/* kmalloc, unaligned start */
	KMEM_VMALLOC,	/* vmalloc, unaligned start */
	KMEM_PAGES,	/* order-0 pages from alloc_page, unaligned start */
	KMEM_COMPOUND,	/* order-4 compound pages: multi-page bvec segments */
	KMEM_MAX
};

#define KECHO_COMPOUND_ORDER 4
#define KECHO_POISON_TX 0x5a
#define KECHO_POISON_RX 0xa5

struct kecho_buf {
	enum kecho_mem mem;
	size_t cap;		/* usable bytes */
	void *alloc;		/* kmalloc/vmalloc: what to free */
	u8 *base;		/* kmalloc/vmalloc: first usable byte */
	struct page **pages;	/* pages/compound */
	unsigned int npages;
	unsigned int order;
	unsigned int first_off;	/* pages/compound: start in the first one */
};

/* One buffer of each kind, and vector arrays big enough for any of them. */
struct kecho_bufs {
	struct kecho_buf b[KMEM_MAX];
	struct kvec *kv;
	struct bio_vec *bv;
	unsigned int maxvecs;
};

static void kecho_buf_free(struct kecho_buf *b)
{
	unsigned int i;

	if (b->mem == KMEM_KMALLOC)
		kfree(b->alloc);
	else if (b->mem == KMEM_VMALLOC)
		vfree(b->alloc);
	if (b->pages) {
		for (i = 0; i < b->npages; i++)
			if (b->pages[i])
				__free_pages(b->pages[i], b->order);
		kfree(b->pages);
	}
	memset(b, 0, sizeof(*b));
}

static int kecho_buf_alloc(struct kecho_buf *b, enum kecho_mem mem, size_t cap)
{
	size_t chunk;
	unsigned int i;

	memset(b, 0, sizeof(*b));
	b->mem = mem;
	b->cap = cap;
	switch (mem) {
	case KMEM_KMALLOC:
		b->alloc = kmalloc(cap + 64, GFP_KERNEL | __GFP_NOWARN);
		b->base = (u8 *)b->alloc + 5;
		return b->alloc ? 0 : -ENOMEM;
	case KMEM_VMALLOC:
		b->alloc = vmalloc(cap + 64);
		b->base = (u8 *)b->alloc + 3;
		return b->alloc ? 0 : -ENOMEM;
	case KMEM_PAGES:
		b->order = 0;
		b->first_off = 100;
		break;
	case KMEM_COMPOUND:
		b->order = KECHO_COMPOUND_ORDER;
		b->first_off = PAGE_SIZE + 7; /* starts in the chunk's 2nd page */
		break;
	default:
		return -EINVAL;
	}
	chunk = PAGE_SIZE << b->order;
	b->npages = DIV_ROUND_UP(cap + b->first_off, chunk);
	b->pages = kcalloc(b->npages, sizeof(*b->pages), GFP_KERNEL);
	if (!b->pages)
		return -ENOMEM;
	for (i = 0; i < b->npages; i++) {
		b->pages[i] = alloc_pages(GFP_KERNEL | __GFP_NOWARN |
					  (b->order ? __GFP_COMP : 0), b->order);
		if (!b->pages[i])
			return -ENOMEM;
	}
	return 0;
}

static void kecho_bufs_free(struct kecho_bufs *s)
{
	int i;

	for (i = 0; i < KMEM_MAX; i++)
		kecho_buf_free(&s->b[i]);
	kvfree(s->kv);
	kvfree(s->bv);
	s->kv = NULL;
	s->bv = NULL;
}

/* kmalloc buffers of kcap bytes, the others of cap bytes. */
static int kecho_bufs_alloc(struct kecho_bufs *s, size_t kcap, size_t cap)
{
	int i, err;

	memset(s, 0, sizeof(*s));
	for (i = 0; i < KMEM_MAX; i++) {
		err = kecho_buf_alloc(&s->b[i], i, i == KMEM_KMALLOC ? kcap : cap);
		if (err) {
			kecho_bufs_free(s);
			return err;
		}
	}
	/* Page-bounded segments of an unaligned range, or maxseg >= PAGE_SIZE. */
	s->maxvecs = max(kcap, cap) / PAGE_SIZE + 4;
	s->kv = kvcalloc(s->maxvecs, sizeof(*s->kv), GFP_KERNEL);
	s->bv = kvcalloc(s->maxvecs, sizeof(*s->bv), GFP_KERNEL);
	if (!s->kv || !s->bv) {
		kecho_bufs_free(s);
		return -ENOMEM;
	}
	return 0;
}

/*
 * The contiguous piece of b at byte pos, at most max bytes: its address and,
 * for a bvec, its page and offset.  kvecs into kmalloc/vmalloc memory are
 * virtually contiguous; bvecs end at page boundaries, except over compound
 * pages, where a segment runs to the end of the chunk.
 */
static size_t kecho_seg(const struct kecho_buf *b, size_t pos, size_t max,
			bool bvec, void **addr, struct page **page,
			unsigned int *pgoff)
{
	size_t len, chunk, at, in;
	struct page *p;
	u8 *a;

	switch (b->mem) {
	case KMEM_KMALLOC:
	case KMEM_VMALLOC:
		a = b->base + pos;
		len = SIZE_MAX;
		if (bvec) {
			len = PAGE_SIZE - offset_in_page(a);
			*page = b->mem == KMEM_KMALLOC ? virt_to_page(a) :
							 vmalloc_to_page(a);
			*pgoff = offset_in_page(a);
		}
		break;
	default:
		chunk = PAGE_SIZE << b->order;
		at = b->first_off + pos;
		p = b->pages[at / chunk];
		in = at % chunk;
		a = (u8 *)page_address(p) + in;
		len = chunk - in;
		if (bvec) {
			*page = nth_page(p, in >> PAGE_SHIFT);
			*pgoff = in & ~PAGE_MASK;
		}
		break;
	}
	*addr = a;
	return min(len, max);
}

/*
 * Describe bytes [start, start + len) of b in s->kv (kvec) or s->bv (bvec),
 * in segments of at most maxseg bytes.  Returns the number of segments.
 */
static int kecho_vecs(struct kecho_bufs *s, const struct kecho_buf *b,
		      size_t start, size_t len, size_t maxseg, bool bvec)
{
	size_t pos = start, end = start + len;
	int n = 0;

	if (start > b->cap || len > b->cap - start)
		return -EINVAL;
	while (pos < end) {
		struct page *page = NULL;
		unsigned int off = 0;
		void *a;
		size_t seg;

		if (n == s->maxvecs)
			return -E2BIG;
		seg = kecho_seg(b, pos, min(maxseg, end - pos), bvec, &a, &page,
				&off);
		if (bvec) {
			bvec_set_page(&s->bv[n], page, seg, off);
		} else {
			s->kv[n].iov_base = a;
			s->kv[n].iov_len = seg;
		}
		n++;
		pos += seg;
	}
	return n;
}

static void kecho_memset(struct kecho_bufs *s, const struct kecho_buf *b,
			 size_t len, int c)
{
	int i, n = kecho_vecs(s, b, 0, len, SIZE_MAX, false);

	for (i = 0; i < n; i++)
		memset(s->kv[i].iov_base, c, s->kv[i].iov_len);
}

static int kecho_send_kvec(struct socket *sock, struct kvec *kv, int n,
			   size_t len)
{
	struct msghdr msg = { .msg_flags = MSG_NOSIGNAL };

	return kernel_sendmsg(sock, &msg, kv, n, len);
}

static int kecho_send_bvec(struct socket *sock, struct bio_vec *bv, int n,
			   size_t len)
{
	struct msghdr msg = { .msg_flags = MSG_NOSIGNAL };

	iov_iter_bvec(&msg.msg_iter, ITER_SOURCE, bv, n, len);
	return sock_sendmsg(sock, &msg);
}

static int kecho_recv_kvec(struct socket *sock, struct kvec *kv, int n,
			   size_t len, int flags)
{
	struct msghdr msg = {};

	return kernel_recvmsg(sock, &msg, kv, n, len, flags);
}

static int kecho_recv_bvec(struct socket *sock, struct bio_vec *bv, int n,
			   size_t len, int flags)
{
	struct msghdr msg = {};

	iov_iter_bvec(&msg.msg_iter, ITER_DEST, bv, n, len);
	return sock_recvmsg(sock, &msg, flags);
}

/* A way to move bytes: memory kind, vector type, segment size, flags. */
struct kecho_method {
	const char *name;
	enum kecho_mem mem;
	bool bvec;
	size_t maxseg;	/* split kvecs this small */
	size_t chunk;	/* receive: at most this much per call */
	int flags;	/* receive: MSG_WAITALL */
};

/*
 * Send bytes [0, len) of m's buffer: 0 or an error.  A blocking send returns
 * short only when the connection fails part way (as TCP's does); the rest is
 * sent again and the error comes then.  *shorts counts short returns.
 */
static int kecho_send_all(struct socket *sock, struct kecho_bufs *s,
			  const struct kecho_method *m, size_t len,
			  unsigned int *shorts)
{
	size_t done = 0;

	while (done < len) {
		int n = kecho_vecs(s, &s->b[m->mem], done, len - done, m->maxseg,
				   m->bvec);
		int ret;

		if (n < 0)
			return n;
		ret = m->bvec ? kecho_send_bvec(sock, s->bv, n, len - done) :
				kecho_send_kvec(sock, s->kv, n, len - done);
		if (ret < 0)
			return ret;
		if (ret == 0)
			return -EIO;
		done += ret;
		if (done < len)
			(*shorts)++;
	}
	return 0;
}

static int kecho_do_recv(struct socket *sock, struct kecho_bufs *s,
			 const struct kecho_method *m, size_t len)
{
	int n = kecho_vecs(s, &s->b[m->mem], 0, len, m->maxseg, m->bvec);

	if (n < 0)
		return n;
	return m->bvec ? kecho_recv_bvec(sock, s->bv, n, len, m->flags) :
			 kecho_recv_kvec(sock, s->kv, n, len, m->flags);
}

static int kecho_socket(struct socket **sock)
{
	int err = sock_create_kern(&init_net, kecho_family, SOCK_STREAM, 0, sock);

	if (err)
		pr_err("sock_create_kern(family %d): %d (is sdp.ko loaded?)\n",
		       kecho_family, err);
	return err;
}

static void kecho_set_timeouts(struct socket *sock, int secs)
{
	struct sock *sk = sock->sk;

	sock_set_sndtimeo(sk, secs);
	lock_sock(sk);
	WRITE_ONCE(sk->sk_rcvtimeo, (long)secs * HZ);
	release_sock(sk);
}

static bool kecho_is_reset(int err)
{
	return err == -ECONNRESET || err == -EPIPE || err == -ECONNABORTED;
}

/* ---- shared state -------------------------------------------------------- */

/*
 * kecho_lock: kecho_stopping, the connection list, the client task and the
 * sockets that rmmod must shut down.  Never held across a blocking socket
 * call (kernel_sock_shutdown does not block).
 */
static DEFINE_MUTEX(kecho_lock);
static bool kecho_stopping;
static struct socket *kecho_listen_sock;
static struct task_struct *kecho_server_task;
static LIST_HEAD(kecho_conns);
static unsigned int kecho_conn_ids;

/* ---- echo server --------------------------------------------------------- */

/*
 * How the server receives and how it sends the bytes back, in turn.  Every
 * send method of the brief: kvec into kmalloc, vmalloc (one and several
 * segments) and page memory; bvec over alloc_page pages, vmalloc pages and
 * kmalloc memory.  The receive lengths span the zero-copy threshold.
 */
static const struct {
	struct kecho_method rx, tx;
} kecho_server_modes[] = {
	{ { "kvec/kmalloc", KMEM_KMALLOC, false, SIZE_MAX, SZ_1M, 0 },
	  { "kvec/kmalloc", KMEM_KMALLOC, false, SIZE_MAX } },
	{ { "kvec/vmalloc", KMEM_VMALLOC, false, SIZE_MAX, SZ_1M - 3, 0 },
	  { "kvec[]/vmalloc", KMEM_VMALLOC, false, 65536 + 13 } },
	{ { "kvec[]/pages", KMEM_PAGES, false, SIZE_MAX, SZ_1M, 0 },
	  { "bvec/pages", KMEM_PAGES, true, SIZE_MAX } },
	{ { "bvec/pages", KMEM_PAGES, true, SIZE_MAX, 200000, 0 },
	  { "kvec[]/pages", KMEM_PAGES, false, SIZE_MAX } },
	{ { "kvec/vmalloc", KMEM_VMALLOC, false, SIZE_MAX, SZ_1M, 0 },
	  { "bvec/vmalloc", KMEM_VMALLOC, true, SIZE_MAX } },
	{ { "kvec/kmalloc", KMEM_KMALLOC, false, SIZE_MAX, SZ_512K + 1, 0 },
	  { "bvec/kmalloc", KMEM_KMALLOC, true, SIZE_MAX } },
	{ { "bvec/compound", KMEM_COMPOUND, true, SIZE_MAX, SZ_1M, 0 },
	  { "bvec/compound", KMEM_COMPOUND, true, SIZE_MAX } },
	{ { "bvec/vmalloc", KMEM_VMALLOC, true, SIZE_MAX, 65536, 0 },
	  { "kvec/vmalloc", KMEM_VMALLOC, false, SIZE_MAX } },
	{ { "kvec/vmalloc", KMEM_VMALLOC, false, SIZE_MAX, 4096 + 7, 0 },
	  { "kvec/vmalloc", KMEM_VMALLOC, false, SIZE_MAX } },
};

#define KECHO_NSERVER_MODES ARRAY_SIZE(kecho_server_modes)
/* 1 MiB allocations (kmalloc's usable part is 64 bytes less: order 8). */
#define KECHO_SERVER_KBUF (SZ_1M - 64)
#define KECHO_SERVER_BUF SZ_1M

static DEFINE_SPINLOCK(kecho_stats_lock);
static struct {
	u64 connections, active, eof, resets, stopped, errors, short_sends;
	u64 bytes;
	u64 sends[KECHO_NSERVER_MODES];
	u64 max_send[KECHO_NSERVER_MODES];
	char first_error[160];
} kecho_sstats;

struct kecho_conn {
	struct list_head node;
	struct socket *sock;	/* kecho_lock; NULL once released */
	struct task_struct *task;
	unsigned int id;
	bool done;
};

static void kecho_server_error(unsigned int id, const char *what, int err)
{
	spin_lock(&kecho_stats_lock);
	kecho_sstats.errors++;
	if (!kecho_sstats.first_error[0])
		snprintf(kecho_sstats.first_error,
			 sizeof(kecho_sstats.first_error),
			 "connection %u: %s: %d", id, what, err);
	spin_unlock(&kecho_stats_lock);
	pr_warn("connection %u: %s: %d\n", id, what, err);
}

/* Echo until EOF, an error or rmmod.  Returns how the connection ended. */
static int kecho_echo(struct kecho_conn *conn, struct kecho_bufs *s)
{
	unsigned int k;

	for (k = 0; !kthread_should_stop(); k++) {
		unsigned int mode = k % KECHO_NSERVER_MODES;
		const struct kecho_method *rx = &kecho_server_modes[mode].rx;
		const struct kecho_method *tx = &kecho_server_modes[mode].tx;
		unsigned int shorts = 0;
		int got, err;

		/* Both methods of a mode use the same buffer. */
		got = kecho_do_recv(conn->sock, s, rx,
				    min(rx->chunk, s->b[rx->mem].cap));
		if (got == 0)
			return 0;
		if (got < 0) {
			if (!kecho_is_reset(got))
				kecho_server_error(conn->id, "receive", got);
			return got;
		}
		err = kecho_send_all(conn->sock, s, tx, got, &shorts);
		if (shorts) {
			spin_lock(&kecho_stats_lock);
			kecho_sstats.short_sends += shorts;
			spin_unlock(&kecho_stats_lock);
		}
		if (err) {
			if (!kecho_is_reset(err))
				kecho_server_error(conn->id, "send", err);
			return err;
		}
		/* A send that returned must not read its buffer any more. */
		kecho_memset(s, &s->b[tx->mem], got, KECHO_POISON_TX);
		spin_lock(&kecho_stats_lock);
		kecho_sstats.bytes += got;
		kecho_sstats.sends[mode]++;
		kecho_sstats.max_send[mode] = max_t(u64, kecho_sstats.max_send[mode], got);
		spin_unlock(&kecho_stats_lock);
	}
	return -EINTR;
}

static int kecho_conn_fn(void *arg)
{
	struct kecho_conn *conn = arg;
	struct kecho_bufs *s;
	struct socket *sock;
	int err;

	s = kmalloc(sizeof(*s), GFP_KERNEL);
	err = s ? kecho_bufs_alloc(s, KECHO_SERVER_KBUF, KECHO_SERVER_BUF) : -ENOMEM;
	if (err)
		kecho_server_error(conn->id, "buffer allocation", err);
	else
		err = kecho_echo(conn, s);

	mutex_lock(&kecho_lock);
	sock = conn->sock;
	conn->sock = NULL;
	mutex_unlock(&kecho_lock);
	spin_lock(&kecho_stats_lock);
	kecho_sstats.active--;
	if (kthread_should_stop() || READ_ONCE(kecho_stopping))
		kecho_sstats.stopped++;
	else if (!err)
		kecho_sstats.eof++;
	else if (kecho_is_reset(err))
		kecho_sstats.resets++;
	spin_unlock(&kecho_stats_lock);
	kernel_sock_shutdown(sock, SHUT_RDWR);
	sock_release(sock);
	if (s) {
		kecho_bufs_free(s);
		kfree(s);
	}
	WRITE_ONCE(conn->done, true);
	return 0;
}

/* Stop and free finished connections, or all of them. */
static void kecho_reap(bool all)
{
	struct kecho_conn *conn, *tmp;
	LIST_HEAD(dead);

	mutex_lock(&kecho_lock);
	list_for_each_entry_safe(conn, tmp, &kecho_conns, node)
		if (all || READ_ONCE(conn->done))
			list_move(&conn->node, &dead);
	mutex_unlock(&kecho_lock);
	list_for_each_entry_safe(conn, tmp, &dead, node) {
		kthread_stop(conn->task);
		put_task_struct(conn->task);
		kfree(conn);
	}
}

static void kecho_conn_start(struct socket *sock)
{
	struct kecho_conn *conn = kzalloc(sizeof(*conn), GFP_KERNEL);
	int err = -ENOMEM;

	if (!conn)
		goto fail;
	conn->sock = sock;
	mutex_lock(&kecho_lock);
	if (kecho_stopping) {
		mutex_unlock(&kecho_lock);
		kfree(conn);
		sock_release(sock);
		return;
	}
	conn->id = ++kecho_conn_ids;
	conn->task = kthread_create(kecho_conn_fn, conn, "kecho-conn/%u",
				    conn->id);
	if (IS_ERR(conn->task)) {
		err = PTR_ERR(conn->task);
		mutex_unlock(&kecho_lock);
		kfree(conn);
		goto fail;
	}
	get_task_struct(conn->task);
	list_add_tail(&conn->node, &kecho_conns);
	mutex_unlock(&kecho_lock);
	spin_lock(&kecho_stats_lock);
	kecho_sstats.connections++;
	kecho_sstats.active++;
	spin_unlock(&kecho_stats_lock);
	wake_up_process(conn->task);
	return;
fail:
	kecho_server_error(0, "starting a connection thread", err);
	sock_release(sock);
}

static int kecho_server_fn(void *arg)
{
	while (!kthread_should_stop()) {
		struct socket *sock;
		int err = kernel_accept(kecho_listen_sock, &sock, 0);

		if (err) {
			/* rmmod shuts the listener down: accept fails. */
			if (!kthread_should_stop() && !READ_ONCE(kecho_stopping))
				kecho_server_error(0, "accept", err);
			break;
		}
		kecho_reap(false);
		kecho_conn_start(sock);
	}
	return 0;
}

static int kecho_server_start(void)
{
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_port = htons(kecho_port),
	};
	int err;

	if (!in4_pton(kecho_addr, -1, (u8 *)&sin.sin_addr.s_addr, -1, NULL)) {
		pr_err("addr=%s is not an IPv4 address\n", kecho_addr);
		return -EINVAL;
	}
	err = kecho_socket(&kecho_listen_sock);
	if (err)
		return err;
	err = kernel_bind(kecho_listen_sock, (struct sockaddr *)&sin, sizeof(sin));
	if (err) {
		pr_err("bind %pI4:%u: %d\n", &sin.sin_addr, kecho_port, err);
		goto out;
	}
	err = kernel_listen(kecho_listen_sock, 16);
	if (err) {
		pr_err("listen %pI4:%u: %d\n", &sin.sin_addr, kecho_port, err);
		goto out;
	}
	kecho_server_task = kthread_create(kecho_server_fn, NULL, "kecho-server");
	if (IS_ERR(kecho_server_task)) {
		err = PTR_ERR(kecho_server_task);
		kecho_server_task = NULL;
		goto out;
	}
	get_task_struct(kecho_server_task);
	wake_up_process(kecho_server_task);
	pr_info("echo server on %pI4:%u (family %d)\n", &sin.sin_addr,
		kecho_port, kecho_family);
	return 0;
out:
	sock_release(kecho_listen_sock);
	kecho_listen_sock = NULL;
	return err;
}

static int kecho_server_stats_get(char *buf, const struct kernel_param *kp)
{
	unsigned int i;
	int len;

	spin_lock(&kecho_stats_lock);
	len = scnprintf(buf, PAGE_SIZE,
			"connections=%llu\n"
			"active=%llu\n"
			"eof=%llu\n"
			"resets=%llu\n"
			"stopped=%llu\n"
			"errors=%llu\n"
			"bytes=%llu\n"
			"short_sends=%llu\n"
			"first_error=%s\n",
			kecho_sstats.connections, kecho_sstats.active,
			kecho_sstats.eof, kecho_sstats.resets,
			kecho_sstats.stopped, kecho_sstats.errors,
			kecho_sstats.bytes, kecho_sstats.short_sends,
			kecho_sstats.first_error);
	for (i = 0; i < KECHO_NSERVER_MODES; i++)
		len += scnprintf(buf + len, PAGE_SIZE - len,
				 "mode%u=%s>%s sends=%llu max=%llu\n", i,
				 kecho_server_modes[i].rx.name,
				 kecho_server_modes[i].tx.name,
				 kecho_sstats.sends[i], kecho_sstats.max_send[i]);
	spin_unlock(&kecho_stats_lock);
	return len;
}

static int kecho_read_only(const char *val, const struct kernel_param *kp)
{
	return -EPERM;
}

static const struct kernel_param_ops kecho_server_stats_ops = {
	.set = kecho_read_only,
	.get = kecho_server_stats_get,
};
module_param_cb(server_stats, &kecho_server_stats_ops, NULL, 0444);
MODULE_PARM_DESC(server_stats, "echo server counters (read)");

/* ---- client self-test ---------------------------------------------------- */

/* Message sizes, 1 B to 4 MiB, around the 64 KiB zero-copy threshold. */
static const u32 kecho_sizes[] = {
	1, 1000, SZ_64K, SZ_256K, SZ_4M, 2, SZ_64K - 1, SZ_64K + 1, 7,
	3 * SZ_1M + 5, 4095, 4096, 4097, SZ_1M + 1, 100000, SZ_16K, 3 * SZ_64K + 5,
	SZ_2M - 1, 12345, SZ_1M, 64, SZ_128K,
};

static const struct kecho_method kecho_client_tx[] = {
	{ "kvec/kmalloc", KMEM_KMALLOC, false, SIZE_MAX },
	{ "kvec/vmalloc", KMEM_VMALLOC, false, SIZE_MAX },
	{ "kvec[]/vmalloc", KMEM_VMALLOC, false, 65536 + 13 },
	{ "kvec[]/pages", KMEM_PAGES, false, SIZE_MAX },
	{ "bvec/pages", KMEM_PAGES, true, SIZE_MAX },
	{ "bvec/vmalloc", KMEM_VMALLOC, true, SIZE_MAX },
	{ "bvec/compound", KMEM_COMPOUND, true, SIZE_MAX },
	{ "bvec/kmalloc", KMEM_KMALLOC, true, SIZE_MAX },
};

static const struct kecho_method kecho_client_rx[] = {
	{ "kvec/kmalloc WAITALL", KMEM_KMALLOC, false, SIZE_MAX, SIZE_MAX, MSG_WAITALL },
	{ "kvec/vmalloc WAITALL", KMEM_VMALLOC, false, SIZE_MAX, SIZE_MAX, MSG_WAITALL },
	{ "kvec/vmalloc 7777 B reads", KMEM_VMALLOC, false, SIZE_MAX, 7777, 0 },
	{ "kvec[]/pages", KMEM_PAGES, false, SIZE_MAX, SIZE_MAX, 0 },
	{ "bvec/pages WAITALL", KMEM_PAGES, true, SIZE_MAX, SIZE_MAX, MSG_WAITALL },
	{ "bvec/compound", KMEM_COMPOUND, true, SIZE_MAX, SIZE_MAX, 0 },
	{ "kvec/kmalloc", KMEM_KMALLOC, false, SIZE_MAX, SIZE_MAX, 0 },
};

#define KECHO_CLIENT_KBUF (SZ_1M - 64)
#define KECHO_CLIENT_BUF SZ_4M

/* Each pass over the size table shifts the send methods by one. */
static const struct kecho_method *kecho_tx_method(u32 msg)
{
	u32 k = msg + msg / ARRAY_SIZE(kecho_sizes);

	return &kecho_client_tx[k % ARRAY_SIZE(kecho_client_tx)];
}

static const struct kecho_method *kecho_rx_method(u32 msg)
{
	return &kecho_client_rx[(msg / 2) % ARRAY_SIZE(kecho_client_rx)];
}

static u32 kecho_fmix32(u32 h)
{
	h ^= h >> 16;
	h *= 0x85ebca6b;
	h ^= h >> 13;
	h *= 0xc2b2ae35;
	h ^= h >> 16;
	return h;
}

/* Message msg's bytes: a hash of (message, word index). */
static u32 kecho_word(u32 msg, u64 word)
{
	return kecho_fmix32((u32)word ^ kecho_fmix32(msg + 1) ^
			    (u32)(word >> 32) * 0x9e3779b9);
}

static void kecho_fill(u8 *p, size_t len, u32 msg, u64 pos)
{
	u32 w = kecho_word(msg, pos >> 2);
	size_t i;

	for (i = 0; i < len; i++, pos++) {
		if (!(pos & 3))
			w = kecho_word(msg, pos >> 2);
		p[i] = w >> (8 * (pos & 3));
	}
}

/* Index of the first byte that differs from the pattern, or len. */
static size_t kecho_check(const u8 *p, size_t len, u32 msg, u64 pos, u8 *want)
{
	u32 w = kecho_word(msg, pos >> 2);
	size_t i;

	for (i = 0; i < len; i++, pos++) {
		if (!(pos & 3))
			w = kecho_word(msg, pos >> 2);
		if (p[i] != (u8)(w >> (8 * (pos & 3)))) {
			*want = w >> (8 * (pos & 3));
			return i;
		}
	}
	return len;
}

enum kecho_state { KSTATE_IDLE, KSTATE_RUNNING, KSTATE_PASSED, KSTATE_FAILED };
static const char *const kecho_state_names[] = {
	"idle", "running", "passed", "failed"
};

static DEFINE_SPINLOCK(kecho_result_lock);
static struct {
	enum kecho_state state;
	char target[48];
	u32 messages, messages_sent, messages_verified;
	u64 bytes_total, bytes_sent, bytes_verified, bad_bytes, errors;
	u64 short_sends;
	unsigned long start, elapsed_ms;
	char first_error[256];
} kecho_res;

static __printf(1, 2) void kecho_fail(const char *fmt, ...)
{
	va_list ap;

	spin_lock(&kecho_result_lock);
	kecho_res.errors++;
	if (!kecho_res.first_error[0]) {
		int n = 0;

		/* rmmod cut the run short: say so before the symptom. */
		if (READ_ONCE(kecho_stopping))
			n = scnprintf(kecho_res.first_error,
				      sizeof(kecho_res.first_error), "rmmod: ");
		va_start(ap, fmt);
		vsnprintf(kecho_res.first_error + n,
			  sizeof(kecho_res.first_error) - n, fmt, ap);
		va_end(ap);
		pr_warn("client self-test: %s\n", kecho_res.first_error);
	}
	spin_unlock(&kecho_result_lock);
}

struct kecho_client {
	struct sockaddr_in peer;
	struct socket *sock;
	struct task_struct *sender;
	u32 nmsgs;
	u32 rounds;
	struct kecho_bufs tx;
	struct kecho_bufs rx;
};

static struct task_struct *kecho_client_task;	/* kecho_lock */
static struct socket *kecho_client_sock;	/* kecho_lock: for rmmod */

static u32 kecho_msg_size(u32 msg)
{
	return kecho_sizes[msg % ARRAY_SIZE(kecho_sizes)];
}

/* The client's sending half: message by message, buffer by buffer. */
static int kecho_sender_fn(void *arg)
{
	struct kecho_client *c = arg;
	u32 msg;

	for (msg = 0; msg < c->nmsgs && !kthread_should_stop(); msg++) {
		const struct kecho_method *m = kecho_tx_method(msg);
		struct kecho_buf *b = &c->tx.b[m->mem];
		size_t size = kecho_msg_size(msg), pos, n;

		for (pos = 0; pos < size; pos += n) {
			unsigned int shorts = 0;
			size_t at = pos;
			int i, nv, ret;

			n = min(b->cap, size - pos);
			nv = kecho_vecs(&c->tx, b, 0, n, SIZE_MAX, false);
			for (i = 0; i < nv; i++) {
				kecho_fill(c->tx.kv[i].iov_base, c->tx.kv[i].iov_len,
					   msg, at);
				at += c->tx.kv[i].iov_len;
			}
			ret = kecho_send_all(c->sock, &c->tx, m, n, &shorts);
			if (ret) {
				kecho_fail("message %u (%zu B): send %s of %zu B at %zu: %d",
					   msg, size, m->name, n, pos, ret);
				/* Wake the receiver: nothing more is coming. */
				kernel_sock_shutdown(c->sock, SHUT_RDWR);
				return ret;
			}
			/* Zero copy must be over once send() returns. */
			kecho_memset(&c->tx, b, n, KECHO_POISON_TX);
			spin_lock(&kecho_result_lock);
			kecho_res.short_sends += shorts;
			kecho_res.bytes_sent += n;
			spin_unlock(&kecho_result_lock);
		}
		spin_lock(&kecho_result_lock);
		kecho_res.messages_sent++;
		spin_unlock(&kecho_result_lock);
	}
	return 0;
}

/* Receive and verify message msg.  0, or an error already recorded. */
static int kecho_receive_msg(struct kecho_client *c, u32 msg)
{
	const struct kecho_method *m = kecho_rx_method(msg);
	const struct kecho_method *tm = kecho_tx_method(msg);
	struct kecho_buf *b = &c->rx.b[m->mem];
	size_t size = kecho_msg_size(msg), pos = 0;

	while (pos < size) {
		size_t want = min3(b->cap, m->chunk, size - pos);
		size_t off = 0;
		int i, nv, got;

		if (kthread_should_stop()) {
			kecho_fail("stopped by module unload at message %u", msg);
			return -EINTR;
		}
		kecho_memset(&c->rx, b, want, KECHO_POISON_RX);
		got = kecho_do_recv(c->sock, &c->rx, m, want);
		if (got <= 0) {
			kecho_fail("message %u (%zu B, sent as %s): receive %s of %zu B at %zu returned %d%s",
				   msg, size, tm->name, m->name, want, pos, got,
				   got ? "" : " (EOF)");
			return got ? got : -EPIPE;
		}
		if ((m->flags & MSG_WAITALL) && got != (int)want) {
			kecho_fail("message %u (%zu B): MSG_WAITALL receive %s returned %d of %zu B",
				   msg, size, m->name, got, want);
			return -EIO;
		}
		nv = kecho_vecs(&c->rx, b, 0, got, SIZE_MAX, false);
		for (i = 0; i < nv; i++) {
			const u8 *p = c->rx.kv[i].iov_base;
			size_t len = c->rx.kv[i].iov_len, bad;
			u8 exp = 0;

			bad = kecho_check(p, len, msg, pos + off, &exp);
			if (bad != len) {
				spin_lock(&kecho_result_lock);
				kecho_res.bad_bytes++;
				spin_unlock(&kecho_result_lock);
				kecho_fail("message %u (%zu B, sent as %s, received as %s): byte %zu: got 0x%02x, want 0x%02x",
					   msg, size, tm->name, m->name,
					   pos + off + bad, p[bad], exp);
				return -EIO;
			}
			off += len;
		}
		pos += got;
		spin_lock(&kecho_result_lock);
		kecho_res.bytes_verified += got;
		spin_unlock(&kecho_result_lock);
	}
	spin_lock(&kecho_result_lock);
	kecho_res.messages_verified++;
	spin_unlock(&kecho_result_lock);
	return 0;
}

/* After the whole echo and our SHUT_WR: the server closes, nothing more. */
static int kecho_expect_eof(struct kecho_client *c)
{
	struct kecho_buf *b = &c->rx.b[KMEM_KMALLOC];
	struct kvec kv = { .iov_base = b->base, .iov_len = 4096 };
	int got = kecho_recv_kvec(c->sock, &kv, 1, kv.iov_len, 0);

	if (got != 0) {
		kecho_fail("after the echo: receive returned %d, want 0 (EOF)", got);
		return -EIO;
	}
	return 0;
}

static int kecho_client_run(struct kecho_client *c)
{
	int err, sender_err;
	u32 msg;

	err = kecho_bufs_alloc(&c->tx, KECHO_CLIENT_KBUF, KECHO_CLIENT_BUF);
	if (!err)
		err = kecho_bufs_alloc(&c->rx, KECHO_CLIENT_KBUF, KECHO_CLIENT_BUF);
	if (err) {
		kecho_fail("buffer allocation: %d", err);
		return err;
	}
	err = kecho_socket(&c->sock);
	if (err) {
		kecho_fail("sock_create_kern: %d", err);
		return err;
	}
	kecho_set_timeouts(c->sock, kecho_timeout_s);
	mutex_lock(&kecho_lock);
	if (kecho_stopping)
		err = -ESHUTDOWN;
	else
		kecho_client_sock = c->sock;
	mutex_unlock(&kecho_lock);
	if (err) {
		kecho_fail("stopped by module unload before connecting");
		return err;
	}
	err = kernel_connect(c->sock, (struct sockaddr *)&c->peer,
			     sizeof(c->peer), 0);
	if (err) {
		kecho_fail("connect %pISpc: %d", &c->peer, err);
		return err;
	}

	c->sender = kthread_create(kecho_sender_fn, c, "kecho-send");
	if (IS_ERR(c->sender)) {
		err = PTR_ERR(c->sender);
		c->sender = NULL;
		kecho_fail("starting the sender thread: %d", err);
		return err;
	}
	get_task_struct(c->sender);
	wake_up_process(c->sender);

	for (msg = 0; msg < c->nmsgs && !err; msg++)
		err = kecho_receive_msg(c, msg);
	/* A failed receive leaves the sender stuck: shut it out. */
	if (err)
		kernel_sock_shutdown(c->sock, SHUT_RDWR);
	sender_err = kthread_stop(c->sender);
	put_task_struct(c->sender);
	c->sender = NULL;
	if (err || sender_err)
		return err ?: sender_err;

	err = kernel_sock_shutdown(c->sock, SHUT_WR);
	if (err) {
		kecho_fail("shutdown(SHUT_WR): %d", err);
		return err;
	}
	return kecho_expect_eof(c);
}

static int kecho_client_fn(void *arg)
{
	struct kecho_client *c = arg;
	struct socket *sock;
	int err;

	err = kecho_client_run(c);

	mutex_lock(&kecho_lock);
	kecho_client_sock = NULL;
	mutex_unlock(&kecho_lock);
	sock = c->sock;
	if (sock) {
		kernel_sock_shutdown(sock, SHUT_RDWR);
		sock_release(sock);
	}
	kecho_bufs_free(&c->tx);
	kecho_bufs_free(&c->rx);
	kfree(c);

	spin_lock(&kecho_result_lock);
	if (!err && kecho_res.errors)
		err = -EIO;
	kecho_res.elapsed_ms = jiffies_to_msecs(jiffies - kecho_res.start);
	kecho_res.state = err ? KSTATE_FAILED : KSTATE_PASSED;
	spin_unlock(&kecho_result_lock);
	pr_info("client self-test %s\n", err ? "failed" : "passed");
	/* rmmod or the next run reaps the task (we hold a reference). */
	return err;
}

/* "A.B.C.D:PORT" */
static int kecho_parse_target(const char *val, struct sockaddr_in *sin)
{
	char buf[48];
	const char *end;
	u16 port;

	strscpy(buf, val, sizeof(buf));
	strim(buf);
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	if (!in4_pton(buf, -1, (u8 *)&sin->sin_addr.s_addr, ':', &end) ||
	    *end != ':' || kstrtou16(end + 1, 10, &port) || !port)
		return -EINVAL;
	sin->sin_port = htons(port);
	return 0;
}

static int kecho_client_set(const char *val, const struct kernel_param *kp)
{
	struct task_struct *old, *task;
	struct kecho_client *c;
	u64 total = 0;
	int err = 0;
	u32 i;

	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		return -ENOMEM;
	err = kecho_parse_target(val, &c->peer);
	if (err)
		goto out_free;
	c->rounds = clamp(READ_ONCE(kecho_rounds), 1, 100);
	c->nmsgs = c->rounds * ARRAY_SIZE(kecho_sizes);
	for (i = 0; i < c->nmsgs; i++)
		total += kecho_msg_size(i);

	mutex_lock(&kecho_lock);
	spin_lock(&kecho_result_lock);
	if (kecho_stopping)
		err = -ENODEV;
	else if (kecho_res.state == KSTATE_RUNNING)
		err = -EBUSY;
	spin_unlock(&kecho_result_lock);
	if (err)
		goto out_unlock;
	/* The previous run has finished: it only waits to be stopped. */
	old = kecho_client_task;
	kecho_client_task = NULL;
	if (old) {
		kthread_stop(old);
		put_task_struct(old);
	}
	task = kthread_create(kecho_client_fn, c, "kecho-client");
	if (IS_ERR(task)) {
		err = PTR_ERR(task);
		goto out_unlock;
	}
	get_task_struct(task);
	kecho_client_task = task;
	spin_lock(&kecho_result_lock);
	memset(&kecho_res, 0, sizeof(kecho_res));
	kecho_res.state = KSTATE_RUNNING;
	snprintf(kecho_res.target, sizeof(kecho_res.target), "%pISpc", &c->peer);
	kecho_res.messages = c->nmsgs;
	kecho_res.bytes_total = total;
	kecho_res.start = jiffies;
	spin_unlock(&kecho_result_lock);
	mutex_unlock(&kecho_lock);
	wake_up_process(task);
	return 0;

out_unlock:
	mutex_unlock(&kecho_lock);
out_free:
	kfree(c);
	return err;
}

static int kecho_client_get(char *buf, const struct kernel_param *kp)
{
	int len;

	spin_lock(&kecho_result_lock);
	len = scnprintf(buf, PAGE_SIZE, "%s\n", kecho_res.target);
	spin_unlock(&kecho_result_lock);
	return len;
}

static const struct kernel_param_ops kecho_client_ops = {
	.set = kecho_client_set,
	.get = kecho_client_get,
};
module_param_cb(client, &kecho_client_ops, NULL, 0600);
MODULE_PARM_DESC(client,
		 "write A.B.C.D:PORT: run the client self-test against an echo server there");

static int kecho_result_get(char *buf, const struct kernel_param *kp)
{
	unsigned long ms;
	int len;

	spin_lock(&kecho_result_lock);
	ms = kecho_res.state == KSTATE_RUNNING ?
		     jiffies_to_msecs(jiffies - kecho_res.start) :
		     kecho_res.elapsed_ms;
	len = scnprintf(buf, PAGE_SIZE,
			"state=%s\n"
			"target=%s\n"
			"messages=%u\n"
			"messages_sent=%u\n"
			"messages_verified=%u\n"
			"bytes_total=%llu\n"
			"bytes_sent=%llu\n"
			"bytes_verified=%llu\n"
			"bad_bytes=%llu\n"
			"errors=%llu\n"
			"short_sends=%llu\n"
			"elapsed_ms=%lu\n"
			"first_error=%s\n",
			kecho_state_names[kecho_res.state], kecho_res.target,
			kecho_res.messages, kecho_res.messages_sent,
			kecho_res.messages_verified, kecho_res.bytes_total,
			kecho_res.bytes_sent, kecho_res.bytes_verified,
			kecho_res.bad_bytes, kecho_res.errors,
			kecho_res.short_sends, ms,
			kecho_res.first_error);
	spin_unlock(&kecho_result_lock);
	return len;
}

static const struct kernel_param_ops kecho_result_ops = {
	.set = kecho_read_only,
	.get = kecho_result_get,
};
module_param_cb(result, &kecho_result_ops, NULL, 0444);
MODULE_PARM_DESC(result, "client self-test outcome (read)");

/* ---- module -------------------------------------------------------------- */

static int __init kecho_init(void)
{
	if (kecho_server_on)
		return kecho_server_start();
	return 0;
}

static void __exit kecho_exit(void)
{
	struct task_struct *client;
	struct kecho_conn *conn;

	/* Wake every thread out of its socket call; none starts anew. */
	mutex_lock(&kecho_lock);
	kecho_stopping = true;
	if (kecho_listen_sock)
		kernel_sock_shutdown(kecho_listen_sock, SHUT_RDWR);
	list_for_each_entry(conn, &kecho_conns, node)
		if (conn->sock)
			kernel_sock_shutdown(conn->sock, SHUT_RDWR);
	if (kecho_client_sock)
		kernel_sock_shutdown(kecho_client_sock, SHUT_RDWR);
	client = kecho_client_task;
	kecho_client_task = NULL;
	mutex_unlock(&kecho_lock);

	if (kecho_server_task) {
		kthread_stop(kecho_server_task);
		put_task_struct(kecho_server_task);
	}
	kecho_reap(true);
	if (client) {
		kthread_stop(client);
		put_task_struct(client);
	}
	if (kecho_listen_sock)
		sock_release(kecho_listen_sock);
	pr_info("unloaded\n");
}

module_init(kecho_init);
module_exit(kecho_exit);

MODULE_DESCRIPTION("AF_INET_SDP kernel-consumer test: echo server and client self-test");
MODULE_LICENSE("GPL");
