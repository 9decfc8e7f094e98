// SPDX-License-Identifier: GPL-2.0
//
// SDP wire codec: the only code that reads or writes SDP headers.
//
// decode() turns received bytes (a receive completion or CM private data)
// into a Message, validating everything a peer controls before any field is
// used: it never reads past `size` and returns an explicit DecodeError for
// anything malformed.  encode_header() writes the BSDH and the extra header of
// a Message; the payload (Data, inline SrcAvail) is placed after the header by
// the caller, which lets the transmit path copy user data straight into a
// registered send buffer.
#ifndef SDP_CORE_WIRE_H
#define SDP_CORE_WIRE_H

#include "sdp_wire.h"
#include "types.h"

namespace sdp::wire {

enum class Mid : u8 {
    kHello = SDP_MID_HELLO,
    kHelloAck = SDP_MID_HELLO_ACK,
    kDisConn = SDP_MID_DISCONN,
    kAbortConn = SDP_MID_ABORT_CONN,
    kSendSm = SDP_MID_SEND_SM,
    kRdmaWrCompl = SDP_MID_RDMA_WR_COMPL,
    kRdmaRdCompl = SDP_MID_RDMA_RD_COMPL,
    kModeChange = SDP_MID_MODE_CHANGE,
    kSrcAvailCancel = SDP_MID_SRC_AVAIL_CANCEL,
    kSinkAvailCancel = SDP_MID_SINK_AVAIL_CANCEL,
    kSinkCancelAck = SDP_MID_SINK_CANCEL_ACK,
    kChRcvBuf = SDP_MID_CH_RCV_BUF,
    kChRcvBufAck = SDP_MID_CH_RCV_BUF_ACK,
    kSuspComm = SDP_MID_SUSP_COMM,
    kSuspCommAck = SDP_MID_SUSP_COMM_ACK,
    kSinkAvail = SDP_MID_SINK_AVAIL,
    kSrcAvail = SDP_MID_SRC_AVAIL,
    kData = SDP_MID_DATA,
};

enum class DecodeError : u8 {
    kNone = 0,
    kShortBuffer, // fewer bytes than a BSDH, or than BSDH.len announces
    kBadLength,   // BSDH.len does not fit the message id
    kUnknownId,   // mid is not a defined SDP message
    kUnsupported, // defined by the spec, not spoken by this implementation
    kBadVersion,  // Hello/HelloAck major version is not 2
    kBadField,    // a header field holds a value the spec forbids
};

enum class EncodeError : u8 {
    kNone = 0,
    kNoRoom,       // destination smaller than the header
    kTooLong,      // header + payload does not fit BSDH.len (u32)
    kNotEncodable, // mid this implementation never sends
    kBadField,     // field value that decode() would reject
};

// Base Sockets Direct Header, present in every message.
struct Bsdh {
    Mid mid;
    u8 flags;
    u16 bufs;     // receive buffers the sender has posted: its credit grant
    u32 len;      // whole message: BSDH + extra header + payload
    u32 mseq;     // sender's sequence number of this message
    u32 mseq_ack; // last mseq the sender received from its peer
};

enum class IpVersion : u8 { kV4 = 4, kV6 = 6 };

struct Hello {
    u8 major;
    u8 minor;
    IpVersion ip_version;
    u8 caps; // SDP_CAP_*
    u8 max_adverts;
    u32 desired_remote_rcv_size;
    u32 local_rcv_size;
    u16 local_port;
    // The historical layout also carries the IP addresses; the modern one
    // leaves them to the CM header.  IPv4 sits in the last four bytes.
    bool has_addresses;
    u8 src_addr[16];
    u8 dst_addr[16];
};

struct HelloAck {
    u8 major;
    u8 minor;
    u8 ip_version;
    u8 caps;
    u8 ext_max_adverts;
    u32 actual_rcv_size;
};

struct SrcAvail {
    u32 len; // bytes offered for RDMA Read (inline payload not counted)
    u32 rkey;
    u64 vaddr;
};

struct SinkAvail {
    u32 len; // bytes the sink can take by RDMA Write
    u32 rkey;
    u64 vaddr;
    u32 non_discard;
};

struct Message {
    Bsdh bsdh;
    union {
        Hello hello;
        HelloAck hello_ack;
        SrcAvail src_avail;
        SinkAvail sink_avail;
        u32 rdma_compl_len; // RdmaRdCompl / RdmaWrCompl
        u32 rcv_buf_size;   // ChRcvBuf / ChRcvBufAck
    };
    // Bytes after the headers (Data payload, inline SrcAvail payload).  On
    // decode it points into the caller's buffer; on encode only payload_len
    // is used, to fill BSDH.len.
    const u8* payload;
    u32 payload_len;
};

// Header bytes (BSDH + extra header) of a message with this id, or 0 if the
// id is not defined.
u32 header_size(Mid mid);

inline bool is_control(Mid mid)
{
    return (static_cast<u8>(mid) & 0xf0) == 0;
}

// Decode `size` bytes at `buf`.  Trailing bytes beyond BSDH.len are allowed
// (CM private data arrives zero padded to its full length) and ignored.
DecodeError decode(const u8* buf, usize size, Message* out);

// Write the headers of `msg` at `buf`, BSDH.len set to headers + payload_len.
// On success *written is the header length; the payload goes right after it.
EncodeError encode_header(const Message& msg, u8* buf, usize size, usize* written);

// Whether `mid` is a message id the SDP specification defines (spoken by
// this implementation or not).
bool is_sdp_mid(u8 mid);

const char* mid_name(u8 mid);
const char* decode_error_name(DecodeError err);

} // namespace sdp::wire

#endif // SDP_CORE_WIRE_H
