// SPDX-License-Identifier: GPL-2.0
//
// Data transfer calls: send/recv flags, readv/writev, sendmsg/recvmsg,
// zero-length and non-blocking transfers.
#include "conformance.h"

#include <atomic>
#include <cstring>
#include <poll.h>
#include <sys/uio.h>
#include <unistd.h>

namespace sdp::conformance {
namespace {

constexpr size_t kKiB = 1024;

std::string text_of(const char* buf, Res r)
{
    return r.rc > 0 ? std::string(buf, static_cast<size_t>(r.rc)) : std::string();
}

// Waits until the peer's FIN arrived, so everything sent before it is in
// the receive queue and recv() sizes are deterministic.
void wait_fin(Lane& l, int fd)
{
    const int ev = poll_until(fd, POLLIN | POLLRDHUP);
    if ((ev & POLLRDHUP) == 0)
        l.abort("peer FIN did not arrive, poll = " + poll_text(ev));
}

} // namespace

// Blocking send and recv both ways, MSG_WAITALL on the receiving side.
SCENARIO46("data", "send_recv")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    std::vector<char> out(1000);
    std::vector<char> in(1000);
    pattern_fill(1, 0, out.data(), out.size());
    l.rec("cli send 1000", CALL(send(c, out.data(), out.size(), 0)));
    l.rec("srv recv WAITALL", CALL(recv(s, in.data(), in.size(), MSG_WAITALL)));
    l.flag("srv data intact", in == out);
    l.rec("srv send back", CALL(send(s, in.data(), in.size(), 0)));
    std::vector<char> back(1000);
    l.rec("cli recv WAITALL", CALL(recv(c, back.data(), back.size(), MSG_WAITALL)));
    l.flag("cli data intact", back == out);
    l.txt("cli poll", poll_text(poll_now(c)));
    l.txt("srv poll", poll_text(poll_now(s)));
}

// recv() smaller than what is queued.
SCENARIO("data.partial_recv")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    char out[100];
    pattern_fill(2, 0, out, sizeof(out));
    l.rec("send 100", CALL(send(c, out, sizeof(out), 0)));
    l.rec("shutdown WR", CALL(shutdown(c, SHUT_WR)));
    wait_fin(l, s);
    l.opt("SIOCINQ", inq(s));
    char in[100];
    size_t off = 0;
    for (int i = 0; i < 5; i++) {
        const Res r = l.rec("recv 30", CALL(recv(s, in + off, 30, 0)));
        if (r.rc > 0)
            off += static_cast<size_t>(r.rc);
    }
    l.flag("intact", off == sizeof(out) && memcmp(in, out, off) == 0);
}

// MSG_PEEK leaves the data queued.
SCENARIO("data.msg_peek")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    l.rec("send", CALL(send(c, "0123456789", 10, 0)));
    l.rec("shutdown WR", CALL(shutdown(c, SHUT_WR)));
    wait_fin(l, s);
    char buf[32];
    Res r = l.rec("peek 4", CALL(recv(s, buf, 4, MSG_PEEK)));
    l.txt("data", text_of(buf, r));
    r = l.rec("peek 4 again", CALL(recv(s, buf, 4, MSG_PEEK)));
    l.txt("data", text_of(buf, r));
    r = l.rec("peek 32", CALL(recv(s, buf, 32, MSG_PEEK)));
    l.txt("data", text_of(buf, r));
    r = l.rec("recv 3", CALL(recv(s, buf, 3, 0)));
    l.txt("data", text_of(buf, r));
    r = l.rec("peek DONTWAIT 32", CALL(recv(s, buf, 32, MSG_PEEK | MSG_DONTWAIT)));
    l.txt("data", text_of(buf, r));
    l.opt("SIOCINQ", inq(s));
    r = l.rec("recv 32", CALL(recv(s, buf, 32, 0)));
    l.txt("data", text_of(buf, r));
    l.rec("peek at EOF", CALL(recv(s, buf, 32, MSG_PEEK)));
    l.rec("recv at EOF", CALL(recv(s, buf, 32, 0)));
}

// MSG_TRUNC on a stream: the bytes are discarded, no buffer needed (the
// kernel's msg_zerocopy selftest reads this way), peeked with MSG_PEEK,
// and a large send (zero copy on SDP above the threshold) discarded whole
// with MSG_WAITALL up to the last bytes, which arrive intact.
SCENARIO("data.msg_trunc_discards")
{
    Lane& srv = ctx.lane("srv");
    Lane& cli = ctx.lane("cli");
    Ctx::Pair p = ctx.pair(srv);
    Fd c(p.cli);
    Fd s(p.srv);
    cli.rec("send 10", CALL(send(c, "0123456789", 10, 0)));
    char buf[128];
    srv.rec("discard 4", CALL(recv(s, nullptr, 4, MSG_TRUNC | MSG_WAITALL)));
    Res r = srv.rec("recv 3", CALL(recv(s, buf, 3, MSG_WAITALL)));
    srv.txt("data", text_of(buf, r));
    srv.rec("peek-discard 2", CALL(recv(s, nullptr, 2, MSG_TRUNC | MSG_PEEK)));
    r = srv.rec("recv 3 after", CALL(recv(s, buf, 3, MSG_WAITALL)));
    srv.txt("data", text_of(buf, r));
    constexpr size_t kLarge = 512 * kKiB;
    constexpr size_t kTail = 100;
    std::vector<char> out(kLarge);
    pattern_fill(12, 0, out.data(), out.size());
    Thread t([&] {
        cli.flag("large send whole",
                 send(c, out.data(), out.size(), 0) == static_cast<ssize_t>(kLarge));
        cli.rec("shutdown WR", CALL(shutdown(c, SHUT_WR)));
    });
    srv.rec("discard all but 100", CALL(recv(s, nullptr, kLarge - kTail, MSG_TRUNC | MSG_WAITALL)));
    r = srv.rec("recv the last 100", CALL(recv(s, buf, kTail, MSG_WAITALL)));
    srv.flag("tail intact", r.rc == static_cast<long>(kTail) &&
                                memcmp(buf, out.data() + kLarge - kTail, kTail) == 0);
    t.join();
    srv.rec("discard at EOF", CALL(recv(s, nullptr, 10, MSG_TRUNC)));
}

// MSG_PEEK waits for data like recv does.
SCENARIO("data.msg_peek_blocks")
{
    Lane& srv = ctx.lane("srv");
    Lane& cli = ctx.lane("cli");
    Ctx::Pair p = ctx.pair(srv);
    Fd c(p.cli);
    Fd s(p.srv);
    Thread t([&] {
        sleep_ms(100);
        cli.rec("send", CALL(send(c, "peekaboo", 8, 0)));
    });
    char buf[16];
    Res r = srv.rec("peek (blocking)", CALL(recv(s, buf, 8, MSG_PEEK | MSG_WAITALL)));
    srv.flag("peeked something", r.rc > 0);
    r = srv.rec("recv WAITALL", CALL(recv(s, buf, 8, MSG_WAITALL)));
    srv.txt("data", text_of(buf, r));
}

// MSG_WAITALL collects data sent in several pieces.
SCENARIO("data.msg_waitall")
{
    Lane& srv = ctx.lane("srv");
    Lane& cli = ctx.lane("cli");
    Ctx::Pair p = ctx.pair(srv);
    Fd c(p.cli);
    Fd s(p.srv);
    std::vector<char> out(10000);
    pattern_fill(3, 0, out.data(), out.size());
    Thread t([&] {
        int ok = 0;
        for (size_t i = 0; i < 10; i++) {
            ok += send(c, out.data() + i * 1000, 1000, 0) == 1000 ? 1 : 0;
            sleep_ms(10);
        }
        cli.val("sends of 1000", ok);
    });
    std::vector<char> in(10000);
    srv.rec("recv WAITALL 10000", CALL(recv(s, in.data(), in.size(), MSG_WAITALL)));
    srv.flag("intact", in == out);
}

// MSG_WAITALL returns short at EOF.
SCENARIO("data.msg_waitall_eof")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    char out[500];
    pattern_fill(4, 0, out, sizeof(out));
    l.rec("send 500", CALL(send(c, out, sizeof(out), 0)));
    l.rec("close", CALL(close(c.release())));
    char in[1000];
    l.rec("recv WAITALL 1000", CALL(recv(s, in, sizeof(in), MSG_WAITALL)));
    l.flag("intact", memcmp(in, out, sizeof(out)) == 0);
    l.rec("recv WAITALL again", CALL(recv(s, in, sizeof(in), MSG_WAITALL)));
}

// MSG_DONTWAIT and O_NONBLOCK on an empty socket.
SCENARIO("data.msg_dontwait_empty")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    char buf[16];
    l.rec("recv DONTWAIT", CALL(recv(s, buf, sizeof(buf), MSG_DONTWAIT)));
    l.rec("peek DONTWAIT", CALL(recv(s, buf, sizeof(buf), MSG_DONTWAIT | MSG_PEEK)));
    l.rec("recv DONTWAIT|WAITALL", CALL(recv(s, buf, sizeof(buf), MSG_DONTWAIT | MSG_WAITALL)));
    set_nonblock(s, true);
    l.rec("recv O_NONBLOCK", CALL(recv(s, buf, sizeof(buf), 0)));
    l.rec("read O_NONBLOCK", CALL(read(s, buf, sizeof(buf))));
    l.rec("send", CALL(send(c, "abcde", 5, 0)));
    l.txt("poll", poll_text(poll_until(s, POLLIN)));
    l.rec("recv DONTWAIT", CALL(recv(s, buf, sizeof(buf), MSG_DONTWAIT)));
    l.rec("recv DONTWAIT empty again", CALL(recv(s, buf, sizeof(buf), MSG_DONTWAIT)));
}

// Non-blocking send until EAGAIN, then the receiver drains: everything send
// accepted arrives; POLLOUT comes back once there is room.
SCENARIO("data.nonblocking_send_eagain")
{
    Lane& cli = ctx.lane("cli");
    Lane& srv = ctx.lane("srv");
    Ctx::Pair p = ctx.pair(cli);
    Fd c(p.cli);
    Fd s(p.srv);
    set_nonblock(c, true);
    std::vector<char> buf(65536);
    uint64_t sent = 0;
    uint64_t hash = kFnvInit;
    bool eagain = false;
    for (int i = 0; i < 4096 && !eagain; i++) {
        pattern_fill(5, sent, buf.data(), buf.size());
        const Res r = CALL(send(c, buf.data(), buf.size(), MSG_NOSIGNAL));
        if (r.ok()) {
            hash = fnv(hash, buf.data(), static_cast<size_t>(r.rc));
            sent += static_cast<uint64_t>(r.rc);
        } else if (r.is(EAGAIN)) {
            eagain = true;
        } else {
            cli.abort("send", r);
        }
    }
    cli.flag("EAGAIN reached", eagain);
    cli.flag("sent something", sent > 0);
    Drain d;
    Thread t([&] { d = drain(s); });
    cli.txt("poll(OUT) after reader started", poll_text(wait_poll(c, POLLOUT)));
    cli.rec("shutdown WR", CALL(shutdown(c, SHUT_WR)));
    t.join();
    srv.txt("drain end", d.end);
    srv.flag("delivered == accepted by send", d.bytes == sent);
    srv.flag("hash matches", d.hash == hash);
}

// writev() and readv() with different iovec layouts.
SCENARIO("data.readv_writev")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    std::vector<char> all(3210);
    pattern_fill(6, 0, all.data(), all.size());
    iovec out[3] = {{all.data(), 10}, {all.data() + 10, 200}, {all.data() + 210, 3000}};
    l.rec("writev 10+200+3000", CALL(writev(c, out, 3)));
    l.rec("shutdown WR", CALL(shutdown(c, SHUT_WR)));
    wait_fin(l, s);
    std::vector<char> in(5105);
    iovec iv[3] = {{in.data(), 5}, {in.data() + 5, 100}, {in.data() + 105, 5000}};
    l.rec("readv 5+100+5000", CALL(readv(s, iv, 3)));
    l.flag("intact", memcmp(in.data(), all.data(), all.size()) == 0);
    l.rec("readv at EOF", CALL(readv(s, iv, 3)));
    iovec empty[2] = {{in.data(), 0}, {in.data(), 0}};
    l.rec("writev of empty iovecs", CALL(writev(s, empty, 2)));
}

// sendmsg()/recvmsg(): iovecs, msg_name and msg_flags on a stream socket.
SCENARIO("data.sendmsg_recvmsg")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    std::vector<char> all(4006);
    pattern_fill(7, 0, all.data(), all.size());
    iovec out[4] = {
        {all.data(), 1}, {all.data() + 1, 2}, {all.data() + 3, 3}, {all.data() + 6, 4000}};
    msghdr m{};
    m.msg_iov = out;
    m.msg_iovlen = 4;
    l.rec("sendmsg 1+2+3+4000", CALL(sendmsg(c, &m, 0)));
    l.rec("shutdown WR", CALL(shutdown(c, SHUT_WR)));
    wait_fin(l, s);
    std::vector<char> in(4006);
    sockaddr_storage name{};
    iovec iv[2] = {{in.data(), 6}, {in.data() + 6, 1000}};
    msghdr r{};
    r.msg_name = &name;
    r.msg_namelen = sizeof(name);
    r.msg_iov = iv;
    r.msg_iovlen = 2;
    l.rec("recvmsg PEEK 6+1000", CALL(recvmsg(s, &r, MSG_PEEK)));
    l.val("msg_namelen", r.msg_namelen);
    l.val("msg_flags", r.msg_flags);
    r.msg_namelen = sizeof(name);
    l.rec("recvmsg 6+1000", CALL(recvmsg(s, &r, 0)));
    l.val("msg_namelen", r.msg_namelen);
    l.val("msg_flags", r.msg_flags);
    iovec rest = {in.data() + 1006, 5000};
    r.msg_iov = &rest;
    r.msg_iovlen = 1;
    l.rec("recvmsg rest", CALL(recvmsg(s, &r, 0)));
    l.val("msg_flags", r.msg_flags);
    l.flag("intact", in == all);
    l.rec("recvmsg at EOF", CALL(recvmsg(s, &r, 0)));
}

// Zero-length transfers.
SCENARIO("data.zero_length")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    char buf[8] = {};
    l.rec("send 0", CALL(send(c, buf, 0, 0)));
    l.rec("write 0", CALL(write(c, buf, 0)));
    msghdr m{};
    l.rec("sendmsg no iov", CALL(sendmsg(c, &m, 0)));
    l.rec("recv 0 DONTWAIT on empty", CALL(recv(s, buf, 0, MSG_DONTWAIT)));
    l.txt("srv poll", poll_text(poll_now(s)));
    l.rec("send 5", CALL(send(c, "12345", 5, 0)));
    poll_until(s, POLLIN);
    l.rec("recv 0 with data", CALL(recv(s, buf, 0, 0)));
    l.rec("read 0 with data", CALL(read(s, buf, 0)));
    l.opt("SIOCINQ", inq(s));
    l.rec("recv 8", CALL(recv(s, buf, 8, 0)));
}

// read()/write() on sockets.
SCENARIO("data.read_write_calls")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    std::vector<char> out(3000);
    pattern_fill(8, 0, out.data(), out.size());
    l.rec("write 3000", CALL(write(c, out.data(), out.size())));
    l.rec("close", CALL(close(c.release())));
    wait_fin(l, s);
    std::vector<char> in(4000);
    l.rec("read 4000", CALL(read(s, in.data(), in.size())));
    l.flag("intact", memcmp(in.data(), out.data(), out.size()) == 0);
    l.rec("read at EOF", CALL(read(s, in.data(), in.size())));
}

// EOF is sticky.
SCENARIO("data.recv_after_eof_repeats")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    l.rec("close client", CALL(close(c.release())));
    wait_fin(l, s);
    char b = 0;
    for (int i = 0; i < 3; i++)
        l.rec("recv", CALL(recv(s, &b, 1, 0)));
    l.rec("recv DONTWAIT", CALL(recv(s, &b, 1, MSG_DONTWAIT)));
    l.rec("recv WAITALL", CALL(recv(s, &b, 1, MSG_WAITALL)));
    l.txt("poll", poll_text(poll_now(s)));
    l.opt("SIOCINQ", inq(s));
}

// One large blocking send returns only when all of it is queued.
SCENARIO("data.large_single_send")
{
    Lane& cli = ctx.lane("cli");
    Lane& srv = ctx.lane("srv");
    Ctx::Pair p = ctx.pair(cli);
    Fd c(p.cli);
    Fd s(p.srv);
    const auto size = static_cast<size_t>(4 * 1024 * 1024 * std::min(ctx.scale(), 4.0));
    std::vector<char> out(size);
    pattern_fill(9, 0, out.data(), out.size());
    Drain d;
    Thread t([&] { d = drain(s); });
    cli.flag("send returns full size",
             send(c, out.data(), out.size(), 0) == static_cast<ssize_t>(size));
    cli.rec("shutdown WR", CALL(shutdown(c, SHUT_WR)));
    t.join();
    srv.txt("end", d.end);
    srv.flag("bytes == size", d.bytes == size);
    srv.flag("hash matches", d.hash == fnv(out.data(), out.size()));
}

// recv() with a buffer much larger than the data.
SCENARIO("data.large_recv_buffer")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    char out[100];
    pattern_fill(10, 0, out, sizeof(out));
    l.rec("send 100", CALL(send(c, out, sizeof(out), 0)));
    l.rec("shutdown WR", CALL(shutdown(c, SHUT_WR)));
    wait_fin(l, s);
    std::vector<char> in(1 << 20);
    l.rec("recv 1 MiB", CALL(recv(s, in.data(), in.size(), 0)));
    l.flag("intact", memcmp(in.data(), out, sizeof(out)) == 0);
}

// Both directions at once with small messages: request/response loop.
SCENARIO("data.ping_pong_200")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    Thread echo([&] {
        char buf[64];
        for (;;) {
            const size_t n = recv_exact(s, buf, 16);
            if (n != 16 || !send_all(s, buf, 16))
                return;
        }
    });
    int good = 0;
    for (uint64_t i = 0; i < 200; i++) {
        char out[16];
        char in[16];
        pattern_fill(11, i * 16, out, 16);
        if (send_all(c, out, 16) && recv_exact(c, in, 16) == 16 && memcmp(in, out, 16) == 0)
            good++;
    }
    l.val("round trips", good);
    l.rec("shutdown WR", CALL(shutdown(c, SHUT_WR)));
}

} // namespace sdp::conformance
