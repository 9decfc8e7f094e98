// SPDX-License-Identifier: GPL-2.0
//
// Fixed-width types for the freestanding core.  The core is built with
// -nostdinc inside the kernel, so it cannot include <stdint.h>; the compiler's
// predefined type macros give the same types in the kernel and in userspace.
#ifndef SDP_CORE_TYPES_H
#define SDP_CORE_TYPES_H

namespace sdp {

using u8 = __UINT8_TYPE__;
using u16 = __UINT16_TYPE__;
using u32 = __UINT32_TYPE__;
using u64 = __UINT64_TYPE__;
using s32 = __INT32_TYPE__;
using usize = __SIZE_TYPE__;

static_assert(sizeof(u8) == 1 && sizeof(u16) == 2 && sizeof(u32) == 4 && sizeof(u64) == 8,
              "fixed-width types");

// Big-endian accessors.  Byte at a time: the input is untrusted and may be
// unaligned, and the compiler folds these into single loads/stores + bswap.
inline u16 load_be16(const u8* p)
{
    return static_cast<u16>((p[0] << 8) | p[1]);
}

inline u32 load_be32(const u8* p)
{
    return (static_cast<u32>(p[0]) << 24) | (static_cast<u32>(p[1]) << 16) |
           (static_cast<u32>(p[2]) << 8) | static_cast<u32>(p[3]);
}

inline u64 load_be64(const u8* p)
{
    return (static_cast<u64>(load_be32(p)) << 32) | load_be32(p + 4);
}

inline void store_be16(u8* p, u16 v)
{
    p[0] = static_cast<u8>(v >> 8);
    p[1] = static_cast<u8>(v);
}

inline void store_be32(u8* p, u32 v)
{
    p[0] = static_cast<u8>(v >> 24);
    p[1] = static_cast<u8>(v >> 16);
    p[2] = static_cast<u8>(v >> 8);
    p[3] = static_cast<u8>(v);
}

inline void store_be64(u8* p, u64 v)
{
    store_be32(p, static_cast<u32>(v >> 32));
    store_be32(p + 4, static_cast<u32>(v));
}

} // namespace sdp

#endif // SDP_CORE_TYPES_H
