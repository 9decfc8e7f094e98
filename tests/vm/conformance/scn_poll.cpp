// SPDX-License-Identifier: GPL-2.0
//
// Readiness: poll, select and epoll (level and edge triggered) in each
// connection state.
#include "conformance.h"

#include <algorithm>
#include <atomic>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <unistd.h>
#include <vector>

namespace sdp::conformance {
namespace {

// Every poll bit, including the ones select() is built from.
int poll_all(int fd)
{
    pollfd p{fd,
             POLLIN | POLLPRI | POLLOUT | POLLRDHUP | POLLRDNORM | POLLRDBAND | POLLWRNORM |
                 POLLWRBAND,
             0};
    while (poll(&p, 1, 0) < 0) {
        if (errno != EINTR)
            return POLLNVAL;
    }
    return p.revents;
}

void masks(Lane& l, const std::string& what, int fd)
{
    l.txt(what + " poll", poll_text(poll_now(fd)));
    l.txt(what + " poll all bits", poll_text(poll_all(fd)));
}

std::string select_text(int fd)
{
    fd_set r;
    fd_set w;
    fd_set e;
    FD_ZERO(&r);
    FD_ZERO(&w);
    FD_ZERO(&e);
    FD_SET(fd, &r);
    FD_SET(fd, &w);
    FD_SET(fd, &e);
    timeval tv{0, 0};
    const Res n = CALL(select(fd + 1, &r, &w, &e, &tv));
    return res_text(n) + " r=" + std::to_string(FD_ISSET(fd, &r)) +
           " w=" + std::to_string(FD_ISSET(fd, &w)) + " e=" + std::to_string(FD_ISSET(fd, &e));
}

class Epoll {
  public:
    explicit Epoll(Lane& l) : l_(l), fd_(epoll_create1(EPOLL_CLOEXEC))
    {
        if (fd_ < 0)
            l.abort("epoll_create1");
    }
    void add(int fd, uint32_t events, uint32_t tag = 0)
    {
        epoll_event ev{};
        ev.events = events;
        ev.data.u32 = tag;
        l_.rec("epoll_ctl ADD " + epoll_text(events), CALL(epoll_ctl(fd_, EPOLL_CTL_ADD, fd, &ev)));
    }
    void mod(int fd, uint32_t events)
    {
        epoll_event ev{};
        ev.events = events;
        l_.rec("epoll_ctl MOD " + epoll_text(events), CALL(epoll_ctl(fd_, EPOLL_CTL_MOD, fd, &ev)));
    }
    // epoll_wait, logged as "n: events[tag] ..." (tags sorted by the kernel order,
    // which is the order events became ready; callers use one fd or sort).
    void wait(const std::string& what, int timeout_ms)
    {
        epoll_event evs[8];
        Res r;
        do {
            r = CALL(epoll_wait(fd_, evs, 8, timeout_ms));
        } while (r.is(EINTR));
        std::string text = res_text(r);
        std::vector<std::string> items;
        for (long i = 0; i < r.rc; i++) {
            items.push_back("[" + std::to_string(evs[i].data.u32) + "]" +
                            epoll_text(evs[i].events));
        }
        std::sort(items.begin(), items.end());
        for (const std::string& it : items)
            text += " " + it;
        l_.txt(what, text);
    }
    // Until epoll_wait reports every one of `tags` (level-triggered
    // entries only), not logged.  poll() can see a socket's new state a
    // moment before the wake-up that queues it for epoll has run on the
    // other CPU: SDP handles the peer's message in its completion work,
    // TCP's loopback in the sender's own call.
    void settle(std::initializer_list<uint32_t> tags, int timeout_ms = 2000)
    {
        wait_until(
            [&] {
                epoll_event evs[8];
                const int n = epoll_wait(fd_, evs, 8, 20);
                for (const uint32_t t : tags) {
                    bool seen = false;
                    for (int i = 0; i < n; i++)
                        seen = seen || evs[i].data.u32 == t;
                    if (!seen)
                        return false;
                }
                return true;
            },
            timeout_ms);
    }
    // Events one epoll_wait returns within timeout_ms, not logged.
    int count(int timeout_ms)
    {
        epoll_event evs[8];
        const int n = epoll_wait(fd_, evs, 8, timeout_ms);
        return n > 0 ? n : 0;
    }
    ~Epoll() { close(fd_); }
    Epoll(const Epoll&) = delete;
    Epoll& operator=(const Epoll&) = delete;

  private:
    Lane& l_;
    int fd_;
};

constexpr uint32_t kEpAll = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI;

} // namespace

SCENARIO46("poll", "idle_connected")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    masks(l, "cli", c);
    masks(l, "srv", s);
    l.txt("srv select", select_text(s));
}

SCENARIO("poll.data_available")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    l.rec("send 10", CALL(send(c, "0123456789", 10, 0)));
    l.txt("wait IN", poll_text(wait_poll(s, POLLIN)));
    masks(l, "srv", s);
    l.txt("srv select", select_text(s));
    char buf[4];
    l.rec("recv 4", CALL(recv(s, buf, 4, 0)));
    masks(l, "srv after partial read", s);
    char rest[16];
    l.rec("recv rest", CALL(recv(s, rest, sizeof(rest), 0)));
    masks(l, "srv after full read", s);
}

SCENARIO46("poll", "peer_shutdown_wr")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    l.rec("cli shutdown WR", CALL(shutdown(c, SHUT_WR)));
    l.txt("wait RDHUP", poll_text(poll_until(s, POLLRDHUP)));
    masks(l, "srv", s);
    masks(l, "cli", c);
    l.txt("srv select", select_text(s));
    l.txt("cli select", select_text(c));
}

SCENARIO("poll.peer_closed")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    l.rec("send 3", CALL(send(c, "abc", 3, 0)));
    l.rec("cli close", CALL(close(c.release())));
    l.txt("wait RDHUP", poll_text(poll_until(s, POLLRDHUP)));
    masks(l, "srv with data and FIN", s);
    char buf[8];
    l.rec("recv", CALL(recv(s, buf, sizeof(buf), 0)));
    masks(l, "srv after read", s);
    l.rec("recv EOF", CALL(recv(s, buf, sizeof(buf), 0)));
    masks(l, "srv after EOF", s);
}

SCENARIO46("poll", "reset")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    const linger lg{1, 0};
    setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    l.rec("cli abort", CALL(close(c.release())));
    l.txt("wait HUP", poll_text(poll_until(s, kClosedMask)));
    masks(l, "srv", s);
    l.txt("srv select", select_text(s));
    l.txt("SO_ERROR", errname(int_opt(s, SOL_SOCKET, SO_ERROR)));
    masks(l, "srv after SO_ERROR", s);
}

SCENARIO46("poll", "listener_pending")
{
    Lane& l = ctx.lane("main");
    const Addr a = ctx.addr(Host::kA, 0);
    Fd ls(ctx.listener(l, a));
    masks(l, "listener idle", ls);
    l.txt("listener select idle", select_text(ls));
    Fd c(ctx.socket(l));
    l.rec("connect", CALL(connect(c, a.sa(), a.len)));
    l.txt("wait IN", poll_text(wait_poll(ls, POLLIN)));
    masks(l, "listener pending", ls);
    l.txt("listener select pending", select_text(ls));
    Fd s(ctx.accept_one(l, ls));
    masks(l, "listener after accept", ls);
}

// A thread blocked in poll() is woken by data, and by the peer's FIN.
SCENARIO("poll.blocking_wakeup")
{
    Lane& srv = ctx.lane("srv");
    Lane& cli = ctx.lane("cli");
    Ctx::Pair p = ctx.pair(srv);
    Fd c(p.cli);
    Fd s(p.srv);
    Thread t([&] {
        sleep_ms(100);
        cli.rec("send", CALL(send(c, "w", 1, 0)));
        sleep_ms(100);
        cli.rec("shutdown WR", CALL(shutdown(c, SHUT_WR)));
    });
    pollfd pf{s, POLLIN, 0};
    srv.rec("poll IN (blocking)", CALL(poll(&pf, 1, 10000)));
    srv.txt("revents", poll_text(pf.revents));
    char b = 0;
    srv.rec("recv", CALL(recv(s, &b, 1, 0)));
    pf = {s, POLLRDHUP, 0};
    srv.rec("poll RDHUP (blocking)", CALL(poll(&pf, 1, 10000)));
    srv.txt("revents", poll_text(pf.revents));
}

// Own shutdowns.
SCENARIO("poll.self_shutdown")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    l.rec("cli shutdown WR", CALL(shutdown(c, SHUT_WR)));
    masks(l, "cli after own WR", c);
    l.rec("cli shutdown RD", CALL(shutdown(c, SHUT_RD)));
    masks(l, "cli after own RD+WR", c);
    l.txt("cli select", select_text(c));
    Ctx::Pair p2 = ctx.pair(l, 1);
    Fd c2(p2.cli);
    Fd s2(p2.srv);
    l.rec("cli2 shutdown RD", CALL(shutdown(c2, SHUT_RD)));
    masks(l, "cli2 after own RD", c2);
}

// Both directions closed: POLLHUP.
SCENARIO46("poll", "both_directions_closed")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    l.rec("cli shutdown WR", CALL(shutdown(c, SHUT_WR)));
    poll_until(s, POLLRDHUP);
    l.rec("srv shutdown WR", CALL(shutdown(s, SHUT_WR)));
    l.txt("cli wait HUP", poll_text(poll_until(c, kClosedMask)));
    l.txt("srv wait HUP", poll_text(poll_until(s, kClosedMask)));
    masks(l, "cli", c);
    masks(l, "srv", s);
}

// Sockets that never connected.
SCENARIO46("poll", "unconnected_sockets")
{
    Lane& l = ctx.lane("main");
    Fd fresh(ctx.socket(l));
    masks(l, "fresh", fresh);
    l.txt("fresh select", select_text(fresh));
    Fd bound(ctx.socket(l));
    const Addr a = ctx.addr(Host::kA, 0);
    l.rec("bind", CALL(bind(bound, a.sa(), a.len)));
    masks(l, "bound", bound);
    l.rec("listen", CALL(listen(bound, 4)));
    masks(l, "listening", bound);
}

SCENARIO("epoll.lt_data")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    Epoll ep(l);
    ep.add(s, kEpAll);
    ep.wait("wait idle", 0);
    l.rec("send 10", CALL(send(c, "0123456789", 10, 0)));
    poll_until(s, POLLIN);
    ep.wait("wait with data", 1000);
    ep.wait("wait with data again", 1000);
    char buf[16];
    l.rec("recv 4", CALL(recv(s, buf, 4, 0)));
    ep.wait("wait after partial read", 0);
    l.rec("recv rest", CALL(recv(s, buf, sizeof(buf), 0)));
    ep.wait("wait after full read", 0);
}

SCENARIO("epoll.et_data")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    Epoll ep(l);
    ep.add(s, kEpAll | EPOLLET);
    ep.wait("wait after ADD", 0);
    ep.wait("wait again", 0);
    l.rec("send 10", CALL(send(c, "0123456789", 10, 0)));
    ep.wait("wait for data", 10000);
    ep.wait("wait again", 0);
    char buf[16];
    l.rec("recv 4", CALL(recv(s, buf, 4, 0)));
    ep.wait("wait after partial read", 0);
    l.rec("send 5 more", CALL(send(c, "abcde", 5, 0)));
    ep.wait("wait for new data", 10000);
    ep.wait("wait again", 0);
    l.rec("recv all", CALL(recv(s, buf, sizeof(buf), 0)));
    ep.wait("wait after read", 0);
    l.rec("cli shutdown WR", CALL(shutdown(c, SHUT_WR)));
    ep.wait("wait for FIN", 10000);
    ep.wait("wait again", 0);
}

// Edge-triggered EPOLLOUT after the send buffer filled and the peer read.
SCENARIO("epoll.et_writable_after_drain")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    set_nonblock(c, true);
    std::vector<char> buf(65536, 'w');
    bool eagain = false;
    uint64_t sent = 0;
    for (int i = 0; i < 4096 && !eagain; i++) {
        const Res r = CALL(send(c, buf.data(), buf.size(), MSG_NOSIGNAL));
        if (r.ok())
            sent += static_cast<uint64_t>(r.rc);
        eagain = r.is(EAGAIN);
    }
    l.flag("EAGAIN reached", eagain);
    Epoll ep(l);
    ep.add(c, EPOLLOUT | EPOLLET);
    Drain d;
    {
        Thread reader([&] {
            sleep_ms(100);
            d = drain(s);
        });
        ep.wait("wait OUT (reader drains)", 10000);
        l.rec("shutdown WR", CALL(shutdown(c, SHUT_WR)));
    }
    l.flag("all delivered", d.bytes == sent);
}

// Input that came and waits unread while one thread blocks in a large
// send and another waits for input in edge-triggered epoll: one event for
// the arrival and none during the send, where the peer's acknowledgements
// (SDP: credits, RDMA completions) are not input.  With the unread bytes
// there, every wake-up of the socket's wait queue that epoll does not
// filter out by its key is an event.
SCENARIO("epoll.et_in_quiet_during_send")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    Epoll ep(l);
    ep.add(c, EPOLLIN | EPOLLET);
    l.rec("srv send 10", CALL(send(s, "0123456789", 10, 0)));
    ep.wait("wait for data", 10000);
    const size_t total = static_cast<size_t>(std::max(1.0, 4 * ctx.scale())) << 20;
    std::vector<char> buf(total);
    pattern_fill(41, 0, buf.data(), buf.size());
    Drain d;
    std::atomic<bool> sending{true};
    int during = 0;
    {
        Thread reader([&] { d = drain(s); });
        Thread watcher([&] {
            while (sending.load())
                during += ep.count(20);
        });
        l.flag("cli sent all", send_all(c, buf.data(), buf.size()));
        // Acknowledged, the last too; the FIN's handshake wakes every
        // waiter (TCP's state changes), so it comes after the watch.
        l.flag("cli all acknowledged", wait_until([&] { return outq(c) == 0; }));
        sending = false;
        watcher.join();
        l.rec("cli shutdown WR", CALL(shutdown(c, SHUT_WR)));
    }
    // With MSG_ZEROCOPY (--zerocopy) each notification wakes the socket
    // and edge-triggered epoll reports the unread input again, with TCP as
    // well, as often as the notifications' timing makes it.
    if (!zerocopy_mode())
        l.val("epoll events during the send", during);
    l.check(d.bytes == total && d.hash == fnv(buf.data(), buf.size()), "srv got every byte");
    l.txt("srv drain end", d.end);
    ep.wait("wait after the send", 0);
    char b[16];
    l.rec("cli recv", CALL(recv(c, b, sizeof(b), 0)));
}

SCENARIO("epoll.rdhup")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    Epoll ep(l);
    ep.add(s, EPOLLIN | EPOLLRDHUP);
    ep.wait("wait idle", 0);
    l.rec("cli shutdown WR", CALL(shutdown(c, SHUT_WR)));
    ep.wait("wait RDHUP", 10000);
    ep.wait("wait again (LT)", 0);
}

SCENARIO("epoll.reset")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    Epoll ep(l);
    ep.add(s, EPOLLIN | EPOLLET); // ERR and HUP are always reported
    ep.wait("wait after ADD", 0);
    const linger lg{1, 0};
    setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    l.rec("cli abort", CALL(close(c.release())));
    ep.wait("wait reset", 10000);
    ep.wait("wait again (ET)", 0);
    l.txt("SO_ERROR", errname(int_opt(s, SOL_SOCKET, SO_ERROR)));
}

SCENARIO("epoll.listener")
{
    Lane& l = ctx.lane("main");
    const Addr a = ctx.addr(Host::kA, 0);
    Fd ls(ctx.listener(l, a, 16, true, SOCK_NONBLOCK));
    Epoll ep(l);
    ep.add(ls, EPOLLIN | EPOLLET);
    ep.wait("wait idle", 0);
    Fd c1(ctx.socket(l));
    l.rec("connect 1", CALL(connect(c1, a.sa(), a.len)));
    ep.wait("wait pending", 10000);
    ep.wait("wait again (ET)", 0);
    Fd s1(static_cast<int>(l.rec_fd("accept", CALL(accept(ls, nullptr, nullptr))).rc));
    l.rec_fd("accept empty", CALL(accept(ls, nullptr, nullptr)));
    Fd c2(ctx.socket(l));
    l.rec("connect 2", CALL(connect(c2, a.sa(), a.len)));
    ep.wait("wait pending", 10000);
    Fd s2(static_cast<int>(l.rec_fd("accept", CALL(accept(ls, nullptr, nullptr))).rc));
}

SCENARIO("epoll.oneshot")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    Epoll ep(l);
    ep.add(s, EPOLLIN | EPOLLONESHOT);
    l.rec("send", CALL(send(c, "1", 1, 0)));
    ep.wait("wait data", 10000);
    l.rec("send more", CALL(send(c, "2", 1, 0)));
    poll_until(s, POLLIN);
    sleep_ms(50);
    ep.wait("wait disarmed", 0);
    ep.mod(s, EPOLLIN | EPOLLONESHOT);
    ep.wait("wait rearmed", 1000);
    ep.wait("wait disarmed again", 0);
}

// One epoll set, four connections: only the ones with data report.
SCENARIO("epoll.multiple_sockets")
{
    Lane& l = ctx.lane("main");
    const Addr a = ctx.addr(Host::kA, 0);
    Fd ls(ctx.listener(l, a));
    std::vector<Fd> cli;
    std::vector<Fd> srv;
    Epoll ep(l);
    for (uint32_t i = 0; i < 4; i++) {
        Ctx::Pair p = ctx.pair_via(l, ls, a);
        cli.emplace_back(p.cli);
        srv.emplace_back(p.srv);
        ep.add(p.srv, EPOLLIN, i);
    }
    ep.wait("wait idle", 0);
    l.rec("send on 1", CALL(send(cli[1], "x", 1, 0)));
    l.rec("send on 3", CALL(send(cli[3], "y", 1, 0)));
    poll_until(srv[1], POLLIN);
    poll_until(srv[3], POLLIN);
    ep.settle({1, 3});
    ep.wait("wait", 1000);
    l.rec("close 0", CALL(close(cli[0].release())));
    poll_until(srv[0], POLLRDHUP);
    ep.settle({0, 1, 3});
    ep.wait("wait after close of 0", 1000);
}

// select() readiness in the main states.
SCENARIO("select.states")
{
    Lane& l = ctx.lane("main");
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    l.txt("idle", select_text(s));
    l.rec("send", CALL(send(c, "d", 1, 0)));
    poll_until(s, POLLIN);
    l.txt("data", select_text(s));
    char b = 0;
    l.rec("recv", CALL(recv(s, &b, 1, 0)));
    l.txt("drained", select_text(s));
    l.rec("cli shutdown WR", CALL(shutdown(c, SHUT_WR)));
    poll_until(s, POLLRDHUP);
    l.txt("EOF", select_text(s));
    fd_set r;
    FD_ZERO(&r);
    FD_SET(c, &r);
    timeval tv{0, 100000};
    l.rec("select cli read 100 ms (nothing to read)",
          CALL(select(c + 1, &r, nullptr, nullptr, &tv)));
}

} // namespace sdp::conformance
