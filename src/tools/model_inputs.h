// Model inputs from command-line flags, shared by `run`, `optimize` and `bench`:
// --input NAME=FILE.npy, --shape NAME=1x3x640x640 and --seed for random data.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ir/status.h"
#include "ir/tensor.h"

namespace CLI {
class App;
}

namespace tessera {

class Session;

struct InputFlags {
  std::vector<std::string> inputs;  // NAME=FILE.npy
  std::vector<std::string> shapes;  // NAME=1x3x640x640
  uint64_t seed = 0;
  void add_to(CLI::App& app);
};

// "NAME=VALUE" split at the first '='.
Result<std::pair<std::string, std::string>> split_assignment(const std::string& s, const char* flag);
// "1x3x640x640" -> {1, 3, 640, 640}.
Result<std::vector<int64_t>> parse_dims(const std::string& s);
// The --input files that read, before the session is made (their dims fix the graph's input
// shapes); make_inputs reports the others, after checking the names.
std::map<std::string, Tensor> read_input_files(const InputFlags& o);
// --shape and the --input files' dims, to specialize the graph with.
Result<std::map<std::string, std::vector<int64_t>>> given_shapes(const InputFlags& o,
                                                                 const std::map<std::string, Tensor>& files);
// Every input of the session's model: the given files, random data (seeded) for the rest.
Result<std::map<std::string, Tensor>> make_inputs(const Session& s, const InputFlags& o,
                                                  std::map<std::string, Tensor> inputs);

}  // namespace tessera
