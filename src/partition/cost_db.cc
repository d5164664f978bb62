#include "partition/cost_db.h"

#include <fcntl.h>
#include <pwd.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>

namespace tessera {
namespace {

constexpr int kSchemaVersion = 1;
// Another optimizer may hold the write lock while it stores a batch: wait rather than fail.
constexpr int kBusyTimeoutMs = 30000;

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS costs (
  subgraph_hash   TEXT    NOT NULL,
  backend         TEXT    NOT NULL,
  backend_version TEXT    NOT NULL,
  threads         INTEGER NOT NULL,
  cpu             TEXT    NOT NULL,
  seconds         REAL    NOT NULL,
  noise           REAL    NOT NULL,
  valid           INTEGER NOT NULL,
  reason          TEXT    NOT NULL,
  label           TEXT    NOT NULL,
  measured_at     INTEGER NOT NULL,
  PRIMARY KEY (subgraph_hash, backend, backend_version, threads, cpu)
) WITHOUT ROWID;
)sql";

// Errors that mean the file's content is bad, as opposed to a lock, a permission or the disk.
bool is_corruption(int rc) {
  rc &= 0xff;
  return rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB || rc == SQLITE_FORMAT;
}

Status sql_error(sqlite3* db, int rc, const std::string& what) {
  std::string msg = what + ": " + sqlite3_errstr(rc);
  if (db && sqlite3_errcode(db) != SQLITE_OK) msg += std::string(" (") + sqlite3_errmsg(db) + ")";
  return io_error(msg);
}

// Runs `sql` and returns the first column of its first row ("" when there is none).
int query_text(sqlite3* db, const char* sql, std::string* first) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr);
  if (rc != SQLITE_OK) return rc;
  rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW) {
    const unsigned char* text = sqlite3_column_text(stmt, 0);
    if (first) *first = text ? reinterpret_cast<const char*>(text) : "";
    rc = SQLITE_OK;
  } else if (rc == SQLITE_DONE) {
    if (first) first->clear();
    rc = SQLITE_OK;
  }
  sqlite3_finalize(stmt);
  return rc;
}

// Serializes open() across processes, so that two of them finding the same damaged file do not
// both move it aside (the second would move away the first one's fresh database).
class OpenLock {
 public:
  explicit OpenLock(const std::string& path)
      : fd_(::open((path + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);  // without a lock file, open unserialized
  }
  ~OpenLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }

 private:
  int fd_;
};

// Opens `path` and checks it is a healthy cost database, creating the schema in an empty one.
// On failure, *corrupt says whether the file's content is to blame.
Status open_checked(const std::string& path, sqlite3** out, bool* corrupt) {
  *corrupt = false;
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  auto fail = [&](Status st, bool bad_content) {
    if (db) sqlite3_close(db);
    *corrupt = bad_content;
    return st;
  };
  if (rc != SQLITE_OK) return fail(sql_error(db, rc, "cannot open"), is_corruption(rc));
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  // The first statement that reads the file: garbage fails here ("file is not a database").
  // WAL lets readers and a writer of several processes work at once; where the filesystem
  // cannot do WAL, SQLite keeps its rollback journal, which is slower but just as safe.
  rc = query_text(db, "PRAGMA journal_mode=WAL", nullptr);
  if (rc != SQLITE_OK) return fail(sql_error(db, rc, "cannot read"), is_corruption(rc));
  query_text(db, "PRAGMA synchronous=NORMAL", nullptr);
  std::string check;
  rc = query_text(db, "PRAGMA quick_check", &check);
  if (rc != SQLITE_OK) return fail(sql_error(db, rc, "integrity check failed"), is_corruption(rc));
  if (check != "ok") return fail(io_error("integrity check failed: " + check), true);

  std::string version;
  rc = query_text(db, "PRAGMA user_version", &version);
  if (rc != SQLITE_OK)
    return fail(sql_error(db, rc, "cannot read the schema version"), is_corruption(rc));
  if (version == "0") {
    // A new file (or one being created by another process right now: IMMEDIATE takes the write
    // lock first, and IF NOT EXISTS makes the second creator a no-op).
    char* err = nullptr;
    std::string sql = std::string("BEGIN IMMEDIATE;") + kSchema +
                      "PRAGMA user_version=" + std::to_string(kSchemaVersion) + ";COMMIT;";
    rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
    sqlite3_free(err);
    if (rc != SQLITE_OK) {
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      return fail(sql_error(db, rc, "cannot create the schema"), is_corruption(rc));
    }
  } else if (version != std::to_string(kSchemaVersion)) {
    return fail(io_error("unknown schema version " + version), true);
  }
  // The table must be the one we expect (a foreign SQLite file would have user_version 0 and
  // gain our table, which is harmless; a damaged schema fails here).
  rc = query_text(db,
                  "SELECT subgraph_hash, backend, backend_version, threads, cpu, seconds, noise, "
                  "valid, reason, label, measured_at FROM costs LIMIT 0",
                  nullptr);
  if (rc != SQLITE_OK) return fail(sql_error(db, rc, "unexpected schema"), true);
  *out = db;
  return Status();
}

// Moves `path` (and its WAL and shared-memory files) aside; returns the new name.
Result<std::string> move_aside(const std::string& path) {
  std::string aside =
      path + ".corrupt-" + std::to_string(std::time(nullptr)) + "-" + std::to_string(::getpid());
  std::error_code ec;
  std::filesystem::rename(path, aside, ec);
  if (ec) return io_error("cannot move " + path + " aside: " + ec.message());
  for (const char* suffix : {"-wal", "-shm"}) {
    std::filesystem::rename(path + suffix, aside + suffix, ec);  // absent: nothing to do
    if (ec && std::filesystem::exists(path + suffix)) std::filesystem::remove(path + suffix, ec);
  }
  return aside;
}

std::string home_dir() {
  if (const char* home = std::getenv("HOME"); home && *home) return home;
  if (const passwd* pw = ::getpwuid(::getuid()); pw && pw->pw_dir) return pw->pw_dir;
  return ".";
}

}  // namespace

std::string CostDatabase::default_path() {
  if (const char* env = std::getenv("TESSERA_COST_DB"); env && *env) return env;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/tessera/costs.sqlite";
  return home_dir() + "/.cache/tessera/costs.sqlite";
}

Result<std::unique_ptr<CostDatabase>> CostDatabase::open(std::string path) {
  if (path.empty()) path = default_path();
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec)
    return io_error("cost database " + path + ": cannot create " + parent.string() + ": " +
                    ec.message());

  std::unique_ptr<CostDatabase> cdb(new CostDatabase());
  cdb->path_ = path;
  OpenLock lock(path);
  for (int attempt = 0;; ++attempt) {
    bool corrupt = false;
    Status st = open_checked(path, &cdb->db_, &corrupt);
    if (st.ok()) break;
    if (!corrupt || attempt > 0) return st.with_context("cost database " + path);
    TESSERA_ASSIGN_OR_RETURN(cdb->moved_aside_, move_aside(path));
    std::fprintf(stderr,
                 "tessera: warning: cost database %s is damaged (%s); moved it to %s and started "
                 "an empty one\n",
                 path.c_str(), st.message().c_str(), cdb->moved_aside_.c_str());
  }
  TESSERA_RETURN_IF_ERROR(cdb->prepare().with_context("cost database " + path));
  return cdb;
}

Status CostDatabase::prepare() {
  const char* lookup =
      "SELECT seconds, noise, valid, reason FROM costs WHERE subgraph_hash=?1 AND backend=?2 AND "
      "backend_version=?3 AND threads=?4 AND cpu=?5";
  const char* store =
      "INSERT OR REPLACE INTO costs (subgraph_hash, backend, backend_version, threads, cpu, "
      "seconds, "
      "noise, valid, reason, label, measured_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, "
      "?11)";
  int rc = sqlite3_prepare_v2(db_, lookup, -1, &lookup_, nullptr);
  if (rc == SQLITE_OK) rc = sqlite3_prepare_v2(db_, store, -1, &store_, nullptr);
  return rc == SQLITE_OK ? Status() : sql_error(db_, rc, "cannot prepare statements");
}

CostDatabase::~CostDatabase() {
  sqlite3_finalize(lookup_);
  sqlite3_finalize(store_);
  if (db_) sqlite3_close(db_);
}

namespace {

void bind_key(sqlite3_stmt* stmt, const CostKey& key) {
  sqlite3_bind_text(stmt, 1, key.subgraph_hash.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(stmt, 2, key.backend.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(stmt, 3, key.backend_version.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int(stmt, 4, key.threads);
  sqlite3_bind_text(stmt, 5, key.cpu.c_str(), -1, SQLITE_TRANSIENT);
}

// Makes a statement reusable however its last use ended.
struct StatementReset {
  sqlite3_stmt* stmt;
  ~StatementReset() {
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
  }
};

}  // namespace

Result<std::optional<Cost>> CostDatabase::lookup(const CostKey& key) {
  StatementReset reset{lookup_};
  bind_key(lookup_, key);
  int rc = sqlite3_step(lookup_);
  if (rc == SQLITE_DONE) return std::optional<Cost>();
  if (rc != SQLITE_ROW) return sql_error(db_, rc, "cost database lookup");
  Cost cost;
  cost.seconds = sqlite3_column_double(lookup_, 0);
  cost.noise = sqlite3_column_double(lookup_, 1);
  cost.valid = sqlite3_column_int(lookup_, 2) != 0;
  const unsigned char* reason = sqlite3_column_text(lookup_, 3);
  cost.reason = reason ? reinterpret_cast<const char*>(reason) : "";
  return std::optional<Cost>(cost);
}

Status CostDatabase::store(const CostKey& key, const Cost& cost, const std::string& label) {
  if (!cost.measured)
    return invalid_argument("an unmeasured cost is not stored (" + cost.reason + ")");
  StatementReset reset{store_};
  bind_key(store_, key);
  sqlite3_bind_double(store_, 6, cost.seconds);
  sqlite3_bind_double(store_, 7, cost.noise);
  sqlite3_bind_int(store_, 8, cost.valid ? 1 : 0);
  sqlite3_bind_text(store_, 9, cost.reason.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(store_, 10, label.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(store_, 11, static_cast<int64_t>(std::time(nullptr)));
  int rc = sqlite3_step(store_);
  return rc == SQLITE_DONE ? Status() : sql_error(db_, rc, "cost database store");
}

Result<int64_t> CostDatabase::count() {
  std::string n;
  int rc = query_text(db_, "SELECT COUNT(*) FROM costs", &n);
  if (rc != SQLITE_OK) return sql_error(db_, rc, "cost database count");
  return static_cast<int64_t>(std::strtoll(n.c_str(), nullptr, 10));
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    // x86: "model name : ..."; some ARM kernels only have "Hardware" or "CPU part".
    for (const char* key : {"model name", "Hardware", "CPU part"}) {
      if (line.rfind(key, 0) != 0) continue;
      size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      size_t start = line.find_first_not_of(" \t", colon + 1);
      if (start != std::string::npos) return line.substr(start);
    }
  }
  return "unknown";
}

}  // namespace tessera
