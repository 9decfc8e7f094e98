// SPDX-License-Identifier: GPL-2.0
//
// The rogue SDP peer (rogue_peer.h).
#include "rogue_peer.h"

#include "sdp_wire.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sstream>
#include <utility>

namespace sdp::rogue {
namespace {

constexpr uint64_t kWrRx = 1ull << 62;
constexpr uint64_t kWrTx = 2ull << 62;
constexpr uint64_t kWrRdma = 3ull << 62;
constexpr uint64_t kWrKindMask = 3ull << 62;
constexpr uint32_t kTxBufSize = 128 * 1024;
constexpr uint32_t kControlReserve = 2;

void put16(uint8_t* p, uint16_t v)
{
    p[0] = static_cast<uint8_t>(v >> 8);
    p[1] = static_cast<uint8_t>(v);
}

void put32(uint8_t* p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}

void put64(uint8_t* p, uint64_t v)
{
    put32(p, static_cast<uint32_t>(v >> 32));
    put32(p + 4, static_cast<uint32_t>(v));
}

uint16_t get16(const uint8_t* p)
{
    return static_cast<uint16_t>((p[0] << 8) | p[1]);
}

uint32_t get32(const uint8_t* p)
{
    return (static_cast<uint32_t>(p[0]) << 24) | (static_cast<uint32_t>(p[1]) << 16) |
           (static_cast<uint32_t>(p[2]) << 8) | p[3];
}

uint64_t get64(const uint8_t* p)
{
    return (static_cast<uint64_t>(get32(p)) << 32) | get32(p + 4);
}

void put_bsdh(uint8_t* p, const Bsdh& h)
{
    p[0] = h.mid;
    p[1] = h.flags;
    put16(p + 2, h.bufs);
    put32(p + 4, h.len);
    put32(p + 8, h.mseq);
    put32(p + 12, h.mseq_ack);
}

Bsdh get_bsdh(const uint8_t* p)
{
    Bsdh h;
    h.mid = p[0];
    h.flags = p[1];
    h.bufs = get16(p + 2);
    h.len = get32(p + 4);
    h.mseq = get32(p + 8);
    h.mseq_ack = get32(p + 12);
    return h;
}

void set_nonblock(int fd)
{
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

sockaddr_in inet_addr_of(const char* ip, int port)
{
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

// A valid Hello (modern layout, 32 bytes).
std::vector<uint8_t> hello_bytes(uint16_t bufs, uint32_t rx_buf_size, uint16_t port,
                                 uint8_t max_adverts)
{
    std::vector<uint8_t> hello(SDP_HELLO_MODERN_SIZE, 0);
    Bsdh h;
    h.mid = SDP_MID_HELLO;
    h.bufs = bufs;
    h.len = SDP_HELLO_MODERN_SIZE;
    put_bsdh(hello.data(), h);
    hello[16] = (SDP_VERSION_MAJOR << 4) | SDP_VERSION_MINOR;
    hello[17] = 4 << 4; // IPv4, no capabilities
    hello[19] = max_adverts;
    put32(hello.data() + 20, kTxBufSize);  // desired remote receive size
    put32(hello.data() + 24, rx_buf_size); // our receive size
    put16(hello.data() + 28, port);
    return hello;
}

int remaining_ms(std::chrono::steady_clock::time_point end)
{
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          end - std::chrono::steady_clock::now())
                          .count();
    return left > 0 ? static_cast<int>(left) : 0;
}

// A non-blocking RDMA CM event channel, or nullptr with *error set.
rdma_event_channel* open_event_channel(std::string* error)
{
    rdma_event_channel* ch = rdma_create_event_channel();
    if (ch != nullptr)
        set_nonblock(ch->fd);
    else
        *error = std::string("rdma_create_event_channel: ") + strerror(errno);
    return ch;
}

} // namespace

RoguePeer::RoguePeer(Options opt) : opt_(std::move(opt))
{
    ch_ = open_event_channel(&error_);
}

RoguePeer::~RoguePeer()
{
    if ((id_ != nullptr) && connected_ && !disconnected_)
        rdma_disconnect(id_);
    if (qp_ != nullptr)
        rdma_destroy_qp(id_);
    for (ibv_mr* mr : user_mrs_)
        ibv_dereg_mr(mr);
    for (Buf& b : rx_)
        if (b.mr != nullptr)
            ibv_dereg_mr(b.mr);
    for (Buf& b : tx_)
        if (b.mr != nullptr)
            ibv_dereg_mr(b.mr);
    if (cq_ != nullptr)
        ibv_destroy_cq(cq_);
    if (cc_ != nullptr)
        ibv_destroy_comp_channel(cc_);
    if (pd_ != nullptr)
        ibv_dealloc_pd(pd_);
    if (id_ != nullptr)
        rdma_destroy_id(id_);
    if (listen_id_ != nullptr)
        rdma_destroy_id(listen_id_);
    if (ch_ != nullptr)
        rdma_destroy_event_channel(ch_);
}

bool RoguePeer::fail(const std::string& why)
{
    error_ = why;
    return false;
}

// ---- connection setup ----------------------------------------------------

// Wait for CM event `expect`; other events are errors except the harmless
// ones.  private_data receives the event's private data, *evid its id.
bool RoguePeer::wait_cm_event(int expect, int timeout_ms, std::vector<uint8_t>* private_data,
                              rdma_cm_id** evid)
{
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
        rdma_cm_event* ev = nullptr;
        if (rdma_get_cm_event(ch_, &ev) == 0) {
            const int got = ev->event;
            const int status = ev->status;
            if (got == expect) {
                if (private_data != nullptr) {
                    const auto* pd = static_cast<const uint8_t*>(ev->param.conn.private_data);
                    private_data->assign(
                        pd, pd + (pd != nullptr ? ev->param.conn.private_data_len : 0));
                }
                if (evid != nullptr)
                    *evid = ev->id;
                rdma_ack_cm_event(ev);
                return true;
            }
            rdma_ack_cm_event(ev);
            if (got == RDMA_CM_EVENT_ADDR_CHANGE || got == RDMA_CM_EVENT_TIMEWAIT_EXIT)
                continue;
            last_cm_event_ = got;
            return fail(std::string("waiting for ") +
                        rdma_event_str(static_cast<rdma_cm_event_type>(expect)) + ", got " +
                        rdma_event_str(static_cast<rdma_cm_event_type>(got)) + " status " +
                        std::to_string(status));
        }
        if (errno != EAGAIN)
            return fail(std::string("rdma_get_cm_event: ") + strerror(errno));
        const int left = remaining_ms(end);
        if (left == 0)
            return fail(std::string("timed out waiting for ") +
                        rdma_event_str(static_cast<rdma_cm_event_type>(expect)));
        pollfd pfd{ch_->fd, POLLIN, 0};
        poll(&pfd, 1, left);
    }
}

bool RoguePeer::setup_resources(rdma_cm_id* id)
{
    pd_ = ibv_alloc_pd(id->verbs);
    if (pd_ == nullptr)
        return fail(std::string("ibv_alloc_pd: ") + strerror(errno));
    cc_ = ibv_create_comp_channel(id->verbs);
    if (cc_ == nullptr)
        return fail(std::string("ibv_create_comp_channel: ") + strerror(errno));
    set_nonblock(cc_->fd);
    const int cqe = static_cast<int>(opt_.rx_bufs + opt_.tx_slots + 32);
    cq_ = ibv_create_cq(id->verbs, cqe, nullptr, cc_, 0);
    if (cq_ == nullptr)
        return fail(std::string("ibv_create_cq: ") + strerror(errno));
    ibv_req_notify_cq(cq_, 0);

    ibv_qp_init_attr qa{};
    qa.send_cq = cq_;
    qa.recv_cq = cq_;
    qa.qp_type = IBV_QPT_RC;
    qa.cap.max_send_wr = opt_.tx_slots + 16;
    qa.cap.max_recv_wr = opt_.rx_bufs != 0u ? opt_.rx_bufs : 1;
    qa.cap.max_send_sge = 1;
    qa.cap.max_recv_sge = 1;
    qa.sq_sig_all = 1;
    if (rdma_create_qp(id, pd_, &qa) != 0)
        return fail(std::string("rdma_create_qp: ") + strerror(errno));
    qp_ = id->qp;

    rx_.resize(opt_.rx_bufs);
    rx_posted_.assign(opt_.rx_bufs, false);
    const int rx_access = IBV_ACCESS_LOCAL_WRITE;
    for (Buf& b : rx_) {
        b.mem.resize(opt_.rx_buf_size);
        b.mr = ibv_reg_mr(pd_, b.mem.data(), b.mem.size(), rx_access);
        if (b.mr == nullptr)
            return fail(std::string("ibv_reg_mr (rx): ") + strerror(errno));
    }
    tx_.resize(opt_.tx_slots);
    tx_busy_.assign(opt_.tx_slots, false);
    for (Buf& b : tx_) {
        b.mem.resize(kTxBufSize);
        b.mr = ibv_reg_mr(pd_, b.mem.data(), b.mem.size(), 0);
        if (b.mr == nullptr)
            return fail(std::string("ibv_reg_mr (tx): ") + strerror(errno));
    }
    // The initial credit grant: posted before the Hello/HelloAck goes.
    const uint32_t n = opt_.initial_posted >= 0 && opt_.initial_posted < opt_.rx_bufs
                           ? static_cast<uint32_t>(opt_.initial_posted)
                           : opt_.rx_bufs;
    for (uint32_t i = 0; i < n; i++)
        if (!post_recv(i))
            return false;
    return true;
}

bool RoguePeer::post_receives()
{
    for (uint32_t i = 0; i < rx_.size(); i++)
        if (!rx_posted_[i] && !post_recv(i))
            return false;
    return true;
}

bool RoguePeer::post_recv(uint32_t slot)
{
    Buf& b = rx_[slot];
    ibv_sge sge{reinterpret_cast<uintptr_t>(b.mem.data()), opt_.rx_buf_size, b.mr->lkey};
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    wr.wr_id = kWrRx | slot;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    if (ibv_post_recv(qp_, &wr, &bad) != 0)
        return fail(std::string("ibv_post_recv: ") + strerror(errno));
    rx_posted_[slot] = true;
    posted_++;
    return true;
}

uint16_t RoguePeer::bufs_field() const
{
    if (opt_.claimed_bufs >= 0)
        return static_cast<uint16_t>(opt_.claimed_bufs);
    return static_cast<uint16_t>(posted_);
}

bool RoguePeer::connect(const char* ip, int port, int timeout_ms)
{
    if (ch_ == nullptr)
        return false;
    if (rdma_create_id(ch_, &id_, this, RDMA_PS_IB) != 0)
        return fail(std::string("rdma_create_id: ") + strerror(errno));
    sockaddr_in src = inet_addr_of(ip, 0);
    sockaddr_in dst = inet_addr_of(ip, port);
    if (rdma_resolve_addr(id_, reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&dst),
                          timeout_ms) != 0)
        return fail(std::string("rdma_resolve_addr: ") + strerror(errno));
    if (!wait_cm_event(RDMA_CM_EVENT_ADDR_RESOLVED, timeout_ms, nullptr, nullptr))
        return false;
    if (rdma_resolve_route(id_, timeout_ms) != 0)
        return fail(std::string("rdma_resolve_route: ") + strerror(errno));
    if (!wait_cm_event(RDMA_CM_EVENT_ROUTE_RESOLVED, timeout_ms, nullptr, nullptr))
        return false;
    if (!setup_resources(id_))
        return false;

    // Hello, modern layout (32 bytes): the CM header carries the addresses.
    std::vector<uint8_t> hello = hello_bytes(bufs_field(), opt_.rx_buf_size,
                                             ntohs(rdma_get_src_port(id_)), opt_.max_adverts);
    if (opt_.edit_hello)
        opt_.edit_hello(hello);
    advertised_bufs_ = bufs_field();

    rdma_conn_param param{};
    param.private_data = hello.data();
    param.private_data_len = static_cast<uint8_t>(hello.size());
    param.responder_resources = 1;
    param.initiator_depth = 1;
    param.retry_count = 7;
    param.rnr_retry_count = opt_.rnr_retry;
    if (rdma_connect(id_, &param) != 0)
        return fail(std::string("rdma_connect: ") + strerror(errno));
    std::vector<uint8_t> rep;
    if (!wait_cm_event(RDMA_CM_EVENT_ESTABLISHED, timeout_ms, &rep, nullptr))
        return false;
    if (rep.size() < SDP_HELLO_ACK_SIZE)
        return fail("REP private data too short for a HelloAck: " + std::to_string(rep.size()));
    const Bsdh ack = get_bsdh(rep.data());
    if (ack.mid != SDP_MID_HELLO_ACK || ack.len != SDP_HELLO_ACK_SIZE || ack.mseq != 0 ||
        (rep[16] >> 4) != SDP_VERSION_MAJOR)
        kernel_errors_.push_back("bad HelloAck");
    peer_hello_bufs_ = ack.bufs;
    peer_rcv_size_ = get32(rep.data() + 20);
    peer_max_adverts_ = rep[19] != 0 ? rep[19] : 1; // HelloAck ext_max_adverts
    tx_credits_ = ack.bufs;
    connected_ = true;
    return true;
}

bool RoguePeer::listen(const char* ip, int port)
{
    if (ch_ == nullptr)
        return false;
    if (rdma_create_id(ch_, &listen_id_, this, RDMA_PS_IB) != 0)
        return fail(std::string("rdma_create_id: ") + strerror(errno));
    sockaddr_in a = inet_addr_of(ip, port);
    if (rdma_bind_addr(listen_id_, reinterpret_cast<sockaddr*>(&a)) != 0)
        return fail(std::string("rdma_bind_addr: ") + strerror(errno));
    if (rdma_listen(listen_id_, 4) != 0)
        return fail(std::string("rdma_listen: ") + strerror(errno));
    return true;
}

bool RoguePeer::accept(int timeout_ms)
{
    std::vector<uint8_t> req;
    rdma_cm_id* id = nullptr;
    if (!wait_cm_event(RDMA_CM_EVENT_CONNECT_REQUEST, timeout_ms, &req, &id))
        return false;
    id_ = id;
    if (req.size() < SDP_HELLO_MODERN_SIZE)
        return fail("REQ private data too short for a Hello: " + std::to_string(req.size()));
    const Bsdh hello = get_bsdh(req.data());
    if (hello.mid != SDP_MID_HELLO || hello.mseq != 0 || (req[16] >> 4) != SDP_VERSION_MAJOR ||
        (req[17] >> 4) != 4 || req[19] == 0)
        kernel_errors_.push_back("bad Hello");
    peer_hello_bufs_ = hello.bufs;
    peer_rcv_size_ = get32(req.data() + 24);
    peer_max_adverts_ = req[19]; // Hello max_adverts
    if (!setup_resources(id_))
        return false;

    uint8_t ack[SDP_HELLO_ACK_SIZE] = {};
    Bsdh h;
    h.mid = SDP_MID_HELLO_ACK;
    h.bufs = bufs_field();
    h.len = SDP_HELLO_ACK_SIZE;
    put_bsdh(ack, h);
    ack[16] = (SDP_VERSION_MAJOR << 4) | SDP_VERSION_MINOR;
    ack[19] = opt_.max_adverts;
    put32(ack + 20, opt_.rx_buf_size);
    advertised_bufs_ = h.bufs;
    tx_credits_ = hello.bufs;

    rdma_conn_param param{};
    param.private_data = ack;
    param.private_data_len = sizeof(ack);
    param.responder_resources = 1;
    param.initiator_depth = 1;
    param.retry_count = 7;
    param.rnr_retry_count = opt_.rnr_retry;
    if (rdma_accept(id_, &param) != 0)
        return fail(std::string("rdma_accept: ") + strerror(errno));
    if (!wait_cm_event(RDMA_CM_EVENT_ESTABLISHED, timeout_ms, nullptr, nullptr))
        return false;
    connected_ = true;
    return true;
}

void RoguePeer::disconnect()
{
    if ((id_ != nullptr) && connected_ && !disconnected_) {
        rdma_disconnect(id_);
        disconnected_ = true;
    }
}

// ---- the engine ------------------------------------------------------------

void RoguePeer::handle_cm_events()
{
    rdma_cm_event* ev = nullptr;
    while ((ch_ != nullptr) && rdma_get_cm_event(ch_, &ev) == 0) {
        const rdma_cm_event_type type = ev->event;
        rdma_cm_id* id = ev->id;
        if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
            // Only one connection per peer.
            rdma_reject(id, nullptr, 0);
            rdma_ack_cm_event(ev);
            rdma_destroy_id(id);
            continue;
        }
        rdma_ack_cm_event(ev);
        if (id == id_ &&
            (type == RDMA_CM_EVENT_DISCONNECTED || type == RDMA_CM_EVENT_DEVICE_REMOVAL ||
             type == RDMA_CM_EVENT_CONNECT_ERROR || type == RDMA_CM_EVENT_UNREACHABLE))
            disconnected_ = true;
    }
}

bool RoguePeer::pump(int timeout_ms)
{
    if (ch_ == nullptr)
        return false;
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    bool armed = false;
    for (;;) {
        handle_cm_events();
        bool got = false;
        if (cq_ != nullptr) {
            ibv_wc wc[16];
            int n = 0;
            while ((n = ibv_poll_cq(cq_, 16, wc)) > 0) {
                for (int i = 0; i < n; i++)
                    handle_wc(&wc[i]);
                got = true;
            }
        }
        if (got) {
            maybe_credit_update();
            return true;
        }
        if (armed || (cq_ == nullptr)) {
            const int left = remaining_ms(end);
            if (left == 0)
                return false;
            pollfd pfd[2] = {{ch_->fd, POLLIN, 0}, {cq_ != nullptr ? cc_->fd : -1, POLLIN, 0}};
            poll(pfd, 2, left < 50 ? left : 50);
            if ((cq_ != nullptr) && ((pfd[1].revents & POLLIN) != 0)) {
                ibv_cq* ecq = nullptr;
                void* ctx = nullptr;
                if (ibv_get_cq_event(cc_, &ecq, &ctx) == 0)
                    ibv_ack_cq_events(ecq, 1);
            }
            armed = false;
        }
        // Arm, then look once more: nothing can slip between.
        if (cq_ != nullptr) {
            ibv_req_notify_cq(cq_, 0);
            armed = true;
        }
    }
}

void RoguePeer::handle_wc(const void* p)
{
    const ibv_wc& wc = *static_cast<const ibv_wc*>(p);
    const uint64_t kind = wc.wr_id & kWrKindMask;
    if (wc.status != IBV_WC_SUCCESS)
        qp_failed_ = true;
    if (kind == kWrRx) {
        const auto slot = static_cast<uint32_t>(wc.wr_id & 0xffffffffu);
        rx_posted_[slot] = false;
        posted_--;
        if (wc.status != IBV_WC_SUCCESS)
            return;
        on_message(rx_[slot].mem.data(), wc.byte_len);
        if (repost_ && !qp_failed_)
            post_recv(slot);
    } else if (kind == kWrTx) {
        tx_busy_[wc.wr_id & 0xffffffffu] = false;
    } else if (kind == kWrRdma) {
        rdma_status_[wc.wr_id] = wc.status;
    }
}

void RoguePeer::on_message(const uint8_t* p, uint32_t n)
{
    if (n < SDP_BSDH_SIZE) {
        kernel_errors_.push_back("message of " + std::to_string(n) + " bytes");
        return;
    }
    Message m;
    m.h = get_bsdh(p);
    m.bytes.assign(p, p + n);
    if (m.h.len != n)
        kernel_errors_.push_back("mid " + std::to_string(m.h.mid) + ": len " +
                                 std::to_string(m.h.len) + " in a SEND of " + std::to_string(n));
    if (m.h.mseq != last_rx_mseq_ + 1)
        kernel_errors_.push_back("mseq " + std::to_string(m.h.mseq) + " after " +
                                 std::to_string(last_rx_mseq_));
    last_rx_mseq_ = m.h.mseq;
    const uint32_t in_flight = (next_tx_mseq_ - 1) - m.h.mseq_ack;
    if (static_cast<int32_t>(in_flight) < 0) {
        kernel_errors_.push_back("mseq_ack " + std::to_string(m.h.mseq_ack) +
                                 " acknowledges a message never sent");
        tx_credits_ = 0;
    } else {
        tx_credits_ = m.h.bufs > in_flight ? m.h.bufs - in_flight : 0;
    }
    rx_count_[m.h.mid]++;

    m.payload_off = SDP_BSDH_SIZE;
    switch (m.h.mid) {
    case SDP_MID_SRC_AVAIL:
    case SDP_MID_SINK_AVAIL:
        if (n >= SDP_SRC_AVAIL_HDR_SIZE) {
            m.zc_len = get32(p + 16);
            m.rkey = get32(p + 20);
            m.vaddr = get64(p + 24);
        }
        m.payload_off = m.h.mid == SDP_MID_SRC_AVAIL ? SDP_SRC_AVAIL_HDR_SIZE : SDP_SINK_AVAIL_SIZE;
        break;
    case SDP_MID_RDMA_RD_COMPL:
    case SDP_MID_RDMA_WR_COMPL:
    case SDP_MID_CH_RCV_BUF:
    case SDP_MID_CH_RCV_BUF_ACK:
        if (n >= SDP_RDMA_COMPL_SIZE)
            m.compl_len = get32(p + 16);
        m.payload_off = SDP_RDMA_COMPL_SIZE;
        break;
    default:
        break;
    }
    if (m.payload_off > n)
        m.payload_off = n;
    if (m.h.mid == SDP_MID_DATA) {
        stream_.insert(stream_.end(), p + m.payload_off, p + n);
        return; // payload, or a credit update
    }
    inbox_.push_back(std::move(m));
}

uint32_t RoguePeer::remote_credits() const
{
    const uint32_t used = last_rx_mseq_ - advertised_at_;
    return advertised_bufs_ > used ? advertised_bufs_ - used : 0;
}

// A zero-payload Data when the peer runs short of credits we could give.
// Only if it can go at once: this runs inside pump().
void RoguePeer::maybe_credit_update()
{
    if (!auto_updates_ || !connected_ || disconnected_ || qp_failed_ || tx_credits_ == 0)
        return;
    bool slot = false;
    for (bool busy : tx_busy_)
        slot = slot || !busy;
    const uint32_t remote = remote_credits();
    const uint32_t adv = bufs_field();
    if (!slot || adv <= remote)
        return;
    if (remote <= kControlReserve || remote * 3 < adv * 2)
        send_credit_update();
}

bool RoguePeer::wait_send_slot(int timeout_ms)
{
    auto free_slot = [&] {
        for (bool busy : tx_busy_)
            if (!busy)
                return true;
        return false;
    };
    return pump_until([&] { return tx_credits_ >= 1 && free_slot(); }, timeout_ms);
}

// ---- raw messages --------------------------------------------------------------

bool RoguePeer::send_raw(uint8_t mid, const std::vector<uint8_t>& extra,
                         const std::vector<uint8_t>& payload, uint8_t flags,
                         std::optional<uint32_t> len_override,
                         std::optional<uint32_t> mseq_override, int timeout_ms)
{
    return post_message(SendOp::kSend, 0, mid, extra, payload, flags, len_override, mseq_override,
                        timeout_ms);
}

bool RoguePeer::send_raw_op(SendOp op, uint32_t imm_or_rkey, uint8_t mid,
                            const std::vector<uint8_t>& extra, const std::vector<uint8_t>& payload)
{
    return post_message(op, imm_or_rkey, mid, extra, payload, 0, std::nullopt, std::nullopt, 5000);
}

bool RoguePeer::post_message(SendOp op, uint32_t imm_or_rkey, uint8_t mid,
                             const std::vector<uint8_t>& extra, const std::vector<uint8_t>& payload,
                             uint8_t flags, std::optional<uint32_t> len_override,
                             std::optional<uint32_t> mseq_override, int timeout_ms)
{
    if (!connected_ || (qp_ == nullptr))
        return fail("not connected");
    const size_t total = SDP_BSDH_SIZE + extra.size() + payload.size();
    if (total > kTxBufSize)
        return fail("message too long for a send buffer");
    if (!wait_send_slot(timeout_ms))
        return fail("no credit or send slot for mid " + std::to_string(mid) + ": " + describe());
    uint32_t slot = 0;
    while (tx_busy_[slot])
        slot++;
    Buf& b = tx_[slot];
    Bsdh h;
    h.mid = mid;
    h.flags = flags;
    h.bufs = bufs_field();
    h.len = len_override ? *len_override : static_cast<uint32_t>(total);
    h.mseq = mseq_override ? *mseq_override : next_tx_mseq_;
    h.mseq_ack = last_rx_mseq_;
    put_bsdh(b.mem.data(), h);
    if (!extra.empty())
        memcpy(b.mem.data() + SDP_BSDH_SIZE, extra.data(), extra.size());
    if (!payload.empty())
        memcpy(b.mem.data() + SDP_BSDH_SIZE + extra.size(), payload.data(), payload.size());

    ibv_sge sge{reinterpret_cast<uintptr_t>(b.mem.data()), static_cast<uint32_t>(total),
                b.mr->lkey};
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.wr_id = kWrTx | slot;
    switch (op) {
    case SendOp::kSend:
        wr.opcode = IBV_WR_SEND;
        break;
    case SendOp::kSendWithImm:
        wr.opcode = IBV_WR_SEND_WITH_IMM;
        wr.imm_data = htonl(imm_or_rkey);
        break;
    case SendOp::kSendWithInv:
        wr.opcode = IBV_WR_SEND_WITH_INV;
        wr.invalidate_rkey = imm_or_rkey;
        break;
    }
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (ibv_post_send(qp_, &wr, &bad) != 0)
        return fail(std::string("ibv_post_send: ") + strerror(errno));
    tx_busy_[slot] = true;
    if (!mseq_override)
        next_tx_mseq_++;
    tx_credits_--;
    advertised_bufs_ = h.bufs;
    advertised_at_ = last_rx_mseq_;
    acked_rx_mseq_ = last_rx_mseq_;
    return true;
}

bool RoguePeer::send_src_avail(uint32_t len, uint32_t rkey, uint64_t vaddr,
                               const std::vector<uint8_t>& inline_payload)
{
    std::vector<uint8_t> x(16);
    put32(x.data(), len);
    put32(x.data() + 4, rkey);
    put64(x.data() + 8, vaddr);
    return send_raw(SDP_MID_SRC_AVAIL, x, inline_payload);
}

bool RoguePeer::send_sink_avail(uint32_t len, uint32_t rkey, uint64_t vaddr)
{
    std::vector<uint8_t> x(20);
    put32(x.data(), len);
    put32(x.data() + 4, rkey);
    put64(x.data() + 8, vaddr);
    return send_raw(SDP_MID_SINK_AVAIL, x);
}

bool RoguePeer::send_rd_compl(uint32_t n)
{
    std::vector<uint8_t> x(4);
    put32(x.data(), n);
    return send_raw(SDP_MID_RDMA_RD_COMPL, x);
}

bool RoguePeer::send_wr_compl(uint32_t n)
{
    std::vector<uint8_t> x(4);
    put32(x.data(), n);
    return send_raw(SDP_MID_RDMA_WR_COMPL, x);
}

bool RoguePeer::send_control(uint8_t mid)
{
    return send_raw(mid, {});
}

bool RoguePeer::send_credit_update()
{
    return send_raw(SDP_MID_DATA, {});
}

// ---- honest traffic ----------------------------------------------------------

bool RoguePeer::send_data(const void* p, size_t n, int timeout_ms)
{
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    const uint32_t limit = peer_rcv_size_ < kTxBufSize ? peer_rcv_size_ : kTxBufSize;
    if (limit <= SDP_BSDH_SIZE)
        return fail("the peer's receive size leaves no room for data");
    const size_t seg_max = limit - SDP_BSDH_SIZE;
    const auto* bytes = static_cast<const uint8_t*>(p);
    size_t off = 0;
    while (off < n) {
        // Data never takes the last kControlReserve credits.
        if (!pump_until([&] { return tx_credits_ > kControlReserve; }, remaining_ms(end)))
            return fail("no credit for data: " + describe());
        const size_t seg = n - off < seg_max ? n - off : seg_max;
        if (!send_raw(SDP_MID_DATA, {}, std::vector<uint8_t>(bytes + off, bytes + off + seg), 0,
                      std::nullopt, std::nullopt, remaining_ms(end)))
            return false;
        off += seg;
    }
    return true;
}

bool RoguePeer::recv_data(void* p, size_t n, int timeout_ms)
{
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    auto* out = static_cast<uint8_t*>(p);
    size_t got = 0;
    for (;;) {
        while (got < n && !stream_.empty()) {
            out[got++] = stream_.front();
            stream_.pop_front();
        }
        if (got == n)
            return true;
        // Stream order: Data received before a SrcAvail comes first (the
        // peer sends nothing after its SrcAvail until it is read).
        auto sa = inbox_.begin();
        while (sa != inbox_.end() && sa->h.mid != SDP_MID_SRC_AVAIL)
            ++sa;
        if (sa != inbox_.end()) {
            const Message m = *sa;
            inbox_.erase(sa);
            std::vector<uint8_t> buf(m.zc_len);
            ibv_mr* mr = register_memory(buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
            if (mr == nullptr)
                return false;
            const int st = rdma_read(mr, buf.data(), m.zc_len, m.vaddr, m.rkey, remaining_ms(end));
            if (st != IBV_WC_SUCCESS)
                return fail("RDMA Read of a SrcAvail: status " + std::to_string(st));
            if (!send_rd_compl(m.zc_len))
                return false;
            stream_.insert(stream_.end(), buf.begin(), buf.end());
            continue;
        }
        if (disconnected_ || qp_failed_)
            return fail("connection gone after " + std::to_string(got) + " of " +
                        std::to_string(n) + " bytes: " + describe());
        // The reader waits: acknowledge what arrived (a Nagle-holding
        // sender waits for it).
        if (acked_rx_mseq_ != last_rx_mseq_ && tx_credits_ >= 1)
            send_credit_update();
        if (remaining_ms(end) == 0)
            return fail("timed out after " + std::to_string(got) + " of " + std::to_string(n) +
                        " bytes: " + describe());
        pump(remaining_ms(end) < 50 ? remaining_ms(end) : 50);
    }
}

std::optional<Message> RoguePeer::wait_for(uint8_t mid, int timeout_ms)
{
    return wait_for_any({mid}, timeout_ms);
}

std::optional<Message> RoguePeer::wait_for_any(const std::vector<uint8_t>& mids, int timeout_ms)
{
    std::optional<Message> out;
    int after_end = 0;
    pump_until(
        [&] {
            for (auto it = inbox_.begin(); it != inbox_.end(); ++it) {
                if (std::find(mids.begin(), mids.end(), it->h.mid) != mids.end()) {
                    out = std::move(*it);
                    inbox_.erase(it);
                    return true;
                }
            }
            // Gone: what arrived before is in the completion queue by now.
            return (disconnected_ || qp_failed_) && ++after_end > 3;
        },
        timeout_ms);
    return out;
}

// ---- RDMA ------------------------------------------------------------------------

ibv_mr* RoguePeer::register_memory(void* p, size_t len, int access)
{
    if (pd_ == nullptr) {
        fail("no protection domain yet");
        return nullptr;
    }
    ibv_mr* mr = ibv_reg_mr(pd_, p, len, access);
    if (mr == nullptr) {
        fail(std::string("ibv_reg_mr: ") + strerror(errno));
        return nullptr;
    }
    user_mrs_.push_back(mr);
    return mr;
}

int RoguePeer::rdma_op(int opcode, ibv_mr* mr, const void* p, uint32_t len, uint64_t raddr,
                       uint32_t rkey, uint32_t imm, int timeout_ms)
{
    if (qp_ == nullptr)
        return kPostFailed;
    ibv_sge sge{reinterpret_cast<uintptr_t>(p), len, mr != nullptr ? mr->lkey : 0};
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    const uint64_t id = kWrRdma | next_wr_id_++;
    wr.wr_id = id;
    wr.opcode = static_cast<ibv_wr_opcode>(opcode);
    wr.sg_list = len != 0u ? &sge : nullptr;
    wr.num_sge = len != 0u ? 1 : 0;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    if (opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
        wr.imm_data = htonl(imm);
    if (ibv_post_send(qp_, &wr, &bad) != 0) {
        fail(std::string("ibv_post_send (RDMA): ") + strerror(errno));
        return kPostFailed;
    }
    if (!pump_until([&] { return rdma_status_.count(id) != 0; }, timeout_ms))
        return kTimedOut;
    return rdma_status_[id];
}

int RoguePeer::rdma_read(ibv_mr* mr, void* p, uint32_t len, uint64_t raddr, uint32_t rkey,
                         int timeout_ms)
{
    return rdma_op(IBV_WR_RDMA_READ, mr, p, len, raddr, rkey, 0, timeout_ms);
}

int RoguePeer::rdma_write(ibv_mr* mr, const void* p, uint32_t len, uint64_t raddr, uint32_t rkey,
                          int timeout_ms)
{
    return rdma_op(IBV_WR_RDMA_WRITE, mr, p, len, raddr, rkey, 0, timeout_ms);
}

int RoguePeer::rdma_write_imm(ibv_mr* mr, const void* p, uint32_t len, uint64_t raddr,
                              uint32_t rkey, uint32_t imm, int timeout_ms)
{
    // It takes one of the peer's receive buffers, as a SEND does.
    if (tx_credits_ != 0u)
        tx_credits_--;
    return rdma_op(IBV_WR_RDMA_WRITE_WITH_IMM, mr, p, len, raddr, rkey, imm, timeout_ms);
}

bool RoguePeer::kill_qp()
{
    if (qp_ == nullptr)
        return fail("no QP");
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_ERR;
    const int err = ibv_modify_qp(qp_, &attr, IBV_QP_STATE);
    if (err != 0)
        return fail(std::string("ibv_modify_qp(ERR): ") + strerror(err));
    qp_failed_ = true;
    return true;
}

// ---- state -------------------------------------------------------------------------

unsigned long RoguePeer::rx_count(uint8_t mid) const
{
    const auto it = rx_count_.find(mid);
    return it == rx_count_.end() ? 0 : it->second;
}

std::string RoguePeer::describe() const
{
    std::ostringstream s;
    s << "rogue{connected=" << connected_ << " disconnected=" << disconnected_
      << " qp_failed=" << qp_failed_ << " tx_credits=" << tx_credits_ << " posted=" << posted_
      << " next_tx_mseq=" << next_tx_mseq_ << " last_rx_mseq=" << last_rx_mseq_
      << " stream=" << stream_.size() << " rx:";
    for (const auto& [mid, n] : rx_count_)
        s << " 0x" << std::hex << static_cast<int>(mid) << std::dec << "=" << n;
    s << " inbox:";
    for (const Message& m : inbox_)
        s << " 0x" << std::hex << static_cast<int>(m.h.mid) << std::dec;
    for (const std::string& e : kernel_errors_)
        s << " [kernel: " << e << "]";
    s << "}";
    return s.str();
}

// ---- REQ flood ----------------------------------------------------------------------

ReqFlood::ReqFlood()
{
    ch_ = open_event_channel(&error_);
}

ReqFlood::~ReqFlood()
{
    destroy();
    if (ch_ != nullptr)
        rdma_destroy_event_channel(ch_);
}

void ReqFlood::handle(rdma_cm_id* id, int event)
{
    last_event_[id] = event;
    switch (event) {
    case RDMA_CM_EVENT_CONNECT_RESPONSE:
        responses_++; // and no rdma_establish(): no RTU
        break;
    case RDMA_CM_EVENT_REJECTED:
        rejected_++;
        break;
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_CONNECT_ERROR:
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
        failed_++;
        break;
    default:
        break;
    }
}

void ReqFlood::pump(int timeout_ms)
{
    if (ch_ == nullptr)
        return;
    pollfd pfd{ch_->fd, POLLIN, 0};
    poll(&pfd, 1, timeout_ms);
    rdma_cm_event* ev = nullptr;
    while (rdma_get_cm_event(ch_, &ev) == 0) {
        rdma_cm_id* id = ev->id;
        const int type = ev->event;
        rdma_ack_cm_event(ev);
        handle(id, type);
    }
}

bool ReqFlood::wait_event(rdma_cm_id* id, int expect, int timeout_ms)
{
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
        rdma_cm_event* ev = nullptr;
        while (rdma_get_cm_event(ch_, &ev) == 0) {
            rdma_cm_id* evid = ev->id;
            const int type = ev->event;
            rdma_ack_cm_event(ev);
            handle(evid, type);
            if (evid != id)
                continue;
            if (type == expect)
                return true;
            error_ = std::string("waiting for ") +
                     rdma_event_str(static_cast<rdma_cm_event_type>(expect)) + ", got " +
                     rdma_event_str(static_cast<rdma_cm_event_type>(type));
            return false;
        }
        const int left = remaining_ms(end);
        if (left == 0) {
            error_ = std::string("timed out waiting for ") +
                     rdma_event_str(static_cast<rdma_cm_event_type>(expect));
            return false;
        }
        pollfd pfd{ch_->fd, POLLIN, 0};
        poll(&pfd, 1, left);
    }
}

int ReqFlood::send(const char* ip, int port, int n, int timeout_ms)
{
    int out = 0;
    if (ch_ == nullptr)
        return 0;
    for (int i = 0; i < n; i++) {
        rdma_cm_id* id = nullptr;
        if (rdma_create_id(ch_, &id, nullptr, RDMA_PS_IB) != 0) {
            error_ = std::string("rdma_create_id: ") + strerror(errno);
            break;
        }
        ids_.push_back(id);
        sockaddr_in src = inet_addr_of(ip, 0);
        sockaddr_in dst = inet_addr_of(ip, port);
        if (rdma_resolve_addr(id, reinterpret_cast<sockaddr*>(&src),
                              reinterpret_cast<sockaddr*>(&dst), timeout_ms) != 0) {
            error_ = std::string("rdma_resolve_addr: ") + strerror(errno);
            break;
        }
        if (!wait_event(id, RDMA_CM_EVENT_ADDR_RESOLVED, timeout_ms))
            break;
        if (rdma_resolve_route(id, timeout_ms) != 0) {
            error_ = std::string("rdma_resolve_route: ") + strerror(errno);
            break;
        }
        if (!wait_event(id, RDMA_CM_EVENT_ROUTE_RESOLVED, timeout_ms))
            break;
        std::vector<uint8_t> hello = hello_bytes(16, 65536, ntohs(rdma_get_src_port(id)), 1);
        rdma_conn_param param{};
        param.private_data = hello.data();
        param.private_data_len = static_cast<uint8_t>(hello.size());
        param.responder_resources = 1;
        param.initiator_depth = 1;
        param.retry_count = 7;
        param.rnr_retry_count = 7;
        param.qp_num = 0x10000u + static_cast<uint32_t>(ids_.size()); // no such QP
        if (rdma_connect(id, &param) != 0) {
            error_ = std::string("rdma_connect: ") + strerror(errno);
            break;
        }
        out++;
    }
    return out;
}

bool ReqFlood::wait_answered(int timeout_ms)
{
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
        int answered = 0;
        for (rdma_cm_id* id : ids_) {
            const auto it = last_event_.find(id);
            if (it != last_event_.end() && it->second != RDMA_CM_EVENT_ADDR_RESOLVED &&
                it->second != RDMA_CM_EVENT_ROUTE_RESOLVED)
                answered++;
        }
        if (answered == static_cast<int>(ids_.size()))
            return true;
        const int left = remaining_ms(end);
        if (left == 0)
            return false;
        pump(left < 50 ? left : 50);
    }
}

void ReqFlood::destroy()
{
    // Events not yet acknowledged would block rdma_destroy_id().
    pump(0);
    for (rdma_cm_id* id : ids_)
        rdma_destroy_id(id);
    ids_.clear();
    last_event_.clear();
}

} // namespace sdp::rogue
