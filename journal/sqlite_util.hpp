// SQLite helpers the journal's two files share (not part of the journal's interface).
#pragma once

#include <sqlite3.h>

#include <string>

#include "journal/journal.hpp"

namespace conveyor::journal::detail {

// Steps a statement to its end and resets it; returns the last result code.
inline int run(sqlite3_stmt* s) {
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
  }
  sqlite3_reset(s);
  return rc;
}

inline bytes column_bytes(sqlite3_stmt* s, int i) {
  const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(s, i));
  return bytes(p, p + sqlite3_column_bytes(s, i));
}

inline void bind_text(sqlite3_stmt* s, int i, const std::string& v) { sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC); }
inline void bind_blob(sqlite3_stmt* s, int i, const bytes& v) { sqlite3_bind_blob(s, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC); }

// RAII for statements prepared once per call.
struct stmt {
  sqlite3_stmt* s = nullptr;
  ~stmt() { sqlite3_finalize(s); }
};

} // namespace conveyor::journal::detail
