#include "backends/ref/nn_kernels.h"

namespace tessera {

void register_nn_kernels(RefKernelTable& t) {
  register_nn_matmul_kernels(t);
  register_nn_conv_kernels(t);
  register_nn_pool_kernels(t);
  register_nn_norm_kernels(t);
  register_nn_quant_kernels(t);
}

}  // namespace tessera
