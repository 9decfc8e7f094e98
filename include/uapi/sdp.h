/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause */
/*
 * Userspace API of the SDP (Sockets Direct Protocol) socket family.
 *
 *   int fd = socket(AF_INET_SDP, SOCK_STREAM, 0);
 *
 * The family number is the historical AF_INET_SDP (27, which the kernel
 * headers now call AF_IB but for which no socket family is registered).
 * sdp.ko can register another number with its `family` module parameter;
 * programs that must follow it read /sys/module/sdp/parameters/family.
 * Both IPv4 and IPv6 peers are addressed through this one family, with
 * struct sockaddr_in or struct sockaddr_in6.
 */
#ifndef _UAPI_SDP_H
#define _UAPI_SDP_H

#define AF_INET_SDP 27
#define PF_INET_SDP AF_INET_SDP

/* Where the loaded module publishes the family number it registered. */
#define SDP_FAMILY_SYSFS_PATH "/sys/module/sdp/parameters/family"

/*
 * The same sockets with ordinary inet addressing, for programs and language
 * runtimes that cannot pass an unknown family:
 *
 *   int fd = socket(AF_INET or AF_INET6, SOCK_STREAM, IPPROTO_SDP);
 *
 * SO_DOMAIN reads AF_INET/AF_INET6 and SO_PROTOCOL IPPROTO_SDP; addresses
 * follow the family as on TCP (an AF_INET6 socket reaches IPv4 peers by
 * v4-mapped addresses unless IPV6_V6ONLY).  No kernel uses 257; sdp.ko can
 * register another number with its `ipproto` module parameter (0: none),
 * published in SDP_IPPROTO_SYSFS_PATH.
 */
#define IPPROTO_SDP 257
#define SDP_IPPROTO_SYSFS_PATH "/sys/module/sdp/parameters/ipproto"

/*
 * Socket options.  Level SOL_SDP, or SOL_TCP for the historical ones (OFED
 * SDP numbers, so programs written for it keep working).
 */
#define SOL_SDP 1025

/*
 * int: blocking sends and receives of at least this many bytes move the
 * data by RDMA straight between the applications' buffers (zero copy);
 * 0 turns zero copy off for the socket.  Default: net.sdp.zcopy_thresh.
 */
#define SDP_ZCOPY_THRESH 80

/* struct sdp_sock_stats (getsockopt only): this socket's transfer counters. */
#define SDP_STATS 82

/*
 * int: which transport connect() may use (Documentation/fallback.md).  Set
 * before connect(); the default is net.sdp.fallback (0: SDP only, 1: SDP,
 * else TCP).  A socket that falls back goes on as a TCP connection on the
 * same file descriptor: every later call behaves as on TCP.
 */
#define SDP_TRANSPORT_POLICY 83
#define SDP_POLICY_SDP 0      /* SDP only: what SDP cannot carry fails */
#define SDP_POLICY_FALLBACK 1 /* SDP, else TCP */
#define SDP_POLICY_TCP 2      /* TCP only (connect() and listen()) */
/*
 * A listener with SDP_POLICY_FALLBACK also listens on its address and port
 * over TCP: accept() returns plain TCP clients too, as sockets that went
 * over TCP (SDP_FB_PEER_TCP).
 */

/* int (getsockopt only): the transport of the socket's connection. */
#define SDP_TRANSPORT 84
#define SDP_TRANSPORT_NONE 0 /* none yet, or the connect failed */
#define SDP_TRANSPORT_SDP 1
#define SDP_TRANSPORT_TCP 2

/* int (getsockopt only): why the socket went over TCP, 0 if it did not. */
#define SDP_FALLBACK_REASON 85
#define SDP_FB_NONE 0
#define SDP_FB_POLICY 1	   /* SDP_POLICY_TCP */
#define SDP_FB_NO_ROUTE 2  /* no RDMA device or route to the destination */
#define SDP_FB_REJECTED 3  /* the peer's CM refused: no SDP listener there */
#define SDP_FB_BUSY 4	   /* the peer's SDP listener had no resources */
#define SDP_FB_TIMEOUT 5   /* no answer within net.sdp.fallback_ms */
#define SDP_FB_RESOURCES 6 /* no QP, CQ, memory or memlock here */
#define SDP_FB_PEER_TCP 7  /* accepted: the client came over TCP */

/*
 * int, 0 or 1: SO_ZEROCOPY under SDP's level.  Kernels before 6.12 let
 * setsockopt(SOL_SOCKET, SO_ZEROCOPY) reach only TCP's and UDP's protocol
 * numbers and answer EOPNOTSUPP for an SDP socket before SDP sees the call;
 * this sets the same flag (getsockopt(SOL_SOCKET, SO_ZEROCOPY) reads it).
 * libsdp.so maps a refused SO_ZEROCOPY to it.  Documentation/zcopy.md.
 */
#define SDP_ZEROCOPY 86

#ifndef __KERNEL__
#include <stdint.h>
#define __sdp_u64 uint64_t
#else
#include <linux/types.h>
#define __sdp_u64 __u64
#endif

struct sdp_sock_stats {
	__sdp_u64 tx_bytes;	   /* stream bytes sent, every path */
	__sdp_u64 rx_bytes;	   /* stream bytes received, every path */
	__sdp_u64 tx_bcopy_bytes;  /* sent in Data messages (CPU copy) */
	__sdp_u64 rx_bcopy_bytes;  /* received in Data messages (CPU copy) */
	__sdp_u64 zc_tx_bytes;	   /* sent by zero copy (RDMA Read or Write) */
	__sdp_u64 zc_rx_bytes;	   /* received by zero copy */
	__sdp_u64 zc_tx_segs;	   /* zero-copy transfers as the source */
	__sdp_u64 zc_rx_segs;	   /* zero-copy transfers as the sink */
	__sdp_u64 src_avail_sent;  /* SrcAvail messages sent */
	__sdp_u64 sink_avail_sent; /* SinkAvail messages sent */
	__sdp_u64 rdma_writes;	   /* RDMA Writes into the peer's SinkAvail */
	__sdp_u64 rdma_reads;	   /* RDMA Reads of the peer's SrcAvail */
	__sdp_u64 send_sm_sent;
	__sdp_u64 send_sm_rcvd;
	__sdp_u64 cancels_sent;	   /* SrcAvailCancel + SinkAvailCancel */
	__sdp_u64 fallback_send_sm;  /* SrcAvails ended by SendSM: rest by bcopy */
	__sdp_u64 fallback_memlock;  /* RLIMIT_MEMLOCK refused the pinning */
	__sdp_u64 fallback_pin;	     /* the pages could not be pinned */
	__sdp_u64 fallback_reg;	     /* registration failed */
	__sdp_u64 fallback_peek;     /* MSG_PEEK over an offer: SendSM */
	__sdp_u64 fallback_no_reader; /* an offer nobody read in time: SendSM */
	/* Now, not counters: bytes of the receive and send rings' buffers
	 * (replacements of another size waiting to be swapped in included).
	 */
	__sdp_u64 rx_ring_bytes;
	__sdp_u64 tx_ring_bytes;
	/* Now: entries of the completion queue, which grows with the
	 * receive ring (0 before the connection has one).
	 */
	__sdp_u64 cq_entries;
};

#endif /* _UAPI_SDP_H */
