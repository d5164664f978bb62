#include "backends/ref/ref_kernel.h"

namespace tessera {

void register_tensor_kernels(RefKernelTable& t) { (void)t; }

}  // namespace tessera
