// The external HTTP reward endpoint; see reward_http.h.
#include "train/rl/reward_http.h"

#include <httplib.h>

#include <cmath>

#include "core/error.h"

namespace vela {

HttpReward::HttpReward(std::string url, double timeout_s)
    : url_(std::move(url)), timeout_s_(timeout_s) {
  VELA_CHECK(timeout_s_ > 0, "grpo.reward: http timeout_s must be > 0, got ", timeout_s_);
  const std::string scheme = "http://";
  VELA_CHECK(url_.rfind(scheme, 0) == 0, "grpo.reward: http url must start with http:// (got '",
             url_, "')");
  std::string rest = url_.substr(scheme.size());
  const size_t slash = rest.find('/');
  path_ = slash == std::string::npos ? "/" : rest.substr(slash);
  std::string hostport = rest.substr(0, slash);
  const size_t colon = hostport.rfind(':');
  host_ = hostport.substr(0, colon);
  if (colon != std::string::npos) {
    try {
      port_ = std::stoi(hostport.substr(colon + 1));
    } catch (const std::exception&) {
      VELA_THROW(InvalidArgument, "grpo.reward: bad port in url '", url_, "'");
    }
  }
  VELA_CHECK(!host_.empty() && port_ > 0 && port_ < 65536, "grpo.reward: bad url '", url_, "'");
}

std::vector<double> HttpReward::score(const std::vector<RewardInput>& batch) const {
  json body = {
      {"prompts", json::array()}, {"completions", json::array()}, {"answers", json::array()}};
  for (const RewardInput& in : batch) {
    body["prompts"].push_back(in.prompt);
    body["completions"].push_back(in.completion);
    body["answers"].push_back(in.answer);
  }
  httplib::Client client(host_, port_);
  const auto sec = static_cast<time_t>(timeout_s_);
  const auto usec = static_cast<time_t>((timeout_s_ - static_cast<double>(sec)) * 1e6);
  client.set_connection_timeout(sec, usec);
  client.set_read_timeout(sec, usec);
  client.set_write_timeout(sec, usec);
  auto res = client.Post(path_, body.dump(), "application/json");
  if (!res) {
    const httplib::Error e = res.error();
    VELA_CHECK_T(IoError, e != httplib::Error::Read && e != httplib::Error::ConnectionTimeout,
                 "reward endpoint ", url_, " did not answer within timeout_s = ", timeout_s_,
                 " s (", httplib::to_string(e), ")");
    VELA_THROW(IoError, "reward endpoint ", url_, ": request failed (", httplib::to_string(e), ")");
  }
  VELA_CHECK_T(IoError, res->status >= 200 && res->status < 300, "reward endpoint ", url_,
               " answered HTTP ", res->status, ": ", res->body.substr(0, 200));
  json reply;
  try {
    reply = json::parse(res->body);
  } catch (const json::exception& e) {
    VELA_THROW(IoError, "reward endpoint ", url_, " answered with a body that is not JSON (",
               e.what(), "): ", res->body.substr(0, 200));
  }
  const json* scores = &reply;
  if (reply.is_object() && reply.contains("scores")) scores = &reply["scores"];
  VELA_CHECK_T(IoError, scores->is_array(), "reward endpoint ", url_,
               " answered without a \"scores\" array: ", res->body.substr(0, 200));
  VELA_CHECK_T(IoError, scores->size() == batch.size(), "reward endpoint ", url_, " returned ",
               scores->size(), " scores for ", batch.size(), " completions");
  std::vector<double> out;
  out.reserve(batch.size());
  for (size_t i = 0; i < scores->size(); ++i) {
    const json& s = (*scores)[i];
    VELA_CHECK_T(IoError, s.is_number() && std::isfinite(s.get<double>()), "reward endpoint ", url_,
                 ": score ", i, " is not a finite number (", s.dump(), ")");
    out.push_back(s.get<double>());
  }
  return out;
}

}  // namespace vela
