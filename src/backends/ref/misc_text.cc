#include "backends/ref/misc_kernels.h"

namespace tessera {

void register_misc_text_kernels(RefKernelTable& t) { (void)t; }

}  // namespace tessera
