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

/*
 * Known-answer self-check of the wire codec and credit arithmetic, run by the
 * module at load so a miscompiled core never handles traffic.  Returns 0, or
 * the number of the first failing check with *failed naming it.
 */
int sdp_core_selftest(const char **failed);

/* ---- one connection ---------------------------------------------------- */

/* Opaque protocol state, embedded in the host's socket (no allocation). */
#define SDP_CORE_CONN_BYTES 128
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
 * Connection setup.  The active side builds a Hello into the CM REQ private
 * data and parses the HelloAck from the REP; the passive side parses the
 * Hello and builds the HelloAck.  posted_rx is the number of receive buffers
 * posted before the message goes out: the initial credit grant.  Each
 * returns the bytes written (build) or 0 (parse), or -enum sdp_core_err.
 */
int sdp_core_build_hello(struct sdp_core_conn *c, unsigned char *buf,
			 unsigned int size, unsigned short posted_rx,
			 unsigned short local_port, int ipv6);
int sdp_core_on_hello_ack(struct sdp_core_conn *c, const unsigned char *buf,
			  unsigned int size);
int sdp_core_on_hello(struct sdp_core_conn *c, const unsigned char *buf,
		      unsigned int size);
int sdp_core_build_hello_ack(struct sdp_core_conn *c, unsigned char *buf,
			     unsigned int size, unsigned short posted_rx);

/* Largest Data payload one message may carry (peer's and our limits). */
unsigned int sdp_core_seg_max(const struct sdp_core_conn *c);

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
 * Write the headers of an outgoing SEND at hdr (SDP_BSDH_SIZE bytes for
 * Data, DisConn, AbortConn) and account it: sequence number, credit, data in
 * flight.  mid is an enum sdp_mid the core sends (Data, DisConn, AbortConn);
 * flags are BSDH flags (SDP_FLAG_OOB_PRES).  posted_rx: receive buffers
 * posted now.  Returns the header length, or -enum sdp_core_err.
 */
int sdp_core_tx_build(struct sdp_core_conn *c, unsigned char *hdr,
		      unsigned int mid, unsigned int payload_len,
		      unsigned int flags, unsigned short posted_rx);

/* A SEND posted with tx_build completed (successfully or flushed). */
void sdp_core_tx_done(struct sdp_core_conn *c, unsigned int mid);

/*
 * The control message that should go out now, if any: 0 for none, else an
 * enum sdp_mid (SDP_MID_DISCONN once shutdown was requested and no data is
 * queued, SDP_MID_DATA for a zero-payload credit update).
 * tx_queued: Data segments queued and not yet posted.
 */
int sdp_core_control_due(const struct sdp_core_conn *c,
			 unsigned int tx_queued, unsigned short posted_rx);

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
};

struct sdp_core_rx {
	unsigned int kind;	  /* enum sdp_core_rx_kind */
	unsigned int mid;	  /* message id, for statistics */
	unsigned int payload_off; /* payload bytes at buf + payload_off */
	unsigned int payload_len;
	int urgent; /* the last payload byte is urgent (MSG_OOB) */
	int ack_timer; /* an acknowledgement became owed: arm the delayed-ack
			* timer, which calls sdp_core_ack_request() */
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

unsigned int sdp_core_state(const struct sdp_core_conn *c);
/*
 * Credits for sending to the peer now, and the Data SENDs (credit updates
 * included) posted and not yet completed.
 */
unsigned int sdp_core_tx_credits(const struct sdp_core_conn *c);
unsigned int sdp_core_data_in_flight(const struct sdp_core_conn *c);

#ifdef __cplusplus
}
#endif

#endif /* SDP_CORE_H */
