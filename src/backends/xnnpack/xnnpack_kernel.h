// XnnpackKernel: one compiled XNNPACK runtime for a whole tessera SubGraph.
//
// Owns the runtime, the repacked weights it points to, the pthreadpool it runs on (threads > 1:
// bound to the session's ThreadPool for each run, see xnnpack_threads.h) and the staging buffers of the boundary: 4-D inputs of an NHWC subgraph are transposed into
// them before the run and 4-D outputs transposed out of them after it, inside run(), so that the
// layout conversion is part of the kernel's measured cost. Other inputs are passed in place when
// their buffer has XNN_EXTRA_BYTES of slack after the data (XNNPACK may read that far), else
// copied. run() is serialized by a mutex (the runtime binds one set of pointers at a time).
#pragma once

#include <pthreadpool.h>
#include <xnnpack.h>

#include <memory>
#include <mutex>
#include <vector>

#include "backends/backend.h"
#include "backends/xnnpack/xnnpack_emitter.h"

namespace tessera::xnnpack {

class XnnpackKernel final : public Kernel {
 public:
  // Builds the XNNPACK subgraph for sg (nhwc: the subgraph's layout) and creates its runtime.
  // channels_last_io (an NHWC subgraph in a channels-last plan): its 4-D inputs and outputs are
  // NHWC already, and pass without transposes.
  static Result<std::unique_ptr<Kernel>> create(const SubGraph& sg, bool nhwc, int threads,
                                                bool channels_last_io = false);
  ~XnnpackKernel() override;

  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs,
             KernelRunContext& ctx) override;

 private:
  // A boundary value: its NCHW dims outside, whether it is NHWC inside, its staging buffer.
  struct Port {
    std::vector<int64_t> dims;
    bool nhwc = false;
    bool read_inside = false;  // an output that later nodes of the subgraph also read
    std::unique_ptr<float[]> staging;  // not zeroed: every use writes it whole first
    size_t bytes() const;
    float* stage();  // the staging buffer, allocated on first use (with XNN_EXTRA_BYTES of slack)
  };
  XnnpackKernel() = default;
  Status bind(const std::vector<xnn_external_value>& values);

  pthreadpool_t pool_ = nullptr;  // owned; holds no threads of its own
  xnn_runtime_t runtime_ = nullptr;
  StaticStore statics_;  // outlives runtime_ (destroyed after the destructor body)
  std::vector<Port> inputs_, outputs_;
  std::vector<xnn_external_value> bound_;  // the pointers the runtime was last set up with
  std::mutex mu_;
};

}  // namespace tessera::xnnpack
