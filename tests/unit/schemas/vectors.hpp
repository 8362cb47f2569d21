// Test helper: schemas/vectors/protocol_vectors.json (written by scripts/make_protocol_vectors.py).
#pragma once

#include <cstdint>
#include <fstream>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "schemas/protocol.hpp"

namespace conveyor {  // (where argument-dependent lookup finds it: the enum is the engine's)
inline std::ostream& operator<<(std::ostream& os, error_code code) { return os << to_string(code); }
} // namespace conveyor

namespace conveyor::schemas::test {

inline const nlohmann::json& vectors() {
  static const nlohmann::json doc = [] {
    std::ifstream in(CONVEYOR_PROTOCOL_VECTORS);
    if (!in)
      throw std::runtime_error(std::string("cannot open ") + CONVEYOR_PROTOCOL_VECTORS +
                               "; HINT: run scripts/make_protocol_vectors.py");
    return nlohmann::json::parse(in);
  }();
  return doc;
}

inline std::vector<uint8_t> from_hex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

/// The vector named `name` in section `section` ("requests", "replies", "events").
inline const nlohmann::json& vector(const std::string& section, const std::string& name) {
  for (const auto& v : vectors().at(section))
    if (v.at("name") == name) return v;
  throw std::runtime_error("no vector " + section + "/" + name);
}

inline std::vector<uint8_t> vector_bytes(const std::string& section, const std::string& name) {
  return from_hex(vector(section, name).at("hex").get<std::string>());
}

} // namespace conveyor::schemas::test
