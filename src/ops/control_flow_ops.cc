// Control-flow ops: their bodies are subgraph attributes; output types come from the bodies.
#include "ops/op_registry.h"

namespace tessera {

void register_control_flow_ops(OpRegistry& r) {
  r.add("If", OpKind::kOpaque).set_inputs(1, 1).set_outputs(1, 1 << 20);
  r.add("Loop", OpKind::kOpaque).set_inputs(2, 1 << 20).set_outputs(1, 1 << 20);
  r.add("Scan", OpKind::kOpaque).set_inputs(1, 1 << 20).set_outputs(1, 1 << 20);
}

}  // namespace tessera
