// The cost database: measured costs that persist across runs, models and processes (SQLite).
//
// A cost is keyed by what determines it: the structural hash of the subgraph
// (structural_hash.h), the backend's name and version, the thread count and the CPU model. So a
// second `tessera optimize` of the same model measures nothing new, and a layer shared by two
// models is measured once.
//
// Location: the path given to open(), else $TESSERA_COST_DB, else
// $XDG_CACHE_HOME/tessera/costs.sqlite, else ~/.cache/tessera/costs.sqlite.
//
// Contracts:
//  - Several processes may use one file at once (WAL journal, a busy timeout on locks, and open()
//    serialized by an advisory lock on PATH.lock): nothing is lost or torn.
//  - A file that is not a healthy cost database (garbage, a damaged page, an unknown schema) is
//    detected at open(), moved aside to PATH.corrupt-<time>-<pid> with a warning on stderr and
//    replaced by an empty database. Damage found later makes lookup()/store() return an error,
//    which callers treat as "not known"; nothing crashes.
//  - One CostDatabase object is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "ir/status.h"
#include "partition/cost_estimator.h"

struct sqlite3;
struct sqlite3_stmt;

namespace tessera {

struct CostKey {
  std::string subgraph_hash;  // structural_hash_hex
  std::string backend;
  std::string backend_version;
  int threads = 1;
  std::string cpu;  // cpu_model()
};

class CostDatabase {
 public:
  static std::string default_path();
  // Opens or creates the database at `path` ("" for default_path()), creating its folder.
  static Result<std::unique_ptr<CostDatabase>> open(std::string path = "");
  ~CostDatabase();
  CostDatabase(const CostDatabase&) = delete;
  CostDatabase& operator=(const CostDatabase&) = delete;

  // The stored cost, or nullopt if this key was never measured.
  Result<std::optional<Cost>> lookup(const CostKey& key);
  // Stores (or replaces) the cost of `key`; `label` ("Conv+Relu") is kept for people reading
  // the file. Unmeasured costs (Cost::measured false) are refused.
  Status store(const CostKey& key, const Cost& cost, const std::string& label);
  // Number of stored costs.
  Result<int64_t> count();

  const std::string& path() const { return path_; }
  // Where open() moved a corrupt file, or "" if it did not have to.
  const std::string& moved_aside() const { return moved_aside_; }

 private:
  CostDatabase() = default;
  Status prepare();

  std::string path_, moved_aside_;
  sqlite3* db_ = nullptr;
  sqlite3_stmt* lookup_ = nullptr;
  sqlite3_stmt* store_ = nullptr;
};

// The CPU model ("Intel(R) Xeon(R) ..."), from /proc/cpuinfo; "unknown" when not found.
std::string cpu_model();

}  // namespace tessera
