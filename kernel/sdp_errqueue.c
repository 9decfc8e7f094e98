// SPDX-License-Identifier: GPL-2.0
/*
 * MSG_ZEROCOPY completion notifications, in TCP's format.
 *
 * A socket with SO_ZEROCOPY set numbers each send() that carries
 * MSG_ZEROCOPY and some bytes (sk_zckey, from 0); once the buffer may be
 * reused, the number goes to the socket's error queue as a
 * sock_extended_err with ee_origin SO_EE_ORIGIN_ZEROCOPY and the inclusive
 * range [ee_info, ee_data], with SO_EE_CODE_ZEROCOPY_COPIED when some of the
 * bytes were copied (bcopy) rather than read from the buffer by the peer.
 * A notification that continues the range of the one at the tail of the
 * queue extends it, as TCP's do (skb_zerocopy_notify_extend()).
 *
 * A notification is never queued while the peer can still read the
 * buffer: a send that copied, or waited for the peer, is notified as it
 * returns; one that returned with offers in flight (sdp_zc_async_work())
 * once the last of them ended and its key is invalidated, with the number
 * it took when it returned (sdp_zc_notify_send()).
 *
 * The flag is SOCK_ZEROCOPY, as TCP's.  sock_setsockopt() sets it only for
 * TCP's and UDP's protocol numbers, so SDP sockets take SO_ZEROCOPY in
 * sdp_setsockopt(): at SOL_SOCKET where the kernel lets a socket handle
 * that level (SOCK_CUSTOM_SOCKOPT, 6.12 on), and as SOL_SDP/SDP_ZEROCOPY
 * on every kernel.
 *
 * The notification skb is allocated before the send, charged to the
 * socket's option memory as TCP's (sock_kmalloc's budget, optmem_max);
 * without it the send fails with ENOBUFS, as TCP's does.
 */
#include <linux/errqueue.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/skbuff.h>
#include <net/sock.h>

#include "sdp.h"

/*
 * Did this send() ask for a notification?  Not one that brings its own
 * completion (msg_ubuf: io_uring's SEND_ZC), as tcp_sendmsg_locked().
 */
bool sdp_zc_notify_wanted(const struct sock *sk, const struct msghdr *msg,
			  size_t size)
{
	return (msg->msg_flags & MSG_ZEROCOPY) && size && !msg->msg_ubuf &&
	       sock_flag(sk, SOCK_ZEROCOPY);
}

/*
 * SO_ZEROCOPY (SOL_SOCKET, or SOL_SDP/SDP_ZEROCOPY): sock_setsockopt()'s
 * checks and errors.  On a socket that fell back to TCP, TCP's flag too.
 */
int sdp_set_zerocopy(struct socket *sock, sockptr_t optval,
		     unsigned int optlen)
{
	struct sock *sk = sock->sk;
	int val;

	if (optlen < sizeof(int))
		return -EINVAL;
	if (copy_from_sockptr(&val, optval, sizeof(val)))
		return -EFAULT;
	if (val < 0 || val > 1)
		return -EINVAL;
	lock_sock(sk);
	sock_valbool_flag(sk, SOCK_ZEROCOPY, val);
	release_sock(sk);
	if (sdp_fallen_back(sk))
		sdp_fb_set_zerocopy(sock, val);
	return 0;
}

/* Gives back a notification's option-memory charge (sock_ofree()). */
static void sdp_zc_notify_free(struct sk_buff *skb)
{
	atomic_sub(skb->truesize, &skb->sk->sk_omem_alloc);
}

/* The notification's skb, before the send; NULL: the send fails, ENOBUFS. */
struct sk_buff *sdp_zc_notify_alloc(struct sock *sk)
{
	struct sk_buff *skb;

	if (atomic_read(&sk->sk_omem_alloc) + SKB_TRUESIZE(0) >
	    sdp_optmem_max(sk))
		return NULL;
	skb = alloc_skb(0, GFP_KERNEL | __GFP_NOWARN);
	if (!skb)
		return NULL;
	/* Charged until read or purged, as sock_omalloc()'s skbs are. */
	atomic_add(skb->truesize, &sk->sk_omem_alloc);
	skb->sk = sk;
	skb->destructor = sdp_zc_notify_free;
	return skb;
}

/* Queue skb as the notification of this send(); copied: some bytes went by
 * bcopy.  Consumes skb.
 */
void sdp_zc_notify(struct sock *sk, struct sk_buff *skb, bool copied)
{
	sdp_zc_notify_id(sk, skb, (u32)atomic_fetch_inc(&sk->sk_zckey), copied);
}

/* The same for a send numbered when it returned (an asynchronous one). */
void sdp_zc_notify_id(struct sock *sk, struct sk_buff *skb, u32 id,
		      bool copied)
{
	struct sk_buff_head *q = &sk->sk_error_queue;
	struct sock_exterr_skb *serr = SKB_EXT_ERR(skb);
	struct sk_buff *tail;
	unsigned long flags;

	memset(serr, 0, sizeof(*serr));
	serr->ee.ee_errno = 0;
	serr->ee.ee_origin = SO_EE_ORIGIN_ZEROCOPY;
	serr->ee.ee_info = id;
	serr->ee.ee_data = id;
	if (copied)
		serr->ee.ee_code |= SO_EE_CODE_ZEROCOPY_COPIED;

	spin_lock_irqsave(&q->lock, flags);
	tail = skb_peek_tail(q);
	if (tail && SKB_EXT_ERR(tail)->ee.ee_origin == SO_EE_ORIGIN_ZEROCOPY &&
	    SKB_EXT_ERR(tail)->ee.ee_data + 1 == id &&
	    SKB_EXT_ERR(tail)->ee.ee_data != U32_MAX) {
		/* The next number: the range at the tail grows (TCP keeps
		 * the tail's code, so does this).
		 */
		SKB_EXT_ERR(tail)->ee.ee_data = id;
	} else {
		__skb_queue_tail(q, skb);
		skb = NULL;
	}
	spin_unlock_irqrestore(&q->lock, flags);
	consume_skb(skb);
	sk_error_report(sk);
}

/*
 * io_uring's SEND_ZC brings its own completion (msg_ubuf); an asynchronous
 * send holds a reference until the buffer is free, and drops it here.
 * `zerocopy` false reports the bytes as copied (io_uring's
 * IORING_NOTIF_USAGE_ZC_COPIED).  The one user of the ubuf_info API, whose
 * difference between the kernels is sdp_ubuf_complete() (sdp_compat.h).
 */
void sdp_zc_ubuf_done(struct ubuf_info *uarg, bool zerocopy)
{
	sdp_ubuf_complete(uarg, zerocopy);
}

/*
 * recvmsg(MSG_ERRQUEUE), as ip_recv_error() and ipv6_recv_error() answer
 * for TCP: the sock_extended_err and an empty offender address in a
 * SOL_IP/IP_RECVERR (or SOL_IPV6/IPV6_RECVERR) control message, no data.
 */
int sdp_recv_error(struct sock *sk, struct msghdr *msg, size_t len)
{
	struct {
		struct sock_extended_err ee;
		union {
			struct sockaddr_in sin;
			struct sockaddr_in6 sin6;
		} offender;
	} errhdr;
	/* AF_INET_SDP: the family of the connection's addresses. */
	bool v6 = sk->sk_family == AF_INET6 ||
		  (sk->sk_family != AF_INET &&
		   READ_ONCE(sdp_sk(sk)->local.sa.sa_family) == AF_INET6);
	struct sock_exterr_skb *serr;
	struct sk_buff *skb;
	int copied, err;

	skb = sock_dequeue_err_skb(sk);
	if (!skb)
		return -EAGAIN;
	copied = skb->len;
	if (copied > len) {
		msg->msg_flags |= MSG_TRUNC;
		copied = len;
	}
	err = skb_copy_datagram_msg(skb, 0, msg, copied);
	if (err)
		goto out;
	serr = SKB_EXT_ERR(skb);
	memset(&errhdr, 0, sizeof(errhdr));
	errhdr.ee = serr->ee;
	if (v6)
		err = put_cmsg(msg, SOL_IPV6, IPV6_RECVERR,
			       sizeof(errhdr.ee) + sizeof(errhdr.offender.sin6),
			       &errhdr);
	else
		err = put_cmsg(msg, SOL_IP, IP_RECVERR,
			       sizeof(errhdr.ee) + sizeof(errhdr.offender.sin),
			       &errhdr);
	if (err)
		goto out;
	msg->msg_flags |= MSG_ERRQUEUE;
	err = copied;
out:
	kfree_skb(skb);
	return err;
}
