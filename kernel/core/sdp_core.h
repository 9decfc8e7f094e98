/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C ABI between the C++ protocol core and its hosts: the kernel glue in
 * kernel/ and the userspace tests and simulation.  Plain C, no includes, so
 * the kernel C glue can include it without pulling C++ in and the core
 * without pulling kernel headers in.
 *
 * The core is sans-I/O.  The host owns queue pairs, buffers, memory, locks
 * and the socket; it feeds the core events (a message arrived, a send
 * completed, the user wants to send or shut down) and asks it for decisions
 * (may this segment go now, which control message is due, what does this
 * message mean).  The core owns the protocol: the connection's state,
 * credits, sequence numbers, Nagle/cork, header encoding and validation of
 * everything the peer sends.  The host serialises all calls on one
 * connection (the socket lock in the kernel).
 */
#ifndef SDP_CORE_H
#define SDP_CORE_H

#ifdef __cplusplus
extern "C" {
#endif

/* The C ABI is named as the kernel names things, not as the C++ core does. */
/* NOLINTBEGIN(readability-identifier-naming) */

/*
 * Known-answer self-check of the wire codec and credit arithmetic, run by the
 * module at load so a miscompiled core never handles traffic.  Returns 0, or
 * the number of the first failing check with *failed naming it.
 */
int sdp_core_selftest(const char **failed);

/* ---- one connection ---------------------------------------------------- */

/* Opaque protocol state, embedded in the host's socket (no allocation). */
#define SDP_CORE_CONN_BYTES 472
struct sdp_core_conn {
	unsigned long long opaque[SDP_CORE_CONN_BYTES / 8];
};

/*
 * rx_buf_size: bytes of one posted receive buffer, BSDH included; the peer
 *              never sends a longer message.
 * tx_buf_size: bytes of one send buffer, BSDH included.
 */
void sdp_core_conn_init(struct sdp_core_conn *c, unsigned int rx_buf_size,
			unsigned int tx_buf_size);

/*
 * Protocol timers.  The core decides when one starts and for how long; the
 * host runs a timer for the milliseconds a call returns and reports its
 * end (sdp_core_ack_request(), sdp_core_rsa_grace_end()).  The durations
 * are the host's configuration; a change applies to the timers started
 * after it.  Until set: SDP_CORE_ACK_DELAY_MS and SDP_CORE_ZC_GRACE_MS.
 *   ack_delay_ms  longest wait before a received partial message is
 *                 acknowledged (TCP's delayed ACK)
 *   zc_grace_ms   longest wait without read progress for the peer's
 *                 SrcAvail before it is given up (SendSM)
 * A zero keeps the current value.
 */
#define SDP_CORE_ACK_DELAY_MS 4
#define SDP_CORE_ZC_GRACE_MS 200
void sdp_core_set_timers(struct sdp_core_conn *c, unsigned int ack_delay_ms,
			 unsigned int zc_grace_ms);

/* Errors returned by the calls below (negated as they are, never errno). */
enum sdp_core_err {
	SDP_CORE_OK = 0,
	SDP_CORE_EMALFORMED = 1, /* bytes that do not decode */
	SDP_CORE_EVERSION = 2,	 /* peer speaks another major version */
	SDP_CORE_EPROTO = 3,	 /* valid message not allowed here */
	SDP_CORE_ESEQUENCE = 4,	 /* mseq gap or ack of an unsent message */
	SDP_CORE_ETOOBIG = 5,	 /* longer than our receive buffer */
	SDP_CORE_ENOROOM = 6,	 /* output buffer too small */
	SDP_CORE_ESTATE = 7,	 /* call not valid in this state */
};
const char *sdp_core_err_name(int err);

/*
 * Receive buffers posted and not yet consumed (completed), reported by the
 * host whenever the number changes: after posting, and for each receive
 * completion.  Every message built afterwards advertises it (the Hello and
 * HelloAck: the initial credit grant) and the credit-update rule of
 * control_due() weighs it.
 */
void sdp_core_rx_posted(struct sdp_core_conn *c, unsigned int posted);

/*
 * Connection setup.  The active side builds a Hello into the CM REQ private
 * data and parses the HelloAck from the REP; the passive side parses the
 * Hello and builds the HelloAck.  Each returns the bytes written (build) or
 * 0 (parse), or -enum sdp_core_err.
 */
int sdp_core_build_hello(struct sdp_core_conn *c, unsigned char *buf,
			 unsigned int size, unsigned short local_port,
			 int ipv6);
int sdp_core_on_hello_ack(struct sdp_core_conn *c, const unsigned char *buf,
			  unsigned int size);
int sdp_core_on_hello(struct sdp_core_conn *c, const unsigned char *buf,
		      unsigned int size);
int sdp_core_build_hello_ack(struct sdp_core_conn *c, unsigned char *buf,
			     unsigned int size);

/* Largest Data payload one message may carry (peer's and our limits). */
unsigned int sdp_core_seg_max(const struct sdp_core_conn *c);

/*
 * Receive buffers that change size (ChRcvBuf/ChRcvBufAck, an extension both
 * sides announce in the Hello exchange, SDP_CAP_RESIZE).  A connection
 * starts with the receive buffers sdp_core_conn_init() names, however large
 * the send buffers are.  One request is in flight at a time.
 *
 * Data source: when full segments queue behind each other and the peer's
 * buffers are smaller than ours, the core asks (ChRcvBuf, tx_buf_size)
 * through control_due()/tx_next().  The answer arrives as SDP_RX_RESIZE
 * with mid ChRcvBufAck: seg_max() may have grown, and the host may give
 * its send buffers that size.  A refused growth is not asked again until
 * the stream has been idle.
 *
 * Idle: when the host's stream has sent nothing for a while (its timer),
 * sdp_core_tx_idle() asks the peer to go back to the size of its Hello
 * (ChRcvBuf, smaller).  seg_max() shrinks as that request is built, before
 * any later segment: the host re-reads it after posting a ChRcvBuf, and its
 * send buffers may shrink with it.  Until the answer, tx_next() sends credit
 * updates while nothing is queued, so the peer's large buffers posted before
 * the request are consumed and posted again small.
 *
 * Data sink: the peer's ChRcvBuf arrives as SDP_RX_RESIZE with mid
 * ChRcvBuf and the size asked for.  The host posts only buffers of the
 * new size from then on and calls sdp_core_rx_resized() once every buffer
 * posted and not yet consumed has rx_buf_size bytes (receives complete in
 * posting order, so the source's messages after our answer land in those
 * or in later ones).  Declining is answering with the current size; an
 * answer smaller than both the size asked for and the current one is
 * refused (-SDP_CORE_ESTATE).  The core then sends ChRcvBufAck and accepts
 * messages of the new size.  Returns 0, or -SDP_CORE_ESTATE if no request
 * is waiting.
 */
int sdp_core_rx_resized(struct sdp_core_conn *c, unsigned int rx_buf_size);

/*
 * The host's stream sent nothing for its idle time and has nothing queued:
 * returns 1 if a ChRcvBuf that shrinks the peer's buffers is now due (the
 * host pushes), 0 if not (nothing grew, a request is in flight, closing).
 */
int sdp_core_tx_idle(struct sdp_core_conn *c);

/*
 * How many receive buffers a connection keeps.  It starts with `base`
 * (net.sdp.ring_min or more) and the host may add buffers, up to `cap`,
 * for a reader that lags: unread data holds its buffers until the reader
 * copies it out, and a ring of small buffers would stall a writer that TCP
 * lets through.  Added buffers go back as they come free once the reader
 * has caught up, or while `trim` is set (the peer's stream idled and asked
 * for its first buffer size again, or a growth was refused).  The credits
 * a given-back buffer stood for were spent by the message that filled it,
 * so the peer never counts on a buffer that is gone.
 *
 * The numbers are the host's, at the moment it asks:
 *   live        buffers it has: posted, holding unread data, or free
 *   posted      posted and not yet completed
 *   free        neither posted nor holding unread data
 *   base, cap   its first number of buffers and the most it may have
 *   limit       the most it may have now (cap, or fewer when its
 *               completion queue cannot grow to hold more)
 *   unread      bytes received and not yet read
 *   unread_max  unread bytes up to which buffers are added
 *   trim        set by the host as above; it clears it on
 *               SDP_RX_FREE_AT_BASE
 */
struct sdp_core_rx_ring {
	unsigned int live;
	unsigned int posted;
	unsigned int free;
	unsigned int base;
	unsigned int cap;
	unsigned int limit;
	unsigned long long unread;
	unsigned long long unread_max;
	int trim;
};

/* What to do with one free receive buffer: sdp_core_rx_free_buffer(). */
enum sdp_core_rx_free {
	SDP_RX_FREE_POST = 0,	   /* post it again */
	SDP_RX_FREE_GIVE_BACK = 1, /* free it: live goes down by one */
	SDP_RX_FREE_AT_BASE = 2,   /* post it; the ring is back at base */
};
int sdp_core_rx_free_buffer(const struct sdp_core_rx_ring *r);

/*
 * 1 if the host should add receive buffers now (it may do so later, from
 * a work item, and ask again), 0 if not; sdp_core_rx_add_count() says how
 * many at most (0 when the ring is at its cap).
 */
int sdp_core_rx_more_wanted(const struct sdp_core_rx_ring *r);
unsigned int sdp_core_rx_add_count(const struct sdp_core_rx_ring *r);

/* ---- transmit ----------------------------------------------------------- */

/* Options in force for a segment (socket options and send flags). */
#define SDP_TXO_NODELAY 0x1 /* TCP_NODELAY: no Nagle */
#define SDP_TXO_CORK 0x2    /* TCP_CORK or MSG_MORE: hold partial segments */
#define SDP_TXO_PUSH 0x4    /* flush now (urgent data, close, uncork) */

enum sdp_core_tx_verdict {
	SDP_TX_POST = 0,      /* post the segment now */
	SDP_TX_HOLD = 1,      /* partial segment: wait for more data or a
			       * send completion (Nagle) or uncork */
	SDP_TX_NO_CREDIT = 2, /* the peer has no buffer for it: wait for credits */
	SDP_TX_CLOSED = 3,    /* DisConn/AbortConn sent or connection dead */
};

/*
 * May the oldest queued Data segment (seg_bytes of payload; full when it
 * cannot take more, or when more segments queue behind it) be posted now?
 */
enum sdp_core_tx_verdict sdp_core_tx_decide(const struct sdp_core_conn *c,
					    unsigned int seg_bytes, int full,
					    unsigned int opts);

/*
 * Write the headers of an outgoing SEND at hdr (SDP_BSDH_SIZE bytes, 20 for
 * RdmaRdCompl and RdmaWrCompl) and account it: sequence number, credit,
 * data in flight.  mid is Data, DisConn, AbortConn or a zero-copy control
 * message control_due() returned (its fields come from the core); flags
 * are BSDH flags (SDP_FLAG_OOB_PRES).  Returns the header length, or
 * -enum sdp_core_err.
 */
int sdp_core_tx_build(struct sdp_core_conn *c, unsigned char *hdr,
		      unsigned int mid, unsigned int payload_len,
		      unsigned int flags);

/* A SEND posted with tx_build completed (successfully or flushed). */
void sdp_core_tx_done(struct sdp_core_conn *c, unsigned int mid);

/*
 * The control message that should go out now, if any: 0 for none, else an
 * enum sdp_mid: a zero-copy completion, SendSM or cancel first, then
 * SDP_MID_DISCONN once shutdown was requested and no data is queued, then
 * SDP_MID_DATA for a zero-payload credit update.
 * tx_queued: Data segments queued and not yet posted.
 */
int sdp_core_control_due(const struct sdp_core_conn *c,
			 unsigned int tx_queued);

/*
 * The transmit rings as the core needs to see them to choose the next SEND.
 * seg_*: the oldest queued Data segment (its payload bytes, whether it ends
 * with urgent data, where its SDP_BSDH_SIZE header bytes go), segs_queued:
 * Data segments queued and not posted, that one included (0: none).
 * ctl_hdr: the next free control-ring buffer (ctl_size bytes), NULL when
 * the control ring is full.  opts: SDP_TXO_*.
 */
struct sdp_core_tx_ring {
	unsigned int seg_bytes;
	unsigned int segs_queued;
	int seg_urgent;
	int seg_full; /* its send buffer can take no more (smaller than
		       * seg_max() until it grows) */
	unsigned char *seg_hdr;
	unsigned char *ctl_hdr;
	unsigned int ctl_size;
	unsigned int opts;
};

enum sdp_core_tx_kind {
	SDP_TXN_NONE = 0,    /* nothing to post now */
	SDP_TXN_DATA = 1,    /* post the oldest segment: its header is written */
	SDP_TXN_CONTROL = 2, /* post the control buffer: its header is written */
};

struct sdp_core_tx_action {
	enum sdp_core_tx_kind kind;
	unsigned int mid;     /* the message built (SDP_MID_DATA for a segment;
			       * a zero-payload Data control is a credit update) */
	unsigned int hdr_len; /* header bytes written */
	/* Why the oldest queued segment did not go (SDP_TX_HOLD,
	 * SDP_TX_NO_CREDIT, SDP_TX_CLOSED); SDP_TX_POST if it went or none
	 * is queued.  Set whatever the kind. */
	enum sdp_core_tx_verdict data;
};

/*
 * The next SEND to post: the oldest queued segment if it may go now (Nagle,
 * cork, credits, stream order with zero copy), else the control message
 * due (control_due()) if the control ring has room, else nothing.  The
 * header is written and accounted as by tx_build().  The host posts what it
 * is told and calls again until SDP_TXN_NONE (sdp_push()).  Returns 0, or
 * -enum sdp_core_err if a header could not be built (nothing accounted).
 */
int sdp_core_tx_next(struct sdp_core_conn *c,
		     const struct sdp_core_tx_ring *ring,
		     struct sdp_core_tx_action *act);

/*
 * Acknowledge the data received so far at the next opportunity: the
 * delayed-ack timer fired, or the reader took everything and waits for more.
 * A sender holds small writes (Nagle) until its last partial message is
 * acknowledged; control_due() then returns a zero-payload Data unless other
 * traffic carries the acknowledgement first.
 */
void sdp_core_ack_request(struct sdp_core_conn *c);

/* The user shut down sending (shutdown(SHUT_WR) or close()). */
void sdp_core_shutdown_send(struct sdp_core_conn *c);

/* ---- receive ------------------------------------------------------------- */

enum sdp_core_rx_kind {
	SDP_RX_DATA = 0,    /* payload for the socket (may be empty: credits) */
	SDP_RX_DISCONN = 1, /* the peer will send no more: EOF after the data */
	SDP_RX_ABORT = 2,   /* the peer aborted the connection: ECONNRESET */
	SDP_RX_ZCOPY = 3,   /* a zero-copy message (mid says which): the zero-
			     * copy state changed, see sdp_core_zc_query();
			     * for RdmaWrCompl zc_bytes landed in the buffer
			     * our SinkAvail advertised */
	SDP_RX_RESIZE = 4,  /* ChRcvBuf (resize_bytes asked for) or
			     * ChRcvBufAck (seg_max() may have grown), see
			     * sdp_core_rx_resized() */
};

struct sdp_core_rx {
	unsigned int kind;	  /* enum sdp_core_rx_kind */
	unsigned int mid;	  /* message id, for statistics */
	unsigned int payload_off; /* payload bytes at buf + payload_off */
	unsigned int payload_len;
	int urgent; /* the last payload byte is urgent (MSG_OOB) */
	unsigned int ack_timer_ms; /* an acknowledgement became owed: run the
				    * delayed-ack timer this long, then call
				    * sdp_core_ack_request() (0: no timer) */
	unsigned int zc_bytes; /* SDP_RX_ZCOPY: bytes the message reports
				* (SrcAvail, RdmaRdCompl, RdmaWrCompl) */
	unsigned int resize_bytes; /* SDP_RX_RESIZE: the size the message
				    * carries */
};

/*
 * A receive completed with byte_len bytes at buf.  Decodes and validates
 * the message, accounts its credits and sequence number, and says what it
 * means for the socket.  Returns 0, or -enum sdp_core_err: the connection
 * must then be aborted.
 */
int sdp_core_on_recv(struct sdp_core_conn *c, const unsigned char *buf,
		     unsigned int byte_len, struct sdp_core_rx *out);

/* ---- state ---------------------------------------------------------------- */

#define SDP_CS_ESTABLISHED 0x01	 /* Hello exchange complete */
#define SDP_CS_SHUT_REQUESTED 0x02 /* user shut down sending */
#define SDP_CS_DISCONN_SENT 0x04   /* our DisConn is posted */
#define SDP_CS_DISCONN_RCVD 0x08   /* peer's DisConn arrived */
#define SDP_CS_ABORTED 0x10	   /* AbortConn sent or received */
#define SDP_CS_RX_FAILED 0x20	   /* the peer broke the protocol */

/*
 * After SDP_CS_ABORTED or SDP_CS_RX_FAILED, sdp_core_on_recv() refuses
 * every message (-SDP_CORE_ESTATE): a reset connection delivers nothing
 * the peer sends after the reset.  sdp_core_on_recv() sets RX_FAILED
 * itself on every error; sdp_core_rx_fail() sets it for errors the host
 * finds (a receive that is no SEND).
 */
void sdp_core_rx_fail(struct sdp_core_conn *c);

unsigned int sdp_core_state(const struct sdp_core_conn *c);
/*
 * Credits for sending to the peer now, and the Data SENDs (credit updates
 * included) posted and not yet completed.
 */
unsigned int sdp_core_tx_credits(const struct sdp_core_conn *c);
unsigned int sdp_core_data_in_flight(const struct sdp_core_conn *c);
/*
 * Credits allow an offer (SrcAvail or SinkAvail) now: like a Data
 * message it must leave the reserve for the control messages that answer
 * the peer.  The host waits for this, and for room on its control ring,
 * before it registers memory for an offer.
 */
int sdp_core_may_offer(const struct sdp_core_conn *c);

/* ---- close: the socket's TCP state ---------------------------------------- */

/*
 * The state a socket reports (getsockopt TCP_INFO, /proc/net/sdp, the
 * close and poll rules) is TCP's, with TCP's numbers (the glue checks they
 * agree with include/net/tcp_states.h at build time).
 */
enum sdp_core_tcp_state {
	SDP_TCP_ESTABLISHED = 1,
	SDP_TCP_SYN_SENT = 2,
	SDP_TCP_SYN_RECV = 3,
	SDP_TCP_FIN_WAIT1 = 4,
	SDP_TCP_FIN_WAIT2 = 5,
	SDP_TCP_TIME_WAIT = 6,
	SDP_TCP_CLOSE = 7,
	SDP_TCP_CLOSE_WAIT = 8,
	SDP_TCP_LAST_ACK = 9,
	SDP_TCP_LISTEN = 10,
	SDP_TCP_CLOSING = 11,
};

/* What happened to a connection on its way to closed. */
enum sdp_core_close_event {
	SDP_CLOSE_SHUTDOWN_SEND = 0, /* the user shut down sending (or closed) */
	SDP_CLOSE_PEER_DISCONN = 1,  /* the peer's DisConn arrived (its FIN) */
	SDP_CLOSE_DISCONN_POSTED = 2, /* our DisConn went to the QP */
	SDP_CLOSE_DISCONN_DONE = 3,  /* our DisConn's send completed (acked) */
	SDP_CLOSE_FINISHED = 4,	     /* both DisConns through: RC disconnect */
	SDP_CLOSE_RESET = 5,	     /* abort, error, listener or connect undone */
};

/*
 * The TCP state after `event` in state `tcp_state`: the one table of the
 * close path.  An event that does not move this state returns it as is.
 */
unsigned int sdp_core_close_state(unsigned int tcp_state, unsigned int event);

/* ---- connect: SDP or TCP ------------------------------------------------- */

/*
 * A socket's transport policy (the values of the UAPI's SDP_POLICY_*), and
 * why its connection went over TCP (SDP_FB_*, same values; the glue checks
 * that they agree at build time).
 */
enum sdp_core_policy {
	SDP_CORE_POLICY_SDP = 0,
	SDP_CORE_POLICY_FALLBACK = 1,
	SDP_CORE_POLICY_TCP = 2,
};

enum sdp_core_fallback {
	SDP_CORE_FB_NONE = 0,
	SDP_CORE_FB_POLICY = 1,
	SDP_CORE_FB_NO_ROUTE = 2,
	SDP_CORE_FB_REJECTED = 3,
	SDP_CORE_FB_BUSY = 4,
	SDP_CORE_FB_TIMEOUT = 5,
	SDP_CORE_FB_RESOURCES = 6,
	SDP_CORE_FB_PEER_TCP = 7, /* a listener's child: the client chose TCP */
};

/* How an SDP connect attempt ended, as the host saw it. */
enum sdp_core_connect_end {
	SDP_CORE_CE_START = 0,	     /* connect() called: nothing tried yet */
	SDP_CORE_CE_NO_ROUTE = 1,    /* address or route resolution failed */
	SDP_CORE_CE_REJECTED = 2,    /* the peer's CM rejected the REQ */
	SDP_CORE_CE_BUSY = 3,	     /* rejected by a listener short of resources */
	SDP_CORE_CE_NO_ANSWER = 4,   /* the CM or our fallback bound timed out */
	SDP_CORE_CE_RESOURCES = 5,   /* no QP, CQ, memory or memlock here */
	SDP_CORE_CE_NOT_SDP = 6,     /* the peer answered, but not as SDP */
	SDP_CORE_CE_LOST = 7,	     /* device removed, connection reset */
};

/*
 * Whether a connect that ended so goes on over TCP: the SDP_CORE_FB_*
 * reason, or SDP_CORE_FB_NONE for the host to report the failure as SDP
 * does.  A peer that answered as something other than SDP, or a
 * connection lost after the peer accepted it, is not retried over TCP:
 * the peer did take the connection.
 */
int sdp_core_fallback_reason(int policy, int end);

/* ---- zero copy ------------------------------------------------------------ */

/*
 * Zero-copy transfers move stream bytes by RDMA between registered
 * application buffers.  The core owns the protocol (which message is due,
 * what the peer may do, where each transfer stands); the host owns the
 * registrations, the RDMA work requests and waiting.
 *
 * Source side, SrcAvail + RDMA Read: with nothing queued ahead, the host
 * registers len bytes for remote read and posts the SrcAvail built by
 * sdp_core_tx_src_avail().  The sink reads and answers RdmaRdCompl(n) until
 * all is read; or it sends SendSM (it reads no more: the rest goes by
 * bcopy), to which the source answers SrcAvailCancel.  The source may also
 * give up by itself with sdp_core_src_cancel().  The sink answers every
 * SrcAvailCancel with SendSM, after the RdmaRdCompl of what it read; that
 * SendSM ends the SrcAvail.  When src_state is SDP_ZC_DONE the host invalidates its key
 * and calls sdp_core_src_release(); src_acked bytes were delivered.
 *
 * Sink side of a SrcAvail: SDP_RX_ZCOPY with mid SrcAvail queues its bytes
 * behind the unread data, and behind the peer's earlier offers (up to
 * SDP_CORE_MAX_ADVERTS).  The host reads them with RDMA Reads:
 * sdp_core_rd_start(n), then sdp_core_rd_done(n) (RdmaRdCompl becomes
 * due).  A read of n bytes starts at the first unread byte and may go on
 * into the offers queued behind it, one RDMA Read per offer
 * (sdp_core_rsa_piece()), all in flight at once.  MSG_PEEK or a failed
 * registration give the offers up with sdp_core_rsa_abandon() (SendSM).  A SrcAvail that arrives
 * while our own SrcAvail is outstanding and no application receive is
 * posted (sdp_core_set_reader_waiting()) is the send/send deadlock of the
 * specification: the core answers SendSM at once and never offers it.
 *
 * Sink side, SinkAvail + RDMA Write: with nothing unread the host registers
 * the application's receive buffer for remote write and posts the
 * SinkAvail built by sdp_core_tx_sink_avail(), or several for consecutive
 * pieces of the buffer (sdp_core_adv_room()).  The source writes into each
 * in turn and sends RdmaWrCompl(n) (SDP_RX_ZCOPY, zc_bytes = n), which ends
 * that piece.  A message carrying stream bytes (Data, SrcAvail) ends them
 * all: the source never uses an advertisement after sending such a
 * message.  The sink may cancel (sdp_core_adv_cancel(): SinkAvailCancel);
 * the source always answers SinkCancelAck, after the RdmaWrCompl of a write
 * it made.  When sdp_core_adv_end() says ENDED the host invalidates and
 * calls sdp_core_adv_release().
 *
 * Source side of a SinkAvail: sdp_core_sink_take() hands out the next
 * usable advertisement (one the sink made after receiving all our stream
 * bytes but those we wrote into its earlier pieces of the same receive);
 * the host RDMA-writes zc->len bytes there and posts the RdmaWrCompl that
 * sdp_core_control_due() then returns, before anything else.
 *
 * Every cancel and every zero-copy completion message goes through
 * sdp_core_control_due() and sdp_core_tx_build().
 */
enum sdp_core_zc_state {
	SDP_ZC_IDLE = 0,
	SDP_ZC_ACTIVE = 1,     /* offered, the peer may use it */
	SDP_ZC_CANCELLING = 2, /* cancel sent or due, the peer's answer pending */
	SDP_ZC_DONE = 3,       /* ended: invalidate, then release */
};

/*
 * SrcAvails, and SinkAvails, of the peer this implementation accepts
 * outstanding at once (Hello max_adverts, HelloAck ext_max_adverts): the
 * sink queues the SrcAvails in stream order and reads them in that order,
 * several with one read; the source writes into the SinkAvails in order.
 */
#define SDP_CORE_MAX_ADVERTS 4

/* Largest SrcAvail or SinkAvail this implementation sends or accepts. */
#define SDP_ZC_MAX_LEN (64u << 20)

struct sdp_core_zc {
	unsigned int len;
	unsigned int rkey;
	unsigned long long vaddr;
};

/*
 * The whole zero-copy state at once, for diagnostics (the message a
 * protocol error logs) and for the tests' checks.  The host decides
 * nothing from it: it asks the calls below, which answer one question
 * each.
 */
struct sdp_core_zc_status {
	/* our SrcAvail */
	unsigned int src_state;	 /* enum sdp_core_zc_state */
	unsigned int src_len;
	unsigned int src_acked;	 /* bytes the sink has read */
	int src_sink_stopped;	 /* a SendSM came: the sink reads no more */
	unsigned int src_offers; /* our offers not released (src_*: the first) */
	int src_pending;	 /* one of them may still be read, or its
				  * cancel awaits its answer */
	/* the peer's SrcAvail */
	unsigned int rsa_left;	 /* bytes offered and not yet read (0: none) */
	unsigned int rsa_rkey;	 /* the first offer's (the one read next) */
	unsigned long long rsa_vaddr; /* address of the next unread byte */
	int rsa_reading;	 /* an RDMA Read is in progress */
	unsigned int rsa_offers; /* offers queued (stopped ones included) */
	unsigned int peer_max_adverts; /* offers the peer accepts at once */
	/* our SinkAvails (the pieces of one receive's buffer) */
	unsigned int adv_state;	 /* enum sdp_core_zc_state: cancelling if one
				  * is, else active if one is */
	unsigned int adv_written; /* bytes the source wrote into them */
	unsigned int adv_count;	 /* how many */
	/* the peer's usable SinkAvails (psink_len: the next one's) */
	int psink_usable;
	unsigned int psink_len;
	unsigned int psink_count;
	/* the RdmaWrCompl of our RDMA Write is not posted yet */
	int wr_compl_pending;
};

void sdp_core_zc_query(const struct sdp_core_conn *c,
			struct sdp_core_zc_status *st);

/* SrcAvail for zc (header only, SDP_SRC_AVAIL_HDR_SIZE bytes at hdr). */
int sdp_core_tx_src_avail(struct sdp_core_conn *c, unsigned char *hdr,
			  unsigned int size, const struct sdp_core_zc *zc);
/* Take our SrcAvail back: 1 if a cancel is now due, 0 if nothing to cancel
 * (not offered, ended, or cancelled already: a SendSM asked for it). */
int sdp_core_src_cancel(struct sdp_core_conn *c);
void sdp_core_src_release(struct sdp_core_conn *c);
/*
 * How many SrcAvails of ours may be out at once: n (1 to
 * SDP_CORE_MAX_ADVERTS; 1 until set), and never more than the peer's
 * max_adverts.  A new one only while the others are offered or read in
 * full; they end in stream order (RdmaRdCompl bytes apply in order, and a
 * SendSM or our cancel ends them all), so src_state, src_acked and
 * sdp_core_src_end() describe the oldest, and sdp_core_src_release()
 * releases it.
 */
void sdp_core_set_src_limit(struct sdp_core_conn *c, unsigned int n);
/* The connection failed: forget the oldest offer, ended or not. */
void sdp_core_src_drop(struct sdp_core_conn *c);
/* Another SrcAvail would be accepted now, credits aside (sdp_core_may_offer). */
int sdp_core_src_room(const struct sdp_core_conn *c);

/*
 * Where our SrcAvail stands; *acked (may be NULL): bytes the sink read.
 * The writer waits while it is PENDING; once it ended, release it.
 */
enum sdp_core_src_end {
	SDP_SRC_NONE = 0,      /* no SrcAvail of ours */
	SDP_SRC_PENDING = 1,   /* the sink may still read it, or our cancel
				* (or the one a SendSM asked for) waits for
				* its answer: keep waiting */
	SDP_SRC_READ = 2,      /* the sink read all of it */
	SDP_SRC_STOPPED = 3,   /* the sink stopped reading (SendSM): *acked
				* bytes went, the rest of the write goes by
				* bcopy */
	SDP_SRC_CANCELLED = 4, /* our cancel ended it: *acked bytes went */
};
int sdp_core_src_end(const struct sdp_core_conn *c, unsigned int *acked);

/* Bytes the peer's usable SinkAvail takes (0: none to write into). */
unsigned int sdp_core_sink_len(const struct sdp_core_conn *c);

/* An RDMA Write's RdmaWrCompl is due and not posted yet. */
int sdp_core_wr_compl_pending(const struct sdp_core_conn *c);

/* A usable SinkAvail of the peer for up to `want` bytes: 1 and *zc, or 0. */
int sdp_core_sink_take(struct sdp_core_conn *c, unsigned int want,
		       struct sdp_core_zc *zc);

/* Bytes of the peer's SrcAvails not read yet (0: none readable). */
unsigned int sdp_core_rsa_left(const struct sdp_core_conn *c);

/*
 * A reader reached the peer's offer: read it (RDMA Read) or give it up
 * (SendSM: the source sends the bytes by bcopy)?  A peek cannot consume
 * the bytes; a reader of small pieces (SDP_RSA_SMALL: less than the zero-
 * copy threshold wanted) is served by at most SDP_CORE_SMALL_READS RDMA
 * Reads of one offer, each a registration, a round trip and an
 * RdmaRdCompl; the next gives it up.  On SDP_RSA_READ, *zc is where the
 * first offer's unread bytes are (len: how many; those of the offers
 * behind it follow in the stream, sdp_core_rsa_piece()), and a small read
 * is counted.
 */
#define SDP_RSA_PEEK 0x1  /* MSG_PEEK */
#define SDP_RSA_SMALL 0x2 /* the read wants less than the threshold */
#define SDP_CORE_SMALL_READS 4
enum sdp_core_rsa_verdict {
	SDP_RSA_NONE = 0,	    /* nothing to read now (no offer, or a read
				     * of it is in progress) */
	SDP_RSA_READ = 1,	    /* read it, from *zc */
	SDP_RSA_GIVE_UP_PEEK = 2,  /* give it up: a peek */
	SDP_RSA_GIVE_UP_SMALL = 3, /* give it up: small reads */
};
int sdp_core_rsa_next(struct sdp_core_conn *c, unsigned int flags,
		      struct sdp_core_zc *zc);

/*
 * Where the unread bytes of the peer's offers are, one RDMA Read's worth
 * at a time: the offer that holds the byte `skip` bytes after the next
 * unread one, from that byte (*zc: its rkey and address, and the offer's
 * bytes from there).  1, or 0 if there is no such byte (skip >=
 * rsa_left).  An RDMA Read never spans two offers (each has its own key):
 * a read of n bytes is posted as the pieces at skip 0, then at the bytes
 * of the pieces before, until n.
 */
int sdp_core_rsa_piece(const struct sdp_core_conn *c, unsigned int skip,
		       struct sdp_core_zc *zc);
/*
 * RDMA Reads of the next n bytes of the peer's offers, from the first
 * unread byte, as many offers as they span: 0, or -SDP_CORE_ESTATE (a
 * read is in progress, n is 0 or more than rsa_left).
 */
int sdp_core_rd_start(struct sdp_core_conn *c, unsigned int n);
/* The reads ended; n bytes landed, in order (0 if they failed). */
void sdp_core_rd_done(struct sdp_core_conn *c, unsigned int n);
void sdp_core_rsa_abandon(struct sdp_core_conn *c);
/*
 * The grace period of the peer's offer (zc_grace_ms, sdp_core_set_timers):
 * the host starts it when a SrcAvail arrives and when it ends without a
 * verdict, runs a timer for the milliseconds grace_start() returns, and
 * asks at its end.  An offer nobody reads over a whole
 * period is given up (SendSM: the rest comes by bcopy), so a sender never
 * blocks on a receiver that is not reading, where TCP's send would have
 * returned.  reader_busy: a recvmsg is at work on the socket.
 */
enum sdp_core_grace {
	SDP_GRACE_NONE = 0,	 /* no offer left to read: stop the timer */
	SDP_GRACE_AGAIN = 1,	 /* being read: start another period */
	SDP_GRACE_ABANDONED = 2, /* given up: SendSM is due */
};
unsigned int sdp_core_rsa_grace_start(struct sdp_core_conn *c);
int sdp_core_rsa_grace_end(struct sdp_core_conn *c, int reader_busy);
void sdp_core_set_reader_waiting(struct sdp_core_conn *c, int waiting);

/* SinkAvail for zc (SDP_SINK_AVAIL_SIZE bytes at hdr). */
int sdp_core_tx_sink_avail(struct sdp_core_conn *c, unsigned char *hdr,
			   unsigned int size, const struct sdp_core_zc *zc);
void sdp_core_adv_cancel(struct sdp_core_conn *c);

/*
 * A receive may advertise its buffer in several pieces, one SinkAvail each
 * (consecutive bytes, the first piece first), so that the source writes
 * into the next while the sink learns of the last: how many more SinkAvails
 * it may add now (0: none).  Pieces are added only while every earlier one
 * is untouched, and at most the peer's max_adverts are out.  The source
 * fills them in order; an RdmaWrCompl that leaves room in its piece ends
 * the pieces after it, and a cancel takes back all of them.
 */
unsigned int sdp_core_adv_room(const struct sdp_core_conn *c);

/*
 * Where our SinkAvails stand; *written (may be NULL): bytes the source
 * wrote into them so far, the pieces filled in order.  The reader waits
 * while it is PENDING (it may cancel the rest once it has enough); once
 * it ended, release it.
 */
enum sdp_core_adv_end {
	SDP_ADV_NONE = 0,    /* no SinkAvail of ours */
	SDP_ADV_PENDING = 1, /* the source may still write, or our cancel
			      * waits for its answer */
	SDP_ADV_ENDED = 2,   /* written into (*written bytes), or ended by
			      * the peer's stream bytes, DisConn or answer */
};
int sdp_core_adv_end(const struct sdp_core_conn *c, unsigned int *written);
void sdp_core_adv_release(struct sdp_core_conn *c);

/*
 * A reader about to block may advertise its buffer: should it, this time?
 * A reader whose advertisements keep going unused (the peer writes small
 * messages, by bcopy) skips 1, 3, 7, ... up to 63 chances after as many
 * misses in a row: the registration and the extra messages would only
 * cost it latency.  Each call that answers 0 counts as one skipped chance;
 * sdp_core_adv_release() records a hit or a miss.
 */
int sdp_core_adv_try(struct sdp_core_conn *c);

/* NOLINTEND(readability-identifier-naming) */

#ifdef __cplusplus
}
#endif

#endif /* SDP_CORE_H */
