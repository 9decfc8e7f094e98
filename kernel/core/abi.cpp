// SPDX-License-Identifier: GPL-2.0
//
// The C ABI of sdp_core.h over sdp::Connection.  The host embeds struct
// sdp_core_conn (plain storage) and the Connection lives in it; nothing is
// allocated.
#include "conn.h"
#include "sdp_core.h"

using sdp::Connection;
using sdp::u16;
using sdp::u32;
using sdp::u8;

namespace {

Connection* conn(sdp_core_conn* c)
{
    return reinterpret_cast<Connection*>(c->opaque);
}

const Connection* conn(const sdp_core_conn* c)
{
    return reinterpret_cast<const Connection*>(c->opaque);
}

} // namespace

// Placement new without <new>: the freestanding core has no standard headers.
inline void* operator new(sdp::usize, void* where) noexcept
{
    return where;
}

extern "C" {

void sdp_core_conn_init(sdp_core_conn* c, unsigned int rx_buf_size, unsigned int tx_buf_size)
{
    Connection* connection = new (c->opaque) Connection{};
    connection->init(rx_buf_size, tx_buf_size);
}

void sdp_core_set_timers(sdp_core_conn* c, unsigned int ack_delay_ms, unsigned int zc_grace_ms)
{
    conn(c)->set_timers(ack_delay_ms, zc_grace_ms);
}

const char* sdp_core_err_name(int err)
{
    switch (err < 0 ? -err : err) {
    case SDP_CORE_OK:
        return "ok";
    case SDP_CORE_EMALFORMED:
        return "malformed message";
    case SDP_CORE_EVERSION:
        return "unsupported protocol version";
    case SDP_CORE_EPROTO:
        return "message not allowed in this state";
    case SDP_CORE_ESEQUENCE:
        return "sequence or acknowledgement out of order";
    case SDP_CORE_ETOOBIG:
        return "message larger than the receive buffer";
    case SDP_CORE_ENOROOM:
        return "no room for the header";
    case SDP_CORE_ESTATE:
        return "not valid in this connection state";
    default:
        return "unknown error";
    }
}

void sdp_core_rx_posted(sdp_core_conn* c, unsigned int posted)
{
    conn(c)->rx_posted(posted);
}

int sdp_core_build_hello(sdp_core_conn* c, unsigned char* buf, unsigned int size,
                         unsigned short local_port, int ipv6)
{
    return conn(c)->build_hello(buf, size, local_port, ipv6 != 0);
}

int sdp_core_on_hello_ack(sdp_core_conn* c, const unsigned char* buf, unsigned int size)
{
    return conn(c)->on_hello_ack(buf, size);
}

int sdp_core_on_hello(sdp_core_conn* c, const unsigned char* buf, unsigned int size)
{
    return conn(c)->on_hello(buf, size);
}

int sdp_core_build_hello_ack(sdp_core_conn* c, unsigned char* buf, unsigned int size)
{
    return conn(c)->build_hello_ack(buf, size);
}

unsigned int sdp_core_seg_max(const sdp_core_conn* c)
{
    return conn(c)->seg_max();
}

int sdp_core_rx_resized(sdp_core_conn* c, unsigned int rx_buf_size)
{
    return conn(c)->rx_resized(rx_buf_size);
}

int sdp_core_tx_idle(sdp_core_conn* c)
{
    return conn(c)->tx_idle();
}

enum sdp_core_tx_verdict sdp_core_tx_decide(const sdp_core_conn* c, unsigned int seg_bytes,
                                            int full, unsigned int opts)
{
    return conn(c)->tx_verdict(seg_bytes, full != 0, opts);
}

int sdp_core_tx_build(sdp_core_conn* c, unsigned char* hdr, unsigned int mid,
                      unsigned int payload_len, unsigned int flags)
{
    return conn(c)->tx_build(hdr, mid, payload_len, flags);
}

void sdp_core_tx_done(sdp_core_conn* c, unsigned int mid)
{
    conn(c)->tx_done(mid);
}

int sdp_core_control_due(const sdp_core_conn* c, unsigned int tx_queued)
{
    return conn(c)->control_due(tx_queued);
}

int sdp_core_tx_next(sdp_core_conn* c, const sdp_core_tx_ring* ring, sdp_core_tx_action* act)
{
    return conn(c)->tx_next(*ring, act);
}

void sdp_core_ack_request(sdp_core_conn* c)
{
    conn(c)->ack_request();
}

void sdp_core_shutdown_send(sdp_core_conn* c)
{
    conn(c)->shutdown_send();
}

int sdp_core_on_recv(sdp_core_conn* c, const unsigned char* buf, unsigned int byte_len,
                     struct sdp_core_rx* out)
{
    return conn(c)->rx(buf, byte_len, out);
}

void sdp_core_rx_fail(sdp_core_conn* c)
{
    conn(c)->rx_fail();
}

unsigned int sdp_core_state(const sdp_core_conn* c)
{
    return conn(c)->state();
}

unsigned int sdp_core_tx_credits(const sdp_core_conn* c)
{
    return conn(c)->tx_credits();
}

int sdp_core_may_offer(const sdp_core_conn* c)
{
    return conn(c)->may_send_data() ? 1 : 0;
}

unsigned int sdp_core_data_in_flight(const sdp_core_conn* c)
{
    return conn(c)->data_in_flight();
}

void sdp_core_zc_query(const sdp_core_conn* c, sdp_core_zc_status* st)
{
    conn(c)->zc_status(st);
}

int sdp_core_tx_src_avail(sdp_core_conn* c, unsigned char* hdr, unsigned int size,
                          const sdp_core_zc* zc)
{
    return conn(c)->tx_src_avail(hdr, size, *zc);
}

int sdp_core_src_cancel(sdp_core_conn* c)
{
    return conn(c)->src_cancel() ? 1 : 0;
}

void sdp_core_src_release(sdp_core_conn* c)
{
    conn(c)->src_release();
}

void sdp_core_set_src_limit(sdp_core_conn* c, unsigned int n)
{
    conn(c)->set_src_limit(n);
}

void sdp_core_src_drop(sdp_core_conn* c)
{
    conn(c)->src_drop();
}

int sdp_core_src_room(const sdp_core_conn* c)
{
    return conn(c)->src_room() ? 1 : 0;
}

int sdp_core_sink_take(sdp_core_conn* c, unsigned int want, sdp_core_zc* zc)
{
    return conn(c)->sink_take(want, zc);
}

int sdp_core_rsa_piece(const sdp_core_conn* c, unsigned int skip, sdp_core_zc* zc)
{
    return conn(c)->rsa_piece(skip, zc);
}

int sdp_core_rd_start(sdp_core_conn* c, unsigned int n)
{
    return conn(c)->rd_start(n);
}

void sdp_core_rd_done(sdp_core_conn* c, unsigned int n)
{
    conn(c)->rd_done(n);
}

int sdp_core_src_end(const sdp_core_conn* c, unsigned int* acked)
{
    return conn(c)->src_end(acked);
}

unsigned int sdp_core_sink_len(const sdp_core_conn* c)
{
    return conn(c)->sink_len();
}

int sdp_core_wr_compl_pending(const sdp_core_conn* c)
{
    return conn(c)->wr_compl_pending() ? 1 : 0;
}

unsigned int sdp_core_rsa_left(const sdp_core_conn* c)
{
    return conn(c)->rsa_left();
}

int sdp_core_rsa_next(sdp_core_conn* c, unsigned int flags, sdp_core_zc* zc)
{
    return conn(c)->rsa_next(flags, zc);
}

int sdp_core_adv_end(const sdp_core_conn* c, unsigned int* written)
{
    return conn(c)->adv_end(written);
}

unsigned int sdp_core_adv_room(const sdp_core_conn* c)
{
    return conn(c)->adv_room();
}

int sdp_core_adv_try(sdp_core_conn* c)
{
    return conn(c)->adv_try() ? 1 : 0;
}

void sdp_core_rsa_abandon(sdp_core_conn* c)
{
    conn(c)->rsa_abandon();
}

unsigned int sdp_core_rsa_grace_start(sdp_core_conn* c)
{
    return conn(c)->rsa_grace_start();
}

int sdp_core_rsa_grace_end(sdp_core_conn* c, int reader_busy)
{
    return conn(c)->rsa_grace_end(reader_busy != 0);
}

void sdp_core_set_reader_waiting(sdp_core_conn* c, int waiting)
{
    conn(c)->set_reader_waiting(waiting != 0);
}

int sdp_core_tx_sink_avail(sdp_core_conn* c, unsigned char* hdr, unsigned int size,
                           const sdp_core_zc* zc)
{
    return conn(c)->tx_sink_avail(hdr, size, *zc);
}

void sdp_core_adv_cancel(sdp_core_conn* c)
{
    conn(c)->adv_cancel();
}

void sdp_core_adv_release(sdp_core_conn* c)
{
    conn(c)->adv_release();
}

} // extern "C"
