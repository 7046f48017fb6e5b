// HttpRequest header lookup and request-target parsing (RFC 3986 percent-decoding; '+' is a space
// in the query, as HTML forms send it).
#include "server/http_message.h"

#include <strings.h>

namespace vela {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool decode(std::string_view in, bool plus_is_space, std::string& out) {
  out.clear();
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return false;
      int hi = hex_value(in[i + 1]), lo = hex_value(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return true;
}

}  // namespace

std::string HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (k.size() == name.size() && strncasecmp(k.data(), name.data(), k.size()) == 0) return v;
  return "";
}

bool parse_target(std::string_view target, std::string& path,
                  std::map<std::string, std::string>& params) {
  if (target.empty() || target[0] != '/') return false;
  size_t q = target.find('?');
  if (!decode(target.substr(0, q), false, path)) return false;
  params.clear();
  if (q == std::string_view::npos) return true;
  std::string_view query = target.substr(q + 1);
  size_t frag = query.find('#');
  if (frag != std::string_view::npos) query = query.substr(0, frag);
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view kv = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (kv.empty()) continue;
    size_t eq = kv.find('=');
    std::string k, v;
    if (!decode(kv.substr(0, eq), true, k)) return false;
    if (eq != std::string_view::npos && !decode(kv.substr(eq + 1), true, v)) return false;
    params.emplace(std::move(k), std::move(v));
  }
  return true;
}

}  // namespace vela
