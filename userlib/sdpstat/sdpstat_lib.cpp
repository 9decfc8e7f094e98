// SPDX-License-Identifier: GPL-2.0
#include "sdpstat_lib.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <utility>

namespace sdp::sdpstat {
namespace {

// --- text helpers ----------------------------------------------------------------

bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

bool is_lower(char c)
{
    return c >= 'a' && c <= 'z';
}

bool is_upper(char c)
{
    return c >= 'A' && c <= 'Z';
}

bool starts_with(std::string_view s, std::string_view prefix)
{
    return s.substr(0, prefix.size()) == prefix;
}

std::vector<std::string_view> split_whitespace(std::string_view line)
{
    std::vector<std::string_view> tokens;
    std::size_t pos = 0;
    while (pos < line.size()) {
        while (pos < line.size() && is_space(line[pos]))
            pos++;
        const std::size_t start = pos;
        while (pos < line.size() && !is_space(line[pos]))
            pos++;
        if (pos > start)
            tokens.push_back(line.substr(start, pos - start));
    }
    return tokens;
}

// Calls fn(line_no, line) for every line of `text`; a final newline does not
// start another line.
template <typename Fn> void for_each_line(std::string_view text, Fn fn)
{
    unsigned long line_no = 1;
    std::size_t pos = 0;
    while (pos < text.size()) {
        std::size_t end = text.find('\n', pos);
        if (end == std::string_view::npos)
            end = text.size();
        fn(line_no, text.substr(pos, end - pos));
        line_no++;
        pos = end + 1;
    }
}

// The lines of a /proc table: the first line that is not blank is the
// header, which must start with the words of `start` (errors name it; the
// first word is checked, and with a wrong header the rows are still passed
// on); each later line that is not blank is a row.
// on_header(cols) sees a right header, on_row(line_no, cols) each row.
template <typename Header, typename Row>
void for_each_row(std::string_view text, std::string_view start, std::vector<LineError>* errors,
                  Header on_header, Row on_row)
{
    const std::string hint = "the header line (\"" + std::string(start) + " ...\")";
    const std::string_view first = start.substr(0, start.find(' '));
    bool header_seen = false;
    unsigned long last_line = 0;
    for_each_line(text, [&](unsigned long line_no, std::string_view line) {
        last_line = line_no;
        const std::vector<std::string_view> cols = split_whitespace(line);
        if (cols.empty())
            return;
        if (header_seen) {
            on_row(line_no, cols);
            return;
        }
        header_seen = true;
        if (cols[0] == first)
            on_header(cols);
        else
            errors->push_back({line_no, "expected " + hint});
    });
    if (!header_seen)
        errors->push_back({last_line + 1, "missing " + hint});
}

// A token as it can be shown in an error message: quoted, control and
// non-ASCII bytes escaped so a corrupt file cannot garble the terminal, and
// cut short when long.
std::string quote(std::string_view token)
{
    constexpr std::size_t kMaxShown = 64;
    std::string out = "\"";
    for (std::size_t i = 0; i < token.size() && i < kMaxShown; i++) {
        const auto byte = static_cast<unsigned char>(token[i]);
        if (byte >= 0x20 && byte <= 0x7e && byte != '"' && byte != '\\') {
            out += token[i];
            continue;
        }
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\x%02x", byte);
        out += buf;
    }
    if (token.size() > kMaxShown)
        out += "...";
    return out + "\"";
}

bool is_counter_name(std::string_view name)
{
    if (name.empty() || !is_lower(name[0]))
        return false;
    for (const char c : name) {
        if (!is_lower(c) && !is_digit(c) && c != '_')
            return false;
    }
    return true;
}

bool is_state_name(std::string_view name)
{
    if (name.empty() || !is_upper(name[0]))
        return false;
    for (const char c : name) {
        if (!is_upper(c) && !is_digit(c) && c != '_')
            return false;
    }
    return true;
}

bool is_scope_id(std::string_view scope)
{
    if (scope.empty())
        return false;
    for (const char c : scope) {
        if (!is_lower(c) && !is_upper(c) && !is_digit(c) && c != '_' && c != '.' && c != '-')
            return false;
    }
    return true;
}

// --- tables -------------------------------------------------------------------------

enum class Align { kLeft, kRight };

// Rows of cells, each column as wide as its widest cell, two spaces between
// columns, no trailing spaces.
std::string render_table(const std::vector<std::vector<std::string>>& rows,
                         const std::vector<Align>& aligns)
{
    std::vector<std::size_t> widths(aligns.size(), 0);
    for (const auto& row : rows) {
        for (std::size_t i = 0; i < row.size() && i < widths.size(); i++)
            widths[i] = std::max(widths[i], row[i].size());
    }
    std::string out;
    for (const auto& row : rows) {
        std::string line;
        for (std::size_t i = 0; i < row.size() && i < widths.size(); i++) {
            if (i > 0)
                line += "  ";
            const std::string pad(widths[i] - row[i].size(), ' ');
            line += aligns[i] == Align::kRight ? pad + row[i] : row[i] + pad;
        }
        while (!line.empty() && line.back() == ' ')
            line.pop_back();
        out += line + "\n";
    }
    return out;
}

// One counter (or rate) as the grouped formatter sees it.
struct Entry {
    std::string_view name;
    std::string text;
    bool nonzero = false;
};

constexpr std::string_view kDataPathNames[] = {"tx_bytes",       "rx_bytes",      "tx_inline",
                                               "credit_updates", "credit_stalls", "nagle_holds",
                                               "cpu_copy_bytes"};

// The messages table, then the data path, connections and other groups, each
// a section; sections separated by a blank line.  Empty when nothing is shown.
std::string format_groups(const std::vector<Entry>& entries, bool all, const char* tx_header,
                          const char* rx_header)
{
    std::vector<std::string> sections;

    // Messages: one row per message name, tx and rx side by side; "-" where
    // the module has no such counter.
    std::map<std::string_view, const Entry*> by_name;
    for (const Entry& e : entries)
        by_name.emplace(e.name, &e);
    std::vector<std::vector<std::string>> rows = {{"Messages", tx_header, rx_header}};
    for (const std::string_view msg : message_names()) {
        const std::string tx_name = "tx_" + std::string(msg);
        const std::string rx_name = "rx_" + std::string(msg);
        const auto tx = by_name.find(tx_name);
        const auto rx = by_name.find(rx_name);
        const Entry* tx_entry = tx == by_name.end() ? nullptr : tx->second;
        const Entry* rx_entry = rx == by_name.end() ? nullptr : rx->second;
        if (tx_entry == nullptr && rx_entry == nullptr)
            continue;
        const bool nonzero = (tx_entry != nullptr && tx_entry->nonzero) ||
                             (rx_entry != nullptr && rx_entry->nonzero);
        if (!all && !nonzero)
            continue;
        rows.push_back({"  " + std::string(msg), tx_entry == nullptr ? "-" : tx_entry->text,
                        rx_entry == nullptr ? "-" : rx_entry->text});
    }
    if (rows.size() > 1)
        sections.push_back(render_table(rows, {Align::kLeft, Align::kRight, Align::kRight}));

    // The other groups: one "name value" row per counter, in file order.
    const std::pair<Group, const char*> groups[] = {
        {Group::kDataPath, "Data path"},
        {Group::kZeroCopy, "Zero copy"},
        {Group::kConnection, "Connections"},
        {Group::kOther, "Other"},
    };
    for (const auto& [group, title] : groups) {
        rows.clear();
        for (const Entry& e : entries) {
            if (classify(e.name) == group && (all || e.nonzero))
                rows.push_back({"  " + std::string(e.name), e.text});
        }
        if (!rows.empty())
            sections.push_back(std::string(title) + "\n" +
                               render_table(rows, {Align::kLeft, Align::kRight}));
    }

    std::string out;
    for (const std::string& section : sections)
        out += (out.empty() ? "" : "\n") + section;
    return out;
}

std::string format_rate(double per_second)
{
    char buf[400]; // room for any finite double in %.1f
    std::snprintf(buf, sizeof(buf), "%.1f", per_second);
    return buf;
}

// --- JSON ---------------------------------------------------------------------------

std::string json_string(std::string_view s)
{
    std::string out = "\"";
    for (const char c : s) {
        const auto byte = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (byte < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof(buf), "\\u%04x", byte);
            out += buf;
        } else {
            out += c;
        }
    }
    return out + "\"";
}

std::string json_socket(const Socket& s)
{
    std::string out = "{";
    out += "\"sl\": " + std::to_string(s.sl);
    out += ", \"state\": " + json_string(s.state);
    out += ", \"family\": " + json_string(s.local.ipv6 ? "inet6" : "inet");
    out += ", \"local_address\": " + json_string(s.local.address);
    out += ", \"local_port\": " + std::to_string(s.local.port);
    out += ", \"remote_address\": " + json_string(s.remote.address);
    out += ", \"remote_port\": " + std::to_string(s.remote.port);
    out += ", \"tx_queue\": " + std::to_string(s.tx_queue);
    out += ", \"rx_queue\": " + std::to_string(s.rx_queue);
    out += ", \"uid\": " + std::to_string(s.uid);
    out += ", \"inode\": " + std::to_string(s.inode);
    if (!s.info.empty()) {
        out += ", \"info\": {";
        for (std::size_t i = 0; i < s.info.size(); i++) {
            const InfoField& f = s.info[i];
            out += (i == 0 ? "" : ", ") + json_string(f.name) + ": " +
                   (parse_u64(f.value) ? f.value : json_string(f.value));
        }
        out += "}";
    }
    return out + "}";
}

// --- driver ---------------------------------------------------------------------------

// Reports each problem with a /proc file once, however many times the file is
// read (interval mode rereads it).
class Reporter {
  public:
    explicit Reporter(std::ostream& err) : err_(err) {}

    void report(const std::string& path, const std::vector<LineError>& errors)
    {
        for (const LineError& e : errors) {
            malformed_ = true;
            std::string text =
                "sdpstat: " + path + ":" + std::to_string(e.line) + ": " + e.message + "\n";
            if (seen_.insert(text).second)
                err_ << text;
        }
    }

    bool malformed() const { return malformed_; }

  private:
    std::ostream& err_;
    std::set<std::string> seen_;
    bool malformed_ = false;
};

bool read_proc_file(System& sys, const std::string& path, std::ostream& err, std::string* text)
{
    System::ReadResult r = sys.read_file(path);
    switch (r.status) {
    case System::ReadStatus::kOk:
        *text = std::move(r.text);
        return true;
    case System::ReadStatus::kNotFound:
        err << "sdpstat: " << path << " not found: is sdp.ko loaded? (modprobe sdp)\n";
        return false;
    case System::ReadStatus::kError:
        break;
    }
    err << "sdpstat: cannot read " << path << ": " << r.error << "\n";
    return false;
}

std::optional<double> parse_seconds(const std::string& text)
{
    // Plain decimals only: strtod would also take " 1", "inf", "0x1p3".
    bool digit = false;
    int dots = 0;
    for (const char c : text) {
        if (is_digit(c))
            digit = true;
        else if (c == '.')
            dots++;
        else
            return std::nullopt;
    }
    if (!digit || dots > 1)
        return std::nullopt;
    const double value = std::strtod(text.c_str(), nullptr);
    if (!std::isfinite(value) || value <= 0)
        return std::nullopt;
    return value;
}

} // namespace

// --- parsing ----------------------------------------------------------------------------

std::optional<std::uint64_t> parse_u64(std::string_view text)
{
    if (text.empty())
        return std::nullopt;
    std::uint64_t value = 0;
    constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
    for (const char c : text) {
        if (!is_digit(c))
            return std::nullopt;
        const auto digit = static_cast<std::uint64_t>(c - '0');
        if (value > (kMax - digit) / 10)
            return std::nullopt;
        value = value * 10 + digit;
    }
    return value;
}

std::optional<Endpoint> parse_endpoint(std::string_view text)
{
    Endpoint ep;
    std::string_view port;
    if (starts_with(text, "[")) {
        const std::size_t close = text.find(']');
        if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
            return std::nullopt;
        ep.ipv6 = true;
        ep.address = std::string(text.substr(1, close - 1));
        port = text.substr(close + 2);
        // A link-local address may carry its interface: fe80::1%eth0.
        std::string host = ep.address;
        const std::size_t percent = host.find('%');
        if (percent != std::string::npos) {
            if (!is_scope_id(std::string_view(host).substr(percent + 1)))
                return std::nullopt;
            host.resize(percent);
        }
        unsigned char buf[16];
        if (inet_pton(AF_INET6, host.c_str(), buf) != 1)
            return std::nullopt;
    } else {
        const std::size_t colon = text.rfind(':');
        if (colon == std::string_view::npos)
            return std::nullopt;
        ep.address = std::string(text.substr(0, colon));
        port = text.substr(colon + 1);
        unsigned char buf[4];
        if (inet_pton(AF_INET, ep.address.c_str(), buf) != 1)
            return std::nullopt;
    }
    const std::optional<std::uint64_t> port_value = parse_u64(port);
    if (!port_value || *port_value > 65535)
        return std::nullopt;
    ep.port = static_cast<std::uint16_t>(*port_value);
    return ep;
}

std::string format_endpoint(const Endpoint& ep)
{
    const std::string port = std::to_string(ep.port);
    if (ep.ipv6)
        return "[" + ep.address + "]:" + port;
    return ep.address + ":" + port;
}

namespace {

constexpr const char* kSocketColumns =
    "expected 8 columns (sl local_address remote_address st tx_queue rx_queue uid inode)";

// One socket line; the reason when it does not parse.
std::optional<Socket> parse_socket_line(const std::vector<std::string_view>& cols,
                                        std::string* error)
{
    if (cols.size() < 8) {
        *error = std::string(kSocketColumns) + ", found " + std::to_string(cols.size());
        return std::nullopt;
    }
    Socket s;
    const std::string_view sl = cols[0];
    const std::optional<std::uint64_t> sl_value =
        sl.size() > 1 && sl.back() == ':' ? parse_u64(sl.substr(0, sl.size() - 1)) : std::nullopt;
    if (!sl_value) {
        *error = "bad sl " + quote(sl) + ": expected a number and ':'";
        return std::nullopt;
    }
    s.sl = *sl_value;

    const char* const endpoint_names[] = {"local_address", "remote_address"};
    Endpoint* const endpoints[] = {&s.local, &s.remote};
    for (int i = 0; i < 2; i++) {
        std::optional<Endpoint> ep = parse_endpoint(cols[1 + i]);
        if (!ep) {
            *error = std::string("bad ") + endpoint_names[i] + " " + quote(cols[1 + i]) +
                     ": expected a.b.c.d:port or [ipv6]:port";
            return std::nullopt;
        }
        *endpoints[i] = std::move(*ep);
    }

    if (!is_state_name(cols[3])) {
        *error = "bad st " + quote(cols[3]) + ": expected a state name such as ESTABLISHED";
        return std::nullopt;
    }
    s.state = std::string(cols[3]);

    const char* const number_names[] = {"tx_queue", "rx_queue", "uid", "inode"};
    std::uint64_t numbers[4] = {};
    for (int i = 0; i < 4; i++) {
        const std::optional<std::uint64_t> value = parse_u64(cols[4 + i]);
        const bool uid = i == 2;
        if (!value || (uid && *value > std::numeric_limits<std::uint32_t>::max())) {
            *error = std::string("bad ") + number_names[i] + " " + quote(cols[4 + i]) +
                     (uid ? ": expected an unsigned 32-bit decimal"
                          : ": expected an unsigned 64-bit decimal");
            return std::nullopt;
        }
        numbers[i] = *value;
    }
    s.tx_queue = numbers[0];
    s.rx_queue = numbers[1];
    s.uid = static_cast<std::uint32_t>(numbers[2]);
    s.inode = numbers[3];
    return s;
}

} // namespace

SocketTable parse_sockets(std::string_view text)
{
    SocketTable table;
    for_each_row(
        text, "sl local_address", &table.errors,
        [](const std::vector<std::string_view>& /*header*/) {},
        [&](unsigned long line_no, const std::vector<std::string_view>& cols) {
            std::string error;
            std::optional<Socket> socket = parse_socket_line(cols, &error);
            if (socket)
                table.sockets.push_back(std::move(*socket));
            else
                table.errors.push_back({line_no, error});
        });
    return table;
}

InfoTable parse_info(std::string_view text)
{
    InfoTable table;
    std::vector<std::string> names;
    for_each_row(
        text, "inode", &table.errors,
        [&](const std::vector<std::string_view>& header) {
            names.assign(header.begin(), header.end());
        },
        [&](unsigned long line_no, const std::vector<std::string_view>& cols) {
            const std::optional<std::uint64_t> inode = parse_u64(cols[0]);
            if (cols.size() != names.size() || !inode) {
                table.errors.push_back({line_no, "expected " + std::to_string(names.size()) +
                                                     " columns as the header names, found " +
                                                     std::to_string(cols.size())});
                return;
            }
            SocketInfo row;
            row.inode = *inode;
            for (std::size_t i = 1; i < cols.size(); i++)
                row.fields.push_back({names[i], std::string(cols[i])});
            table.rows.push_back(std::move(row));
        });
    return table;
}

void attach_info(std::vector<Socket>* sockets, const std::vector<SocketInfo>& info)
{
    std::map<std::uint64_t, const SocketInfo*> by_inode;
    for (const SocketInfo& row : info)
        by_inode.emplace(row.inode, &row);
    for (Socket& s : *sockets) {
        const auto it = by_inode.find(s.inode);
        s.info = it == by_inode.end() ? std::vector<InfoField>{} : it->second->fields;
    }
}

CounterSet parse_counters(std::string_view text)
{
    CounterSet set;
    std::map<std::string, unsigned long, std::less<>> first_line;
    for_each_line(text, [&](unsigned long line_no, std::string_view line) {
        const std::vector<std::string_view> cols = split_whitespace(line);
        if (cols.empty())
            return;
        if (cols.size() != 2) {
            set.errors.push_back({line_no, "expected \"name value\", found " +
                                               std::to_string(cols.size()) + " columns"});
            return;
        }
        if (!is_counter_name(cols[0])) {
            set.errors.push_back({line_no, "bad counter name " + quote(cols[0]) +
                                               ": expected a lowercase identifier"});
            return;
        }
        const std::optional<std::uint64_t> value = parse_u64(cols[1]);
        if (!value) {
            set.errors.push_back({line_no, "bad value " + quote(cols[1]) + " for " +
                                               std::string(cols[0]) +
                                               ": expected an unsigned 64-bit decimal"});
            return;
        }
        const auto [it, inserted] = first_line.emplace(std::string(cols[0]), line_no);
        if (!inserted) {
            set.errors.push_back({line_no, "duplicate counter " + std::string(cols[0]) +
                                               " (first on line " + std::to_string(it->second) +
                                               ")"});
            return;
        }
        set.counters.push_back({std::string(cols[0]), *value});
    });
    return set;
}

// --- counter groups -----------------------------------------------------------------------

const std::vector<std::string_view>& message_names()
{
    static const std::vector<std::string_view> kNames = {
        "hello",           "hello_ack",        "disconn",
        "abort_conn",      "send_sm",          "rdma_wr_compl",
        "rdma_rd_compl",   "src_avail_cancel", "sink_avail_cancel",
        "sink_cancel_ack", "ch_rcv_buf",       "ch_rcv_buf_ack",
        "sink_avail",      "src_avail",        "data",
    };
    return kNames;
}

Group classify(std::string_view name)
{
    for (const std::string_view known : kDataPathNames) {
        if (name == known)
            return Group::kDataPath;
    }
    if (starts_with(name, "tx_") || starts_with(name, "rx_")) {
        const std::string_view msg = name.substr(3);
        for (const std::string_view known : message_names()) {
            if (msg == known)
                return Group::kMessage;
        }
    }
    if (starts_with(name, "zcopy_"))
        return Group::kZeroCopy;
    if (starts_with(name, "conn_"))
        return Group::kConnection;
    return Group::kOther;
}

// --- formatting ---------------------------------------------------------------------------

std::string format_sockets(const std::vector<Socket>& sockets, bool listening_only)
{
    std::vector<std::vector<std::string>> rows = {
        {"State", "Recv-Q", "Send-Q", "Local Address:Port", "Peer Address:Port", "uid", "inode"}};
    std::vector<std::string> info_lines;
    for (const Socket& s : sockets) {
        if (listening_only && s.state != "LISTEN")
            continue;
        rows.push_back({s.state, std::to_string(s.rx_queue), std::to_string(s.tx_queue),
                        format_endpoint(s.local), format_endpoint(s.remote), std::to_string(s.uid),
                        std::to_string(s.inode)});
        std::string info;
        for (const InfoField& f : s.info) {
            if (f.value != "0" && f.value != "-")
                info += (info.empty() ? "" : " ") + f.name + ":" + f.value;
        }
        info_lines.push_back(std::move(info));
    }
    const std::string table =
        render_table(rows, {Align::kLeft, Align::kRight, Align::kRight, Align::kLeft, Align::kLeft,
                            Align::kRight, Align::kRight});
    // Line i + 1 of the table is socket i's: its info line after it.
    std::string out;
    std::size_t line = 0;
    std::size_t start = 0;
    for (std::size_t end = table.find('\n'); end != std::string::npos;
         start = end + 1, end = table.find('\n', start), line++) {
        out.append(table, start, end + 1 - start);
        if (line > 0 && !info_lines[line - 1].empty())
            out += "    " + info_lines[line - 1] + "\n";
    }
    return out;
}

std::string format_counters(const std::vector<Counter>& counters, bool all)
{
    if (counters.empty())
        return "No counters\n";
    std::vector<Entry> entries;
    entries.reserve(counters.size());
    for (const Counter& c : counters)
        entries.push_back({c.name, std::to_string(c.value), c.value != 0});
    std::string out = format_groups(entries, all, "tx", "rx");
    return out.empty() ? "No nonzero counters (-a shows all)\n" : out;
}

std::vector<Rate> compute_rates(const std::vector<Counter>& before,
                                const std::vector<Counter>& after, double seconds)
{
    std::map<std::string_view, std::uint64_t> old_values;
    for (const Counter& c : before)
        old_values.emplace(c.name, c.value);
    // Two reads of a monotonic clock around a sleep are never 0 s apart, but
    // a division by zero is not worth the risk.
    const double elapsed = seconds > 1e-6 ? seconds : 1e-6;
    std::vector<Rate> rates;
    for (const Counter& c : after) {
        const auto old = old_values.find(c.name);
        if (old == old_values.end())
            continue;
        const std::uint64_t delta = c.value >= old->second ? c.value - old->second : c.value;
        rates.push_back({c.name, delta, static_cast<double>(delta) / elapsed});
    }
    return rates;
}

std::string format_rates(const std::vector<Rate>& rates, bool all, std::uint64_t interval)
{
    std::string out = "Interval " + std::to_string(interval) + ", per second\n";
    if (rates.empty())
        return out + "No counters\n";
    std::vector<Entry> entries;
    entries.reserve(rates.size());
    for (const Rate& r : rates)
        entries.push_back({r.name, format_rate(r.per_second), r.delta != 0});
    const std::string groups = format_groups(entries, all, "tx/s", "rx/s");
    return out + (groups.empty() ? "No counter changed\n" : groups);
}

std::string format_json(const std::vector<Socket>* sockets, bool listening_only,
                        const std::vector<Counter>* counters)
{
    std::string out = "{\n";
    if (sockets != nullptr) {
        std::vector<const Socket*> shown;
        for (const Socket& s : *sockets) {
            if (!listening_only || s.state == "LISTEN")
                shown.push_back(&s);
        }
        out += "  \"sockets\": [";
        for (std::size_t i = 0; i < shown.size(); i++)
            out += (i == 0 ? "\n    " : ",\n    ") + json_socket(*shown[i]);
        out += shown.empty() ? "]" : "\n  ]";
        out += counters != nullptr ? ",\n" : "\n";
    }
    if (counters != nullptr) {
        out += "  \"counters\": {";
        for (std::size_t i = 0; i < counters->size(); i++) {
            const Counter& c = (*counters)[i];
            out += (i == 0 ? "\n    " : ",\n    ") + json_string(c.name) + ": " +
                   std::to_string(c.value);
        }
        out += counters->empty() ? "}\n" : "\n  }\n";
    }
    return out + "}\n";
}

std::string format_rates_json(const std::vector<Rate>& rates, std::uint64_t interval)
{
    std::string out = "{\"interval\": " + std::to_string(interval) + ", \"rates\": {";
    for (std::size_t i = 0; i < rates.size(); i++) {
        out += (i == 0 ? "" : ", ") + json_string(rates[i].name) + ": " +
               format_rate(rates[i].per_second);
    }
    return out + "}}\n";
}

// --- command line -----------------------------------------------------------------------------

std::string usage()
{
    return "usage: sdpstat [-s|-c] [-a] [-l] [-e] [--json] [--proc DIR]\n"
           "       sdpstat -i SECONDS [-n COUNT] [-c] [-a] [--json] [--proc DIR]\n"
           "\n"
           "Show the SDP sockets (/proc/net/sdp) and the SDP counters (/proc/net/sdpstats)\n"
           "of the current network namespace: the socket table, then the nonzero counters\n"
           "grouped as messages (tx and rx), data path, connections and other.\n"
           "\n"
           "  -s, --sockets           the socket table only\n"
           "  -c, --counters          the counters only\n"
           "  -a, --all               include the counters that are zero\n"
           "  -l, --listening         only the sockets in state LISTEN\n"
           "  -e, --extended          each socket's buffers and zero-copy transfers too\n"
           "                          (/proc/net/sdpinfo)\n"
           "  -i, --interval SECONDS  every SECONDS (e.g. 1 or 0.5), the change of each\n"
           "                          counter per second instead of totals; counters only\n"
           "  -n, --count COUNT       with -i: stop after COUNT reports\n"
           "      --json              JSON instead of text (with -i: one object per line)\n"
           "      --proc DIR          read DIR/sdp, DIR/sdpinfo and DIR/sdpstats instead of\n"
           "                          /proc/net\n"
           "  -h, --help              this text\n"
           "\n"
           "Exit status: 0 ok, 1 some line of a /proc file did not parse (reported on\n"
           "standard error; the lines that did parse are still shown), 2 usage error or a\n"
           "/proc file missing or unreadable.\n";
}

ParsedArgs parse_args(const std::vector<std::string>& args)
{
    ParsedArgs result;
    bool sockets = false;
    bool counters = false;
    bool interval = false;
    bool count = false;
    bool options_done = false;

    // Applies one option; `value` is its argument for -i, -n and --proc.
    auto apply = [&](char opt, const std::string& value) -> bool {
        switch (opt) {
        case 'h':
            result.help = true;
            return true;
        case 's':
            sockets = true;
            return true;
        case 'c':
            counters = true;
            return true;
        case 'a':
            result.options.all = true;
            return true;
        case 'l':
            result.options.listening = true;
            return true;
        case 'j':
            result.options.json = true;
            return true;
        case 'e':
            result.options.extended = true;
            return true;
        case 'i': {
            const std::optional<double> seconds = parse_seconds(value);
            if (!seconds) {
                result.error =
                    "bad interval " + quote(value) + ": expected a positive number of seconds";
                return false;
            }
            result.options.interval = *seconds;
            interval = true;
            return true;
        }
        case 'n': {
            const std::optional<std::uint64_t> n = parse_u64(value);
            if (!n || *n == 0) {
                result.error = "bad count " + quote(value) + ": expected a positive integer";
                return false;
            }
            result.options.count = *n;
            count = true;
            return true;
        }
        case 'p':
            if (value.empty()) {
                result.error = "--proc needs a directory";
                return false;
            }
            result.options.proc_dir = value;
            return true;
        default:
            return false;
        }
    };
    auto takes_value = [](char opt) { return opt == 'i' || opt == 'n' || opt == 'p'; };

    struct LongOption {
        std::string_view name;
        char opt;
    };
    constexpr LongOption kLongOptions[] = {
        {"help", 'h'},     {"sockets", 's'}, {"counters", 'c'}, {"all", 'a'},   {"listening", 'l'},
        {"extended", 'e'}, {"json", 'j'},    {"interval", 'i'}, {"count", 'n'}, {"proc", 'p'},
    };

    for (std::size_t i = 0; i < args.size(); i++) {
        const std::string& arg = args[i];
        if (options_done || arg.size() < 2 || arg[0] != '-') {
            result.error = "unexpected argument " + quote(arg);
            return result;
        }
        if (arg == "--") {
            options_done = true;
            continue;
        }
        if (starts_with(arg, "--")) {
            const std::size_t eq = arg.find('=');
            const std::string_view name = eq == std::string::npos
                                              ? std::string_view(arg).substr(2)
                                              : std::string_view(arg).substr(2, eq - 2);
            char opt = 0;
            for (const LongOption& lo : kLongOptions) {
                if (lo.name == name)
                    opt = lo.opt;
            }
            if (opt == 0) {
                result.error = "unknown option " + arg.substr(0, eq);
                return result;
            }
            std::string value;
            if (takes_value(opt)) {
                if (eq != std::string::npos) {
                    value = arg.substr(eq + 1);
                } else if (i + 1 < args.size()) {
                    value = args[++i];
                } else {
                    result.error = "option --" + std::string(name) + " needs a value";
                    return result;
                }
            } else if (eq != std::string::npos) {
                result.error = "option --" + std::string(name) + " takes no value";
                return result;
            }
            if (!apply(opt, value))
                return result;
            continue;
        }
        // A cluster of short options, "-sa"; -i and -n take the rest of the
        // argument ("-i1") or the next one.
        for (std::size_t j = 1; j < arg.size(); j++) {
            const char opt = arg[j];
            if (std::string_view("hscalein").find(opt) == std::string_view::npos) {
                result.error = "unknown option -" + std::string(1, opt);
                return result;
            }
            std::string value;
            if (takes_value(opt)) {
                if (j + 1 < arg.size()) {
                    value = arg.substr(j + 1);
                } else if (i + 1 < args.size()) {
                    value = args[++i];
                } else {
                    result.error = "option -" + std::string(1, opt) + " needs a value";
                    return result;
                }
                j = arg.size();
            }
            if (!apply(opt, value))
                return result;
        }
    }

    if (result.help) {
        result.ok = true;
        return result;
    }
    if (count && !interval) {
        result.error = "-n needs -i";
        return result;
    }
    if (interval && sockets) {
        result.error = "-i reports counters; it cannot be combined with -s";
        return result;
    }
    if (result.options.extended && (interval || (counters && !sockets))) {
        result.error = "-e adds to the socket table; it cannot be combined with -c or -i";
        return result;
    }
    if (sockets != counters) {
        result.options.sockets = sockets;
        result.options.counters = counters;
    }
    if (interval)
        result.options.sockets = false;
    result.ok = true;
    return result;
}

// --- driver -----------------------------------------------------------------------------------

int run(const Options& options, System& sys, std::ostream& out, std::ostream& err)
{
    const std::string dir = options.proc_dir.empty() || options.proc_dir.back() == '/'
                                ? options.proc_dir
                                : options.proc_dir + "/";
    const std::string sockets_path = dir + "sdp";
    const std::string counters_path = dir + "sdpstats";
    const std::string info_path = dir + "sdpinfo";
    Reporter reporter(err);

    // Everything is read before anything is printed, so a missing file
    // leaves no half report on standard output.
    std::string sockets_text;
    std::string counters_text;
    std::string info_text;
    if (options.sockets && !read_proc_file(sys, sockets_path, err, &sockets_text))
        return kExitUsage;
    if (options.sockets && options.extended && !read_proc_file(sys, info_path, err, &info_text))
        return kExitUsage;
    if (options.counters && !read_proc_file(sys, counters_path, err, &counters_text))
        return kExitUsage;
    const double first_read = sys.now();

    SocketTable table;
    if (options.sockets) {
        table = parse_sockets(sockets_text);
        reporter.report(sockets_path, table.errors);
        if (options.extended) {
            const InfoTable info = parse_info(info_text);
            reporter.report(info_path, info.errors);
            attach_info(&table.sockets, info.rows);
        }
    }
    CounterSet counters;
    if (options.counters) {
        counters = parse_counters(counters_text);
        reporter.report(counters_path, counters.errors);
    }

    if (options.interval <= 0) {
        if (options.json) {
            out << format_json(options.sockets ? &table.sockets : nullptr, options.listening,
                               options.counters ? &counters.counters : nullptr);
        } else {
            if (options.sockets)
                out << format_sockets(table.sockets, options.listening);
            if (options.sockets && options.counters)
                out << "\n";
            if (options.counters)
                out << format_counters(counters.counters, options.all);
        }
        out.flush();
        return reporter.malformed() ? kExitMalformed : kExitOk;
    }

    // Interval mode: reports on a fixed schedule (no drift from the time
    // spent reading and printing), rates over the time actually elapsed
    // between two reads.
    std::vector<Counter> previous = std::move(counters.counters);
    double previous_time = first_read;
    double deadline = first_read;
    for (std::uint64_t n = 1; options.count == 0 || n <= options.count; n++) {
        deadline += options.interval;
        sys.sleep_until(deadline);
        if (!read_proc_file(sys, counters_path, err, &counters_text))
            return kExitUsage;
        const double now = sys.now();
        CounterSet current = parse_counters(counters_text);
        reporter.report(counters_path, current.errors);
        const std::vector<Rate> rates =
            compute_rates(previous, current.counters, now - previous_time);
        if (options.json) {
            out << format_rates_json(rates, n);
        } else {
            out << (n > 1 ? "\n" : "") << format_rates(rates, options.all, n);
        }
        out.flush();
        previous = std::move(current.counters);
        previous_time = now;
        // After a stall of more than an interval (suspend, a stopped
        // process) start a new schedule rather than catching up with a burst
        // of reports.
        if (now - deadline > options.interval)
            deadline = now;
    }
    return reporter.malformed() ? kExitMalformed : kExitOk;
}

} // namespace sdp::sdpstat
