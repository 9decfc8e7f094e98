// SPDX-License-Identifier: GPL-2.0
//
// Socket options and ioctls.
#include "conformance.h"

#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

namespace sdp::conformance {
namespace {

std::string tv_text(int fd, int name)
{
    timeval tv{};
    socklen_t len = sizeof(tv);
    const Res r = CALL(getsockopt(fd, SOL_SOCKET, name, &tv, &len));
    if (!r.ok())
        return res_text(r);
    return std::to_string(tv.tv_sec) + "s " + std::to_string(tv.tv_usec) +
           "us len=" + std::to_string(len);
}

std::string linger_text(int fd)
{
    linger lg{-1, -1};
    socklen_t len = sizeof(lg);
    const Res r = CALL(getsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, &len));
    if (!r.ok())
        return res_text(r);
    return "{" + std::to_string(lg.l_onoff) + "," + std::to_string(lg.l_linger) + "}";
}

long long ms_since(std::chrono::steady_clock::time_point t)
{
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 t)
        .count();
}

} // namespace

// SO_RCVTIMEO: recv() and accept() give up with EAGAIN.
SCENARIO("opt.so_rcvtimeo")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    l.txt("default", tv_text(s, SO_RCVTIMEO));
    const timeval tv{0, 200000};
    l.rec("set 200 ms", CALL(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv))));
    l.txt("get", tv_text(s, SO_RCVTIMEO));
    l.rec("set short optlen", CALL(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, 4)));
    char b = 0;
    auto t0 = std::chrono::steady_clock::now();
    l.rec("recv on empty", CALL(recv(s, &b, 1, 0)));
    l.flag("waited >= 150 ms", ms_since(t0) >= 150);
    l.rec("recv WAITALL on empty", CALL(recv(s, &b, 1, MSG_WAITALL)));
    l.rec("send", CALL(send(c, "r", 1, 0)));
    l.rec("recv with data", CALL(recv(s, &b, 1, 0)));
    const Addr a = ctx.addr(Host::kA, 1);
    Fd ls(ctx.listener(l, a));
    l.rec("listener set 200 ms", CALL(setsockopt(ls, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv))));
    t0 = std::chrono::steady_clock::now();
    l.rec_fd("accept with nothing pending", CALL(accept(ls, nullptr, nullptr)));
    l.flag("waited >= 150 ms", ms_since(t0) >= 150);
}

// SO_SNDTIMEO: a blocking send into a full buffer gives up.
SCENARIO("opt.so_sndtimeo")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    l.txt("default", tv_text(c, SO_SNDTIMEO));
    const timeval tv{0, 200000};
    l.rec("set 200 ms", CALL(setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv))));
    l.txt("get", tv_text(c, SO_SNDTIMEO));
    std::vector<char> buf(65536, 's');
    Res last;
    uint64_t sent = 0;
    for (int i = 0; i < 4096; i++) {
        last = CALL(send(c, buf.data(), buf.size(), MSG_NOSIGNAL));
        if (!last.ok())
            break;
        sent += static_cast<uint64_t>(last.rc);
    }
    l.txt("send into full buffer ends with", last.ok() ? "success" : errname(last.err));
    Drain d;
    {
        Thread reader([&] { d = drain(s); });
        shutdown(c, SHUT_WR);
    }
    l.flag("all delivered", d.bytes == sent);
}

// SO_RCVLOWAT: no POLLIN until that many bytes are queued; a blocking
// recv waits for them.
SCENARIO("opt.so_rcvlowat")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    l.opt("default", int_opt(s, SOL_SOCKET, SO_RCVLOWAT));
    l.rec("set 100", set_int_opt(s, SOL_SOCKET, SO_RCVLOWAT, 100));
    l.opt("get", int_opt(s, SOL_SOCKET, SO_RCVLOWAT));
    std::vector<char> out(110);
    pattern_fill(30, 0, out.data(), out.size());
    l.rec("send 50", CALL(send(c, out.data(), 50, 0)));
    l.flag("50 bytes queued", wait_until([&] { return inq(s) == 50; }));
    l.txt("poll IN 200 ms with 50 queued", poll_text(wait_poll(s, POLLIN, 200)));
    l.txt("poll", poll_text(poll_now(s)));
    l.rec("send 60", CALL(send(c, out.data() + 50, 60, 0)));
    l.txt("poll IN with 110 queued", poll_text(wait_poll(s, POLLIN)));
    std::vector<char> in(200);
    l.rec("recv", CALL(recv(s, in.data(), in.size(), 0)));
    l.flag("intact", memcmp(in.data(), out.data(), out.size()) == 0);
    // A blocking recv waits for lowat bytes.
    Thread t([&] {
        sleep_ms(100);
        send(c, out.data(), 60, 0);
        sleep_ms(100);
        send(c, out.data() + 60, 50, 0);
    });
    l.rec("blocking recv (60 then 50 arrive)", CALL(recv(s, in.data(), in.size(), 0)));
}

// SIOCINQ / FIONREAD once a known number of bytes arrived.
SCENARIO("opt.siocinq")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    l.opt("SIOCINQ empty", inq(s));
    std::vector<char> out(1234, 'i');
    l.rec("send 1234", CALL(send(c, out.data(), out.size(), 0)));
    l.flag("reaches 1234", wait_until([&] { return inq(s) == 1234; }));
    int v = -1;
    l.rec("FIONREAD", CALL(ioctl(s, FIONREAD, &v)));
    l.val("value", v);
    char buf[1000];
    l.rec("recv 1000", CALL(recv(s, buf, sizeof(buf), 0)));
    l.opt("SIOCINQ", inq(s));
    l.rec("cli shutdown WR", CALL(shutdown(c, SHUT_WR)));
    poll_until(s, POLLRDHUP);
    l.opt("SIOCINQ after FIN", inq(s));
    const Addr a = ctx.addr(Host::kA, 1);
    Fd ls(ctx.listener(l, a));
    l.opt("SIOCINQ on listener", inq(ls));
    l.opt("SIOCOUTQ on listener", outq(ls));
}

// SIOCOUTQ / TIOCOUTQ drop to 0 once the peer has everything.
SCENARIO("opt.siocoutq")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    l.opt("SIOCOUTQ idle", outq(c));
    std::vector<char> out(1000, 'o');
    l.rec("send 1000", CALL(send(c, out.data(), out.size(), 0)));
    std::vector<char> in(1000);
    l.flag("peer read all", recv_exact(s, in.data(), in.size()) == in.size());
    l.flag("SIOCOUTQ reaches 0", wait_until([&] { return outq(c) == 0; }));
    int v = -1;
    l.rec("TIOCOUTQ", CALL(ioctl(c, TIOCOUTQ, &v)));
    l.val("value", v);
}

// Keepalive options: defaults, round trips.
SCENARIO46("opt", "keepalive")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    l.opt("SO_KEEPALIVE default", int_opt(c, SOL_SOCKET, SO_KEEPALIVE));
    l.opt("TCP_KEEPIDLE default", int_opt(c, IPPROTO_TCP, TCP_KEEPIDLE));
    l.opt("TCP_KEEPINTVL default", int_opt(c, IPPROTO_TCP, TCP_KEEPINTVL));
    l.opt("TCP_KEEPCNT default", int_opt(c, IPPROTO_TCP, TCP_KEEPCNT));
    l.rec("SO_KEEPALIVE 1", set_int_opt(c, SOL_SOCKET, SO_KEEPALIVE, 1));
    l.rec("TCP_KEEPIDLE 30", set_int_opt(c, IPPROTO_TCP, TCP_KEEPIDLE, 30));
    l.rec("TCP_KEEPINTVL 5", set_int_opt(c, IPPROTO_TCP, TCP_KEEPINTVL, 5));
    l.rec("TCP_KEEPCNT 3", set_int_opt(c, IPPROTO_TCP, TCP_KEEPCNT, 3));
    l.opt("SO_KEEPALIVE", int_opt(c, SOL_SOCKET, SO_KEEPALIVE));
    l.opt("TCP_KEEPIDLE", int_opt(c, IPPROTO_TCP, TCP_KEEPIDLE));
    l.opt("TCP_KEEPINTVL", int_opt(c, IPPROTO_TCP, TCP_KEEPINTVL));
    l.opt("TCP_KEEPCNT", int_opt(c, IPPROTO_TCP, TCP_KEEPCNT));
    l.rec("SO_KEEPALIVE 0", set_int_opt(c, SOL_SOCKET, SO_KEEPALIVE, 0));
    l.opt("SO_KEEPALIVE", int_opt(c, SOL_SOCKET, SO_KEEPALIVE));
    l.opt("TCP_KEEPIDLE kept", int_opt(c, IPPROTO_TCP, TCP_KEEPIDLE));
    // Still a working connection.
    char b = 0;
    l.rec("send", CALL(send(c, "k", 1, 0)));
    l.rec("recv", CALL(recv(s, &b, 1, 0)));
}

// Keepalive options on a socket that is not connected.
SCENARIO("opt.keepalive_unconnected")
{
    Lane& l = ctx.lane("main");
    Fd f(ctx.socket(l));
    l.rec("SO_KEEPALIVE 1", set_int_opt(f, SOL_SOCKET, SO_KEEPALIVE, 1));
    l.rec("TCP_KEEPIDLE 60", set_int_opt(f, IPPROTO_TCP, TCP_KEEPIDLE, 60));
    l.rec("TCP_KEEPINTVL 7", set_int_opt(f, IPPROTO_TCP, TCP_KEEPINTVL, 7));
    l.rec("TCP_KEEPCNT 4", set_int_opt(f, IPPROTO_TCP, TCP_KEEPCNT, 4));
    l.opt("SO_KEEPALIVE", int_opt(f, SOL_SOCKET, SO_KEEPALIVE));
    l.opt("TCP_KEEPIDLE", int_opt(f, IPPROTO_TCP, TCP_KEEPIDLE));
    l.opt("TCP_KEEPINTVL", int_opt(f, IPPROTO_TCP, TCP_KEEPINTVL));
    l.opt("TCP_KEEPCNT", int_opt(f, IPPROTO_TCP, TCP_KEEPCNT));
}

// Out-of-range keepalive values and short option lengths.
SCENARIO("opt.keepalive_invalid")
{
    Lane& l = ctx.lane("main");
    Fd f(ctx.socket(l));
    l.rec("TCP_KEEPIDLE 0", set_int_opt(f, IPPROTO_TCP, TCP_KEEPIDLE, 0));
    l.rec("TCP_KEEPIDLE -1", set_int_opt(f, IPPROTO_TCP, TCP_KEEPIDLE, -1));
    l.rec("TCP_KEEPIDLE 32767", set_int_opt(f, IPPROTO_TCP, TCP_KEEPIDLE, 32767));
    l.rec("TCP_KEEPIDLE 32768", set_int_opt(f, IPPROTO_TCP, TCP_KEEPIDLE, 32768));
    l.rec("TCP_KEEPINTVL 0", set_int_opt(f, IPPROTO_TCP, TCP_KEEPINTVL, 0));
    l.rec("TCP_KEEPINTVL 32768", set_int_opt(f, IPPROTO_TCP, TCP_KEEPINTVL, 32768));
    l.rec("TCP_KEEPCNT 0", set_int_opt(f, IPPROTO_TCP, TCP_KEEPCNT, 0));
    l.rec("TCP_KEEPCNT 127", set_int_opt(f, IPPROTO_TCP, TCP_KEEPCNT, 127));
    l.rec("TCP_KEEPCNT 128", set_int_opt(f, IPPROTO_TCP, TCP_KEEPCNT, 128));
    l.opt("TCP_KEEPIDLE", int_opt(f, IPPROTO_TCP, TCP_KEEPIDLE));
    l.opt("TCP_KEEPCNT", int_opt(f, IPPROTO_TCP, TCP_KEEPCNT));
    const char one = 1;
    l.rec("TCP_KEEPIDLE optlen 1", CALL(setsockopt(f, IPPROTO_TCP, TCP_KEEPIDLE, &one, 1)));
    l.rec("SO_KEEPALIVE optlen 1", CALL(setsockopt(f, SOL_SOCKET, SO_KEEPALIVE, &one, 1)));
    int v = 0;
    socklen_t len = 0;
    l.rec("getsockopt TCP_KEEPCNT optlen 0",
          CALL(getsockopt(f, IPPROTO_TCP, TCP_KEEPCNT, &v, &len)));
    l.val("optlen", len);
}

// TCP_NODELAY round trip; data still flows.
SCENARIO("opt.tcp_nodelay")
{
    Lane& l = ctx.lane("main");
    Fd f(ctx.socket(l));
    l.opt("fresh default", int_opt(f, IPPROTO_TCP, TCP_NODELAY));
    l.rec("set 1 unconnected", set_int_opt(f, IPPROTO_TCP, TCP_NODELAY, 1));
    l.opt("get", int_opt(f, IPPROTO_TCP, TCP_NODELAY));
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    l.opt("connected default", int_opt(c, IPPROTO_TCP, TCP_NODELAY));
    l.rec("set 1", set_int_opt(c, IPPROTO_TCP, TCP_NODELAY, 1));
    l.opt("get", int_opt(c, IPPROTO_TCP, TCP_NODELAY));
    l.rec("set 5", set_int_opt(c, IPPROTO_TCP, TCP_NODELAY, 5));
    l.opt("get", int_opt(c, IPPROTO_TCP, TCP_NODELAY));
    int good = 0;
    for (int i = 0; i < 50; i++) {
        char b = static_cast<char>(i);
        char r = 0;
        good += (send(c, &b, 1, 0) == 1 && recv(s, &r, 1, 0) == 1 && r == b) ? 1 : 0;
    }
    l.val("small messages", good);
    l.rec("set 0", set_int_opt(c, IPPROTO_TCP, TCP_NODELAY, 0));
    l.opt("get", int_opt(c, IPPROTO_TCP, TCP_NODELAY));
}

// TCP_CORK: corked pieces arrive intact after uncorking.
SCENARIO("opt.tcp_cork")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    l.opt("default", int_opt(c, IPPROTO_TCP, TCP_CORK));
    l.rec("set 1", set_int_opt(c, IPPROTO_TCP, TCP_CORK, 1));
    l.opt("get", int_opt(c, IPPROTO_TCP, TCP_CORK));
    std::vector<char> out(3000);
    pattern_fill(31, 0, out.data(), out.size());
    for (int i = 0; i < 3; i++)
        l.rec("send 1000", CALL(send(c, out.data() + static_cast<ptrdiff_t>(i) * 1000, 1000, 0)));
    l.rec("set 0", set_int_opt(c, IPPROTO_TCP, TCP_CORK, 0));
    l.opt("get", int_opt(c, IPPROTO_TCP, TCP_CORK));
    std::vector<char> in(3000);
    l.flag("recv all", recv_exact(s, in.data(), in.size()) == in.size());
    l.flag("intact", in == out);
    // Corked data is also flushed by close().
    l.rec("set 1 again", set_int_opt(c, IPPROTO_TCP, TCP_CORK, 1));
    l.rec("send 7", CALL(send(c, "corked!", 7, 0)));
    l.rec("close", CALL(close(c.release())));
    Drain d = drain(s);
    l.val("bytes after close", static_cast<long long>(d.bytes));
    l.txt("end", d.end);
}

// MSG_MORE pieces arrive intact.
SCENARIO("opt.msg_more")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    std::vector<char> out(4000);
    pattern_fill(32, 0, out.data(), out.size());
    l.rec("send 100 MORE", CALL(send(c, out.data(), 100, MSG_MORE)));
    l.rec("send 900 MORE", CALL(send(c, out.data() + 100, 900, MSG_MORE)));
    l.rec("send 2000 MORE", CALL(send(c, out.data() + 1000, 2000, MSG_MORE)));
    l.rec("send 1000", CALL(send(c, out.data() + 3000, 1000, 0)));
    std::vector<char> in(4000);
    l.flag("recv all", recv_exact(s, in.data(), in.size()) == in.size());
    l.flag("intact", in == out);
    l.rec("send 5 MORE then shutdown", CALL(send(c, "more!", 5, MSG_MORE)));
    l.rec("shutdown WR", CALL(shutdown(c, SHUT_WR)));
    Drain d = drain(s);
    l.val("bytes", static_cast<long long>(d.bytes));
    l.txt("end", d.end);
}

// SO_TYPE, SO_PROTOCOL, SO_DOMAIN, SO_ACCEPTCONN.
SCENARIO46("opt", "socket_identity")
{
    Lane& l = ctx.lane("main");
    Fd f(ctx.socket(l));
    l.opt("SO_TYPE", int_opt(f, SOL_SOCKET, SO_TYPE));
    // TCP's for inet and AF_INET_SDP, IPPROTO_SDP's for IPPROTO_SDP sockets.
    l.flag("SO_PROTOCOL is the stream protocol",
           int_opt(f, SOL_SOCKET, SO_PROTOCOL) == ctx.stream_protocol());
    l.flag("SO_DOMAIN is the socket() family", int_opt(f, SOL_SOCKET, SO_DOMAIN) == ctx.domain());
    l.opt("SO_ACCEPTCONN", int_opt(f, SOL_SOCKET, SO_ACCEPTCONN));
    l.rec("set SO_TYPE", set_int_opt(f, SOL_SOCKET, SO_TYPE, SOCK_DGRAM));
    const Addr a = ctx.addr(Host::kA, 0);
    Fd ls(ctx.listener(l, a));
    l.opt("listener SO_ACCEPTCONN", int_opt(ls, SOL_SOCKET, SO_ACCEPTCONN));
    Ctx::Pair p = ctx.pair_via(l, ls, a);
    Fd c(p.cli);
    Fd s(p.srv);
    l.opt("accepted SO_TYPE", int_opt(s, SOL_SOCKET, SO_TYPE));
    l.flag("accepted SO_PROTOCOL is the stream protocol",
           int_opt(s, SOL_SOCKET, SO_PROTOCOL) == ctx.stream_protocol(true));
    l.flag("accepted SO_DOMAIN is the socket() family",
           int_opt(s, SOL_SOCKET, SO_DOMAIN) == ctx.domain());
    l.opt("accepted SO_ACCEPTCONN", int_opt(s, SOL_SOCKET, SO_ACCEPTCONN));
}

// SO_SNDBUF/SO_RCVBUF set and get (the kernel doubles the value).
SCENARIO("opt.sndbuf_rcvbuf")
{
    Lane& l = ctx.lane("main");
    Fd f(ctx.socket(l));
    l.rec("SO_SNDBUF 65536", set_int_opt(f, SOL_SOCKET, SO_SNDBUF, 65536));
    l.opt("SO_SNDBUF", int_opt(f, SOL_SOCKET, SO_SNDBUF));
    l.rec("SO_RCVBUF 65536", set_int_opt(f, SOL_SOCKET, SO_RCVBUF, 65536));
    l.opt("SO_RCVBUF", int_opt(f, SOL_SOCKET, SO_RCVBUF));
    l.rec("SO_SNDBUF 1", set_int_opt(f, SOL_SOCKET, SO_SNDBUF, 1));
    l.opt("SO_SNDBUF min", int_opt(f, SOL_SOCKET, SO_SNDBUF));
    l.rec("SO_RCVBUF 1", set_int_opt(f, SOL_SOCKET, SO_RCVBUF, 1));
    l.opt("SO_RCVBUF min", int_opt(f, SOL_SOCKET, SO_RCVBUF));
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    l.rec("connected SO_SNDBUF 32768", set_int_opt(c, SOL_SOCKET, SO_SNDBUF, 32768));
    l.opt("SO_SNDBUF", int_opt(c, SOL_SOCKET, SO_SNDBUF));
    l.rec("connected SO_RCVBUF 32768", set_int_opt(s, SOL_SOCKET, SO_RCVBUF, 32768));
    l.opt("SO_RCVBUF", int_opt(s, SOL_SOCKET, SO_RCVBUF));
    // Small buffers still carry data.
    std::vector<char> out(200000);
    pattern_fill(33, 0, out.data(), out.size());
    Drain d;
    {
        Thread t([&] { d = drain(s); });
        send_all(c, out.data(), out.size());
        shutdown(c, SHUT_WR);
    }
    l.val("bytes", static_cast<long long>(d.bytes));
    l.flag("intact", d.hash == fnv(out.data(), out.size()));
}

// Boolean and struct options round trip.
SCENARIO("opt.roundtrips")
{
    Lane& l = ctx.lane("main");
    Fd f(ctx.socket(l));
    l.opt("SO_REUSEADDR default", int_opt(f, SOL_SOCKET, SO_REUSEADDR));
    l.rec("SO_REUSEADDR 1", set_int_opt(f, SOL_SOCKET, SO_REUSEADDR, 1));
    l.opt("SO_REUSEADDR", int_opt(f, SOL_SOCKET, SO_REUSEADDR));
    l.rec("SO_REUSEADDR 0", set_int_opt(f, SOL_SOCKET, SO_REUSEADDR, 0));
    l.opt("SO_REUSEADDR", int_opt(f, SOL_SOCKET, SO_REUSEADDR));
    l.txt("SO_LINGER default", linger_text(f));
    const linger lg{1, 5};
    l.rec("SO_LINGER {1,5}", CALL(setsockopt(f, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg))));
    l.txt("SO_LINGER", linger_text(f));
    const linger off{0, 7};
    l.rec("SO_LINGER {0,7}", CALL(setsockopt(f, SOL_SOCKET, SO_LINGER, &off, sizeof(off))));
    l.txt("SO_LINGER", linger_text(f));
    l.rec("SO_LINGER short optlen", CALL(setsockopt(f, SOL_SOCKET, SO_LINGER, &lg, 4)));
    l.opt("SO_OOBINLINE default", int_opt(f, SOL_SOCKET, SO_OOBINLINE));
    l.rec("SO_OOBINLINE 1", set_int_opt(f, SOL_SOCKET, SO_OOBINLINE, 1));
    l.opt("SO_OOBINLINE", int_opt(f, SOL_SOCKET, SO_OOBINLINE));
    l.opt("SO_ERROR", int_opt(f, SOL_SOCKET, SO_ERROR));
    l.opt("unknown SOL_SOCKET option", int_opt(f, SOL_SOCKET, 9999));
    l.opt("unknown IPPROTO_TCP option", int_opt(f, IPPROTO_TCP, 9999));
    l.rec("set unknown IPPROTO_TCP option", set_int_opt(f, IPPROTO_TCP, 9999, 1));
}

// Options set on a listener are inherited by accepted sockets.
SCENARIO("opt.inherited_by_accept")
{
    Lane& l = ctx.lane("main");
    const Addr a = ctx.addr(Host::kA, 0);
    Fd ls(ctx.socket(l));
    set_int_opt(ls, SOL_SOCKET, SO_REUSEADDR, 1);
    l.rec("SO_KEEPALIVE 1", set_int_opt(ls, SOL_SOCKET, SO_KEEPALIVE, 1));
    l.rec("TCP_KEEPIDLE 77", set_int_opt(ls, IPPROTO_TCP, TCP_KEEPIDLE, 77));
    l.rec("TCP_KEEPINTVL 11", set_int_opt(ls, IPPROTO_TCP, TCP_KEEPINTVL, 11));
    l.rec("TCP_KEEPCNT 5", set_int_opt(ls, IPPROTO_TCP, TCP_KEEPCNT, 5));
    l.rec("TCP_NODELAY 1", set_int_opt(ls, IPPROTO_TCP, TCP_NODELAY, 1));
    l.rec("SO_OOBINLINE 1", set_int_opt(ls, SOL_SOCKET, SO_OOBINLINE, 1));
    const linger lg{1, 3};
    l.rec("SO_LINGER {1,3}", CALL(setsockopt(ls, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg))));
    l.rec("SO_RCVBUF 65536", set_int_opt(ls, SOL_SOCKET, SO_RCVBUF, 65536));
    const timeval tv{1, 500000};
    l.rec("SO_RCVTIMEO 1.5 s", CALL(setsockopt(ls, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv))));
    l.rec("bind", CALL(bind(ls, a.sa(), a.len)));
    l.rec("listen", CALL(listen(ls, 4)));
    Ctx::Pair p = ctx.pair_via(l, ls, a);
    Fd c(p.cli);
    Fd s(p.srv);
    l.opt("SO_KEEPALIVE", int_opt(s, SOL_SOCKET, SO_KEEPALIVE));
    l.opt("TCP_KEEPIDLE", int_opt(s, IPPROTO_TCP, TCP_KEEPIDLE));
    l.opt("TCP_KEEPINTVL", int_opt(s, IPPROTO_TCP, TCP_KEEPINTVL));
    l.opt("TCP_KEEPCNT", int_opt(s, IPPROTO_TCP, TCP_KEEPCNT));
    l.opt("TCP_NODELAY", int_opt(s, IPPROTO_TCP, TCP_NODELAY));
    l.opt("SO_OOBINLINE", int_opt(s, SOL_SOCKET, SO_OOBINLINE));
    l.txt("SO_LINGER", linger_text(s));
    l.opt("SO_RCVBUF", int_opt(s, SOL_SOCKET, SO_RCVBUF));
    l.txt("SO_RCVTIMEO", tv_text(s, SO_RCVTIMEO));
    l.opt("SO_REUSEADDR", int_opt(s, SOL_SOCKET, SO_REUSEADDR));
}

// FIONBIO toggles O_NONBLOCK.
SCENARIO("opt.fionbio")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    int on = 1;
    l.rec("FIONBIO 1", CALL(ioctl(s, FIONBIO, &on)));
    l.flag("O_NONBLOCK", is_nonblock(s));
    char b = 0;
    l.rec("recv", CALL(recv(s, &b, 1, 0)));
    on = 0;
    l.rec("FIONBIO 0", CALL(ioctl(s, FIONBIO, &on)));
    l.flag("O_NONBLOCK", is_nonblock(s));
    l.rec("send", CALL(send(c, "n", 1, 0)));
    l.rec("recv", CALL(recv(s, &b, 1, 0)));
}

} // namespace sdp::conformance
