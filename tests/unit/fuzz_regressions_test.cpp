// SPDX-License-Identifier: GPL-2.0
//
// Reproducers for what the stateful fuzzer (tests/fuzz/fuzz_conn.cpp) found
// or asserts, reduced to the calls that matter.  Each test names the fuzz
// oracle it comes from.
#include "posted_calls.h"
#include "sdp_core.h"
#include "sdp_wire.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace {

using Bytes = std::vector<unsigned char>;
constexpr unsigned kBsdh = SDP_BSDH_SIZE;
constexpr unsigned short kPosted = 8;

void store_be32(unsigned char* p, unsigned v)
{
    p[0] = static_cast<unsigned char>(v >> 24);
    p[1] = static_cast<unsigned char>(v >> 16);
    p[2] = static_cast<unsigned char>(v >> 8);
    p[3] = static_cast<unsigned char>(v);
}

// Two engines after the Hello exchange (256-byte buffers, 8 posted).
class FuzzRegressions : public ::testing::Test {
  protected:
    void SetUp() override
    {
        sdp_core_conn_init(&a_, 256, 256);
        sdp_core_conn_init(&b_, 256, 256);
        unsigned char req[SDP_CM_REQ_PRIVATE_DATA] = {};
        unsigned char rep[SDP_CM_REP_PRIVATE_DATA] = {};
        ASSERT_GT(BuildHello(&a_, req, sizeof(req), kPosted, 5001, 0), 0);
        ASSERT_EQ(sdp_core_on_hello(&b_, req, sizeof(req)), 0);
        ASSERT_GT(BuildHelloAck(&b_, rep, sizeof(rep), kPosted), 0);
        ASSERT_EQ(sdp_core_on_hello_ack(&a_, rep, sizeof(rep)), 0);
    }

    // A message built by `from` (headers, then `payload` bytes).
    static Bytes build(sdp_core_conn* from, unsigned mid, unsigned payload)
    {
        Bytes m(SDP_RDMA_COMPL_SIZE + payload, 0x5a);
        const int n = TxBuild(from, m.data(), mid, payload, 0, kPosted);
        EXPECT_GT(n, 0) << sdp_core_err_name(n);
        m.resize(n > 0 ? static_cast<unsigned>(n) + payload : 0);
        return m;
    }

    static int recv(sdp_core_conn* to, const Bytes& m, sdp_core_rx* rx)
    {
        return sdp_core_on_recv(to, m.data(), static_cast<unsigned>(m.size()), rx);
    }

    // A SrcAvail of `len` bytes from a_, received by b_.
    void offer(unsigned len)
    {
        const sdp_core_zc zc{len, 0x1234, 0x100000000000ull};
        Bytes m(SDP_SRC_AVAIL_HDR_SIZE);
        ASSERT_EQ(TxSrcAvail(&a_, m.data(), static_cast<unsigned>(m.size()), &zc, kPosted),
                  int{SDP_SRC_AVAIL_HDR_SIZE});
        sdp_core_rx rx{};
        ASSERT_EQ(recv(&b_, m, &rx), 0);
        ASSERT_EQ(rx.kind, unsigned{SDP_RX_ZCOPY});
    }

    sdp_core_conn a_{};
    sdp_core_conn b_{};
};

// ---- the reset rule (fuzz_conn: "refuse" in receive()) --------------------------
// After SDP_CS_ABORTED (AbortConn received or sent) or a protocol error the
// engine refuses every message and delivers nothing.

TEST_F(FuzzRegressions, NothingAcceptedAfterAbortReceived)
{
    sdp_core_rx rx{};
    ASSERT_EQ(recv(&b_, build(&a_, SDP_MID_ABORT_CONN, 0), &rx), 0);
    ASSERT_EQ(rx.kind, unsigned{SDP_RX_ABORT});
    // A message the peer could only have sent after its AbortConn: with the
    // next sequence number it would pass every other check.
    Bytes data(kBsdh + 4, 0x61);
    data[0] = SDP_MID_DATA;
    data[3] = kPosted;
    store_be32(&data[4], kBsdh + 4);
    store_be32(&data[8], 2);
    store_be32(&data[12], 0);
    EXPECT_LT(recv(&b_, data, &rx), 0);
    EXPECT_EQ(rx.payload_len, 0u);
}

TEST_F(FuzzRegressions, NothingAcceptedAfterAbortSent)
{
    const Bytes data = build(&b_, SDP_MID_DATA, 10); // crosses a_'s AbortConn
    build(&a_, SDP_MID_ABORT_CONN, 0);
    ASSERT_NE(sdp_core_state(&a_) & SDP_CS_ABORTED, 0u);
    sdp_core_rx rx{};
    EXPECT_LT(recv(&a_, data, &rx), 0);
    EXPECT_EQ(rx.payload_len, 0u);
}

TEST_F(FuzzRegressions, NothingAcceptedAfterProtocolError)
{
    const Bytes first = build(&b_, SDP_MID_DATA, 10);
    const Bytes second = build(&b_, SDP_MID_DATA, 10);
    sdp_core_rx rx{};
    ASSERT_LT(recv(&a_, second, &rx), 0) << "sequence gap";
    // The message that was missing is refused too: the connection is reset.
    EXPECT_LT(recv(&a_, first, &rx), 0);
    EXPECT_EQ(rx.payload_len, 0u);
}

// ---- engine bugs the fuzzer found, fixed ----------------------------------------------

// Fixed (fuzz_conn, honest peer rejected): the sink gives its peer's SrcAvail
// up (sdp_core_rsa_abandon: MSG_PEEK, grace timer) while an RDMA Read of
// the whole rest of the offer is in progress, and that read then completes.
// rd_done() leaves the offer active with a SendSM due; the RdmaRdCompl goes
// first and tells the source that every byte was read, so the source's
// SrcAvail is DONE and it sends its next bytes by Data - which the sink
// refuses (EPROTO, "nothing may overtake the bytes of the peer's own
// SrcAvail") and the connection is reset.  The glue does not abandon during
// a read today (sdp_zc_recv_offer and sdp_zc_grace_work check rsa_reading),
// but the C ABI allows it and rsa_abandon() handles a read in progress.
TEST_F(FuzzRegressions, AbandonDuringReadOfWholeOffer)
{
    offer(1);
    ASSERT_EQ(sdp_core_rd_start(&b_, 1), 0);
    sdp_core_rsa_abandon(&b_);
    sdp_core_rd_done(&b_, 1);

    ASSERT_EQ(ControlDue(&b_, 0, kPosted), SDP_MID_RDMA_RD_COMPL);
    sdp_core_rx rx{};
    ASSERT_EQ(recv(&a_, build(&b_, SDP_MID_RDMA_RD_COMPL, 0), &rx), 0);
    sdp_core_zc_status st{};
    sdp_core_zc_query(&a_, &st);
    ASSERT_EQ(st.src_state, unsigned{SDP_ZC_DONE}) << "all of it was read";
    ASSERT_EQ(st.src_acked, 1u);
    sdp_core_src_release(&a_);

    // The next stream bytes, as the source may now send them.
    ASSERT_EQ(sdp_core_tx_decide(&a_, 3, 0, SDP_TXO_PUSH), SDP_TX_POST);
    const Bytes data = build(&a_, SDP_MID_DATA, 3);
    EXPECT_EQ(recv(&b_, data, &rx), 0) << "an honest peer's Data after its offer was read";
}

// Fixed (fuzz_conn, SDP_RX_DATA checks): a zero-payload Data (credit update)
// reports payload_off as the difference between a null pointer and the
// receive buffer (conn.cpp: msg.payload - buf with msg.payload == nullptr),
// which is undefined behaviour and a meaningless offset far past byte_len.
// The glue ignores payload_off when payload_len is 0, so nothing reads there.
TEST_F(FuzzRegressions, EmptyDataPayloadOffset)
{
    const Bytes update = build(&a_, SDP_MID_DATA, 0);
    sdp_core_rx rx{};
    ASSERT_EQ(recv(&b_, update, &rx), 0);
    ASSERT_EQ(rx.payload_len, 0u);
    EXPECT_LE(rx.payload_off, update.size());
}

// Fixed (fuzz_conn: "never longer than the peer's receive buffer"): a peer
// whose HelloAck announced receive buffers of 17 to 19 bytes (the minimum
// is a BSDH and one byte) made us answer its SinkAvail with a 20-byte
// RdmaWrCompl, longer than the buffer it goes into.  Its offers are now
// answered with what fits: SendSM for a SrcAvail, bcopy for a SinkAvail.
// `tiny_` is the active side; its peer announced 18 bytes, and `offerer_`
// (an honest engine that answered the same Hello) builds the offers.
class TinyPeerBuffers : public ::testing::Test {
  protected:
    void SetUp() override
    {
        sdp_core_conn_init(&tiny_, 256, 256);
        sdp_core_conn_init(&peer_, 18, 256);
        sdp_core_conn_init(&offerer_, 256, 256);
        unsigned char req[SDP_CM_REQ_PRIVATE_DATA] = {};
        unsigned char rep[SDP_CM_REP_PRIVATE_DATA] = {};
        ASSERT_GT(BuildHello(&tiny_, req, sizeof(req), kPosted, 5001, 0), 0);
        ASSERT_EQ(sdp_core_on_hello(&peer_, req, sizeof(req)), 0);
        ASSERT_GT(BuildHelloAck(&peer_, rep, sizeof(rep), kPosted), 0);
        ASSERT_EQ(sdp_core_on_hello_ack(&tiny_, rep, sizeof(rep)), 0);
        ASSERT_EQ(sdp_core_on_hello(&offerer_, req, sizeof(req)), 0);
        ASSERT_GT(BuildHelloAck(&offerer_, rep, sizeof(rep), kPosted), 0);
    }

    sdp_core_conn tiny_{};
    sdp_core_conn peer_{};
    sdp_core_conn offerer_{};
    const sdp_core_zc zc_{4096, 0x1234, 0x100000000000ull};
};

TEST_F(TinyPeerBuffers, SinkAvailIsNotUsed)
{
    Bytes m(SDP_SINK_AVAIL_SIZE);
    ASSERT_EQ(TxSinkAvail(&offerer_, m.data(), static_cast<unsigned>(m.size()), &zc_, kPosted),
              int{SDP_SINK_AVAIL_SIZE});
    sdp_core_rx rx{};
    ASSERT_EQ(sdp_core_on_recv(&tiny_, m.data(), static_cast<unsigned>(m.size()), &rx), 0);
    sdp_core_zc_status st{};
    sdp_core_zc_query(&tiny_, &st);
    EXPECT_EQ(st.psink_usable, 0) << "its RdmaWrCompl would not fit the peer's buffers";
}

TEST_F(TinyPeerBuffers, SrcAvailIsAnsweredWithSendSm)
{
    Bytes m(SDP_SRC_AVAIL_HDR_SIZE);
    ASSERT_EQ(TxSrcAvail(&offerer_, m.data(), static_cast<unsigned>(m.size()), &zc_, kPosted),
              int{SDP_SRC_AVAIL_HDR_SIZE});
    sdp_core_rx rx{};
    ASSERT_EQ(sdp_core_on_recv(&tiny_, m.data(), static_cast<unsigned>(m.size()), &rx), 0);
    EXPECT_EQ(ControlDue(&tiny_, 0, kPosted), SDP_MID_SEND_SM)
        << "its RdmaRdCompl would not fit the peer's buffers";
}

} // namespace
