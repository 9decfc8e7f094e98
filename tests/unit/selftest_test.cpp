// SPDX-License-Identifier: GPL-2.0
//
// The known-answer self-check sdp.ko runs at load must pass on the host build
// too: a failure here means the module would refuse to load.
#include "sdp_core.h"

#include <gtest/gtest.h>

namespace {

TEST(CoreSelftest, PassesAndClearsFailedName)
{
    // Start from a non-null name so the test sees the core clear it.
    const char* failed = "not cleared";
    const int rc = sdp_core_selftest(&failed);
    EXPECT_EQ(rc, 0) << "first failing check: " << (failed != nullptr ? failed : "(null)");
    EXPECT_EQ(failed, nullptr);
}

TEST(CoreSelftest, IsRepeatable)
{
    // It keeps no state between runs, so any run gives the same verdict.
    for (int i = 0; i < 3; i++) {
        const char* failed = "not cleared";
        EXPECT_EQ(sdp_core_selftest(&failed), 0);
        EXPECT_EQ(failed, nullptr);
    }
}

} // namespace
