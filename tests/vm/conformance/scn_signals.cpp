// SPDX-License-Identifier: GPL-2.0
//
// Signals interrupting blocked socket calls: EINTR without SA_RESTART,
// transparent restart with it, and no restart when a timeout is set.
#include "conformance.h"

#include <atomic>
#include <csignal>
#include <pthread.h>
#include <unistd.h>
#include <vector>

namespace sdp::conformance {
namespace {

std::atomic<int> g_signals{0};

void on_signal(int /*sig*/)
{
    g_signals++;
}

void install(bool restart)
{
    g_signals = 0;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sa.sa_flags = restart ? SA_RESTART : 0;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, nullptr);
}

// Signals the thread every 20 ms until `done` or for `ms` milliseconds.
void pester(Thread& t, const std::atomic<bool>& done, int ms)
{
    for (int waited = 0; waited < ms && !done.load(); waited += 20) {
        pthread_kill(t.handle(), SIGUSR1);
        sleep_ms(20);
    }
}

// Fills the send buffer (the peer does not read) until even a 1-byte send
// fails: TCP accepts small sends into a partly filled last segment after a
// large one failed, so each size down to 1 byte is pushed until EAGAIN, and
// the whole is repeated until three rounds 150 ms apart accept nothing (a
// zero-window probe can still open a little room after the first; over SDP
// with MSG_ZEROCOPY, offers the peer does not read go on by bcopy after
// zcopy_sink_wait_ms and free the stream for the ring's last room).  The
// pause grows with SDP_VM_WAIT_SCALE.
uint64_t fill_until_stable(int fd)
{
    std::vector<char> buf(65536, 'f');
    uint64_t total = 0;
    int idle_rounds = 0;
    for (int rounds = 0; rounds < 50 && idle_rounds < 3; rounds++) {
        uint64_t this_round = 0;
        for (size_t chunk = buf.size(); chunk > 0; chunk /= 4) {
            for (int i = 0; i < 4096; i++) {
                const ssize_t n = send(fd, buf.data(), chunk, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n <= 0)
                    break;
                this_round += static_cast<uint64_t>(n);
            }
        }
        total += this_round;
        idle_rounds = this_round == 0 ? idle_rounds + 1 : 0;
        sleep_ms(150 * config().wait_scale);
    }
    return total;
}

} // namespace

// recv() blocked, a signal without SA_RESTART: EINTR; the socket is fine.
SCENARIO("sig.recv_eintr")
{
    Lane& l = ctx.lane("main");
    Lane& b = ctx.lane("blocked");
    install(false);
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    std::atomic<bool> done{false};
    Thread t([&] {
        char buf[4];
        b.rec("recv", CALL(recv(s, buf, sizeof(buf), 0)));
        done = true;
    });
    pester(t, done, 10000);
    t.join();
    l.flag("handler ran", g_signals.load() > 0);
    l.rec("send", CALL(send(c, "data", 4, 0)));
    char buf[4];
    l.rec("recv after EINTR", CALL(recv(s, buf, sizeof(buf), MSG_WAITALL)));
}

// With SA_RESTART the blocked recv() continues and returns the data.
SCENARIO("sig.recv_restart")
{
    Lane& l = ctx.lane("main");
    Lane& b = ctx.lane("blocked");
    install(true);
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    std::atomic<bool> done{false};
    Thread t([&] {
        char buf[8] = {};
        b.rec("recv", CALL(recv(s, buf, 4, 0)));
        b.txt("data", buf);
        done = true;
    });
    pester(t, done, 300);
    l.flag("handler ran", g_signals.load() > 0);
    l.flag("recv still blocked", !done.load());
    l.rec("send", CALL(send(c, "data", 4, 0)));
    t.join();
}

// With SO_RCVTIMEO set, SA_RESTART does not restart recv(): EINTR.
SCENARIO("sig.recv_timeout_not_restarted")
{
    Lane& l = ctx.lane("main");
    Lane& b = ctx.lane("blocked");
    install(true);
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    const timeval tv{20, 0};
    l.rec("SO_RCVTIMEO 20 s", CALL(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv))));
    std::atomic<bool> done{false};
    Thread t([&] {
        char buf[4];
        b.rec("recv", CALL(recv(s, buf, sizeof(buf), 0)));
        done = true;
    });
    pester(t, done, 10000);
    t.join();
    l.flag("handler ran", g_signals.load() > 0);
}

// accept() blocked: EINTR without SA_RESTART.
SCENARIO("sig.accept_eintr")
{
    Lane& l = ctx.lane("main");
    Lane& b = ctx.lane("blocked");
    install(false);
    const Addr a = ctx.addr(Host::kA, 0);
    Fd ls(ctx.listener(l, a));
    std::atomic<bool> done{false};
    Thread t([&] {
        b.rec_fd("accept", CALL(accept(ls, nullptr, nullptr)));
        done = true;
    });
    pester(t, done, 10000);
    t.join();
    l.flag("handler ran", g_signals.load() > 0);
    Ctx::Pair p = ctx.pair_via(l, ls, a);
    Fd c(p.cli);
    Fd s(p.srv);
    l.flag("listener still works", true);
}

// accept() blocked: restarted with SA_RESTART, returns the connection.
SCENARIO("sig.accept_restart")
{
    Lane& l = ctx.lane("main");
    Lane& b = ctx.lane("blocked");
    install(true);
    const Addr a = ctx.addr(Host::kA, 0);
    Fd ls(ctx.listener(l, a));
    std::atomic<bool> done{false};
    Thread t([&] {
        const Res r = b.rec_fd("accept", CALL(accept(ls, nullptr, nullptr)));
        done = true;
        if (r.ok()) {
            char buf[8] = {};
            b.rec("recv", CALL(recv(static_cast<int>(r.rc), buf, 2, MSG_WAITALL)));
            b.txt("data", buf);
            close(static_cast<int>(r.rc));
        }
    });
    pester(t, done, 300);
    l.flag("handler ran", g_signals.load() > 0);
    l.flag("accept still blocked", !done.load());
    Fd c(ctx.socket(l));
    l.rec("connect", CALL(connect(c, a.sa(), a.len)));
    l.rec("send", CALL(send(c, "hi", 2, 0)));
    t.join();
}

// send() blocked on a full buffer: EINTR without SA_RESTART.
SCENARIO("sig.send_eintr")
{
    Lane& l = ctx.lane("main");
    Lane& b = ctx.lane("blocked");
    install(false);
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    const uint64_t filled = fill_until_stable(c);
    l.flag("buffer filled", filled > 0);
    std::atomic<bool> done{false};
    Thread t([&] {
        b.rec("send 1 (blocking)", CALL(send(c, "x", 1, MSG_NOSIGNAL)));
        done = true;
    });
    pester(t, done, 10000);
    t.join();
    l.flag("handler ran", g_signals.load() > 0);
    shutdown(c, SHUT_WR);
    const Drain d = drain(s);
    l.flag("delivered == filled", d.bytes == filled);
}

// send() blocked on a full buffer: restarted with SA_RESTART, completes
// when the peer reads.  (Whether TCP is still blocked when the signals come
// is not recorded: a zero-window probe may open room at any time.)
SCENARIO("sig.send_restart")
{
    Lane& l = ctx.lane("main");
    Lane& b = ctx.lane("blocked");
    install(true);
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    const uint64_t filled = fill_until_stable(c);
    l.flag("buffer filled", filled > 0);
    std::atomic<bool> done{false};
    Thread t([&] {
        b.rec("send 1 (blocking)", CALL(send(c, "x", 1, MSG_NOSIGNAL)));
        done = true;
    });
    pester(t, done, 300);
    l.flag("handler ran", g_signals.load() > 0);
    Drain d;
    {
        Thread reader([&] { d = drain(s); });
        t.join();
        shutdown(c, SHUT_WR);
    }
    l.flag("delivered == filled + 1", d.bytes == filled + 1);
}

// A large blocking send interrupted after it queued part of its data
// returns the partial count (with or without SA_RESTART).
SCENARIO("sig.send_partial_count")
{
    Lane& l = ctx.lane("main");
    Lane& b = ctx.lane("blocked");
    install(true);
    Ctx::Pair p = ctx.pair(l);
    Fd c(p.cli);
    Fd s(p.srv);
    const size_t size = size_t{64} * 1024 * 1024; // more than any socket buffers hold
    std::vector<char> big(size, 'p');
    std::atomic<bool> done{false};
    ssize_t sent = 0;
    Thread t([&] {
        sent = send(c, big.data(), big.size(), MSG_NOSIGNAL);
        const int err = errno;
        b.flag("partial count (0 < n < size)", sent > 0 && static_cast<size_t>(sent) < size);
        if (sent < 0)
            b.txt("error", errname(err));
        done = true;
    });
    sleep_ms(300);
    pester(t, done, 10000);
    t.join();
    l.flag("handler ran", g_signals.load() > 0);
    shutdown(c, SHUT_WR);
    const Drain d = drain(s);
    l.flag("delivered == count", sent > 0 && d.bytes == static_cast<uint64_t>(sent));
}

} // namespace sdp::conformance
