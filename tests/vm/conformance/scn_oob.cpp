// SPDX-License-Identifier: GPL-2.0
//
// Urgent data: MSG_OOB, SIOCATMARK, SO_OOBINLINE, POLLPRI, SIGURG.
#include "conformance.h"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <unistd.h>

namespace sdp::conformance {
namespace {

int atmark(int fd)
{
    int v = -1;
    if (ioctl(fd, SIOCATMARK, &v) != 0)
        return -errno;
    return v;
}

std::string text_of(const char* buf, Res r)
{
    return r.rc > 0 ? std::string(buf, static_cast<size_t>(r.rc)) : std::string();
}

// "abc", urgent `urg`, "def", FIN; waits until all of it arrived.
void send_with_urgent(Lane& l, int c, int s, const char* urg)
{
    l.rec("send abc", CALL(send(c, "abc", 3, 0)));
    l.rec(std::string("send ") + urg + " OOB", CALL(send(c, urg, strlen(urg), MSG_OOB)));
    l.rec("send def", CALL(send(c, "def", 3, 0)));
    l.rec("shutdown WR", CALL(shutdown(c, SHUT_WR)));
    const int ev = poll_until(s, POLLIN | POLLRDHUP);
    if ((ev & POLLRDHUP) == 0)
        l.abort("FIN did not arrive: " + poll_text(ev));
}

void recv_rec(Lane& l, const char* what, int fd, size_t len, int flags)
{
    char buf[64];
    const Res r = l.rec(what, CALL(recv(fd, buf, std::min(len, sizeof(buf)), flags)));
    if (r.rc > 0)
        l.txt("  data", text_of(buf, r));
}

std::atomic<int> g_sigurg{0};

void on_sigurg(int /*sig*/)
{
    g_sigurg++;
}

} // namespace

// One urgent byte among normal data: recv stops at the mark, the byte is
// read with MSG_OOB and skipped in the normal stream.
SCENARIO46("oob", "basic")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    send_with_urgent(l, c, s, "X");
    l.opt("SIOCATMARK", atmark(s));
    l.opt("SIOCINQ", inq(s));
    recv_rec(l, "recv 64", s, 64, 0);
    l.opt("SIOCATMARK", atmark(s));
    recv_rec(l, "recv OOB", s, 1, MSG_OOB);
    l.opt("SIOCATMARK", atmark(s));
    recv_rec(l, "recv 64", s, 64, 0);
    recv_rec(l, "recv at EOF", s, 64, 0);
    recv_rec(l, "recv OOB at EOF", s, 1, MSG_OOB);
}

// A multi-byte MSG_OOB send: only its last byte is urgent.
SCENARIO("oob.multibyte")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    send_with_urgent(l, c, s, "XYZ");
    recv_rec(l, "recv 64", s, 64, 0);
    l.opt("SIOCATMARK", atmark(s));
    recv_rec(l, "recv OOB", s, 8, MSG_OOB);
    recv_rec(l, "recv 64", s, 64, 0);
}

// The urgent byte is read before the data in front of it.
SCENARIO("oob.read_oob_first")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    send_with_urgent(l, c, s, "X");
    recv_rec(l, "recv OOB", s, 1, MSG_OOB);
    l.opt("SIOCATMARK", atmark(s));
    recv_rec(l, "recv 64", s, 64, 0);
    l.opt("SIOCATMARK", atmark(s));
    recv_rec(l, "recv 64", s, 64, 0);
    recv_rec(l, "recv OOB again", s, 1, MSG_OOB);
}

// SO_OOBINLINE: the urgent byte stays in the stream, MSG_OOB is refused.
SCENARIO("oob.inline")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    l.rec("SO_OOBINLINE", set_int_opt(s, SOL_SOCKET, SO_OOBINLINE, 1));
    l.opt("SO_OOBINLINE get", int_opt(s, SOL_SOCKET, SO_OOBINLINE));
    send_with_urgent(l, c, s, "X");
    l.opt("SIOCATMARK", atmark(s));
    recv_rec(l, "recv 64", s, 64, 0);
    l.opt("SIOCATMARK", atmark(s));
    recv_rec(l, "recv OOB", s, 1, MSG_OOB);
    recv_rec(l, "recv 64", s, 64, 0);
    l.opt("SIOCATMARK", atmark(s));
    recv_rec(l, "recv at EOF", s, 64, 0);
}

// MSG_OOB when there is no urgent data, and after it was read.
SCENARIO("oob.no_urgent_einval")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    recv_rec(l, "recv OOB on empty", s, 1, MSG_OOB);
    recv_rec(l, "recv OOB|DONTWAIT on empty", s, 1, MSG_OOB | MSG_DONTWAIT);
    l.rec("send normal", CALL(send(c, "abc", 3, 0)));
    poll_until(s, POLLIN);
    recv_rec(l, "recv OOB with normal data", s, 1, MSG_OOB);
    l.opt("SIOCATMARK", atmark(s));
    l.rec("send OOB", CALL(send(c, "U", 1, MSG_OOB)));
    l.txt("poll", poll_text(poll_until(s, POLLPRI)));
    recv_rec(l, "recv OOB", s, 1, MSG_OOB);
    recv_rec(l, "recv OOB again", s, 1, MSG_OOB);
    recv_rec(l, "recv 64", s, 64, 0);
}

// POLLPRI while an urgent byte is pending.
SCENARIO("oob.pollpri")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    l.txt("poll idle", poll_text(poll_now(s)));
    l.rec("send abc", CALL(send(c, "abc", 3, 0)));
    l.rec("send X OOB", CALL(send(c, "X", 1, MSG_OOB)));
    l.txt("poll after urgent", poll_text(poll_until(s, POLLPRI | POLLIN)));
    recv_rec(l, "recv 64", s, 64, 0);
    l.txt("poll at mark", poll_text(poll_now(s)));
    recv_rec(l, "recv OOB", s, 1, MSG_OOB);
    l.txt("poll after OOB read", poll_text(poll_now(s)));
    l.txt("cli poll", poll_text(poll_now(c)));
}

// SIGURG to the F_SETOWN owner when urgent data arrives.
SCENARIO("oob.sigurg")
{
    Lane& l = ctx.lane("main");
    g_sigurg = 0;
    struct sigaction sa {};
    sa.sa_handler = on_sigurg;
    sigaction(SIGURG, &sa, nullptr);
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    l.rec("F_SETOWN", CALL(fcntl(s, F_SETOWN, getpid())));
    l.flag("F_GETOWN is pid", fcntl(s, F_GETOWN) == getpid());
    l.rec("send normal", CALL(send(c, "abc", 3, 0)));
    poll_until(s, POLLIN);
    sleep_ms(50);
    l.val("SIGURG after normal data", g_sigurg.load());
    l.rec("send OOB", CALL(send(c, "X", 1, MSG_OOB)));
    l.flag("SIGURG arrived", wait_until([] { return g_sigurg.load() > 0; }));
    recv_rec(l, "recv 64", s, 64, 0);
    recv_rec(l, "recv OOB", s, 1, MSG_OOB);
    // No owner: no signal.
    Ctx::Pair p2 = ctx.pair(l, 1);
    Fd c2(p2.cli);
    Fd s2(p2.srv);
    const int before = g_sigurg.load();
    l.rec("send OOB without owner", CALL(send(c2, "Y", 1, MSG_OOB)));
    poll_until(s2, POLLPRI);
    sleep_ms(50);
    l.val("SIGURG without owner", g_sigurg.load() - before);
}

// MSG_OOB|MSG_PEEK does not consume the urgent byte.
SCENARIO("oob.peek")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    send_with_urgent(l, c, s, "X");
    recv_rec(l, "peek OOB", s, 1, MSG_OOB | MSG_PEEK);
    recv_rec(l, "peek OOB again", s, 1, MSG_OOB | MSG_PEEK);
    recv_rec(l, "recv OOB", s, 1, MSG_OOB);
    recv_rec(l, "peek OOB after read", s, 1, MSG_OOB | MSG_PEEK);
    recv_rec(l, "peek 64", s, 64, MSG_PEEK);
    recv_rec(l, "recv 64", s, 64, 0);
    recv_rec(l, "recv 64", s, 64, 0);
}

// select(): the exceptfds set reports urgent data.
SCENARIO("oob.select_exceptfds")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    auto sel = [&](const char* what, int timeout_ms) {
        fd_set r;
        fd_set w;
        fd_set e;
        FD_ZERO(&r);
        FD_ZERO(&w);
        FD_ZERO(&e);
        FD_SET(s, &r);
        FD_SET(s, &w);
        FD_SET(s, &e);
        timeval tv{0, timeout_ms * 1000L};
        const Res n = CALL(select(s + 1, &r, &w, &e, &tv));
        l.txt(what, res_text(n) + " r=" + std::to_string(FD_ISSET(s, &r)) + " w=" +
                        std::to_string(FD_ISSET(s, &w)) + " e=" + std::to_string(FD_ISSET(s, &e)));
    };
    sel("select idle", 0);
    l.rec("send OOB", CALL(send(c, "X", 1, MSG_OOB)));
    poll_until(s, POLLPRI);
    sel("select with urgent", 0);
    recv_rec(l, "recv OOB", s, 1, MSG_OOB);
    sel("select after OOB read", 0);
}

// epoll: EPOLLPRI, edge triggered.
SCENARIO("oob.epoll_pri")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    Fd ep(epoll_create1(EPOLL_CLOEXEC));
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLPRI | EPOLLET;
    l.rec("epoll_ctl ADD", CALL(epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev)));
    epoll_event out{};
    l.rec("epoll_wait idle", CALL(epoll_wait(ep, &out, 1, 0)));
    l.rec("send OOB", CALL(send(c, "X", 1, MSG_OOB)));
    const Res n = l.rec("epoll_wait", CALL(epoll_wait(ep, &out, 1, 10000)));
    l.txt("events", n.rc > 0 ? epoll_text(out.events) : "-");
    l.rec("epoll_wait again (ET)", CALL(epoll_wait(ep, &out, 1, 0)));
    recv_rec(l, "recv OOB", s, 1, MSG_OOB);
    l.rec("epoll_wait after read", CALL(epoll_wait(ep, &out, 1, 0)));
}

// Only an urgent byte in the stream: nothing to read in band.
SCENARIO("oob.urgent_only")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    l.rec("send OOB", CALL(send(c, "X", 1, MSG_OOB)));
    l.txt("poll", poll_text(poll_until(s, POLLPRI)));
    l.opt("SIOCATMARK", atmark(s));
    recv_rec(l, "recv DONTWAIT", s, 64, MSG_DONTWAIT);
    recv_rec(l, "recv OOB", s, 1, MSG_OOB);
    l.txt("poll after", poll_text(poll_now(s)));
    recv_rec(l, "recv DONTWAIT", s, 64, MSG_DONTWAIT);
    l.rec("send normal", CALL(send(c, "n", 1, 0)));
    poll_until(s, POLLIN);
    recv_rec(l, "recv", s, 64, 0);
}

// Urgent data sent from the accepting side to the connecting side.
SCENARIO("oob.reverse_direction")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    send_with_urgent(l, s, c, "R");
    recv_rec(l, "recv 64", c, 64, 0);
    l.opt("SIOCATMARK", atmark(c));
    recv_rec(l, "recv OOB", c, 1, MSG_OOB);
    recv_rec(l, "recv 64", c, 64, 0);
}

} // namespace sdp::conformance
