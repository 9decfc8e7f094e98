// SPDX-License-Identifier: GPL-2.0
//
// A deterministic userspace model of two SDP endpoints connected by an RC
// queue pair, each driving its own protocol engine (sdp_core.h) the way the
// kernel glue does (kernel/sdp_tx.c, sdp_rx.c, sdp_qp.c).  Used by
// sim_test.cpp.
//
// Per side, as in the glue:
//   receive ring  R buffers of B bytes (sdp_post_recvs): every free buffer
//                 is posted; messages land in posting order.  A buffer whose
//                 message leaves nothing to read (credit update, DisConn)
//                 goes back to the free list at once (sdp_rx_complete), even
//                 behind unread data; a data buffer is freed once the reader
//                 has consumed it, in stream order (sdp_rx_release_read).  A
//                 data message of at most B/8 payload bytes joins the newest
//                 unread data buffer if it fits there (sdp_rx_coalesce), and
//                 its own buffer is free at once too.  The model keeps its
//                 buffers in a ring of slots; SideConfig::rx_slots_per_buf
//                 can bound the window between the oldest unread data and
//                 the newest posted buffer to replay the earlier glue (one
//                 slot per buffer: freed only in ring order; four: the slot
//                 window), which deadlocks an echo server.
//                 Free buffers are re-posted after every batch of
//                 completions and after every read.
//   send ring     T buffers.  write() fills segments in place: the tail
//                 segment while it is not posted, not urgent and not full,
//                 else a fresh buffer if the ring has one (else the write is
//                 short).  A buffer comes back only when its SEND completes.
//   control ring  C buffers for DisConn and credit updates: data waiting for
//                 credits never blocks them.
//   pump          sdp_push(): post queued segments while the core says
//                 SDP_TX_POST, then at most one control message if one is due
//                 and the control ring has room.  Run after a write fills a
//                 segment and at its end (with CORK for MSG_MORE), after a
//                 read, after every batch of completions, and with PUSH on
//                 uncork and shutdown.
//
// The wire: a SEND goes into the peer's next posted receive buffer, in order,
// reliably.  Its arrival, the peer's polling of the receive completion, the
// ack that generates the sender's send completion, and the sender's polling
// of that completion are separate events, so completions and deliveries
// interleave on both sides in every order the hardware allows.  Send
// completions come in posting order (one send queue for both rings).
//
// Zero copy (SideConfig::zcopy_thresh), as the glue uses it (kernel/
// sdp_tx.c sdp_sendmsg, sdp_zcopy.c):
//   source        a write() of at least zcopy_thresh bytes blocks in
//                 chunks of at most zcopy_chunk (sdp_zc_send): queued
//                 segments are pushed first (the chunk waits while any is
//                 queued).  Then, with no credit for a SrcAvail (core
//                 credits at the reserve) or no room on the control ring,
//                 ONE chunk goes by bcopy instead (normal segments, the
//                 bcopy path's credit rules; the glue's bcopy_budget: whole
//                 segment fills until zcopy_chunk bytes are copied) and zero
//                 copy is tried again for the next.  Else a usable SinkAvail
//                 of the peer (sdp_core_sink_take) is filled by an RDMA
//                 Write, whose RdmaWrCompl control_due() returns, or a
//                 SrcAvail goes and the writer sleeps until the core says
//                 SDP_ZC_DONE (src_acked bytes delivered; after a SendSM the
//                 rest of the write goes by bcopy).  A SrcAvail the core
//                 refuses with ETOOBIG (receive buffers too small for zero-
//                 copy messages) turns the rest of the write to bcopy, and
//                 so does a rest shorter than zcopy_thresh.  A signal may
//                 interrupt the sleep: sdp_core_src_cancel(), wait for DONE,
//                 and the write returns what was delivered (the application
//                 writes the rest later: the stream is the same).
//   sink          a reader with nothing unread reads the peer's SrcAvail by
//                 RDMA Read (rd_start, a later completion event, rd_done),
//                 or abandons it (MSG_PEEK: SendSM, the bytes then come by
//                 bcopy).  An offer nobody reads (the reader is not in the
//                 middle of reading it) may be given up by the grace timer
//                 (net.sdp.zcopy_sink_wait_ms: rsa_abandon, SendSM;
//                 Weights::grace).  A reader about to block for at least
//                 zcopy_thresh bytes may advertise its buffer (SinkAvail)
//                 and sleep until the advertisement is DONE (written into,
//                 or ended by the peer's stream bytes or DisConn), or cancel
//                 it on a signal.  set_reader_waiting() tells the core
//                 whether the reader is in recv() (the send/send deadlock
//                 rule); write_all_before_read keeps it out until its own
//                 writes are done or blocked on anything but its SrcAvail.
//   wire          SrcAvail and SinkAvail spend a credit like data and go on
//                 the control ring; an RDMA Write is ordered with the SENDs
//                 of its side (its bytes land in the advertised buffer when
//                 it arrives, before the RdmaWrCompl behind it), consumes no
//                 receive buffer and completes in send-queue order.
// The model keeps its own account of every registration (key, range, live
// from registration until the owner sees DONE) and of every offer and
// advertisement as decoded from the wire, and checks each RDMA access, each
// zero-copy message and each answer against it (see the zero-copy checks in
// sim_checker.h).
//
// Each step picks one enabled event at random (seeded PRNG).  Every property
// the credit scheme promises is checked on the fly; the first violation stops
// the run with a state dump and the last events (Result::error).
//
// This header is the entry point; the model lives in parts:
//   sim_config.h      Rng, SideConfig, Weights, SideStats, Result
//   sim_world_decl.h  class World: its types, data and member declarations
//   sim_wire.h        what travels: SENDs, RDMA Writes and Reads, arrivals,
//                     acks, the order of send completions
//   sim_host.h        one side as the glue drives it: the rings, the
//                     completions, sdp_push(), the application's reads and
//                     writes, zero copy as source and sink
//   sim_checker.h     the credit properties, the registration and offer
//                     account, the stream bytes, invariants, the state dump
//   sim_scheduler.h   enabled events and their weights, step(), run()
#ifndef SDP_TESTS_UNIT_SIM_WORLD_H
#define SDP_TESTS_UNIT_SIM_WORLD_H

#include "sim_checker.h"
#include "sim_config.h"
#include "sim_host.h"
#include "sim_scheduler.h"
#include "sim_wire.h"
#include "sim_world_decl.h"

#endif // SDP_TESTS_UNIT_SIM_WORLD_H
