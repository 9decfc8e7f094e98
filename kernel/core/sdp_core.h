/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C ABI between the C++ protocol core and its hosts: the kernel glue in
 * kernel/ and the userspace tests.  Plain C, no includes, so the kernel C
 * glue can include it without pulling C++ in and the core without pulling
 * kernel headers in.
 */
#ifndef SDP_CORE_H
#define SDP_CORE_H

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Known-answer self-check of the wire codec and credit arithmetic, run by the
 * module at load so a miscompiled core never handles traffic.  Returns 0, or
 * the number of the first failing check with *failed naming it.
 */
int sdp_core_selftest(const char** failed);

#ifdef __cplusplus
}
#endif

#endif /* SDP_CORE_H */
