// SPDX-License-Identifier: GPL-2.0
#include "wire.h"

namespace sdp::wire {
namespace {

// What the codec knows about each message id.
enum class Shape : u8 {
    kUnknown,     // not an SDP message id
    kUnsupported, // SDP message this implementation does not speak
    kFixed,       // BSDH.len must equal header_size
    kVariable,    // BSDH.len >= header_size, payload follows
    kHello,       // modern (32) or historical (>= 64) layout
};

struct MidInfo {
    Shape shape;
    u8 header_size;
    const char* name;
};

MidInfo mid_info(u8 mid)
{
    switch (mid) {
    case SDP_MID_HELLO:
        return {Shape::kHello, SDP_HELLO_MODERN_SIZE, "Hello"};
    case SDP_MID_HELLO_ACK:
        return {Shape::kFixed, SDP_HELLO_ACK_SIZE, "HelloAck"};
    case SDP_MID_DISCONN:
        return {Shape::kFixed, SDP_BSDH_SIZE, "DisConn"};
    case SDP_MID_ABORT_CONN:
        return {Shape::kFixed, SDP_BSDH_SIZE, "AbortConn"};
    case SDP_MID_SEND_SM:
        return {Shape::kFixed, SDP_BSDH_SIZE, "SendSM"};
    case SDP_MID_RDMA_WR_COMPL:
        return {Shape::kFixed, SDP_RDMA_COMPL_SIZE, "RdmaWrCompl"};
    case SDP_MID_RDMA_RD_COMPL:
        return {Shape::kFixed, SDP_RDMA_COMPL_SIZE, "RdmaRdCompl"};
    case SDP_MID_MODE_CHANGE:
        return {Shape::kUnsupported, 0, "ModeChange"};
    case SDP_MID_SRC_AVAIL_CANCEL:
        return {Shape::kFixed, SDP_BSDH_SIZE, "SrcAvailCancel"};
    case SDP_MID_SINK_AVAIL_CANCEL:
        return {Shape::kFixed, SDP_BSDH_SIZE, "SinkAvailCancel"};
    case SDP_MID_SINK_CANCEL_ACK:
        return {Shape::kFixed, SDP_BSDH_SIZE, "SinkCancelAck"};
    case SDP_MID_CH_RCV_BUF:
        return {Shape::kFixed, SDP_CH_RCV_BUF_SIZE, "ChRcvBuf"};
    case SDP_MID_CH_RCV_BUF_ACK:
        return {Shape::kFixed, SDP_CH_RCV_BUF_SIZE, "ChRcvBufAck"};
    case SDP_MID_SUSP_COMM:
        return {Shape::kUnsupported, 0, "SuspComm"};
    case SDP_MID_SUSP_COMM_ACK:
        return {Shape::kUnsupported, 0, "SuspCommAck"};
    case SDP_MID_SINK_AVAIL:
        return {Shape::kFixed, SDP_SINK_AVAIL_SIZE, "SinkAvail"};
    case SDP_MID_SRC_AVAIL:
        return {Shape::kVariable, SDP_SRC_AVAIL_HDR_SIZE, "SrcAvail"};
    case SDP_MID_DATA:
        return {Shape::kVariable, SDP_BSDH_SIZE, "Data"};
    default:
        return {Shape::kUnknown, 0, "Unknown"};
    }
}

u8 high_nibble(u8 v)
{
    return static_cast<u8>(v >> 4);
}
u8 low_nibble(u8 v)
{
    return static_cast<u8>(v & 0x0f);
}
u8 nibbles(u8 high, u8 low)
{
    return static_cast<u8>((high << 4) | low);
}

void copy16(u8* dst, const u8* src)
{
    for (int i = 0; i < 16; i++)
        dst[i] = src[i];
}

void zero(u8* dst, usize n)
{
    for (usize i = 0; i < n; i++)
        dst[i] = 0;
}

DecodeError decode_hello(const u8* p, u32 len, Hello* h)
{
    h->major = high_nibble(p[0]);
    h->minor = low_nibble(p[0]);
    if (h->major != SDP_VERSION_MAJOR)
        return DecodeError::kBadVersion;
    const u8 ipv = high_nibble(p[1]);
    if (ipv != 4 && ipv != 6)
        return DecodeError::kBadField;
    h->ip_version = static_cast<IpVersion>(ipv);
    h->caps = low_nibble(p[1]);
    h->max_adverts = p[3];
    if (h->max_adverts == 0)
        return DecodeError::kBadField;
    h->desired_remote_rcv_size = load_be32(p + 4);
    h->local_rcv_size = load_be32(p + 8);
    h->local_port = load_be16(p + 12);
    // Historical layout: the addresses follow the reserved half-word.
    h->has_addresses = len >= SDP_HELLO_FULL_SIZE;
    if (h->has_addresses) {
        copy16(h->src_addr, p + 16);
        copy16(h->dst_addr, p + 32);
    } else {
        zero(h->src_addr, sizeof(h->src_addr));
        zero(h->dst_addr, sizeof(h->dst_addr));
    }
    return DecodeError::kNone;
}

DecodeError decode_hello_ack(const u8* p, HelloAck* h)
{
    h->major = high_nibble(p[0]);
    h->minor = low_nibble(p[0]);
    if (h->major != SDP_VERSION_MAJOR)
        return DecodeError::kBadVersion;
    h->ip_version = high_nibble(p[1]);
    h->caps = low_nibble(p[1]);
    h->ext_max_adverts = p[3];
    h->actual_rcv_size = load_be32(p + 4);
    return DecodeError::kNone;
}

DecodeError check_length(const MidInfo& info, u32 len)
{
    if (len < info.header_size)
        return DecodeError::kBadLength;
    switch (info.shape) {
    case Shape::kFixed:
        return len == info.header_size ? DecodeError::kNone : DecodeError::kBadLength;
    case Shape::kHello:
        // Either the modern layout exactly or the historical one (whose
        // reserved tail after the addresses has varied between versions).
        return len == SDP_HELLO_MODERN_SIZE || len >= SDP_HELLO_FULL_SIZE ? DecodeError::kNone
                                                                          : DecodeError::kBadLength;
    case Shape::kVariable:
        return DecodeError::kNone;
    default:
        return DecodeError::kUnknownId;
    }
}

} // namespace

u32 header_size(Mid mid)
{
    const MidInfo info = mid_info(static_cast<u8>(mid));
    return info.shape == Shape::kUnsupported ? 0 : info.header_size;
}

bool is_sdp_mid(u8 mid)
{
    return mid_info(mid).shape != Shape::kUnknown;
}

const char* mid_name(u8 mid)
{
    return mid_info(mid).name;
}

const char* decode_error_name(DecodeError err)
{
    switch (err) {
    case DecodeError::kNone:
        return "ok";
    case DecodeError::kShortBuffer:
        return "short buffer";
    case DecodeError::kBadLength:
        return "bad length";
    case DecodeError::kUnknownId:
        return "unknown message id";
    case DecodeError::kUnsupported:
        return "unsupported message";
    case DecodeError::kBadVersion:
        return "bad protocol version";
    case DecodeError::kBadField:
        return "bad header field";
    }
    return "?";
}

DecodeError decode(const u8* buf, usize size, Message* out)
{
    if (size < SDP_BSDH_SIZE)
        return DecodeError::kShortBuffer;

    const MidInfo info = mid_info(buf[0]);
    if (info.shape == Shape::kUnknown)
        return DecodeError::kUnknownId;
    if (info.shape == Shape::kUnsupported)
        return DecodeError::kUnsupported;

    Bsdh& bsdh = out->bsdh;
    bsdh.mid = static_cast<Mid>(buf[0]);
    bsdh.flags = buf[1];
    bsdh.bufs = load_be16(buf + 2);
    bsdh.len = load_be32(buf + 4);
    bsdh.mseq = load_be32(buf + 8);
    bsdh.mseq_ack = load_be32(buf + 12);

    const DecodeError len_err = check_length(info, bsdh.len);
    if (len_err != DecodeError::kNone)
        return len_err;
    if (bsdh.len > size)
        return DecodeError::kShortBuffer;

    // From here on every access is below bsdh.len <= size.
    const u8* ext = buf + SDP_BSDH_SIZE;
    u32 headers = info.header_size;
    DecodeError err = DecodeError::kNone;
    switch (bsdh.mid) {
    case Mid::kHello:
        err = decode_hello(ext, bsdh.len, &out->hello);
        headers = bsdh.len; // the historical reserved tail is header, not payload
        break;
    case Mid::kHelloAck:
        err = decode_hello_ack(ext, &out->hello_ack);
        break;
    case Mid::kSrcAvail:
        out->src_avail = {load_be32(ext), load_be32(ext + 4), load_be64(ext + 8)};
        if (out->src_avail.len == 0)
            err = DecodeError::kBadField;
        break;
    case Mid::kSinkAvail:
        out->sink_avail = {load_be32(ext), load_be32(ext + 4), load_be64(ext + 8),
                           load_be32(ext + 16)};
        if (out->sink_avail.len == 0)
            err = DecodeError::kBadField;
        break;
    case Mid::kRdmaRdCompl:
    case Mid::kRdmaWrCompl:
        out->rdma_compl_len = load_be32(ext);
        break;
    case Mid::kChRcvBuf:
    case Mid::kChRcvBufAck:
        out->rcv_buf_size = load_be32(ext);
        break;
    default:
        break; // BSDH-only messages and Data
    }
    out->payload = bsdh.len > headers ? buf + headers : nullptr;
    out->payload_len = bsdh.len - headers;
    return err;
}

EncodeError encode_header(const Message& msg, u8* buf, usize size, usize* written)
{
    const u8 mid = static_cast<u8>(msg.bsdh.mid);
    const MidInfo info = mid_info(mid);
    if (info.shape == Shape::kUnknown || info.shape == Shape::kUnsupported)
        return EncodeError::kNotEncodable;

    u32 headers = info.header_size;
    if (info.shape == Shape::kHello && msg.hello.has_addresses)
        headers = SDP_HELLO_FULL_SIZE;
    if (info.shape != Shape::kVariable && msg.payload_len != 0)
        return EncodeError::kBadField;
    if (msg.payload_len > 0xffffffffu - headers)
        return EncodeError::kTooLong;
    if (size < headers)
        return EncodeError::kNoRoom;

    u8* ext = buf + SDP_BSDH_SIZE;
    switch (msg.bsdh.mid) {
    case Mid::kHello: {
        const Hello& h = msg.hello;
        if (h.major != SDP_VERSION_MAJOR || h.minor > 0xf || h.caps > 0xf || h.max_adverts == 0 ||
            (h.ip_version != IpVersion::kV4 && h.ip_version != IpVersion::kV6))
            return EncodeError::kBadField;
        ext[0] = nibbles(h.major, h.minor);
        ext[1] = nibbles(static_cast<u8>(h.ip_version), h.caps);
        ext[2] = 0;
        ext[3] = h.max_adverts;
        store_be32(ext + 4, h.desired_remote_rcv_size);
        store_be32(ext + 8, h.local_rcv_size);
        store_be16(ext + 12, h.local_port);
        store_be16(ext + 14, 0);
        if (h.has_addresses) {
            copy16(ext + 16, h.src_addr);
            copy16(ext + 32, h.dst_addr);
        }
        break;
    }
    case Mid::kHelloAck: {
        const HelloAck& h = msg.hello_ack;
        if (h.major != SDP_VERSION_MAJOR || h.minor > 0xf || h.ip_version > 0xf || h.caps > 0xf)
            return EncodeError::kBadField;
        ext[0] = nibbles(h.major, h.minor);
        ext[1] = nibbles(h.ip_version, h.caps);
        ext[2] = 0;
        ext[3] = h.ext_max_adverts;
        store_be32(ext + 4, h.actual_rcv_size);
        break;
    }
    case Mid::kSrcAvail:
        if (msg.src_avail.len == 0)
            return EncodeError::kBadField;
        store_be32(ext, msg.src_avail.len);
        store_be32(ext + 4, msg.src_avail.rkey);
        store_be64(ext + 8, msg.src_avail.vaddr);
        break;
    case Mid::kSinkAvail:
        if (msg.sink_avail.len == 0)
            return EncodeError::kBadField;
        store_be32(ext, msg.sink_avail.len);
        store_be32(ext + 4, msg.sink_avail.rkey);
        store_be64(ext + 8, msg.sink_avail.vaddr);
        store_be32(ext + 16, msg.sink_avail.non_discard);
        break;
    case Mid::kRdmaRdCompl:
    case Mid::kRdmaWrCompl:
        store_be32(ext, msg.rdma_compl_len);
        break;
    case Mid::kChRcvBuf:
    case Mid::kChRcvBufAck:
        store_be32(ext, msg.rcv_buf_size);
        break;
    default:
        break;
    }

    buf[0] = mid;
    buf[1] = msg.bsdh.flags;
    store_be16(buf + 2, msg.bsdh.bufs);
    store_be32(buf + 4, headers + msg.payload_len);
    store_be32(buf + 8, msg.bsdh.mseq);
    store_be32(buf + 12, msg.bsdh.mseq_ack);
    *written = headers;
    return EncodeError::kNone;
}

} // namespace sdp::wire
