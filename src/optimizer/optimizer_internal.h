/* Internal to the optimizer layer: what its files share beyond the public
 * header (the service's state is in service_internal.h). */
#ifndef LT_OPTIMIZER_INTERNAL_H
#define LT_OPTIMIZER_INTERNAL_H

#include <stdio.h>

#include "looptune/optimizer.h"

#endif
