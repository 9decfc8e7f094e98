// SPDX-License-Identifier: GPL-2.0
//
// sdp-decode: print SDP messages given as hex, one per line, with every field
// named.  For people reading captures; see usage() and userlib/README.md.
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>

#include "sdp_decode_lib.h"

namespace {

void usage(std::ostream& os)
{
    os << "usage: sdp-decode [-h|--help] [FILE]\n"
          "\n"
          "Decode SDP messages written as hex, one message per line, from FILE or\n"
          "standard input (FILE \"-\" or absent).  Bytes are pairs of hex digits;\n"
          "whitespace and ':' may separate them, '#' starts a comment.  This is the\n"
          "form of tshark -T fields -e data applied to the SDP payload of a RoCE or\n"
          "IB SEND, or of the CM private data for Hello/HelloAck.\n"
          "\n"
          "Prints one line per message with every field named, or\n"
          "\"line N: <error> (<message>)\" for a message that does not decode.\n"
          "\n"
          "Exit status: 0 all messages decoded, 1 some message did not decode,\n"
          "2 usage error, unreadable input or a line that is not valid hex.\n";
}

} // namespace

int main(int argc, char** argv)
{
    const char* path = nullptr;
    bool options_done = false;
    for (int i = 1; i < argc; i++) {
        const std::string_view arg = argv[i];
        if (!options_done && (arg == "-h" || arg == "--help")) {
            usage(std::cout);
            return sdp::tools::kExitOk;
        }
        if (!options_done && arg == "--") {
            options_done = true;
            continue;
        }
        if (!options_done && arg.size() > 1 && arg[0] == '-') {
            std::cerr << "sdp-decode: unknown option " << arg << "\n";
            usage(std::cerr);
            return sdp::tools::kExitUsage;
        }
        if (path != nullptr) {
            std::cerr << "sdp-decode: more than one input file\n";
            usage(std::cerr);
            return sdp::tools::kExitUsage;
        }
        path = argv[i];
    }

    if (path == nullptr || std::string_view(path) == "-")
        return sdp::tools::decode_stream(std::cin, std::cout, std::cerr);

    std::ifstream file(path);
    if (!file) {
        std::cerr << "sdp-decode: cannot open " << path << ": " << std::strerror(errno) << "\n";
        return sdp::tools::kExitUsage;
    }
    return sdp::tools::decode_stream(file, std::cout, std::cerr);
}
