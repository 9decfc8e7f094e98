# SPDX-License-Identifier: GPL-2.0
"""The plain-number #defines of include/uapi/sdp.h, for the VM tier's Python
programs (socket options, policies, transports)."""
import os
import re

UAPI = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                    "include", "uapi", "sdp.h")


def uapi_constants():
    """The #defines of include/uapi/sdp.h that are plain numbers."""
    consts = {}
    with open(UAPI, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"#define\s+(\w+)\s+(\d+)\b", line)
            if m:
                consts[m.group(1)] = int(m.group(2))
    return consts
