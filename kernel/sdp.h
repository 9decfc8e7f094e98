/* SPDX-License-Identifier: GPL-2.0 */
/*
 * sdp.ko internal declarations shared by the C glue files.
 *
 * The glue talks to kernel APIs only; protocol decisions live in the C++
 * core (core/), reached through core/sdp_core.h.
 *
 * Locking contract.  Each field of struct sdp_sock names what guards it;
 * functions that rely on a lock their caller holds assert it on entry
 * (sock_owned_by_me(), lockdep_assert_held(): free on production kernels,
 * checked by the lockdep kernel of `make check-debug`).
 *
 * The locks, outermost first:
 *
 *   cm_ev_mutex        per socket: sdp_cm_work() holds it while it handles
 *                      the queued events, sdp_destroy_resources() while it
 *                      tears the id down and purges its events: an id's
 *                      events are handled or purged, never both, and
 *                      sdp_cm_work() may use the id with the socket lock
 *                      dropped (rdma_connect()).
 *   handler_mutex      the RDMA CM's, per CM id, held around sdp_cm_handler()
 *                      and taken by rdma_connect() and rdma_destroy_id().
 *                      Only CONNECT_REQUEST takes socket locks under it: the
 *                      listener's and those of a child nobody else knows yet
 *                      (see sdp_cm.c).  Every other event is queued under
 *                      cm_ev_lock for sdp_cm_work(), as is the ESTABLISHED
 *                      that a child's first receive queues from the CQ
 *                      poll (sdp_cm_established_by_data()).
 *   res_lock           per socket: serialises teardown of the RDMA
 *                      resources (sdp_claim_rdma() under the socket lock,
 *                      then sdp_free_rdma() without it).  A zero-copy
 *                      transfer whose mapping teardown took waits on it,
 *                      socket lock dropped, before it unpins.
 *   socket lock        lock_sock(), "owned by user": socket calls, every work
 *                      item of the socket (completions, CM events, timers)
 *                      and the CM handler for a listener and a new child.
 *                      Nearly all of struct sdp_sock.  Held across user
 *                      copies and page pinning, which may fault and stall
 *                      (userfaultfd, FUSE), so nothing of the RDMA CM's own
 *                      context waits for a connection's socket lock.
 *   a listener's lock  when its child takes it (accept queue, half-open
 *                      list): only after the child released its own; no two
 *                      SDP socket locks are ever held together, but for a
 *                      TCP client's new socket in accept() (sdp_fallback.c),
 *                      which nobody else can reach yet (SINGLE_DEPTH_NESTING).
 *   a TCP socket's     the kernel TCP socket an SDP socket owns for its
 *   lock, its          fallback (sdp_fallback.c): taken inside the SDP
 *   sk_callback_lock   socket lock, never the other way; TCP's callbacks
 *                      take no SDP lock.
 *   cm_ev_lock         spinlock (bh), innermost: the CM event FIFO and the
 *                      HelloAck copy.
 *   sdp_sock_list_lock global spinlock (bh, sdp_proc.c): the /proc/net/sdp
 *                      list (list_node).
 *
 * Never held across a call that takes handler_mutex (rdma_connect(),
 * rdma_destroy_id()): the socket lock, res_lock.  rdma_destroy_id() also
 * waits for a running handler, and sdp_free_rdma() for the completion work,
 * which takes the socket lock: neither is called with it held.
 *
 * Without any lock:
 *   - the CQ's completion handler (interrupt context) reads cq_claims and
 *     wakes the claimers or queues cq_work; the QP's event handler (atomic)
 *     reads cm_id;
 *   - poll() and /proc/net/sdp read states, stream positions and ring
 *     counters with READ_ONCE (their writers use WRITE_ONCE where a reader
 *     without the lock cares): a snapshot, possibly a moment stale;
 *   - getsockopt() reads int-sized options;
 *   - wake-ups go through sk->sk_wq under RCU (sdp_write_space(),
 *     sdp_zc_wake());
 *   - parent is claimed with xchg() (accept() or the child's death, once).
 *
 * The socket lock is dropped (sk_wait_event(), wait_woken(), the busy poll
 * of recvmsg, sdp_mr_release() waiting for teardown, a child taking its
 * listener's lock, rdma_connect()) and everything it guards may change
 * meanwhile: the completion and CM work run (ring counters, credits, the
 * core's state, sk_state, sk_err, stream positions, urgent state),
 * teardown may claim the RDMA resources (res_ready false; cm_id, qp, cq,
 * pd, rings and MRs gone or replaced: nothing read from them before the
 * wait is valid after it), and other threads' socket calls run.  tx_busy
 * and rx_busy keep a zero-copy transfer's side of the stream (and its
 * struct sdp_zc_map) to its own thread across those waits.
 *
 * RDMA resources are created under the socket lock and destroyed by
 * sdp_destroy_resources() or sdp_cm_detach_res(), which run without it.
 */
#ifndef SDP_KERNEL_SDP_H
#define SDP_KERNEL_SDP_H

#include <linux/mm.h>
#include <linux/percpu.h>
#include <linux/workqueue.h>
#include <linux/ipv6.h>
#include <net/inet_sock.h>
#include <net/sock.h>
#include <net/tcp_states.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

#include "sdp_compat.h"
#include "sdp_core.h"
#include "sdp_wire.h"
#include "uapi/sdp.h"

/* Socket family registered at load (module parameter `family`). */
extern int sdp_family;
/* Protocol number of SDP in AF_INET/AF_INET6 (module parameter `ipproto`). */
extern int sdp_ipproto;
extern struct workqueue_struct *sdp_wq;
/* Completes MSG_ZEROCOPY sends that returned with their offer in flight. */
extern struct workqueue_struct *sdp_zc_wq;

/* ---- tunables (sdp_sysctl.c, net.sdp.*) ---------------------------------- */
extern int sysctl_sdp_buf_size;	      /* bytes per ring buffer, BSDH included */
extern int sysctl_sdp_buf_size_initial; /* receive buffers until the peer asks */
extern int sysctl_sdp_buf_idle_ms; /* an idle stream's buffers shrink after (0: never) */
extern int sysctl_sdp_ring_min;	      /* buffers per ring, at least */
extern int sysctl_sdp_ring_max;	      /* buffers per ring, at most */
extern int sysctl_sdp_inline_thresh;  /* inline sends up to this many bytes */
extern int sysctl_sdp_fin_timeout_ms; /* closed socket waits this for the peer */
extern int sysctl_sdp_connect_timeout_ms;
extern int sysctl_sdp_recv_poll_us;   /* recv busy-polls the CQ this long */
extern int sysctl_sdp_ack_delay_ms;   /* delayed acknowledgement of small data */
extern int sysctl_sdp_zcopy_thresh;   /* zero copy from this many bytes, 0 off */
extern int sysctl_sdp_zcopy_chunk;    /* bytes of one registration at most */
extern int sysctl_sdp_zcopy_cancel_ms; /* bounded wait for a cancel's answer */
extern int sysctl_sdp_zcopy_fail_reg; /* testing: every registration fails */
extern int sysctl_sdp_zcopy_sink_wait_ms; /* an offer waits this for a reader */
extern int sysctl_sdp_zcopy_async; /* MSG_ZEROCOPY sends return once offered */
extern int sysctl_sdp_zcopy_async_offers; /* ... with this many in flight */
extern int sysctl_sdp_zcopy_pipeline; /* blocking sends: several in flight */
extern int sysctl_sdp_max_half_open; /* a listener's connections before RTU */
extern int sysctl_sdp_max_conns; /* connections with RDMA resources */
extern int sysctl_sdp_memcg_reserve_kb; /* left free in a memory cgroup */
extern int sysctl_sdp_tx_stall_ms; /* a send stuck this long resets */
extern int sysctl_sdp_ack_timeout; /* QP local ACK timeout exponent, 0: CM's */
extern int sysctl_sdp_fallback;	   /* default policy: 1 SDP, else TCP */
extern int sysctl_sdp_fallback_ms; /* no REP this long: TCP */
extern atomic_t sdp_conns;

/* ---- rings ------------------------------------------------------------------ */

/*
 * One registered buffer.  Receive buffers live in the receive ring and cycle
 * posted -> completed (holding unread payload) -> read -> posted again.  Send
 * buffers cycle free -> filling/queued -> posted -> completed -> free.  The
 * two lifecycles never mix: they are separate rings.
 */
struct sdp_buf {
	/* kmalloc()ed and DMA-mapped, with the PD's local_dma_lkey; or larger
	 * than a page, vmalloc()ed (order-0 pages) and registered with an MR
	 * of its own (sdp_ringmr.c): then `big` describes it.  Which one:
	 * is_vmalloc_addr(data) (sdp_buf_big()).
	 */
	void *data;
	union {
		u64 dma;
		struct sdp_bigbuf *big;
	};
	/* The larger buffer that replaces this one before it is posted (rx)
	 * or filled (tx) again (sdp_grow_work()); NULL if none.  A large one
	 * replaces it only once registered (sdp_buf_swap()).
	 */
	void *next;
	union {
		u64 next_dma;
		struct sdp_bigbuf *next_big;
	};
	u32 next_size;
	u32 size; /* bytes at data */
	u32 off; /* rx: next unread payload byte; tx: unused */
	u32 end; /* rx: end of payload; tx: header + payload bytes */
	u8 mid;	 /* tx: message id, for the core's completion accounting */
	u8 urgent; /* tx: the last byte is urgent data: closed to appends */
};

/*
 * A FIFO ring: entries [done, post) are posted to the HCA and complete in
 * order; rx entries [read, done) hold received messages not yet consumed by
 * the reader; tx entries [post, tail) are filled and wait to be posted.
 * Counters run free; index = counter % count (receive ring: % cap).
 *
 * Locking: the socket lock of the owning socket, for everything.  poll()
 * and /proc/net/sdp read the counters without it (READ_ONCE).  Teardown
 * moves a ring into its struct sdp_res under the socket lock and frees it
 * from there.
 *
 * The receive ring is a set of buffers, each in exactly one place: the free
 * list, the FIFO of posted buffers (`posted`, counters done..post: RC
 * completes receives in posting order) or the FIFO of buffers holding
 * unread data (`unread`, counters read..tail, in stream order).  A buffer
 * whose message leaves nothing for the reader (a credit update, DisConn, a
 * small message appended to the previous unread buffer) goes back to the
 * free list and is re-posted at once, however much unread data there is.
 */
struct sdp_ring {
	struct sdp_buf *bufs;
	u32 count;
	/* Entries of the ring, and of the receive ring's FIFOs and free
	 * list: the receive ring adds buffers up to it (sdp_rx_add_work()).
	 */
	u32 cap;
	u32 read;
	u32 done;
	u32 post;
	u32 tail;
	/* receive ring only: entry indices (sdp_ring_entry()); cap is at
	 * most net.sdp.ring_max's bound of 4096.
	 */
	u16 *posted;
	u16 *unread;
	u16 *free;
	u32 nfree;
	/* Entries below count whose buffer was given back (no data, size 0,
	 * in no FIFO): an idle stream's ring went back to its first number
	 * of buffers (sdp_rx_trim()).  sdp_rx_add() fills them first.
	 */
	u32 empty;
	/* bufs holds the first `first` entries.  The receive ring's others,
	 * up to cap, are in `more`, allocated when it first adds a buffer
	 * (sdp_rx_add()): most sockets never do, and their bookkeeping stays
	 * that of their first buffers.  Other rings: first = cap, no more.
	 */
	struct sdp_buf *more;
	u32 first;
};

/* Entry i (< cap; past first only once `more` is there). */
static inline struct sdp_buf *sdp_ring_entry(const struct sdp_ring *r, u32 i)
{
	return i < r->first ? &r->bufs[i] : &r->more[i - r->first];
}

/* The index of entry b, the inverse of sdp_ring_entry(). */
static inline u16 sdp_ring_index(const struct sdp_ring *r,
				 const struct sdp_buf *b)
{
	if (b >= r->bufs && b < r->bufs + r->first)
		return b - r->bufs;
	return r->first + (b - r->more);
}

/* Send and control rings: every entry is in bufs. */
static inline struct sdp_buf *sdp_ring_buf(struct sdp_ring *r, u32 n)
{
	return &r->bufs[n % r->count];
}

/* wr_id: ring in the top bits, counter below. */
enum sdp_wr_ring {
	SDP_WR_RX = 1,
	SDP_WR_TX = 2,
	SDP_WR_CTL = 3,
	SDP_WR_ZC = 4,
	SDP_WR_KA = 5, /* the keepalive probe: a zero-length RDMA Write */
	SDP_WR_DRAIN = 6, /* receive queue drain marker (QP in error) */
	SDP_WR_REG = 7, /* a large ring buffer's registration (sdp_ringmr.c) */
};
#define SDP_WR_ID(ring, n) (((u64)(ring) << 32) | (u32)(n))
#define SDP_WR_RING(id) ((u32)((id) >> 32))

#define SDP_MIN_BUF_SIZE 1024 /* net.sdp.buf_size and buf_size_initial */
/*
 * Control messages (DisConn, credit updates, aborts, zero-copy adverts).
 * 7, not 8: with the default 8 data sends, zero copy's SDP_ZC_WRS and the
 * keepalive probe the send queue takes 31 work requests, and providers
 * size queues in powers of two with a slot to spare (rxe: max_wr + 1),
 * so 32 would double the send queue's memory.
 */
#define SDP_CTL_RING 7
#define SDP_CTL_BUF_SIZE 64 /* the largest control message is SinkAvail (36) */

/*
 * Registrations of a socket (struct sdp_zc_map): SDP_ZC_TX for the sending
 * side, SDP_ZC_RX for the receiving side, and up to SDP_ZC_ASYNC_MAX - 1
 * more for asynchronous sends whose offers are in flight together (each
 * takes one; the first takes SDP_ZC_TX).
 */
#define SDP_ZC_ASYNC_MAX SDP_CORE_MAX_ADVERTS
#define SDP_ZC_MAPS (SDP_ZC_ASYNC_MAX + 1)
/*
 * Work requests zero copy may have on the send queue at once, three per
 * registration: the sending side's take REG_MR and LOCAL_INV each, and
 * an RDMA Write besides for the one that writes into the peer's SinkAvail,
 * which happens only with no offer of ours in flight
 * (sdp_core_sink_take()); the receiving side's takes REG_MR, an RDMA Read
 * for each of up to SDP_CORE_MAX_ADVERTS offers it reads at once, and
 * LOCAL_INV (sdp_zc_read_wrs() checks that this fits).
 */
#define SDP_ZC_WRS (3 * SDP_ZC_MAPS)

/*
 * One zero-copy registration: the pages of an application (or kernel)
 * buffer, their DMA mapping and the fast-registration MR over them.  Each
 * socket has two or more, preallocated at connection setup: `tx` for the
 * source side (SrcAvail, RDMA Write from it), `rx` for the sink side (RDMA
 * Read into it, SinkAvail), and those of asynchronous sends in flight
 * together (net.sdp.zcopy_async_offers).  Lifecycle: collect pages (pin user pages) -> DMA
 * map -> REG_MR with a fresh key -> RDMA -> LOCAL_INV -> unmap -> unpin.
 *
 * Locking: the socket lock.  During a transfer the map belongs to the
 * thread that set tx_busy (tx) or rx_busy (rx), also while that thread
 * waits with the socket lock dropped; the completion work only updates
 * wr_out, wc_status and inv_done.  Teardown takes `mapped` (and the DMA
 * mapping with it) under the socket lock; pages and sgl are the socket's,
 * freed when it is destructed.
 */
struct sdp_zc_map {
	struct page **pages;	/* max_pages */
	struct scatterlist *sgl; /* max_pages */
	u32 max_pages;
	u32 npages;		/* pages held */
	u32 len;		/* bytes covered */
	u32 which;		/* its index: wr_id and MR (SDP_ZC_TX, ...) */
	enum dma_data_direction dir;
	bool user;		/* pinned user pages: unpin, uncharge */
	bool mapped;		/* DMA-mapped (taken over by teardown) */
	bool reg_posted;	/* the REG_MR went to the device */
	bool inv_done;		/* the LOCAL_INV completed */
	int wc_status;		/* first failed completion of the transfer */
	u32 wr_out;		/* its work requests posted, not completed */
	bool remote;		/* the peer may access it (SrcAvail, SinkAvail) */
	/* Whose RLIMIT_MEMLOCK the pinned pages are charged to (held with
	 * mmgrab()): the work that ends an asynchronous send has no mm.
	 */
	struct mm_struct *mm;
};

/*
 * Pages a transfer could not give back because the QP was not known to be
 * stopped (sdp_zc_kill_qp): teardown unmaps and unpins them after
 * rdma_destroy_qp(), when no DMA can reach them any more.
 */
struct sdp_zc_orphan {
	struct page **pages;
	struct scatterlist *sgl;
	u32 npages;
	enum dma_data_direction dir;
	bool mapped;
	bool user;
};

/* An asynchronous send's offer in flight (struct sdp_sock's zc_async_*). */
struct sdp_zc_async_slot {
	struct sdp_zc_map *map;
	struct sk_buff *notify;	/* its error-queue notification */
	struct ubuf_info *ubuf;	/* or io_uring's, a reference */
	u32 id;			/* its notification number */
	u32 seq;		/* zc_async_seq when it was added */
	bool copied;		/* some of that send went by bcopy */
	bool held;		/* a blocking send's: it waits for it */
};

/*
 * A socket's zero-copy state, allocated with its first registration
 * (sdp_mr_alloc()) and kept until the socket goes (sdp_mr_destroy()):
 * most sockets never make a zero-copy transfer, and an idle one is
 * smaller without it.  Teardown's res->zc_unmap points into `map`.
 */
struct sdp_zc_block {
	struct sdp_zc_map map[SDP_ZC_MAPS];
	struct sdp_zc_orphan orphan[SDP_ZC_MAPS]; /* for teardown, see the type */
	struct sdp_zc_async_slot slot[SDP_ZC_ASYNC_MAX];
};

/*
 * RDMA resources of one connection, taken from the socket for teardown
 * (sdp_claim_rdma(), socket lock and res_lock held) and freed by the same
 * thread (sdp_free_rdma(), res_lock held): nothing else sees them.
 */
struct sdp_res {
	struct ib_pd *pd;
	struct ib_cq *cq;
	struct ib_qp *qp;
	struct sdp_ring rx;
	struct sdp_ring tx;
	struct sdp_ring ctl;
	struct ib_mr *zc_mr[SDP_ZC_MAPS];
	struct sdp_zc_map *zc_unmap[SDP_ZC_MAPS]; /* mappings teardown must undo */
	struct sdp_zc_orphan zc_orphan[SDP_ZC_MAPS];
	bool counted; /* in sdp_conns */
};

/* ---- the socket --------------------------------------------------------- */

/*
 * A socket address of either family.  Not a sockaddr_storage: its 128
 * bytes, twice in struct sdp_sock, put an IPv6 socket over a page (a
 * 4.2 KiB slab object, seven to an order-3 slab or one to an order-1 one).
 */
union sdp_addr {
	struct sockaddr sa;
	struct sockaddr_in v4;
	struct sockaddr_in6 v6;
};

/* A CM event recorded by the handler for sdp_cm_work() (cm_ev_lock). */
struct sdp_cm_ev {
	struct rdma_cm_id *id;
	/* Narrow, 16 bytes an event: errnos and reject reasons fit. */
	s16 status;
	u8 event; /* enum rdma_cm_event_type */
	bool rej_nobufs; /* REJECTED: the listener had no resources */
	bool by_data; /* ESTABLISHED: queued by the first receive, not the CM */
};

#define SDP_CM_EVENTS 16

enum sdp_urg { SDP_URG_NONE, SDP_URG_VALID, SDP_URG_READ };

struct sdp_sock {
	/*
	 * Must stay first: sk_alloc() allocates an sdp_sock.  An IPPROTO_SDP
	 * socket is made by inet_create()/inet6_create(), which write
	 * inet_sock's fields; SDP itself uses only struct sock's.
	 */
	union {
		struct sock sk;
		struct inet_sock inet;
	};

	/*
	 * Everything up to the listener's fields: the socket lock (see the
	 * contract at the top).  Exceptions are noted per field; "WRITE_ONCE"
	 * means writers (socket lock held) pair with readers without it.
	 * Of struct sock, sk_state (sdp_set_state()), sk_err and sk_shutdown
	 * are written under the socket lock with release/WRITE_ONCE for
	 * poll().
	 */
	struct sdp_core_conn core; /* read locklessly only by /proc/net/sdp
				    * (credits, a snapshot)
				    */
	/* The CM id: set under the socket lock (a child's in the CM handler,
	 * under the child's lock), cleared by teardown under it; read without
	 * the lock by the QP event handler, which the QP's destruction (before
	 * the id's) bounds.
	 */
	struct rdma_cm_id *cm_id;
	/* RDMA resources: created under the socket lock, claimed by teardown
	 * under the socket lock and res_lock (sdp_claim_rdma()).
	 */
	struct ib_pd *pd;
	struct ib_cq *cq;
	struct ib_qp *qp;
	u32 max_inline;
	struct sdp_ring rx;
	struct sdp_ring tx;
	struct sdp_ring ctl;
	u32 buf_size; /* send buffers, and the most a receive buffer grows to */
	/* Receive buffers that grow and shrink (sdp_rx.c): the size posted
	 * from now on, and the size the answer to the peer's ChRcvBuf carries
	 * once every posted buffer has it (0: no request waiting).  Socket
	 * lock.
	 */
	u32 rx_size;
	u32 rx_grow_to;
	/* Unread bytes up to which the receive ring adds buffers when the
	 * reader lags (sdp_rx_more_check()).  Set with the resources.
	 */
	u64 rx_unread_max;
	/* The receive ring's first number of buffers, and whether buffers
	 * added since are given back as they come free (the peer's stream
	 * idled).  Socket lock.
	 */
	u32 rx_base;
	bool rx_trim;
	/* The completion queue grows with the receive ring (sdp_qp.c):
	 * cq_fixed entries for the send side, the drain marker and a spare
	 * (zero copy's work requests once cq_zc: its first use grows the
	 * CQ, sdp_cq_zc_room()); rx_cq_room for receive completions, the
	 * rest of its entries; cq_base its entries with room for the ring's
	 * first buffers, to which it goes back once the ring is back to
	 * rx_base buffers.  cq_grow_refused: a resize failed, the ring stays
	 * within rx_cq_room.  Socket lock.
	 */
	u32 cq_fixed;
	u32 rx_cq_room;
	u32 cq_base;
	bool cq_grow_refused;
	bool cq_zc;
	/* Send buffers that grow: the size of those allocated last; grown
	 * (sdp_grow_work()) when the peer's buffers take larger segments,
	 * shrunk with the segments of an idle stream.  Socket lock.
	 */
	u32 tx_size; /* of send buffers allocated from now on */
	bool tx_grow_failed; /* no memory for it: do not try again */
	/* A send took a page for want of a registered buffer of tx_size:
	 * the grow work registers one (sdp_tx_buf_ready()).  Socket lock.
	 */
	bool tx_big_wanted;
	/* The grow work registers large ring buffers (sdp_ringmr.c): it
	 * holds sdp_push() back (reg_hold) and waits for its REG_MRs
	 * (reg_out).  Socket lock.
	 */
	bool reg_hold;
	u8 reg_out;
	u32 seg_max;
	bool res_ready;	 /* QP and rings exist; WRITE_ONCE (poll) */
	bool qp_error;	 /* a completion failed: the QP is dead */
	bool cm_gone;	 /* the CM id was destroyed by its handler */
	bool disconnect_sent;
	/* Bound: sdp_destroy_resources() clears it without the socket lock,
	 * once the id is destroyed, from the thread that owns the socket
	 * (connect()) or for a socket no thread can reach any more.
	 */
	bool bound;
	/* bind() reserved the address in TCP's space (ssk->tcp is bound)
	 * but SDP has no RDMA device for it: connect() goes over TCP at
	 * once (SDP_FB_NO_ROUTE).  Socket lock.
	 */
	bool tcp_only_addr;
	bool reuseaddr;
	bool v6only;	 /* getsockopt() reads it without the lock */
	bool orphan_teardown;
	bool abort_pending;   /* AbortConn posted: disconnect on completion */
	bool established_once;
	/* Threads in a socket call that poll the CQ before they leave it
	 * (sdp_cq_claim()): while there is one, the completion handler wakes
	 * it instead of queueing the completion work.  Read by the handler
	 * (interrupt context), the completion work and sdp_release_cb().
	 */
	atomic_t cq_claims;
	/* SDP_CQ_DEFERRED: the completion work found the socket owned and
	 * left the CQ to the owner (sdp_release_cb()); set under the
	 * socket's spinlock, cleared by a poll that arms the CQ.
	 */
	unsigned long cq_deferred;
	/* A zero-copy send (receive) owns the transmit (receive) side and
	 * its struct sdp_zc_map, across its waits with the socket lock
	 * dropped: other threads' sends (receives) keep off.
	 */
	bool tx_busy;
	bool rx_busy;
	bool zc_credit_wait; /* a zero-copy send waits for credits */
	bool ka_probe_out;   /* a keepalive probe is on the send queue */
	bool reg_idle_sq;    /* REG_MR only on an idle send queue (rxe) */
	/*
	 * Zero-copy calls waiting for an idle send queue (reg_idle_sq): no
	 * new Data is queued meanwhile, else a stream of other threads'
	 * sends keeps the queue busy until the wait gives up.
	 */
	unsigned int sq_idle_waiters;
	/*
	 * A non-blocking zero-copy send got EAGAIN for a busy send queue
	 * (reg_idle_sq): nothing else is queued and EPOLLOUT waits until the
	 * queue is idle; sdp_zc_sq_progress() clears it and wakes the pollers.
	 */
	bool zc_sq_wanted;
	/*
	 * The same for want of a credit for the offer: cleared, and the
	 * pollers woken, once the peer's credits allow one
	 * (sdp_zc_credit_progress()).
	 */
	bool zc_credit_wanted;
	/*
	 * The same for a non-blocking receive of the peer's offer: poll
	 * leaves the offer out of the readable bytes until the queue is idle.
	 */
	bool zc_rx_sq_wanted;
	bool drain_posted;   /* the receive drain marker is posted */
	bool rq_drained;     /* ... and flushed: the responder stopped */
	bool conn_counted;   /* counted in sdp_conns (net.sdp.max_conns) */
	bool tx_watch_armed; /* tx_watch_work pending (see sdp_tx.c) */
	/* jiffies of the last send completion, or of the post that found
	 * nothing outstanding: the watch's bound counts from it
	 */
	unsigned long tx_progress_at;
	int readers_waiting;

	/* Zero copy: MRs (RDMA resources, claimed by teardown) and
	 * registrations (the socket's; see struct sdp_zc_block).
	 */
	struct ib_mr *zc_mr[SDP_ZC_MAPS];
	struct sdp_zc_block *zcb; /* NULL until the first registration */
	u32 zc_max_pages;
	u32 zc_nmaps;	    /* registrations of this connection: 2 or more */
	bool zc_mr_tried;   /* sdp_mr_ready() allocated them (or could not) */
	int zcopy_thresh;   /* -1: net.sdp.zcopy_thresh; WRITE_ONCE */
	u32 rsa_avail;	    /* sdp_core_rsa_left(), for lockless readers */
	struct sdp_sock_stats stats;

	/* Stream positions (bytes), for SIOCINQ/SIOCOUTQ and urgent data.
	 * rcv_nxt, copied_seq, snd_queued, snd_acked, rsa_avail and urg_state
	 * are written with WRITE_ONCE: poll() and /proc/net/sdp read them
	 * without the lock.
	 */
	u64 rcv_nxt;	/* in-band bytes received */
	u64 copied_seq; /* in-band bytes consumed */
	u64 snd_queued; /* bytes accepted by send() */
	u64 snd_acked;	/* bytes whose SEND completed */
	u64 urg_seq;	/* in-band position of the urgent mark */
	u8 urg_byte;
	u8 urg_state; /* enum sdp_urg */
	u64 urg_pending_off; /* tx: stream position of the last urgent byte */

	/* Options.  getsockopt() reads them without the lock (int-sized). */
	bool nodelay;
	bool cork;
	int keepidle; /* seconds */
	int keepintvl;
	int keepcnt;
	u8 keepalive_probes;
	unsigned long last_rx_jiffies;

	/*
	 * Fallback to TCP (sdp_fallback.c).  tcp: the kernel TCP socket
	 * this socket owns, created by connect() under the socket lock for
	 * a policy that may need it, released with the socket.  use_tcp:
	 * set once, with release, when tcp carries the connection; from
	 * then on every call forwards to tcp (readers: smp_load_acquire,
	 * no lock), and tcp never changes.  The saved callbacks are tcp's
	 * own, under its sk_callback_lock.
	 */
	struct socket *tcp;
	bool use_tcp;
	u8 policy;	     /* SDP_POLICY_*; getsockopt() reads it */
	u8 fallback_reason;  /* SDP_FB_*; WRITE_ONCE (getsockopt, /proc) */
	bool fallback_armed; /* fallback_work pending */
	/* A listener whose tcp listens on its address too; WRITE_ONCE
	 * (poll(), TCP's callbacks).
	 */
	bool tcp_listening;
	/* tcp's sock once it carries the connection, for /proc/net/sdp:
	 * set and cleared (before tcp is released) under
	 * sdp_sock_list_lock, which /proc reads it under.
	 */
	struct sock *proc_tcp;
	/* TCP's error as last copied to sk_err (0: none), so that SO_ERROR,
	 * which reads and clears the SDP socket's, clears TCP's too;
	 * WRITE_ONCE (TCP's callbacks, forwarded calls).
	 */
	int fb_err_seen;
	/* TCP's urgent pointer the SDP socket's owner got SIGURG for;
	 * written by TCP's data_ready, under tcp's socket bh lock.
	 */
	u32 fb_urg_seq;
	bool fb_urg_sent;
	void (*tcp_state_change)(struct sock *sk);
	void (*tcp_data_ready)(struct sock *sk);
	void (*tcp_write_space)(struct sock *sk);
	void (*tcp_error_report)(struct sock *sk);

	/* Listening socket: its own socket lock.  poll() looks at the accept
	 * queue without it (list_empty_careful()).
	 */
	int backlog;
	int pending; /* children connecting, not yet established */
	struct list_head accept_queue;
	struct list_head half_open; /* pending children, oldest first */
	/* Child: its place in the listener's queues, under the listener's
	 * lock (taken with the child's own released); evicted WRITE_ONCE.
	 */
	struct list_head accept_node;
	struct list_head half_open_node;
	bool evicted; /* reset by the listener for a newer REQ */
	/* Child: its first receive queued an ESTABLISHED; the CM delivered
	 * its own (socket lock).
	 */
	bool est_by_data_queued;
	bool cm_est_seen;
	/* The listener: set before the child is reachable, then claimed
	 * once with xchg() (accept(), or the child's death).
	 */
	struct sock *parent;

	/* Addresses (what getsockname/getpeername report): socket lock;
	 * /proc/net/sdp prints them without it.
	 */
	union sdp_addr local;
	union sdp_addr remote;

	/* Work items: each takes the socket lock itself (put_work none). */
	struct work_struct cq_work;
	struct work_struct destroy_work;
	struct work_struct put_work; /* sdp_sock_put_deferred() */
	struct work_struct cm_work;  /* CM events, see sdp_cm.c */
	struct work_struct grow_work; /* larger ring buffers, sdp_rx.c */
	struct mutex cm_ev_mutex;    /* cm_work vs. purge of a dead id */
	/* The CM event FIFO: cm_ev_lock.  Pushed by the handler, popped by
	 * cm_work (cm_ev_mutex held).  The HelloAck is copied in under
	 * cm_ev_lock before its ESTABLISHED event is pushed, and read by
	 * cm_work (socket lock) after popping that event.
	 */
	spinlock_t cm_ev_lock;
	u32 cm_ev_head;
	u32 cm_ev_tail;
	struct sdp_cm_ev cm_ev[SDP_CM_EVENTS];
	u8 cm_hello_ack[SDP_HELLO_ACK_SIZE]; /* a longer one is invalid */
	u32 cm_hello_ack_len;
	atomic_t deferred_puts; /* atomic */
	/* Delayed work: each takes the socket lock and holds a socket
	 * reference while pending (cancelled: the canceller drops it).
	 */
	struct delayed_work keepalive_work;
	struct delayed_work fin_work;
	struct delayed_work ack_work; /* delayed acknowledgement (Nagle) */
	/* Messages posted (every one acknowledges what came before it) and
	 * their count when an acknowledgement last became owed: ack_work
	 * has nothing to send once they differ, and reads both without the
	 * socket lock.  Written under the socket lock (WRITE_ONCE).
	 */
	u32 tx_msgs;
	u32 ack_owed_at;
	/* An idle stream's buffers shrink (sdp_rx.c); tx_data_at: jiffies
	 * of the last Data segment, SrcAvail or RdmaWrCompl posted.  Socket
	 * lock.
	 */
	struct delayed_work idle_work;
	unsigned long tx_data_at;
	struct delayed_work zc_grace_work; /* an offer waits for a reader */
	/*
	 * MSG_ZEROCOPY (or SEND_ZC) sends that returned with their SrcAvails
	 * in flight, oldest first (zc_slot[zc_async_head], zc_async_n of
	 * them): sdp_zc_async_work(), on sdp_zc_wq, holding a socket
	 * reference, owns the transmit side (tx_busy) until the last ended.
	 * For each in turn it waits until the offer ended, sends by bcopy
	 * what the sink did not read, invalidates the key; then the
	 * notification goes out.  Another asynchronous send may add its
	 * offer meanwhile (sdp_zc_async_may_join()).  Socket lock.
	 */
	struct work_struct zc_async_work;
	/*
	 * That work waits here, not on sk_sleep(): close() frees the struct
	 * socket and its wait queue while the work may still wait.  Woken
	 * with the socket's (sdp_zc_wake(), sdp_write_space()).
	 */
	wait_queue_head_t zc_async_wait;
	struct task_struct *zc_async_task; /* the work's, while it runs */
	u32 zc_async_head;
	u32 zc_async_n;
	u32 zc_async_seq;   /* offers added so far (the next one's seq) */
	/* An offer without the send's notification (not the send's last)
	 * had bytes copied: the next notification says COPIED.
	 */
	bool zc_async_copied;
	u32 zc_async_max;   /* offers in flight at most (maps for them) */
	u32 zc_async_room;  /* ... and as the peer allows; WRITE_ONCE */
	/* An offer ended with bytes left for bcopy: no new one joins until
	 * every offer in flight ended (their bytes come first).
	 */
	bool zc_async_stopped;
	bool zc_async;			 /* the work owns the transmit side */
	bool zc_async_fin;   /* shutdown(SHUT_WR) came meanwhile: DisConn after */
	bool zc_async_close; /* close() came meanwhile: orphan close after */
	/*
	 * A blocking send with offers in flight (held slots), which it waits
	 * for before it returns or sends more by bcopy (sdp_zc_held_settle()):
	 * its request (compared, never followed), how many of its offers are
	 * in flight, the bytes the sink did not read of those that ended (the
	 * send takes them back and sends them again), and whether a SendSM
	 * stopped one.  One such send at a time; nobody else joins its offers.
	 * Socket lock; zc_held_req also read by poll (READ_ONCE).
	 */
	const struct sdp_zc_async_req *zc_held_req;
	u32 zc_held_n;
	u32 zc_held_dropped;
	bool zc_held_stopped;
	struct delayed_work tx_watch_work; /* sends that never complete */
	struct delayed_work comm_est_work; /* tell the CM of a lost RTU */
	struct delayed_work fallback_work; /* no answer: go on over TCP */
	struct mutex res_lock; /* serialises resource teardown */
	struct sock *self; /* this sock (a failed clone is a copy: not) */
	struct list_head list_node; /* /proc/net/sdp: sdp_sock_list_lock */
};

/*
 * An IPPROTO_SDP socket of AF_INET6, as tcp6_sock: inet6_create() finds the
 * ipv6_pinfo at proto.ipv6_pinfo_offset (6.7 on), before that in the last
 * bytes of proto.obj_size, so it must stay last.
 */
struct sdp6_sock {
	struct sdp_sock sdp;
	struct ipv6_pinfo inet6;
};

static inline struct sdp_sock *sdp_sk(const struct sock *sk)
{
	return (struct sdp_sock *)sk;
}

static inline void sdp_set_state(struct sock *sk, int state)
{
	/* Release: a lockless reader of the state (poll()) that sees the new
	 * state also sees what was written before it (sk_err, sk_shutdown).
	 */
	smp_store_release(&sk->sk_state, state);
}

static inline bool sdp_established(const struct sock *sk)
{
	return (1 << READ_ONCE(sk->sk_state)) &
	       (TCPF_ESTABLISHED | TCPF_CLOSE_WAIT | TCPF_FIN_WAIT1 |
		TCPF_FIN_WAIT2);
}

/* End the RC connection (the CM's DREQ), once.  Socket lock held. */
static inline void sdp_disconnect(struct sdp_sock *ssk)
{
	sock_owned_by_me(&ssk->sk);
	if (ssk->cm_id && !ssk->disconnect_sent) {
		ssk->disconnect_sent = true;
		rdma_disconnect(ssk->cm_id);
	}
}

/*
 * New Data waits: a zero-copy send of another call owns the stream
 * (tx_busy), or a registration waits for an idle send queue (a call asleep
 * for it, or a non-blocking zero-copy send that got EAGAIN for it).  Read
 * without the socket lock by poll.
 */
static inline bool sdp_tx_held(const struct sdp_sock *ssk)
{
	return READ_ONCE(ssk->tx_busy) || READ_ONCE(ssk->sq_idle_waiters) ||
	       READ_ONCE(ssk->zc_sq_wanted) || READ_ONCE(ssk->zc_credit_wanted);
}

/*
 * An asynchronous zero-copy send would join the offers in flight
 * (sdp_zc_async_may_join(), as far as poll can tell without the lock).
 */
static inline bool sdp_zc_async_joinable(const struct sdp_sock *ssk)
{
	u32 n = READ_ONCE(ssk->zc_async_n);

	return n && n < READ_ONCE(ssk->zc_async_room) &&
	       !READ_ONCE(ssk->zc_async_stopped) &&
	       !READ_ONCE(ssk->zc_held_req);
}

/* Every send work request posted so far has completed.  Socket lock held. */
static inline bool sdp_sq_idle(const struct sdp_sock *ssk)
{
	u32 i;

	if (ssk->tx.done != ssk->tx.post || ssk->ctl.done != ssk->ctl.post ||
	    ssk->ka_probe_out || ssk->reg_out)
		return false;
	if (!ssk->zcb)
		return true; /* no zero-copy transfer yet */
	for (i = 0; i < SDP_ZC_MAPS; i++)
		if (ssk->zcb->map[i].wr_out)
			return false;
	return true;
}

/* ---- statistics (sdp_proc.c) --------------------------------------------- */

enum sdp_counter {
	SDP_CNT_TX_BYTES,
	SDP_CNT_RX_BYTES,
	SDP_CNT_TX_INLINE,
	SDP_CNT_CREDIT_UPDATES,
	SDP_CNT_CREDIT_STALLS,
	SDP_CNT_NAGLE_HOLDS,
	SDP_CNT_CONN_ESTABLISHED,
	SDP_CNT_CONN_ACCEPTED,
	SDP_CNT_CONN_BY_DATA,
	SDP_CNT_CONN_COMM_EST,
	SDP_CNT_CONN_REJ_AFTER_RTU,
	SDP_CNT_ERR_REFUSED,
	SDP_CNT_ERR_UNREACHABLE,
	SDP_CNT_ERR_TIMEOUT,
	SDP_CNT_ERR_RESET,
	SDP_CNT_ERR_BACKLOG,
	SDP_CNT_ERR_DEVICE_REMOVED,
	SDP_CNT_ERR_PROTOCOL,
	SDP_CNT_ERR_TRANSPORT,
	SDP_CNT_ERR_RESOURCES,
	SDP_CNT_HALF_OPEN_EVICTED,
	SDP_CNT_FALLBACK_POLICY, /* connects that went over TCP, by reason */
	SDP_CNT_FALLBACK_NO_ROUTE,
	SDP_CNT_FALLBACK_REJECTED,
	SDP_CNT_FALLBACK_BUSY,
	SDP_CNT_FALLBACK_TIMEOUT,
	SDP_CNT_FALLBACK_RESOURCES,
	SDP_CNT_FALLBACK_PEER_TCP, /* accepted from a plain TCP client */
	SDP_CNT_KEEPALIVE_PROBES,
	SDP_CNT_PERSIST_PROBES,
	SDP_CNT_CPU_COPY_BYTES,
	SDP_CNT_ZC_TX_BYTES,
	SDP_CNT_ZC_RX_BYTES,
	SDP_CNT_ZC_TX_SEGS,
	SDP_CNT_ZC_RX_SEGS,
	SDP_CNT_ZC_RDMA_READS,
	SDP_CNT_ZC_RDMA_WRITES,
	SDP_CNT_ZC_CANCELS,
	SDP_CNT_ZC_FALLBACK_SEND_SM,
	SDP_CNT_ZC_FALLBACK_MEMLOCK,
	SDP_CNT_ZC_FALLBACK_PIN,
	SDP_CNT_ZC_FALLBACK_REG,
	SDP_CNT_ZC_FALLBACK_PEEK,
	SDP_CNT_ZC_FALLBACK_NO_READER,
	SDP_CNT_ZC_FALLBACK_SMALL_READS,
	SDP_CNT_ZC_REG_FAILURES,
	SDP_CNT_ZC_TIMEOUTS,
	SDP_CNT_ZC_ASYNC_SENDS,
	SDP_CNT_ZC_ASYNC_JOINED,
	SDP_CNT_ZC_HELD_OFFERS,	  /* offers of blocking sends in flight... */
	SDP_CNT_ZC_HELD_JOINED,	  /* ... posted while another was */
	SDP_CNT_ZC_SQ_BUSY_AGAIN,
	SDP_CNT_ZC_CREDIT_AGAIN, /* ... for want of a credit for the offer */
	SDP_CNT_RX_GROWN,	  /* receive buffers grown at the peer's request */
	SDP_CNT_RX_GROW_REFUSED, /* ... not: no memory */
	SDP_CNT_RX_BUFS_ADDED,	  /* receive buffers added for a lagging reader */
	SDP_CNT_RX_SHRUNK,	  /* receive buffers shrunk at the peer's request */
	SDP_CNT_RX_BUFS_REMOVED, /* added buffers given back when it idled */
	SDP_CNT_TX_SHRUNK,	  /* send buffers shrunk: the stream went idle */
	SDP_CNT_CQ_GROWN,	  /* a CQ resized for a receive ring that grew */
	SDP_CNT_CQ_GROW_REFUSED, /* ... not: the device or the memory said no */
	SDP_CNT_RING_MR_REGS,	  /* ring buffers larger than a page registered */
	SDP_CNT_RING_MR_REFUSED, /* ... not: no memory, or no idle send queue */
	SDP_CNT_TX_PAGE_SEGS,	  /* send buffers of a page for want of one */
	SDP_CNT_MAX
};

struct sdp_stats {
	u64 cnt[SDP_CNT_MAX];
	u64 tx_mid[256];
	u64 rx_mid[256];
};

/*
 * The counters of /proc/net/sdpstats are the network namespace's: per
 * CPU, allocated with the namespace (sdp_proc.c), counted against the
 * namespace of the socket the event happened on.  A socket holds its
 * namespace (a kernel socket's creator keeps it alive), so the counters
 * outlive every socket that counts.
 */
struct sdp_stats __percpu *sdp_net_stats(const struct net *net);
#define SDP_INC(sk, c) this_cpu_inc(sdp_net_stats(sock_net(sk))->cnt[c])
#define SDP_ADD(sk, c, n) this_cpu_add(sdp_net_stats(sock_net(sk))->cnt[c], n)
#define SDP_INC_TX_MID(sk, m) \
	this_cpu_inc(sdp_net_stats(sock_net(sk))->tx_mid[(m) & 0xff])
#define SDP_INC_RX_MID(sk, m) \
	this_cpu_inc(sdp_net_stats(sock_net(sk))->rx_mid[(m) & 0xff])
/*
 * An event counted twice: in the namespace's counters and in the socket's
 * (SDP_STATS getsockopt, field of struct sdp_sock_stats; socket lock
 * held).
 */
#define SDP_INC_SK(ssk, c, field)			\
	do {						\
		SDP_INC(&(ssk)->sk, c);			\
		(ssk)->stats.field++;			\
	} while (0)

/* ---- functions ------------------------------------------------------------ */

/* sdp_socket.c */
void sdp_set_keepalive(struct sock *sk, int on);
int sdp_socket_register(int family, int ipproto);
void sdp_socket_unregister(void);
struct sock *sdp_sk_alloc(struct net *net, const struct sock *like, int kern);
void sdp_write_space(struct sock *sk);
void sdp_wake_pair(struct sock *sk);
struct sock *sdp_sk_clone(struct sock *parent);
void sdp_update_local(struct sock *sk);
void sdp_sock_init_flags(struct socket *sock);
void sdp_sk_init_data(struct socket *sock, struct sock *sk);
extern struct proto sdp_proto;

/* sdp_close.c */
bool sdp_close_event(struct sock *sk, unsigned int ev);
int sdp_core_errno(const struct sock *sk, int core_err);
void sdp_set_error(struct sock *sk, int err);
void sdp_abort(struct sock *sk);
void sdp_abort_children(struct sock *listener);
int sdp_shutdown(struct socket *sock, int how);
int sdp_release(struct socket *sock);
bool sdp_zc_async_closed(struct sock *sk);
void sdp_shutdown_send(struct sock *sk);
void sdp_maybe_disconnect(struct sock *sk);
void sdp_fin_timeout_work(struct work_struct *work);
void sdp_schedule_destroy(struct sock *sk);
void sdp_destroy_work(struct work_struct *work);

/* sdp_cm.c */
int sdp_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev);
void sdp_cm_work(struct work_struct *work);
void sdp_cm_established_by_data(struct sock *sk);
void sdp_comm_est_work(struct work_struct *work);
void sdp_cm_purge(struct sock *sk, struct rdma_cm_id *id);
struct rdma_cm_id *sdp_cm_create_id(struct sock *sk);
struct sock *sdp_child_unlink(struct sock *sk);

/*
 * Memory of a connection (rings and their bookkeeping): charged to the
 * socket's memory cgroup (sdp_charge_begin()), and its failure is an
 * error the connection reports (ENOBUFS), not a kernel warning, nor the
 * OOM killer of the cgroup or the host (__GFP_NORETRY).
 */
#define SDP_GFP_CONN \
	(GFP_KERNEL | __GFP_ACCOUNT | __GFP_NOWARN | __GFP_NORETRY)

/* sdp_memcg.c: what a connection's memory costs its memory cgroup */
bool sdp_memcg_room(const struct sock *sk, u64 bytes);
bool sdp_charge_begin(const struct sock *sk, u64 bytes,
		      struct mem_cgroup **old);
void sdp_charge_end(struct mem_cgroup *old);

/* sdp_errqueue.c: MSG_ZEROCOPY notifications */
bool sdp_zc_notify_wanted(const struct sock *sk, const struct msghdr *msg,
			  size_t size);
struct sk_buff *sdp_zc_notify_alloc(struct sock *sk);
void sdp_zc_notify(struct sock *sk, struct sk_buff *skb, bool copied);
void sdp_zc_notify_id(struct sock *sk, struct sk_buff *skb, u32 id,
		      bool copied);
void sdp_zc_ubuf_done(struct ubuf_info *uarg, bool zerocopy);
int sdp_recv_error(struct sock *sk, struct msghdr *msg, size_t len);
int sdp_set_zerocopy(struct socket *sock, sockptr_t optval,
		     unsigned int optlen);

/* sdp_qp.c */
void sdp_conn_init(struct sock *sk);
int sdp_create_resources(struct sock *sk, struct rdma_cm_id *id);
void sdp_destroy_resources(struct sock *sk);
void sdp_claim_rdma(struct sock *sk, struct sdp_res *res);
void sdp_free_rdma(struct sock *sk, struct rdma_cm_id *id, struct sdp_res *res);
void sdp_cq_work(struct work_struct *work);
void sdp_release_cb(struct sock *sk);
bool sdp_poll_cq(struct sock *sk, bool arm);
void sdp_qp_failed(struct sock *sk);
int sdp_post_drain_recv(struct sock *sk);
void sdp_process_completions(struct sock *sk, bool arm);
void sdp_cq_claim(struct sock *sk);
void sdp_cq_unclaim(struct sock *sk);
void sdp_sock_put_deferred(struct sock *sk);
void sdp_put_work(struct work_struct *work);
bool sdp_cq_make_room(struct sdp_sock *ssk, u32 rx_want);
void sdp_cq_shrink(struct sdp_sock *ssk, u32 rx_live);
bool sdp_cq_zc_room(struct sdp_sock *ssk);

/* sdp_rx.c */
int sdp_post_recvs(struct sock *sk);
int sdp_buf_alloc(struct ib_device *dev, struct sdp_buf *b, u32 size,
		  enum dma_data_direction dir);
void sdp_buf_release(struct ib_device *dev, void *data, u64 dma, u32 size,
		     enum dma_data_direction dir);
void sdp_buf_swap(struct ib_device *dev, struct sdp_buf *b,
		  enum dma_data_direction dir);
int sdp_rx_ring_init(struct sdp_ring *rx);
void sdp_grow_work(struct work_struct *work);
void sdp_grow_queue(struct sock *sk);
void sdp_idle_work(struct work_struct *work);
void sdp_seg_max_changed(struct sock *sk);
void sdp_idle_watch(struct sock *sk);
u64 sdp_ring_bytes(const struct sdp_ring *r);
u32 sdp_tx_seg_cap(const struct sdp_sock *ssk, const struct sdp_buf *b);
void sdp_rx_ring_fini(struct sdp_ring *rx);
void sdp_rx_complete(struct sock *sk, struct ib_wc *wc);
int sdp_recvmsg(struct socket *sock, struct msghdr *msg, size_t len, int flags);
u32 sdp_rx_posted(struct sdp_sock *ssk);

/* sdp_ringmr.c */
#define SDP_REG_BATCH 8 /* REG_MRs at a time: within zero copy's SQ room */
int sdp_bigbuf_alloc(struct sdp_sock *ssk, u32 size,
		     enum dma_data_direction dir, void **data,
		     struct sdp_bigbuf **big);
void sdp_bigbuf_free(struct ib_device *dev, void *data,
		     struct sdp_bigbuf *big, enum dma_data_direction dir);
bool sdp_bigbuf_registered(const struct sdp_bigbuf *big);
int sdp_bigbufs_register(struct sock *sk, struct sdp_bigbuf **bufs, u32 n);
int sdp_ring_register_next(struct sock *sk, struct sdp_ring *r);
void sdp_reg_complete(struct sock *sk, struct ib_wc *wc);
u64 sdp_buf_sge_addr(const struct sdp_buf *b);
u32 sdp_buf_lkey(const struct sdp_sock *ssk, const struct sdp_buf *b);
void sdp_buf_sync_for_cpu(struct ib_device *dev, const struct sdp_buf *b,
			  u32 len, enum dma_data_direction dir);
void sdp_buf_sync_for_device(struct ib_device *dev, const struct sdp_buf *b,
			     u32 len, enum dma_data_direction dir);

/* A ring buffer larger than a page, in pages with an MR (sdp_ringmr.c). */
static inline bool sdp_buf_big(const void *data)
{
	return is_vmalloc_addr(data);
}

/* sdp_tx.c */
u64 sdp_send_sge_addr(const struct sdp_buf *b, bool inl);
int sdp_sendmsg(struct socket *sock, struct msghdr *msg, size_t len);
int sdp_tx_copy_sg(struct sock *sk, struct scatterlist *sgl,
		   unsigned int nents, size_t skip, size_t len);
void sdp_tx_complete(struct sock *sk, struct ib_wc *wc);
void sdp_push(struct sock *sk, unsigned int extra_opts);
int sdp_send_control(struct sock *sk, unsigned int mid);
int sdp_post_ctl(struct sock *sk, struct ib_send_wr *before, u8 mid, u32 len);
void sdp_keepalive_work(struct work_struct *work);
void sdp_keepalive_complete(struct sock *sk, struct ib_wc *wc);
void sdp_tx_watch_work(struct work_struct *work);
void sdp_reset_keepalive(struct sock *sk);
void sdp_arm_ack_timer(struct sock *sk, unsigned int ms);
void sdp_ack_work(struct work_struct *work);

/* sdp_mr.c */
u64 sdp_mr_iova(u64 dma_iova, u64 random);
bool sdp_mr_ready(struct sock *sk);
void sdp_mr_free_maps(struct sock *sk);
void sdp_mr_destroy(struct sock *sk);
void sdp_mr_claim(struct sock *sk, struct sdp_res *res);
void sdp_mr_teardown(struct ib_device *dev, struct sdp_res *res);
int sdp_mr_collect(struct sdp_sock *ssk, struct sdp_zc_map *map,
		   const struct iov_iter *iter, size_t max_len, bool write);
void sdp_mr_release(struct sock *sk, struct sdp_zc_map *map, bool registered);
int sdp_mr_register(struct sock *sk, struct sdp_zc_map *map,
		    struct ib_reg_wr *reg);
void sdp_mr_inv_wr(struct sdp_sock *ssk, struct sdp_zc_map *map,
		   struct ib_send_wr *inv);
void sdp_mr_orphan(struct sock *sk, struct sdp_zc_map *map);

/* sdp_zcopy.c */
/* Zero-copy work requests: the low bits of SDP_WR_ID's tag. */
#define SDP_ZC_TX 0
#define SDP_ZC_RX 1
/* The low bits of a zero-copy wr_id: the registration's index. */
#define SDP_ZC_WR_MAP 0xff
#define SDP_ZC_WR_REG 0x100
#define SDP_ZC_WR_RDMA 0x200
#define SDP_ZC_WR_INV 0x300
void sdp_zc_complete(struct sock *sk, struct ib_wc *wc);
int sdp_zc_thresh(const struct sdp_sock *ssk);
/* How sdp_sendmsg() goes on after a zero-copy step (sdp_zc_send()). */
enum sdp_zc_next {
	SDP_ZC_NEXT_ZCOPY,	 /* a transfer went: zero copy again */
	SDP_ZC_NEXT_BCOPY_CHUNK, /* no credit for an offer: a chunk by bcopy */
	SDP_ZC_NEXT_BCOPY_REST,	 /* the rest of this send by bcopy */
	SDP_ZC_NEXT_ERROR,	 /* stop with what was sent, else the error */
	SDP_ZC_NEXT_ASYNC,	 /* the rest is offered; the send returns */
	SDP_ZC_NEXT_AGAIN,	 /* may not block: EAGAIN after what was sent */
};
/*
 * What an asynchronous send (MSG_ZEROCOPY, io_uring SEND_ZC) brings; or a
 * blocking send that keeps several offers in flight and waits for them
 * before it returns (hold, sdp_zc_held_settle()).
 */
struct sdp_zc_async_req {
	struct ubuf_info *ubuf;	/* io_uring's completion (msg_ubuf) */
	bool hold;		/* a blocking send's offers */
	bool bcopied;		/* earlier bytes of the send went by bcopy */
	bool posted;		/* an offer of this send is in flight... */
	u32 last_seq;		/* ...and this is its last one's seq */
};
void sdp_zc_notify_send(struct sock *sk, struct sk_buff *notify, bool copied,
			const struct sdp_zc_async_req *async);
enum sdp_zc_next sdp_zc_send(struct sock *sk, struct msghdr *msg,
			     long *timeo, size_t *copied, int *err,
			     struct sdp_zc_async_req *async);
void sdp_zc_async_work(struct work_struct *work);
bool sdp_zc_may_hold(struct sock *sk, size_t left);
int sdp_zc_held_settle(struct sock *sk, struct msghdr *msg, long *timeo,
		       size_t *copied, bool *stopped, bool cancel);
int sdp_zc_recv_offer(struct sock *sk, struct msghdr *msg, size_t len,
		      int flags, size_t *copied);
int sdp_zc_recv_advertise(struct sock *sk, struct msghdr *msg, size_t len,
			  size_t target, long *timeo, size_t *copied);
void sdp_zc_rx_event(struct sock *sk, const struct sdp_core_rx *msg);
void sdp_zc_wake(struct sock *sk);
void sdp_zc_wake_waits(struct sock *sk);
wait_queue_head_t *sdp_zc_waitq(struct sock *sk);
long sdp_zc_wait_slice(struct sock *sk, long timeo);
void sdp_zc_sq_progress(struct sock *sk);
void sdp_zc_credit_progress(struct sock *sk);
bool sdp_zc_src_offered(struct sdp_sock *ssk);
int sdp_zc_recv_sq_wait(struct sock *sk);
void sdp_zc_grace_work(struct work_struct *work);

/* sdp_fallback.c */
static inline bool sdp_fallen_back(const struct sock *sk)
{
	/* Pairs with the release in sdp_fb_use(): tcp is set up. */
	return smp_load_acquire(&sdp_sk(sk)->use_tcp);
}

int sdp_fb_prepare(struct sock *sk, int family);
bool sdp_fb_wanted(struct sock *sk, int end);
int sdp_fb_bind_first(struct sock *sk, union sdp_addr *addr);
void sdp_fb_unbind(struct sock *sk);
void sdp_fb_arm(struct sock *sk);
void sdp_fb_disarm(struct sock *sk);
bool sdp_fb_try(struct sock *sk, int end);
void sdp_fb_work(struct work_struct *work);
void sdp_fb_release(struct sock *sk);
int sdp_fb_connect(struct socket *sock, struct sockaddr *addr, int len,
		   int flags);
int sdp_fb_listen(struct sock *sk, int backlog);
void sdp_fb_unlisten(struct sock *sk);
u32 sdp_fb_backlog(struct sock *sk);
void sdp_fb_share_backlog(struct sock *sk);
void sdp_fb_listening(struct sock *sk);
bool sdp_fb_accept_ready(struct sock *sk);
int sdp_fb_accept(struct sock *sk, struct socket *newsock, bool kern);
__poll_t sdp_fb_poll(struct file *file, struct socket *sock,
		     struct poll_table_struct *wait);
int sdp_fb_sendmsg(struct socket *sock, struct msghdr *msg, size_t len);
int sdp_fb_recvmsg(struct socket *sock, struct msghdr *msg, size_t len,
		   int flags);
int sdp_fb_shutdown(struct socket *sock, int how);
int sdp_fb_getname(struct socket *sock, struct sockaddr *addr, int peer);
int sdp_fb_ioctl(struct socket *sock, unsigned int cmd, unsigned long arg);
void sdp_fb_set_zerocopy(struct socket *sock, bool on);
int sdp_fb_setsockopt(struct socket *sock, int level, int optname,
		      sockptr_t optval, unsigned int optlen);
int sdp_fb_getsockopt(struct socket *sock, int level, int optname,
		      char __user *optval, int __user *optlen);

/* sdp_cm.c: the SDP attempt of a socket that may go over TCP. */
void sdp_cm_abandon(struct sock *sk);
bool sdp_cm_answer_queued(struct sock *sk);

/* sdp_proc.c */
int sdp_proc_init(void);
void sdp_sock_list_add(struct sock *sk);
void sdp_sock_list_del(struct sock *sk);
void sdp_sock_list_set_tcp(struct sock *sk, struct sock *tsk);
void sdp_proc_exit(void);

/* sdp_sysctl.c */
int sdp_sysctl_init(void);
void sdp_sysctl_exit(void);

/* sdp_fault.c: injected post and allocation failures, for tests. */
enum sdp_fault_kind {
	SDP_FAULT_SEND = 1,
	SDP_FAULT_RECV = 2,
	SDP_FAULT_RDMA = 4,
	SDP_FAULT_ALLOC = 8, /* a send buffer allocated on first use */
	SDP_FAULT_CQ = 16,   /* a completion queue resized to grow */
	SDP_FAULT_RX_GROW = 32, /* receive buffers grown at the peer's request */
	SDP_FAULT_RING_MR = 64, /* a ring buffer larger than a page */
};

int sdp_fault_post(enum sdp_fault_kind kind);
int sdp_qp_post_send(struct sdp_sock *ssk, const struct ib_send_wr *wr,
		     enum sdp_fault_kind kind);
void sdp_fault_fallback_race(struct sdp_sock *ssk);

#endif /* SDP_KERNEL_SDP_H */
