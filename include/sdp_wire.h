/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/*
 * SDP wire constants: message ids, header flags and on-the-wire sizes.
 *
 * The single definition shared by the C++ protocol core, the kernel glue and
 * userspace tools.  Plain C with no includes so that every one of them, the
 * freestanding kernel C++ core included, can use it.  The layouts the sizes
 * describe are documented in Documentation/wire-protocol.md; the codec in
 * kernel/core/wire.{h,cpp} is the only code that reads or writes them.
 */
#ifndef SDP_WIRE_H
#define SDP_WIRE_H

/* Message ids (BSDH.mid).  Control messages have (mid & 0xf0) == 0. */
enum sdp_mid {
	SDP_MID_HELLO = 0x00,
	SDP_MID_HELLO_ACK = 0x01,
	SDP_MID_DISCONN = 0x02,
	SDP_MID_ABORT_CONN = 0x03,
	SDP_MID_SEND_SM = 0x04,
	SDP_MID_RDMA_WR_COMPL = 0x05,
	SDP_MID_RDMA_RD_COMPL = 0x06,
	SDP_MID_MODE_CHANGE = 0x07,
	SDP_MID_SRC_AVAIL_CANCEL = 0x08,
	SDP_MID_SINK_AVAIL_CANCEL = 0x09,
	SDP_MID_SINK_CANCEL_ACK = 0x0a,
	SDP_MID_CH_RCV_BUF = 0x0b,
	SDP_MID_CH_RCV_BUF_ACK = 0x0c,
	SDP_MID_SUSP_COMM = 0x0d,
	SDP_MID_SUSP_COMM_ACK = 0x0e,
	SDP_MID_SINK_AVAIL = 0xfd,
	SDP_MID_SRC_AVAIL = 0xfe,
	SDP_MID_DATA = 0xff,
};

/* BSDH.flags */
#define SDP_FLAG_OOB_PRES 0x01 /* last byte of this message is urgent */
#define SDP_FLAG_OOB_PEND 0x02 /* urgent data follows in a later message */
#define SDP_FLAG_REQ_PIPE 0x04 /* request pipelined mode */

/* Protocol version carried in Hello/HelloAck majv_minv: major 2, minor 2. */
#define SDP_VERSION_MAJOR 2
#define SDP_VERSION_MINOR 2

/* Hello/HelloAck ipv_cap low nibble: capability bits. */
#define SDP_CAP_INVALIDATE 0x01 /* accepts SEND with invalidate */
#define SDP_CAP_EXT_MAX_ADVERTS 0x02
/* Extension: answers ChRcvBuf with ChRcvBufAck (receive buffers that grow). */
#define SDP_CAP_RESIZE 0x04

/* Sizes in bytes of each header and of the messages with a fixed size. */
#define SDP_BSDH_SIZE 16
/*
 * Hello as it fits in CM REQ private data with IP addressing: the CM header
 * (36 bytes) carries the addresses, leaving 56 bytes, so the Hello header
 * stops after the local port and its reserved half-word.
 */
#define SDP_HELLO_MODERN_SIZE (SDP_BSDH_SIZE + 16)
/* Historical Hello with source and destination IP (16 bytes each). */
#define SDP_HELLO_FULL_SIZE (SDP_HELLO_MODERN_SIZE + 32)
#define SDP_HELLO_ACK_SIZE (SDP_BSDH_SIZE + 8)
#define SDP_SRC_AVAIL_HDR_SIZE (SDP_BSDH_SIZE + 16) /* inline payload may follow */
#define SDP_SINK_AVAIL_SIZE (SDP_BSDH_SIZE + 20)
#define SDP_RDMA_COMPL_SIZE (SDP_BSDH_SIZE + 4)	/* RdmaRdCompl, RdmaWrCompl */
#define SDP_CH_RCV_BUF_SIZE (SDP_BSDH_SIZE + 4)	/* ChRcvBuf, ChRcvBufAck */

/* Room for SDP in the RDMA CM private data with IP (AF_INET/AF_INET6) ids. */
#define SDP_CM_REQ_PRIVATE_DATA 56
#define SDP_CM_REP_PRIVATE_DATA 196

#endif /* SDP_WIRE_H */
